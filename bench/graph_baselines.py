"""The graph engine's own limits, measured on the rows the index just loaded, in the same run.

Both baselines start from the finished rows already in memory (read from staging and turned into
graph values before the clock starts), and write into scratch graphs beside vedana's:

- `GRAPH.BULK`: the rows encoded into FalkorDB's bulk-insert blocks and sent, the id indexes
  created, the graph renamed into place — what vedana's full load does, minus reading staging;
- raw `UNWIND … MERGE`: the same batches sent as the incremental load sends them, minus reading
  staging.

vedana's side: the full index's graph phase (read, load, check, persist) against the bulk build,
and vedana's incremental path (staging read overlapped with the writes) over the same rows into a
scratch graph against raw UNWIND.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.etl.graph_load import GraphWrite
    from vedana.stores.graph_falkordb import FalkorGraph

BULK_GRAPH = "bench-bulk"
UNWIND_GRAPH = "bench-unwind"
INCREMENTAL_GRAPH = "bench-incremental"


def graph_baselines(engine: Engine, graph: FalkorGraph, vedana_full_s: float) -> dict[str, Any]:
    """Seconds of each baseline and of vedana's incremental path, and the ratios in the bench's
    ratio format (`measure`, `vedana_s`, `baseline`, `baseline_s`, `ratio`, `must_reach`)."""
    from vedana.etl.graph_load import DEFAULT_BATCH, graph_writes, load_graph
    from vedana.stores.graph_falkordb import FalkorGraph
    from vedana.stores.index_state import staging_version
    from vedana.stores.staging_changes import VersionRange

    with engine.connect() as conn:
        upto = staging_version(conn)
        writes = list(graph_writes(conn, VersionRange(None, upto), DEFAULT_BATCH))
    rows = sum(len(w.rows) for w in writes if w.rows is not None)
    client = graph._db.connection
    bulk_s = _timed(lambda: _bulk(client, writes))
    unwind = FalkorGraph(graph.socket_path, UNWIND_GRAPH)
    incremental = FalkorGraph(graph.socket_path, INCREMENTAL_GRAPH)
    try:
        client.delete(UNWIND_GRAPH, INCREMENTAL_GRAPH)
        unwind_s = _timed(lambda: _unwind(unwind, writes))

        def vedana_incremental() -> None:
            with engine.connect() as conn:
                load_graph(conn, incremental, VersionRange(0, upto))

        incremental_s = _timed(vedana_incremental)
    finally:
        client.delete(BULK_GRAPH, UNWIND_GRAPH, INCREMENTAL_GRAPH)
        unwind.close()
        incremental.close()
    return {
        "rows": rows,
        "bulk_s": round(bulk_s, 3),
        "unwind_s": round(unwind_s, 3),
        "incremental_s": round(incremental_s, 3),
        "ratios": [
            _ratio(
                "full graph load (first index)",
                vedana_full_s,
                "GRAPH.BULK of the same rows",
                bulk_s,
                "≤ 1.3×",
            ),
            _ratio(
                "incremental graph load, every row",
                incremental_s,
                "raw UNWIND … MERGE of the same rows",
                unwind_s,
                "≤ 1.0×",
            ),
        ],
    }


def _bulk(client: Any, writes: list[GraphWrite]) -> None:
    from vedana.stores.falkordb_bulk import BulkBuild

    client.delete(BULK_GRAPH)
    build = BulkBuild(client, BULK_GRAPH, BULK_GRAPH + ".rebuild", ([], [], []))
    for write in writes:
        if write.rows is None:
            build.add_index(write.label, "id")
        elif write.counts == "nodes_upserted":
            build.add_nodes(write.label, write.keys, write.rows)
        else:
            build.add_edges(write.label, *write.ends, write.keys, write.rows)
    build.finish()


def _unwind(graph: FalkorGraph, writes: list[GraphWrite]) -> None:
    for write in writes:
        if write.rows is None:
            graph.ensure_index(write.label, "id")
        else:
            graph.write_batches(write.cypher, write.rows, batch_size=len(write.rows))


def _timed(run: Any) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def _ratio(
    measure: str, vedana_s: float, baseline: str, baseline_s: float, must_reach: str
) -> dict[str, Any]:
    return {
        "measure": measure,
        "vedana_s": round(vedana_s, 4),
        "baseline": baseline,
        "baseline_s": round(baseline_s, 4),
        "ratio": round(vedana_s / baseline_s, 2) if baseline_s > 0 else None,
        "must_reach": must_reach,
    }
