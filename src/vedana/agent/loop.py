"""The agent loop behind `vedana ask`.

filter the data model → system prompt (instructions + rendered slice + selected playbook) →
rounds of tool calls (the calls of one round run in parallel threads) → at most
`settings.agent_max_rounds` rounds, then one finalisation call without tools → an empty answer
becomes a short "not found" reply with suggestions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from vedana.agent.filter import FilterResult, filter_data_model, full_model
from vedana.agent.history import Turn, question_in_context
from vedana.agent.llm import LLM
from vedana.agent.sources import Source, SourceRegistry
from vedana.agent.templates import Templates
from vedana.agent.tools import NeighbourhoodFn, NeighbourhoodRequest, Toolbox, VectorSearchFn
from vedana.agent.trace import AskResult, ToolCallTrace, Trace
from vedana.datamodel import DataModel
from vedana.datamodel.render import render_playbook, render_text
from vedana.errors import VedanaError

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.config import Settings
    from vedana.embeddings.base import Embedder
    from vedana.stores.graph import GraphStore
    from vedana.stores.vectors import Retriever

MAX_PARALLEL_TOOLS = 8


def system_prompt(templates: Templates, settings: Settings, filtered: FilterResult) -> str:
    instructions = templates.render(
        "instructions", row_limit=settings.cypher_rows_limit, max_rounds=settings.agent_max_rounds
    )
    data_model = templates.render(
        "data_model",
        data_model=render_text(filtered.data_model),
        playbook=render_playbook(filtered.playbook),
    )
    return f"{instructions}\n\n{data_model}"


def no_answer_reply(templates: Templates, dm: DataModel, question: str) -> str:
    topics = ", ".join(a.noun for a in dm.anchors) or "the data that was synced"
    examples = "".join(f"- a question like “{q.name}”;\n" for q in dm.queries[:3] if q.name)
    return templates.render("no_answer", question=question, topics=topics, examples=examples)


def _assistant_message(message: Any) -> dict[str, Any]:
    """The assistant turn as plain data (the provider's object carries extra fields)."""
    return {
        "role": "assistant",
        "content": message.content or None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments or "{}"},
            }
            for call in message.tool_calls
        ],
    }


class Agent:
    """One question's run: holds the LLM, the tools and the trace."""

    def __init__(
        self, settings: Settings, llm: LLM, toolbox: Toolbox, templates: Templates, trace: Trace
    ) -> None:
        self.settings = settings
        self.llm = llm
        self.toolbox = toolbox
        self.templates = templates
        self.trace = trace
        self._next_index = 0

    def _run_round(self, round_: int, calls: list[Any]) -> list[tuple[str, ToolCallTrace]]:
        indexed = list(enumerate(calls, start=self._next_index))  # order of asking, over the run
        self._next_index += len(calls)

        def run(item: tuple[int, Any]) -> tuple[str, ToolCallTrace]:
            index, call = item
            return self.toolbox.run(call.function.name, call.function.arguments, index=index, round_=round_)

        if len(indexed) == 1:
            return [run(indexed[0])]
        workers = min(len(indexed), MAX_PARALLEL_TOOLS)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"tool-r{round_}") as pool:
            return list(pool.map(run, indexed))

    def answer(self, system: str, question: str, history: Sequence[Turn] = ()) -> str:
        model = self.settings.model
        tools = self.toolbox.specs()
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            *({"role": turn.role, "content": turn.text} for turn in history),
            {"role": "user", "content": question},
        ]
        for round_ in range(1, self.settings.agent_max_rounds + 1):
            response = self.llm.complete(model, messages, purpose="agent", tools=tools)
            message = response.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            self.trace.rounds = round_
            messages.append(_assistant_message(message))
            outcomes = self._run_round(round_, list(message.tool_calls))
            for call, (text, call_trace) in zip(message.tool_calls, outcomes, strict=True):
                self.trace.tool_calls.append(call_trace)
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "name": call.function.name, "content": text}
                )
        # Rounds used up: one more call, tools off, to answer from what was gathered.
        self.trace.finalized = True
        messages.append(
            {
                "role": "user",
                "content": self.templates.render("finalize", max_rounds=self.settings.agent_max_rounds),
            }
        )
        response = self.llm.complete(model, messages, purpose="finalize", tools=tools, tool_choice="none")
        return response.choices[0].message.content or ""


def _retriever(stack: ExitStack, settings: Settings, engine: Engine, embedder: Embedder | None) -> Retriever:
    """The shared retrieval path; its connection goes back to the pool when the answer is done."""
    from vedana.stores.vectors import Retriever

    return stack.enter_context(Retriever(settings, engine, embedder))


def vector_search_for(settings: Settings, engine: Engine, embedder: Embedder | None) -> VectorSearchFn:
    """The agent's vector tool for a long-lived caller (the MCP server): the shared retrieval
    path, `stores.vectors.Retriever`, whose one held connection lives as long as the function."""
    from vedana.stores.vectors import Retriever

    return Retriever(settings, engine, embedder).search


