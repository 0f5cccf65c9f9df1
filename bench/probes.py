"""Latency probes on an indexed knowledge base: vector search, the agent's Cypher tool, and
`ask` with the instant model (time outside the LLM)."""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from bench.measure import percentiles

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.config import Settings
    from vedana.stores.graph import GraphStore

WARMUP = 3


@dataclass(frozen=True)
class CypherProbe:
    """Typical agent queries for a shape: a one-hop lookup by id and a whole-graph aggregate."""

    id_label: str  # the label whose ids the lookup uses
    lookup: str  # with `{id}` where the node id goes (the agent writes literals, not parameters)
    aggregate: str


CYPHER_PROBES = {
    "people": CypherProbe(
        "person",
        "MATCH (p:person {{id: '{id}'}})-[:PERSON_has_INTEREST]->(i:interest) "
        "RETURN i.id, i.interest_name ORDER BY i.id",
        "MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest) "
        "RETURN i.interest_name AS interest, count(p) AS people ORDER BY people DESC LIMIT 10",
    ),
    "regulations": CypherProbe(
        "regulation",
        "MATCH (r:regulation {{id: '{id}'}})-[:REGULATION_has_DOCUMENT_CHUNK]-(c:document_chunk) "
        "RETURN c.id, c.document_chunk_text ORDER BY c.id",
        "MATCH (d:document)-[:DOCUMENT_covers_REGULATION]->(r:regulation) "
        "RETURN r.regulation_title AS regulation, count(d) AS documents ORDER BY documents DESC LIMIT 10",
    ),
}


def sample_ids(engine: Engine, label: str, n: int) -> list[str]:
    """`n` node ids of `label` spread over the table, the same ones on every run."""
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT node_id FROM nodes WHERE node_type = %(label)s AND NOT deleted "
            "ORDER BY md5(node_id) LIMIT %(n)s",
            {"label": label, "n": n},
        )
        return [r[0] for r in rows]


def sample_values(engine: Engine, kind: str, label: str, attribute: str, n: int) -> list[str]:
    """`n` distinct stored texts of one embeddable attribute (search queries are made from them)."""
    from vedana.stores import vectors as vs

    table, type_col = (vs.NODE_TABLE, "node_type") if kind == "node" else (vs.EDGE_TABLE, "edge_label")
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            f"SELECT DISTINCT attribute_value, md5(attribute_value) FROM {table} "
            f"WHERE {type_col} = %(label)s AND attribute_name = %(attribute)s "
            "ORDER BY md5(attribute_value) LIMIT %(n)s",
            {"label": label, "attribute": attribute, "n": n},
        )
        return [r[0] for r in rows]


