"""The bench's graph baselines run on the rows in staging, in scratch graphs that they remove,
and give their ratios in the bench's ratio format. (Speed itself is not asserted.)"""

from __future__ import annotations

from sqlalchemy import Engine

from bench.graph_baselines import BULK_GRAPH, INCREMENTAL_GRAPH, UNWIND_GRAPH, graph_baselines
from support.index_kb import load_shop
from vedana.stores.graph import GraphStore
from vedana.stores.graph_falkordb import FalkorGraph


def test_graph_baselines_measure_the_staged_rows_and_leave_no_graph_behind(
    pg_engine: Engine, session_graph: GraphStore
) -> None:
    assert isinstance(session_graph, FalkorGraph)
    load_shop(pg_engine)
    rebuilds: list[int] = []
    found = graph_baselines(
        pg_engine, session_graph, vedana_full_s=1.0, pairs=3, rebuild=lambda: rebuilds.append(1)
    )
    assert found["rows"] == 10 + 4  # the shop's nodes and edges
    assert found["bulk_s"] > 0 and found["unwind_s"] > 0 and found["incremental_s"] > 0
    assert [r["baseline"] for r in found["ratios"]] == [
        "GRAPH.BULK of the same rows",
        "raw UNWIND … MERGE of the same rows",
    ]
    assert rebuilds == [1, 1]  # the index's load is the first full pair; two more rebuilds
    full, incremental = found["ratios"]
    assert full["pairs"][0][0] == 1.0 and len(full["pairs"]) == len(incremental["pairs"]) == 3
    # FalkorDB is a process of this machine here: each side's CPU share is measured, but for the
    # index's own full pair, timed before the baselines ran.
    assert [p is None for p in full["engine_busy"]["pairs"]] == [True, False, False]
    assert all(p is not None for p in incremental["engine_busy"]["pairs"])
    for ratio in found["ratios"]:
        busy = ratio["engine_busy"]
        assert busy["engine"] == "FalkorDB" and busy["vedana"] >= 0 and busy["baseline"] >= 0
        assert set(ratio) == {
            "measure", "vedana_s", "baseline", "baseline_s", "ratio", "must_reach", "pairs", "engine_busy"
        }  # fmt: skip
        # The pairs are rounded to the microsecond and the ratio, made from them unrounded, to
        # four places: the median lies between the medians of each pair's bounds (the shop's
        # timings are microseconds, so the pairs' rounding is no small part of them).
        low = sorted((v - 5e-7) / (b + 5e-7) for v, b in ratio["pairs"])[1]
        high = sorted((v + 5e-7) / max(b - 5e-7, 1e-9) for v, b in ratio["pairs"])[1]
        assert low - 5e-5 <= ratio["ratio"] <= high + 5e-5
    keys = session_graph._db.connection.keys("bench-*")
    assert not keys, f"scratch graphs left behind: {keys} ({BULK_GRAPH}, {UNWIND_GRAPH}, {INCREMENTAL_GRAPH})"
