"""`vedana mcp`: the knowledge base as a Model Context Protocol server, on the official SDK.

Tools are adapters over the agent's own `Toolbox` (agent/tools.py), so an assistant gets exactly
what the agent gets: `vector_text_search` with label/property as enums of the embeddable
attributes (and texts/where/expand/mmr), `cypher` behind the same guard, row cap and timeout,
`describe_data_model` (the filter step's slice when an LLM is configured), and `ask` (the whole
agent) when one is. Every tool is read-only (`readOnlyHint`); a tool's failure comes back as a
tool error with the same one-line message the CLI prints. Resources: the data model, the
playbook, the knowledge base's status. Prompts: one per playbook query, its `<placeholders>`
as arguments.

Startup stays light: the SDK, settings and the data model (for the enums) only; the graph, the
embedding model and litellm load when a tool first needs them. Logs go to stderr: in stdio
mode stdout is the protocol.
"""

from __future__ import annotations

import inspect
import json
import re
import threading
from typing import TYPE_CHECKING, Any, Literal

from vedana.redaction import redact

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from sqlalchemy import Engine

    from vedana.agent.tools import Toolbox
    from vedana.config import Settings
    from vedana.datamodel import DataModel
    from vedana.stores.graph import GraphStore

INSTRUCTIONS = (
    "A knowledge graph built from spreadsheets. Read vedana://data-model (or call "
    "describe_data_model) to learn its node labels, relationship types and properties; find things "
    "by meaning with vector_text_search, then count, list and follow relationships with read-only "
    "Cypher (cypher). Every tool only reads."
)
_PLACEHOLDER = re.compile(r"<([^<>]{1,40})>")


class KnowledgeBase:
    """What the tools share: settings, the data model, and (opened on first use) the graph and the
    agent's toolbox. Thread-safe: the SDK runs synchronous tools in worker threads."""

    def __init__(self, settings: Settings) -> None:
        from vedana.stores.postgres import get_engine
        from vedana.stores.staging import load_data_model

        self.settings = settings
        self.engine: Engine = get_engine(settings)
        with self.engine.connect() as conn:
            self.dm: DataModel = load_data_model(conn)
        self._lock = threading.Lock()
        self._graph: GraphStore | None = None
        self._toolbox: Toolbox | None = None

    def toolbox(self) -> Toolbox:
        with self._lock:
            if self._toolbox is None:
                from vedana.agent.loop import neighbourhood_search_for, vector_search_for
                from vedana.agent.tools import Toolbox
                from vedana.stores.graph_factory import open_graph

                self._graph = open_graph(self.settings)
                self._toolbox = Toolbox(
                    self.settings,
                    self.dm,
                    self._graph,
                    vector_search_for(self.settings, self.engine, None),
                    neighbourhood=neighbourhood_search_for(self.settings, self.engine, None, self.dm),
                )
            return self._toolbox

    def run_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one of the agent's tools; its `error: …` text becomes a tool error."""
        from mcp.server.mcpserver.exceptions import ToolError

        arguments = {k: v for k, v in arguments.items() if v is not None}
        text, _ = self.toolbox().run(name, json.dumps(arguments), index=0, round_=1)
        text = redact(text)
        if text.startswith("error:"):
            raise ToolError(text.removeprefix("error:").strip())
        return text

    def llm_configured(self) -> bool:
        """Whether a language model looks configured, without importing litellm (3 s): an
        OpenAI-compatible base, a local Ollama model, or a provider key in the environment. A
        wrong guess only means `ask` or the filter answers with the usual one-line error."""
        import os

        if self.settings.llm_api_base or self.settings.model.startswith(("ollama", "ollama_chat")):
            return True
        return any(
            name.endswith(("_API_KEY", "_TOKEN")) and value and not name.startswith(("GRIST_", "VEDANA_"))
            for name, value in os.environ.items()
        )

    def close(self) -> None:
        if self._graph is not None:
            self._graph.close()


