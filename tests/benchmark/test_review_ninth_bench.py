"""The ninth round's review, by tests, of FalkorDB's CPU share of each side of the graph pairs:
`ratio_entry(busy=)` keeps each pair's figures beside that pair when pairs are dropped, the
report explains the figures only where it shows them, and `_EngineClock` gives no figure, rather
than no benchmark, where FalkorDB's process cannot be read."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.graph_baselines import _EngineClock
from bench.ratios import BUSY_NOTE, ratio_entry
from bench.report import markdown, ratio_rows, render
from support.bench_results import bench_results
from vedana.stores.graph import GraphStore
from vedana.stores.graph_falkordb import FalkorGraph


def test_busy_figures_stay_with_their_pairs_when_a_pair_is_dropped() -> None:
    """A pair with no baseline time is dropped, and its engine figures with it: each kept pair's
    shares are its own CPU seconds over its own times."""
    entry = ratio_entry(
        "graph load",
        [(2.0, 1.0), (5.0, 0.0), (4.0, 2.0)],
        "GRAPH.BULK",
        "≤ 1.3×",
        busy=("FalkorDB", [(1.0, 0.25), (9.0, 9.0), (4.0, 2.0)]),
    )
    assert entry["pairs"] == [[2.0, 1.0], [4.0, 2.0]]
    assert entry["engine_busy"]["pairs"] == [[0.5, 0.25], [1.0, 1.0]]
    assert (entry["engine_busy"]["vedana"], entry["engine_busy"]["baseline"]) == (0.75, 0.625)


def test_only_the_dropped_pair_measured_gives_no_busy_figure() -> None:
    """The figures of a dropped pair are no figures: with no kept pair measured, the entry has
    none (and the table prints none)."""
    entry = ratio_entry(
        "graph load",
        [(2.0, 0.0), (3.0, 1.0)],
        "GRAPH.BULK",
        "≤ 1.3×",
        busy=("FalkorDB", [(1.0, 1.0), None]),
    )
    assert entry["pairs"] == [[3.0, 1.0]] and "engine_busy" not in entry
    size = {"rows": 1000, "phases": {"index": {"ratios": [entry]}}}
    assert ratio_rows([size])[0][3] == "GRAPH.BULK: 1.00 s"


def _results(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return bench_results([{"rows": 1000, "phases": {"index": {"seconds": 1.0, "ratios": entries}}}])


def test_the_busy_note_is_printed_only_beside_busy_figures() -> None:
    """The note that explains "busy" comes once with a table that shows busy figures, in the
    markdown and on the console, and not at all without them."""
    from rich.console import Console

    plain = ratio_entry("sync", [(2.0, 1.0)], "COPY", "≤ 1.5×")
    busy = ratio_entry("graph load", [(2.0, 1.0)], "GRAPH.BULK", "≤ 1.3×", busy=("FalkorDB", [(1.9, 0.95)]))
    for entries, shown in [([plain], False), ([plain, busy, busy], True)]:
        text = markdown(_results(entries))
        assert text.count(BUSY_NOTE) == (1 if shown else 0)
        out = io.StringIO()
        render(_results(entries), Console(file=out, width=400))
        assert out.getvalue().count("engine busy: the engine's CPU seconds") == (1 if shown else 0)
    assert "(FalkorDB busy 95% / 95%)" in markdown(_results([busy]))


def test_no_engine_process_gives_no_cpu_figure(tmp_path: Path) -> None:
    """No socket, a socket file nobody answers on, or a process gone: the run is still timed,
    with no CPU figure."""
    import redis

    ran: list[int] = []
    clock = _EngineClock(None, None)
    assert clock.pid is None
    seconds, cpu = clock.timed(lambda: ran.append(1))
    assert ran == [1] and seconds >= 0 and cpu is None

    there = tmp_path / "falkordb.sock"
    there.touch()
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    silent = redis.Redis(unix_socket_path=str(tmp_path / "nobody.sock"), retry=Retry(NoBackoff(), 0))
    clock = _EngineClock(silent, there)
    assert clock.pid is None and clock.timed(lambda: None)[1] is None

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # reaped: /proc holds it no longer
    gone = _EngineClock(None, None)
    gone.pid = ended.pid
    assert gone.cpu() is None and gone.timed(lambda: None)[1] is None


def test_the_engines_cpu_is_what_it_spent_on_the_run(session_graph: GraphStore) -> None:
    """FalkorDB's own process, found through its socket: a query that keeps it busy shows as
    CPU seconds spent, never negative nor more than the machine's cores over the wall time."""
    import os

    assert isinstance(session_graph, FalkorGraph)
    clock = _EngineClock(session_graph._db.connection, session_graph.socket_path)
    assert clock.pid is not None and clock.pid != os.getpid()
    seconds, cpu = clock.timed(
        lambda: session_graph.query("UNWIND range(1, 3000000) AS x WITH x WHERE x % 7 = 0 RETURN count(x)")
    )
    assert cpu is not None
    assert 0 < cpu <= seconds * (os.cpu_count() or 1) + 0.05
    _, idle_cpu = clock.timed(lambda: None)
    assert idle_cpu is not None and 0 <= idle_cpu <= 0.05


@pytest.mark.parametrize("vedana", [0.0, 1e-12])
def test_a_vedana_side_of_no_time_keeps_its_share_finite(vedana: float) -> None:
    """A vedana side timed at ~0 s with no engine CPU is a share of 0, not a division error."""
    entry = ratio_entry("graph load", [(vedana, 1.0)], "GRAPH.BULK", "", busy=("FalkorDB", [(0.0, 0.5)]))
    assert entry["engine_busy"]["pairs"] == [[0.0, 0.5]]
