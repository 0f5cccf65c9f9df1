"""The agent's two tools, `vector_text_search` and `cypher`, with pydantic argument models.

Tool errors never raise out of here: the model gets them back as text so it can correct itself.
Results are JSON text, never holding embedding vectors (long float lists are dropped).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from datetime import time as dtime
from decimal import Decimal
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, ValidationError, create_model

from vedana.agent.budget import fit_result
from vedana.agent.cypher_schema import graph_schema
from vedana.agent.sources import SourceRegistry
from vedana.agent.trace import ToolCallTrace
from vedana.cypher.guard import ensure_read_only, without_final_semicolon
from vedana.cypher.schema import ensure_known_names
from vedana.errors import CypherError, CypherSchemaMismatch, CypherWriteRefused, VedanaError

if TYPE_CHECKING:
    from vedana.config import Settings
    from vedana.cypher.schema import GraphSchema
    from vedana.datamodel import DataModel
    from vedana.stores.graph import GraphStore

# A list of more floats than this inside a result is taken for an embedding and dropped.
MAX_FLOAT_LIST = 32
VECTOR_SEARCH = "vector_text_search"
CYPHER = "cypher"

# (kind, label, attribute, text, threshold, top_n) -> hits (VectorHit objects or dicts)
VectorSearchFn = Callable[[str, str, str, str, float, int], list[Any]]


@dataclass(frozen=True)
class NeighbourhoodRequest:
    """A node search with the graph-aware options (see `vedana.stores.neighbourhood`)."""

    label: str
    attribute: str
    texts: list[str]
    threshold: float
    top_n: int
    where: list[Any]  # vedana.stores.neighbourhood.Condition
    expand: int
    mmr: bool


# request -> hits as dicts (reason, depth, links…)
NeighbourhoodFn = Callable[[NeighbourhoodRequest], list[dict[str, Any]]]


class WhereArg(BaseModel):
    attribute: str = Field(description="An attribute of the searched node type")
    op: Literal["=", ">=", "<=", "contains"] = Field(description="= equals; >= / <= for numbers and dates")
    value: str | float = Field(description="The value to compare with")


class CypherArgs(BaseModel):
    query: str = Field(
        description="One read-only openCypher query, e.g. MATCH (n:Label) RETURN n.id LIMIT 10"
    )


@dataclass(frozen=True)
class Searchable:
    """One embeddable attribute: where its vectors live and how to search them."""

    kind: str  # "node" or "edge"
    label: str  # anchor noun or link sentence
    attribute: str
    threshold: float | None
    top_n: int | None


def searchables(dm: DataModel) -> list[Searchable]:
    found = []
    for anchor in dm.anchors:
        for a in anchor.attributes:
            if a.embeddable:
                found.append(Searchable("node", anchor.noun, a.name, a.embed_threshold, a.embed_top_n))
    for link in dm.links:
        for a in link.attributes:
            if a.embeddable:
                found.append(Searchable("edge", link.sentence, a.name, a.embed_threshold, a.embed_top_n))
    return found


def _enum(name: str, values: Sequence[str]) -> type[Enum]:
    # Member names are positional so any label text (spaces, leading underscores) is a valid value.
    return Enum(name, {f"v{i}": v for i, v in enumerate(dict.fromkeys(values))})  # type: ignore[return-value]


def vector_args_model(items: Sequence[Searchable]) -> type[BaseModel]:
    """Args of `vector_text_search`; label/property are enums of the embeddable attributes
    (free strings only when there are none)."""
    label_type: Any = _enum("SearchLabel", [s.label for s in items]) if items else str
    property_type: Any = _enum("SearchProperty", [s.attribute for s in items]) if items else str
    pairs = ", ".join(f"{s.label}.{s.attribute}" for s in items) or "none declared"
    return create_model(
        "VectorTextSearchArgs",
        label=(label_type, Field(description="Node label or relationship type to search")),
        property=(property_type, Field(description=f"Text property to search; valid pairs: {pairs}")),
        text=(str, Field(description="What to look for, in words")),
        texts=(
            list[str] | None,
            Field(
                default=None,
                max_length=4,
                description="Up to 4 more phrasings of the same thing (synonyms, another language); "
                "searched together, each node returned once",
            ),
        ),
        where=(
            list[WhereArg] | None,
            Field(default=None, description="Keep only nodes whose own attributes meet all of these"),
        ),
        expand=(
            int,
            Field(
                default=0,
                ge=0,
                le=2,
                description="1 or 2: return each hit with its linked nodes (1 or 2 hops), grouped by "
                "relationship type and direction; saves a Cypher call for 'who/what is linked to X'",
            ),
        ),
        mmr=(bool, Field(default=False, description="Prefer varied hits over near-duplicates")),
    )


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace `$ref`s by their definitions: some providers reject `$defs` in tool schemas."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = defs[node["$ref"].rsplit("/", 1)[-1]]
                merged = {**walk(target), **{k: walk(v) for k, v in node.items() if k != "$ref"}}
                merged.pop("title", None)
                return merged
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


def tool_spec(name: str, description: str, args: type[BaseModel]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": _inline_refs(args.model_json_schema()),
        },
    }


# -- values ---------------------------------------------------------------------------------------


def _is_vector(value: Any) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) > MAX_FLOAT_LIST
        and all(isinstance(x, float) for x in value)
    )


def clean(value: Any) -> Any:
    """A JSON-ready copy of `value` in which embedding vectors are replaced by a short marker."""
    if _is_vector(value):
        return f"<{len(value)} floats omitted>"
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, datetime | date | dtime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return str(value)


def hit_to_dict(hit: Any) -> dict[str, Any]:
    """A vector hit (object or dict) as the model and the trace see it: score, ids, value, attributes."""
    data = hit.to_dict() if hasattr(hit, "to_dict") else dict(hit)
    keep = (
        "kind",
        "label",
        "attribute",
        "value",
        "score",
        "node_id",
        "from_node_id",
        "to_node_id",
        "attributes",
    )
    out = {k: clean(data.get(k)) for k in keep if data.get(k) is not None}
    if isinstance(out.get("score"), float):
        out["score"] = round(out["score"], 4)
    return out


# -- cypher ---------------------------------------------------------------------------------------


@dataclass
class CypherOutcome:
    query: str
    columns: list[str]
    rows: list[dict[str, Any]]
    truncated: bool
    row_limit: int
    elapsed_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "columns": self.columns,
            "rows": self.rows,
            "row_count": len(self.rows),
            "truncated": self.truncated,
            "row_limit": self.row_limit,
            "elapsed_s": round(self.elapsed_s, 4),
        }


def run_cypher(
    graph: GraphStore, query: str, *, row_limit: int, timeout_s: float, schema: GraphSchema | None = None
) -> CypherOutcome:
    """Run one query through the read-only guard (and, given a `schema`, the check of the names
    it uses), in a read-only session, capped and timed.

    Raises `CypherWriteRefused` before running anything that could write, `CypherSchemaMismatch`
    before running a query naming what the schema lacks, `CypherError` when the engine fails
    (including a timeout)."""
    ensure_read_only(query)
    if schema is not None:
        ensure_known_names(query, schema)
    started = time.perf_counter()
    try:
        result = graph.query(
            without_final_semicolon(query), read_only=True, row_limit=row_limit, timeout_s=timeout_s
        )
    except VedanaError:
        raise
    except Exception as exc:  # engine errors differ by driver; the message is what helps
        message = str(exc).strip() or type(exc).__name__
        raise CypherError(f"the graph engine rejected the query: {message}") from exc
    return CypherOutcome(
        query=query,
        columns=list(result.columns),
        rows=[clean(row) for row in result.rows],
        truncated=bool(result.truncated),
        row_limit=row_limit,
        elapsed_s=time.perf_counter() - started,
    )


def _looks_like_timeout(message: str) -> bool:
    lowered = message.lower()
    return "timeout" in lowered or "timed out" in lowered


# -- the toolbox ------------------------------------------------------------------------------------


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


class Toolbox:
    """The tools as offered to the model for one question, and their execution."""

    def __init__(
        self,
        settings: Settings,
        dm: DataModel,
        graph: GraphStore,
        vector_search: VectorSearchFn | None,
        *,
        fallback_dm: DataModel | None = None,
        sources: SourceRegistry | None = None,
        neighbourhood: NeighbourhoodFn | None = None,
    ) -> None:
        self.settings = settings
        self.graph = graph
        self.vector_search = vector_search
        self.sources = sources  # numbers the nodes results show, so the answer can cite them
        self.neighbourhood = neighbourhood
        # The slice the agent sees decides the enums; if it kept nothing searchable, the full
        # model does, so a narrow filter cannot take vector search away.
        self.searchables = searchables(dm) or (searchables(fallback_dm) if fallback_dm else [])
        self.vector_args = vector_args_model(self.searchables)
        # Cypher is checked against the whole data model, never the slice the agent was shown.
        self.cypher_schema: GraphSchema | None = (
            graph_schema(fallback_dm or dm, graph) if settings.cypher_schema_check else None
        )

    def specs(self) -> list[dict[str, Any]]:
        row_limit = self.settings.cypher_rows_limit
        return [
            tool_spec(
                VECTOR_SEARCH,
                "Find nodes or relationships whose text property is close in meaning to `text`. "
                "Returns hits with similarity score, id and attributes. For node types: add `texts` "
                "when the words could be phrased several ways, `where` to keep only nodes with given "
                "attribute values, `expand` (1-2) to get each hit's linked nodes in the same call "
                "instead of a follow-up Cypher query, `mmr` for varied hits.",
                self.vector_args,
            ),
            tool_spec(
                CYPHER,
                f"Run one read-only Cypher query on the graph. At most {row_limit} rows are returned; "
                "writes are refused; errors come back as text.",
                CypherArgs,
            ),
        ]

    def run(self, name: str, raw_arguments: str, *, index: int, round_: int) -> tuple[str, ToolCallTrace]:
        """Execute one tool call; returns the text for the model and the call's trace."""
        try:
            arguments = json.loads(raw_arguments or "{}")
            if not isinstance(arguments, dict):
                raise ValueError("arguments must be a JSON object")
        except ValueError as exc:
            arguments = {"_raw": raw_arguments}
            trace = ToolCallTrace(index=index, round=round_, name=name, arguments=arguments)
            return self._finish(
                trace, f"error: the arguments are not valid JSON ({exc})", time.perf_counter()
            )
        trace = ToolCallTrace(index=index, round=round_, name=name, arguments=arguments)
        trace.thread = threading.current_thread().name
        started = time.perf_counter()
        if name == CYPHER:
            text = self._cypher(arguments, trace)
        elif name == VECTOR_SEARCH:
            text = self._vector(arguments, trace)
        else:
            trace.error = f"unknown tool {name!r}"
            text = f"error: there is no tool {name!r}; use {VECTOR_SEARCH} or {CYPHER}"
        text, kept = fit_result(text, self.settings.tool_result_max_tokens)
        if kept is not None and name == CYPHER:
            trace.rows, trace.truncated = kept, True
        return self._finish(trace, text, started)

    @staticmethod
    def _finish(trace: ToolCallTrace, text: str, started: float) -> tuple[str, ToolCallTrace]:
        trace.elapsed_s = round(time.perf_counter() - started, 4)
        trace.result_chars = len(text)
        if text.startswith("error:") and trace.error is None:
            trace.error = text.removeprefix("error:").strip()
        return text, trace

    def _cypher(self, arguments: dict[str, Any], trace: ToolCallTrace) -> str:
        try:
            args = CypherArgs.model_validate(arguments)
        except ValidationError as exc:
            return f"error: invalid arguments for cypher: {_short_validation(exc)}"
        try:
            outcome = run_cypher(
                self.graph,
                args.query,
                row_limit=self.settings.cypher_rows_limit,
                timeout_s=self.settings.cypher_timeout_s,
                schema=self.cypher_schema,
            )
        except CypherWriteRefused as exc:
            trace.refused = True
            return f"error: {exc}"
        except CypherSchemaMismatch as exc:
            return f"error: {exc}"
        except CypherError as exc:
            message = str(exc)
            if _looks_like_timeout(message):
                return (
                    f"error: the query timed out after {self.settings.cypher_timeout_s:g} s ({message}); "
                    "narrow it with WHERE, anchor it on ids, or aggregate"
                )
            return f"error: {message}; fix the query and try again"
        rows, note = outcome.rows, None
        if outcome.truncated:
            note = f"only the first {outcome.row_limit} rows are shown and more exist"
        text = _cypher_payload(outcome.columns, rows, note)
        trace.rows, trace.truncated = len(rows), note is not None
        if self.sources is not None:
            self.sources.cite_rows(args.query, outcome.columns, rows)
            text = _cypher_payload(outcome.columns, rows, note)
        return text

    def _vector(self, arguments: dict[str, Any], trace: ToolCallTrace) -> str:
        try:
            args: Any = self.vector_args.model_validate(arguments)  # a model built at run time
        except ValidationError as exc:
            return f"error: invalid arguments for {VECTOR_SEARCH}: {_short_validation(exc)}"
        label = str(getattr(args.label, "value", args.label))
        prop = str(getattr(args.property, "value", args.property))
        target = self._searchable(label, prop)
        if target is None:
            valid = ", ".join(f"{s.label}.{s.attribute}" for s in self.searchables) or "none"
            return f"error: {label}.{prop} is not searchable by meaning; searchable: {valid}"
        threshold = target.threshold if target.threshold is not None else self.settings.embeddings_threshold
        if threshold is None:
            from vedana.embeddings import default_threshold

            threshold = default_threshold(self.settings.embeddings_model)
        top_n = target.top_n or self.settings.embeddings_top_n
        trace.kind, trace.threshold, trace.top_n = target.kind, threshold, top_n
        if args.texts or args.where or args.expand or args.mmr:
            return self._vector_neighbourhood(args, target, threshold, top_n, trace)
        if self.vector_search is None:
            return "error: vector search is not available (no vector index configured)"
        try:
            hits = self.vector_search(
                target.kind, target.label, target.attribute, args.text, threshold, top_n
            )
        except Exception as exc:  # the model can still go on with Cypher
            return f"error: vector search failed: {str(exc).strip() or type(exc).__name__}"
        hits = [hit_to_dict(h) for h in hits]
        if self.sources is not None and target.kind == "node":
            self.sources.cite_hits(label, hits)
        trace.hits = [
            {k: h[k] for k in ("score", "node_id", "from_node_id", "to_node_id", "value") if k in h}
            for h in hits
        ]
        return _dumps({"label": label, "property": prop, "threshold": threshold, "hits": hits})

    def _vector_neighbourhood(
        self, args: Any, target: Searchable, threshold: float, top_n: int, trace: ToolCallTrace
    ) -> str:
        from vedana.stores.neighbourhood import Condition

        if target.kind != "node":
            return f"error: texts, where, expand and mmr search node types; {target.label} is a relationship type"
        if self.neighbourhood is None:
            return "error: graph-aware vector search is not available here; search without texts/where/expand/mmr"
        request = NeighbourhoodRequest(
            label=target.label,
            attribute=target.attribute,
            texts=[args.text, *(args.texts or [])],
            threshold=threshold,
            top_n=top_n,
            where=[
                Condition(w.attribute, "~" if w.op == "contains" else w.op, w.value) for w in args.where or []
            ],
            expand=args.expand,
            mmr=args.mmr,
        )
        try:
            hits = self.neighbourhood(request)
        except VedanaError as exc:
            return f"error: {exc}"
        except Exception as exc:  # the model can still go on with Cypher
            return f"error: vector search failed: {str(exc).strip() or type(exc).__name__}"
        if self.sources is not None:
            self.sources.cite_hits(target.label, hits)
        trace.hits = [{k: h[k] for k in ("score", "node_id", "value") if k in h} for h in hits]
        return _dumps(
            {"label": target.label, "property": target.attribute, "threshold": threshold, "hits": hits}
        )

    def _searchable(self, label: str, prop: str) -> Searchable | None:
        matches = [s for s in self.searchables if s.label == label and s.attribute == prop]
        if matches:
            return min(matches, key=lambda s: s.kind != "node")
        if not self.searchables:  # free strings: search what the caller named, nodes first
            return Searchable("node", label, prop, None, None)
        return None


def _cypher_payload(columns: list[str], rows: list[dict[str, Any]], note: str | None) -> str:
    payload: dict[str, Any] = {"columns": columns, "rows": rows, "row_count": len(rows)}
    if note:
        payload["truncated"] = True
        payload["note"] = (
            f"Truncated: {note}. Use count()/collect() or a narrower WHERE instead of listing everything."
        )
    return _dumps(payload)


def _short_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)