def build_server(settings: Settings, *, with_ask: bool | None = None) -> MCPServer:
    """The MCP server over the knowledge base `settings` point at. `with_ask`: register `ask`
    (None: when an LLM is configured)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    from vedana import __version__

    kb = KnowledgeBase(settings)
    server = MCPServer(name="vedana", version=__version__, instructions=INSTRUCTIONS)
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    _add_vector_search(server, kb, read_only)

    def cypher(query: str) -> str:
        return kb.run_tool("cypher", {"query": query})

    rows = settings.cypher_rows_limit
    server.add_tool(
        cypher,
        name="cypher",
        description=f"Run one read-only openCypher query (MATCH ... RETURN) on the graph. Writes are refused "
        f"before they run; at most {rows} rows come back (count or aggregate instead of listing); the query "
        f"times out after {settings.cypher_timeout_s:g} s. Use labels, types and properties exactly as "
        "the data model spells them.",
        annotations=read_only,
    )

    def describe_data_model(question: str | None = None) -> str:
        return _describe(kb, question)

    server.add_tool(
        describe_data_model,
        name="describe_data_model",
        description="The graph's data model: node labels with their properties (which are searchable by "
        "meaning), relationship types and their direction, and playbook queries. With `question`, only "
        "the part that question needs (when the server has a language model).",
        annotations=read_only,
    )
    if with_ask if with_ask is not None else kb.llm_configured():

        def ask(question: str) -> str:
            return _ask(kb, question)

        server.add_tool(
            ask,
            name="ask",
            description="Answer a question from the knowledge base with vedana's own agent (it searches, "
            "queries and cites); returns the answer and a compact trace of the tool calls.",
            annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=True),
        )
    _add_resources(server, kb)
    _add_prompts(server, kb)
    return server


def _add_vector_search(server: MCPServer, kb: KnowledgeBase, annotations: Any) -> None:
    """`vector_text_search` with label and property as enums of the embeddable attributes, as the
    agent's tool has them (the data model decides the schema, so the signature is built here)."""
    from vedana.agent.tools import searchables

    found = searchables(kb.dm)
    labels = tuple(dict.fromkeys(s.label for s in found)) or ("",)
    properties = tuple(dict.fromkeys(s.attribute for s in found)) or ("",)
    pairs = ", ".join(f"{s.label}.{s.attribute}" for s in found) or "none (nothing is embeddable)"

    def vector_text_search(**arguments: Any) -> str:
        return kb.run_tool("vector_text_search", arguments)

    keyword = inspect.Parameter.KEYWORD_ONLY
    vector_text_search.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("label", keyword, annotation=Literal[labels]),
            inspect.Parameter("property", keyword, annotation=Literal[properties]),
            inspect.Parameter("text", keyword, annotation=str),
            inspect.Parameter("texts", keyword, annotation=list[str] | None, default=None),
            inspect.Parameter("where", keyword, annotation=list[dict[str, Any]] | None, default=None),
            inspect.Parameter("expand", keyword, annotation=int, default=0),
            inspect.Parameter("mmr", keyword, annotation=bool, default=False),
        ]
    )
    server.add_tool(
        vector_text_search,
        name="vector_text_search",
        description=f"Find nodes (or relationships) whose text property is close in meaning to `text`, best "
        f"first, each hit with its similarity score, id and attributes. Valid label.property pairs: {pairs}. "
        "Each property has its own similarity threshold and number of hits. For node labels: `texts` adds up "
        "to 4 more phrasings, `where` keeps nodes whose attributes match (items {attribute, op: = | >= | <= "
        "| contains, value}), `expand` 1-2 returns each hit's linked nodes, `mmr` prefers varied hits.",
        annotations=annotations,
    )


