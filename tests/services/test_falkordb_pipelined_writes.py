"""FalkorDB's pipelined batch writer (`vedana.stores.falkordb_writes`) against the embedded server:
every batch written, in order, acknowledged oldest first and only once its reply is read; an
error in one batch is raised and leaves the graph's other connections usable."""

from __future__ import annotations

import pytest

from vedana.errors import CypherError
from vedana.stores.falkordb_writes import IN_FLIGHT
from vedana.stores.graph import GraphStore

UPSERT = "UNWIND $rows AS row MERGE (p:Person {id: row[0]}) SET p.step = row[1]"


def test_batches_are_written_in_order_and_acknowledged_oldest_first(graph: GraphStore) -> None:
    acknowledged: list[int] = []
    with graph.batch_writer() as writer:
        for n in range(7):
            # Each batch sets the same node's `step`: only the last one sent may remain.
            acknowledged += writer.send(UPSERT, [["p1", n], [f"q{n}", n]], n)
            assert len(acknowledged) >= n + 1 - IN_FLIGHT  # no more than IN_FLIGHT unanswered
        acknowledged += writer.drain()
        assert writer.drain() == []
    assert acknowledged == list(range(7))
    [row] = graph.query("MATCH (p:Person {id: 'p1'}) RETURN p.step AS step").rows
    assert row["step"] == 6
    assert graph.counts()["nodes"] == {"Person": 8}


def test_a_failing_batch_raises_and_the_graph_stays_usable(graph: GraphStore) -> None:
    with pytest.raises(CypherError, match="FalkorDB"), graph.batch_writer() as writer:
        writer.send(UPSERT, [["p1", 1]], "first")
        writer.send("UNWIND $rows AS row MERGE (p:Person {id: row[0]}) SET p.x = 1 / 0", [["p2"]], "bad")
        writer.send(UPSERT, [["p3", 3]], "after")
        writer.drain()
    assert graph.query("MATCH (p:Person {id: 'p1'}) RETURN p.step AS step").rows == [{"step": 1}]
    with graph.batch_writer() as writer:  # a fresh connection from the pool answers
        assert writer.send(UPSERT, [["p4", 4]], "again") + writer.drain() == ["again"]
