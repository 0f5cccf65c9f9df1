"""A read-only query ends within its time limit plus a margin, whatever it spends its time on
(FalkorDB checks its own TIMEOUT only between records), and runaway queries that were given up
on do not keep the graph from answering others."""

from __future__ import annotations

import threading
import time

import pytest
from typer.testing import CliRunner

from vedana.cli.app import app
from vedana.config import reset_settings
from vedana.errors import CypherError
from vedana.stores.graph import GraphStore

LIMIT_S = 2.0
MARGIN_S = 5.0  # generous: a loaded machine
# Each spends seconds inside expressions or a sort, not streaming records.
SLOW_REDUCE = "RETURN size(reduce(s = '', i IN range(1, 30000000) | s + 'x')) AS n"
SLOW_CARTESIAN = (
    "UNWIND range(1, 6000) AS a UNWIND range(1, 6000) AS b WITH a, b ORDER BY a + b DESC RETURN *"
)


@pytest.mark.parametrize("query", [SLOW_REDUCE, SLOW_CARTESIAN], ids=["reduce", "cartesian"])
def test_vedana_cypher_ends_within_the_time_limit(graph: GraphStore, query: str, monkeypatch) -> None:
    monkeypatch.setenv("CYPHER_TIMEOUT_S", str(LIMIT_S))
    reset_settings()
    started = time.monotonic()
    result = CliRunner().invoke(app, ["cypher", query])
    elapsed = time.monotonic() - started
    reset_settings()

    assert isinstance(result.exception, CypherError), result.output  # main() prints it as one line
    assert "timed out" in str(result.exception) and "CYPHER_TIMEOUT_S" in str(result.exception)
    assert elapsed < LIMIT_S + MARGIN_S
    quick = time.monotonic()
    assert graph.query("RETURN 1 AS one").rows == [{"one": 1}]
    assert time.monotonic() - quick < MARGIN_S


def test_two_runaway_queries_do_not_block_a_third(graph: GraphStore) -> None:
    errors: list[BaseException] = []

    def heavy() -> None:
        try:
            graph.query(SLOW_REDUCE, read_only=True, row_limit=10, timeout_s=LIMIT_S)
        except CypherError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=heavy) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # both are running on the server
    started = time.monotonic()
    assert graph.query("RETURN 1 AS one", read_only=True, timeout_s=LIMIT_S).rows == [{"one": 1}]
    assert time.monotonic() - started < LIMIT_S + MARGIN_S
    for thread in threads:
        thread.join(timeout=60)
    assert len(errors) == 2 and all("timed out" in str(e) for e in errors)
