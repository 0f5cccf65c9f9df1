"""The graph engine's own limits, measured on the rows the index just loaded, in the same run.

Both baselines start from the finished rows already in memory (read from staging and turned into
graph values before the clock starts), and write into scratch graphs beside vedana's:

- `GRAPH.BULK`: the rows encoded into FalkorDB's bulk-insert blocks and sent, the id indexes
  created, the graph renamed into place — what vedana's full load does, minus reading staging;
- raw `UNWIND … MERGE`: the same batches sent as the incremental load sends them, minus reading
  staging.

vedana's side: the full index's graph phase (read, load, check, persist) against the bulk build,
then (more pairs) the full load again as `index --full` makes it; and vedana's incremental path
(staging read overlapped with the writes) over the same rows into a scratch graph against raw
UNWIND. Each ratio is the median of its back-to-back pairs. Where FalkorDB runs on this machine
(a unix socket), each side also gets FalkorDB's CPU seconds while it ran: a side at ~100 % kept
the engine busy throughout, so nothing but the engine's own work bounds it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.etl.graph_load import GraphWrite
    from vedana.stores.graph_falkordb import FalkorGraph

BULK_GRAPH = "bench-bulk"
UNWIND_GRAPH = "bench-unwind"
INCREMENTAL_GRAPH = "bench-incremental"


def graph_baselines(
    engine: Engine,
    graph: FalkorGraph,
    vedana_full_s: float,
    *,
    pairs: int = 1,
    rebuild: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Seconds of each baseline and of vedana's incremental path, and the ratios in the bench's
    ratio format (`bench.ratios.ratio_entry`: medians over back-to-back pairs). The first full
    pair is the index's graph phase (`vedana_full_s`) and a bulk build; each further one times
    `rebuild` (vedana's full load again, as `index --full` makes it) and another bulk build."""
    from bench.ratios import ratio_entry
    from vedana.etl.graph_load import DEFAULT_BATCH, graph_writes, load_graph
    from vedana.stores.graph_falkordb import FalkorGraph
    from vedana.stores.index_state import staging_version
    from vedana.stores.staging_changes import VersionRange

    with engine.connect() as conn:
        upto = staging_version(conn)
        writes = list(graph_writes(conn, VersionRange(None, upto), DEFAULT_BATCH))
    rows = sum(len(w.rows) for w in writes if w.rows is not None)
    client = graph._db.connection
    clock = _EngineClock(client, graph.socket_path)
    full = [(vedana_full_s, _timed(lambda: _bulk(client, writes)))]
    full_cpu: list[tuple[float, float] | None] = [None]  # the index's own pair was timed elsewhere
    if rebuild is not None:
        for _ in range(2, pairs + 1):
            vedana_s, vedana_cpu = clock.timed(rebuild)
            bulk_s, bulk_cpu = clock.timed(lambda: _bulk(client, writes))
            full.append((vedana_s, bulk_s))
            full_cpu.append(_both(vedana_cpu, bulk_cpu))
    unwind = FalkorGraph(graph.socket_path, UNWIND_GRAPH)
    incremental = FalkorGraph(graph.socket_path, INCREMENTAL_GRAPH)

    def vedana_incremental() -> None:
        with engine.connect() as conn:
            load_graph(conn, incremental, VersionRange(0, upto))

    loads: list[tuple[float, float]] = []
    loads_cpu: list[tuple[float, float] | None] = []
    try:
        for _ in range(max(pairs, 1)):
            client.delete(UNWIND_GRAPH, INCREMENTAL_GRAPH)
            unwind_s, unwind_cpu = clock.timed(lambda: _unwind(unwind, writes))
            vedana_s, vedana_cpu = clock.timed(vedana_incremental)
            loads.append((vedana_s, unwind_s))
            loads_cpu.append(_both(vedana_cpu, unwind_cpu))
    finally:
        client.delete(BULK_GRAPH, UNWIND_GRAPH, INCREMENTAL_GRAPH)
        unwind.close()
        incremental.close()
    ratios = [
        ratio_entry(
            "full graph load (first index)",
            full,
            "GRAPH.BULK of the same rows",
            "≤ 1.3×",
            busy=("FalkorDB", full_cpu),
        ),
        ratio_entry(
            "incremental graph load, every row",
            loads,
            "raw UNWIND … MERGE of the same rows",
            "≤ 1.0×",
            busy=("FalkorDB", loads_cpu),
        ),
    ]
    return {
        "rows": rows,
        "bulk_s": ratios[0]["baseline_s"],
        "unwind_s": ratios[1]["baseline_s"],
        "incremental_s": ratios[1]["vedana_s"],
        "ratios": ratios,
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


class _EngineClock:
    """Wall time and FalkorDB's CPU seconds (its process tree, from /proc) of a run; the CPU is
    None when FalkorDB is not a process of this machine (no unix socket) or /proc cannot tell."""

    def __init__(self, client: Any, socket_path: Any) -> None:
        import os

        self.pid: int | None = None
        if socket_path is not None and os.path.exists(socket_path):
            import redis

            try:
                self.pid = int(client.info("server")["process_id"])
            except (redis.RedisError, KeyError, TypeError, ValueError):
                self.pid = None  # no figure, rather than no benchmark

    def cpu(self) -> float | None:
        from bench.measure import proc_tree_cpu

        return None if self.pid is None else proc_tree_cpu(self.pid)

    def timed(self, run: Any) -> tuple[float, float | None]:
        before = self.cpu()
        seconds = _timed(run)
        after = self.cpu()
        return seconds, (after - before if before is not None and after is not None else None)


def _both(vedana_cpu: float | None, baseline_cpu: float | None) -> tuple[float, float] | None:
    return None if vedana_cpu is None or baseline_cpu is None else (vedana_cpu, baseline_cpu)


def _timed(run: Any) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started