def _describe(kb: KnowledgeBase, question: str | None) -> str:
    from vedana.datamodel.render import numbered_queries, render_playbook, render_text

    if not question or not question.strip():
        return render_text(kb.dm) + "\n\nPlaybook:\n" + render_playbook(numbered_queries(kb.dm))
    if not kb.llm_configured():
        return "(no language model is configured, so this is the whole data model)\n\n" + _describe(kb, None)
    from vedana.agent.filter import filter_data_model
    from vedana.agent.llm import LLM
    from vedana.agent.templates import Templates

    filtered = filter_data_model(
        LLM(kb.settings), kb.settings.effective_filter_model, kb.dm, question.strip(), Templates(kb.dm)
    )
    return render_text(filtered.data_model) + "\n\nPlaybook:\n" + render_playbook(filtered.playbook)


def _ask(kb: KnowledgeBase, question: str) -> str:
    from mcp.server.mcpserver.exceptions import ToolError

    from vedana.agent import ask
    from vedana.errors import VedanaError

    kb.toolbox()  # opens the graph once for the server's life
    try:
        result = ask(kb.settings, question, engine=kb.engine, graph=kb._graph).to_dict()
    except VedanaError as exc:
        raise ToolError(redact(str(exc))) from None
    compact = {
        "answer": result["answer"],
        "sources": [s for s in result["sources"] if s["cited"]],
        "tool_calls": [
            {k: c.get(k) for k in ("name", "arguments", "rows", "error") if c.get(k) is not None}
            for c in result["trace"]["tool_calls"]
        ],
        "usage": result["trace"]["usage"],
    }
    return redact(json.dumps(compact, ensure_ascii=False, default=str))


def _add_resources(server: MCPServer, kb: KnowledgeBase) -> None:
    from mcp.server.mcpserver.resources import FunctionResource

    from vedana.datamodel.render import numbered_queries, render_playbook, render_text

    def status() -> str:
        from vedana.ops.status import status as kb_status

        return redact(json.dumps(kb_status(kb.settings, limit=5), ensure_ascii=False, default=str, indent=2))

    for uri, name, description, fn, mime in (
        ("vedana://data-model", "data-model", "Node labels, relationship types and properties, as the agent sees them.",
         lambda: render_text(kb.dm), "text/markdown"),
        ("vedana://playbook", "playbook", "Numbered example queries: how to answer kinds of questions.",
         lambda: render_playbook(numbered_queries(kb.dm)), "text/markdown"),
        ("vedana://status", "status", "What the knowledge base holds: counts, last sync/index, embedding model.",
         status, "application/json"),
    ):  # fmt: skip
        server.add_resource(
            FunctionResource.from_function(fn, uri=uri, name=name, description=description, mime_type=mime)
        )


def _add_prompts(server: MCPServer, kb: KnowledgeBase) -> None:
    """A playbook query as a prompt: its `<placeholders>` are the arguments."""
    from mcp.server.mcpserver.prompts.base import Prompt, PromptArgument

    from vedana.datamodel.render import numbered_queries

    for number, query in numbered_queries(kb.dm):
        names = list(dict.fromkeys(p.strip() for p in _PLACEHOLDER.findall(query.name)))
        slugs = {n: re.sub(r"\W+", "_", n).strip("_") or f"arg{i}" for i, n in enumerate(names, 1)}

        def render(_query: Any = query, _slugs: dict[str, str] = slugs, **values: Any) -> str:
            question = _query.name
            for name, slug in _slugs.items():
                question = question.replace(f"<{name}>", str(values.get(slug, f"<{name}>")))
            return (
                f"{question}\n\nAnswer from the vedana knowledge base. How questions like this are answered "
                f"there:\n{_query.example}"
            )

        server.add_prompt(
            Prompt(
                name=f"playbook-{number}",
                title=query.name,
                description=f"Playbook query {number}: {query.name}",
                arguments=[
                    PromptArgument(name=slug, description=name, required=True) for name, slug in slugs.items()
                ],
                fn=render,
                context_kwarg=None,
            )
        )