def _query_text(value: str) -> str:
    """A query near a stored text but not equal to it: its first words."""
    words = value.split()
    return " ".join(words[: max(2, len(words) * 2 // 3)])


def probe_search(
    settings: Settings, engine: Engine, n: int, top_n: int = 10, rounds: int = 3
) -> dict[str, Any]:
    """p50/p95 of `VectorStore.search` (the database part of the agent's vector tool) and, on the
    same queries in the same run, of its baseline: the same statement from a bare psycopg
    connection (session settings made once). Queries are embedded beforehand, round-robin over
    every embeddable attribute (node and edge ones: each kind has its own HNSW index, so `by_kind`
    gives each index's latency beside its size in `vectors`), threshold 0 so every search returns
    its full `top_n`; vedana and the baseline alternate query by query, taking turns going first
    within each target (`take_turns`), so load on the machine and warm pages favour neither. Each
    figure is the median over `rounds` rounds."""
    from statistics import median

    from vedana.embeddings import get_embedder
    from vedana.etl.embed_values import embed_targets
    from vedana.stores.staging import load_data_model
    from vedana.stores.vectors import VectorStore, vector_counts

    with engine.connect() as conn:
        targets = embed_targets(load_data_model(conn))
        counts = vector_counts(conn)
    embedder = get_embedder(settings)
    per_target = max(1, -(-(n + WARMUP) // max(len(targets), 1)))
    queues = []
    for kind, label, attribute in targets:
        texts = [_query_text(v) for v in sample_values(engine, kind, label, attribute, per_target)]
        queues.append([(kind, label, attribute, v) for v in embedder.embed(texts)])
    # Round-robin over the attributes, so no one of them gets all the warm cache.
    work = [w for group in zip_longest(*queues) for w in group if w is not None][: n + WARMUP]
    vedana_first = take_turns([(kind, label, attribute) for kind, label, attribute, _ in work])
    rounds_out: list[dict[str, Any]] = []
    by_target: dict[str, list[float]] = {}
    by_kind: dict[str, list[float]] = {}
    went_first: dict[str, dict[str, int]] = {}
    hits = 0
    gc_before = [s["collections"] for s in gc.get_stats()]
    with VectorStore(engine) as store, _BareSearch(engine, store.model().dim, top_n) as bare:
        for _ in range(rounds):
            ours: list[float] = []
            theirs: list[float] = []
            for i, (kind, label, attribute, vector) in enumerate(work):
                if not vedana_first[i]:
                    t0 = time.perf_counter()
                    bare.search(kind, label, attribute, vector)
                    t1 = time.perf_counter()
                    found = store.search(kind, label, attribute, vector, threshold=0.0, top_n=top_n)  # type: ignore[arg-type]
                    t2 = time.perf_counter()
                    mine, base = t2 - t1, t1 - t0
                else:
                    t0 = time.perf_counter()
                    found = store.search(kind, label, attribute, vector, threshold=0.0, top_n=top_n)  # type: ignore[arg-type]
                    t1 = time.perf_counter()
                    bare.search(kind, label, attribute, vector)
                    t2 = time.perf_counter()
                    mine, base = t1 - t0, t2 - t1
                if i < WARMUP:
                    continue
                ours.append(mine)
                theirs.append(base)
                turns = went_first.setdefault(f"{label}.{attribute}", {"vedana": 0, "baseline": 0})
                turns["vedana" if vedana_first[i] else "baseline"] += 1
                by_target.setdefault(f"{label}.{attribute}", []).append(mine)
                by_kind.setdefault(kind, []).append(mine)
                hits += len(found)
            rounds_out.append({"vedana": percentiles(ours), "baseline": percentiles(theirs)})
    gc_collections = [s["collections"] - b for s, b in zip(gc.get_stats(), gc_before, strict=True)]
    measured = max(1, sum(len(v) for v in by_target.values()))

    def med(who: str, key: str) -> float:
        return round(median(r[who].get(key, 0.0) for r in rounds_out), 3)

    count = rounds_out[0]["vedana"].get("n", 0) if rounds_out else 0
    latency = {"n": count, "p50_ms": med("vedana", "p50_ms"), "p95_ms": med("vedana", "p95_ms")}
    baseline = {"n": count, "p50_ms": med("baseline", "p50_ms"), "p95_ms": med("baseline", "p95_ms")}
    return {
        "vectors": counts,
        "top_n": top_n,
        "embedder": embedder.model,
        "latency": latency,
        "baseline_latency": baseline,
        "ratio_p50": round(latency["p50_ms"] / baseline["p50_ms"], 2) if baseline["p50_ms"] else None,
        "ratio_p95": round(latency["p95_ms"] / baseline["p95_ms"], 2) if baseline["p95_ms"] else None,
        "rounds": rounds_out,
        "by_target": {k: percentiles(v) for k, v in sorted(by_target.items())},
        "by_kind": {k: percentiles(v) for k, v in sorted(by_kind.items())},
        "mean_hits": round(hits / measured, 2),
        "went_first": dict(sorted(went_first.items())),
        # Cyclic GC runs during the probe, by generation (a classic p95 source; none seen so far:
        # a search's objects die before the next one, so the allocation count never trips it).
        "gc_collections": gc_collections,
    }


def take_turns(targets: list[tuple[str, str, str]]) -> list[bool]:
    """For each search in order, whether vedana goes first. Whichever runs second finds the
    pages the first pulled into shared buffers (the edge index at 100k vectors does not fit:
    the first of a pair measured ~1 ms slower at p50 there), so the two take turns going first
    *within each target*: the round-robin over targets has an even period (4 in the people
    shape), and turns by position alone put vedana first on every edge search — the slowest
    kind, the one that sets p95."""
    turns: dict[tuple[str, str, str], int] = {}
    first = []
    for target in targets:
        n = turns.get(target, 0)
        turns[target] = n + 1
        first.append(n % 2 == 0)
    return first


class _BareSearch:
    """The baseline: vedana's search statement on a plain autocommit psycopg connection, with
    vedana's session settings (HNSW candidate list and iterative scan, custom plans for the
    statement psycopg prepares from its sixth run) and the rows fetched as tuples."""

    def __init__(self, engine: Engine, dim: int, top_n: int) -> None:
        import psycopg

        from vedana.stores.vectors import ef_search_for, search_sql

        url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.conn = psycopg.connect(url, autocommit=True)
        self.sql = {kind: search_sql(kind, dim) for kind in ("node", "edge")}
        self.top_n = top_n
        version = self.conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        self.conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef_search_for(top_n)),))
        if version and tuple(int(p) for p in str(version[0]).split(".")[:2]) >= (0, 8):
            self.conn.execute("SET hnsw.iterative_scan = strict_order")
        self.conn.execute("SET plan_cache_mode = force_custom_plan")

    def search(self, kind: str, label: str, attribute: str, vector: Any) -> list[Any]:
        from vedana.stores.vectors import search_params_sql

        params = search_params_sql(label, attribute, vector, threshold=0.0, top_n=self.top_n)
        return self.conn.execute(self.sql[kind], params).fetchall()

    def __enter__(self) -> _BareSearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def probe_cypher(
    settings: Settings, engine: Engine, graph: GraphStore, shape: str, n: int, aggregates: int = 10
) -> dict[str, Any]:
    """p50/p95 of the agent's Cypher tool (read-only guard, read-only query, row cap): a one-hop
    lookup by id with a different literal id each time, and a whole-graph aggregate."""
    from vedana.agent.tools import run_cypher

    probe = CYPHER_PROBES[shape]
    ids = sample_ids(engine, probe.id_label, n + WARMUP)
    limits = {"row_limit": settings.cypher_rows_limit, "timeout_s": max(settings.cypher_timeout_s, 60.0)}
    lookup, rows = [], 0
    for i, node_id in enumerate(ids):
        t0 = time.perf_counter()
        outcome = run_cypher(graph, probe.lookup.format(id=node_id), **limits)
        if i >= WARMUP:
            lookup.append(time.perf_counter() - t0)
            rows += len(outcome.rows)
    aggregate = []
    for _ in range(aggregates):
        t0 = time.perf_counter()
        run_cypher(graph, probe.aggregate, **limits)
        aggregate.append(time.perf_counter() - t0)
    return {
        "lookup_query": probe.lookup,
        "lookup": percentiles(lookup),
        "lookup_mean_rows": round(rows / len(lookup), 2) if lookup else 0,
        "aggregate_query": probe.aggregate,
        "aggregate": percentiles(aggregate),
    }


def probe_ask(settings: Settings, engine: Engine, shape: str, n: int) -> dict[str, Any]:
    """`ask` end to end with the instant model: filter call, one round of two tools run side by
    side (vector search + Cypher lookup), final answer. The trace splits total time into time in
    LLM calls (HTTP round trips through litellm) and the rest, which is vedana's own overhead."""
    from bench.instant_llm import InstantLLM, Script
    from vedana.agent import ask
    from vedana.etl.embed_values import embed_targets
    from vedana.stores.staging import load_data_model

    with engine.connect() as conn:
        dm = load_data_model(conn)
    kind, label, attribute = embed_targets(dm)[0]
    probe = CYPHER_PROBES[shape]
    ids = sample_ids(engine, probe.id_label, n + 1)
    texts = sample_values(engine, kind, label, attribute, n + 1) or ["anything"]
    script = Script(
        selection={
            "reasoning": "benchmark",
            "anchor_nouns": [a.noun for a in dm.anchors],
            "link_sentences": [lk.sentence for lk in dm.links],
            "anchor_attribute_names": [],
            "link_attribute_names": [],
            "query_ids": [1],
        },
        tool_calls=[],
    )
    with InstantLLM(script) as llm:
        bench_settings = settings.model_copy(
            update={
                "model": llm.model,
                "filter_model": llm.model,
                "llm_api_base": llm.api_base,
                "enable_dm_filtering": True,
            }
        )
        totals, outside, in_llm, tools = [], [], [], []
        first_s = 0.0
        errors = 0
        llm_calls = tool_calls = 0
        for i in range(n + 1):
            script.tool_calls = [
                ("vector_text_search", {"label": label, "property": attribute, "text": _query_text(texts[i % len(texts)])}),
                ("cypher", {"query": probe.lookup.format(id=ids[i % len(ids)])}),
            ]  # fmt: skip
            result = ask(
                bench_settings, f"Benchmark question {i}: what do you know about {ids[i % len(ids)]}?"
            )
            trace = result.trace
            if i == 0:  # the first one imports litellm and opens connections
                first_s = trace.total_s
                continue
            totals.append(trace.total_s)
            in_llm.append(trace.llm_s)
            outside.append(max(trace.total_s - trace.llm_s, 0.0))
            tools.append(sum(c.elapsed_s for c in trace.tool_calls))
            errors += sum(1 for c in trace.tool_calls if c.error) + sum(1 for c in trace.llm_calls if c.error)
            llm_calls += len(trace.llm_calls)
            tool_calls += len(trace.tool_calls)
    asks = len(totals)
    return {
        "asks": asks,
        "first_ask_s": round(first_s, 3),
        "total": percentiles(totals),
        "in_llm": percentiles(in_llm),
        "outside_llm": percentiles(outside),
        "tools": percentiles(tools),
        "llm_calls_per_ask": round(llm_calls / asks, 2) if asks else 0,
        "tool_calls_per_ask": round(tool_calls / asks, 2) if asks else 0,
        "errors": errors,
    }