def neighbourhood_search_for(
    settings: Settings, engine: Engine, embedder: Embedder | None, dm: DataModel
) -> NeighbourhoodFn:
    """Embed every phrasing in one batch, then one statement: hits with their neighbourhoods."""
    from vedana.stores.vectors import Retriever

    # The retrieval path's embedder: made and checked against the index's model once.
    retriever = Retriever(settings, engine, embedder)

    def search(request: NeighbourhoodRequest) -> list[dict[str, Any]]:
        from vedana.stores.neighbourhood import search_neighbourhood

        vectors = retriever.embedder().embed(request.texts)
        hits = search_neighbourhood(
            engine, dm, request.label, request.attribute, vectors, threshold=request.threshold,
            top_n=request.top_n, where=request.where, expand=request.expand, mmr=request.mmr,
        )  # fmt: skip
        return [h.to_dict() for h in hits]

    return search


def locate_sources(settings: Settings, engine: Engine, sources: list[Source]) -> str | None:
    """Fill each source's `row` (where its row lives in the synced data source), one look-up per
    node type; a failure leaves the rows empty and is returned, never raised: the answer stands."""
    if not sources:
        return None
    from vedana.sources.locate import STATE_KEY, locate_nodes
    from vedana.stores.staging import get_state

    with engine.connect() as conn:
        where = get_state(conn, STATE_KEY)
    if not where:
        return None
    by_label: dict[str, set[str]] = {}
    for source in sources:
        by_label.setdefault(source.label, set()).add(source.node_id)
    try:
        client = None
        if where.get("kind") == "grist":
            from vedana.sources.grist_http import GristClient

            key = settings.grist_api_key.get_secret_value() if settings.grist_api_key else None
            client = GristClient(
                where["server"],
                where["doc"],
                key,
                timeout_s=settings.grist_timeout_s,
                deadline_s=settings.grist_deadline_s,
            )
        found = {label: locate_nodes(where, label, ids, client) for label, ids in by_label.items()}
    except (OSError, VedanaError, ValueError, KeyError) as exc:
        from vedana.redaction import redact

        return redact(f"the sources' rows could not be located: {exc}")
    for source in sources:
        source.row = found.get(source.label, {}).get(source.node_id)
    return None


def ask(
    settings: Settings,
    question: str,
    *,
    use_filter: bool | None = None,
    graph: GraphStore | None = None,
    engine: Engine | None = None,
    embedder: Embedder | None = None,
    vector_search: VectorSearchFn | None = None,
    history: Sequence[Turn] = (),
    on_step: Callable[[str], None] | None = None,
) -> AskResult:
    """Answer `question` from the synced and indexed knowledge base; the answer and its trace.

    `history`: the conversation so far (user questions and assistant answers, oldest first),
    which the filter and the agent both see, so a follow-up selects the right part of the model.
    `on_step(text)` hears each step as it starts (the filter, each model call, each tool call)."""
    started = time.perf_counter()
    question = question.strip()
    if not question:
        raise VedanaError('the question is empty; ask something, e.g. vedana ask "Who likes quokkas?"')
    use_filter = settings.enable_dm_filtering if use_filter is None else use_filter
    llm = LLM(settings, on_step)
    llm.check(settings.model)  # no key, no model: say so before touching anything else
    if use_filter:
        llm.check(settings.effective_filter_model)

    with ExitStack() as stack:
        if engine is None:
            from vedana.stores.postgres import get_engine

            engine = get_engine(settings)
        from vedana.stores.staging import load_data_model

        with engine.connect() as conn:
            dm = load_data_model(conn)
        if graph is None:
            from vedana.stores.graph_factory import open_graph

            graph = stack.enter_context(open_graph(settings))

        templates = Templates(dm)
        if use_filter:
            filtered = filter_data_model(
                llm, settings.effective_filter_model, dm, question_in_context(question, history), templates
            )
        else:
            filtered = full_model(dm, enabled=False)
        trace = Trace(
            question=question,
            model=settings.model,
            filter=filtered.trace,
            prompts_overridden=templates.overridden,
            history_messages=len(history),
        )
        sources = SourceRegistry()
        toolbox = Toolbox(
            settings,
            filtered.data_model,
            graph,
            vector_search or _retriever(stack, settings, engine, embedder).search,
            fallback_dm=dm,
            sources=sources,
            neighbourhood=neighbourhood_search_for(settings, engine, embedder, dm),
        )
        system = system_prompt(templates, settings, filtered)
        trace.system_prompt_chars = len(system)
        try:
            answer = Agent(settings, llm, toolbox, templates, trace).answer(system, question, history).strip()
        finally:
            trace.llm_calls = list(llm.calls)
            trace.import_s = llm.import_s
            trace.total_s = time.perf_counter() - started
        if not answer:
            trace.no_answer = True
            answer = no_answer_reply(
                templates, filtered.data_model if filtered.data_model.anchors else dm, question
            )
        trace.unknown_markers = sources.settle(answer)
        trace.sources_error = locate_sources(settings, engine, sources.listed())
    trace.total_s = time.perf_counter() - started
    return AskResult(answer=answer, trace=trace, sources=sources.listed())
