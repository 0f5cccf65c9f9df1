"""FalkorGraph against the real embedded FalkorDB: writes, reads back, plain-value shapes, errors."""

from __future__ import annotations

import time

import pytest

from vedana.errors import CypherError
from vedana.stores.graph import GraphStore

LOAD_PEOPLE = "UNWIND $rows AS row MERGE (p:Person {id: row.id}) SET p.name = row.name"
LOAD_KNOWS = (
    "UNWIND $rows AS row MATCH (a:Person {id: row.src}), (b:Person {id: row.dst}) "
    "MERGE (a)-[k:KNOWS]->(b) SET k.since = row.since"
)


def _load_two_people(graph: GraphStore) -> None:
    sent = graph.write_batches(
        LOAD_PEOPLE, [{"id": "p1", "name": "Ada"}, {"id": "p2", "name": "Bo"}], batch_size=1
    )
    assert sent == 2
    assert graph.write_batches(LOAD_KNOWS, [{"src": "p1", "dst": "p2", "since": 2020}]) == 1


def test_node_and_edge_round_trip(graph: GraphStore) -> None:
    _load_two_people(graph)
    result = graph.query(
        "MATCH (a:Person {id: $id})-[k:KNOWS]->(b) RETURN a, k, b, id(a) AS a_id, id(b) AS b_id", {"id": "p1"}
    )
    assert result.columns == ["a", "k", "b", "a_id", "b_id"]
    [row] = result.rows
    assert row["a"] == {"labels": ["Person"], "properties": {"id": "p1", "name": "Ada"}}
    assert row["b"] == {"labels": ["Person"], "properties": {"id": "p2", "name": "Bo"}}
    assert row["k"] == {
        "type": "KNOWS",
        "properties": {"since": 2020},
        "start": row["a_id"],
        "end": row["b_id"],
    }
    assert graph.counts() == {"nodes": {"Person": 2}, "edges": {"KNOWS": 1}}


def test_merge_is_idempotent_and_stats_are_reported(graph: GraphStore) -> None:
    _load_two_people(graph)
    again = graph.query(LOAD_PEOPLE, {"rows": [{"id": "p1", "name": "Ada L."}]})
    assert "nodes_created" not in again.stats
    assert again.stats["properties_set"] == 1
    assert graph.counts()["nodes"] == {"Person": 2}


def test_paths_come_back_as_plain_dicts(graph: GraphStore) -> None:
    _load_two_people(graph)
    [row] = graph.query("MATCH p = (:Person {id: 'p1'})-[:KNOWS]->(:Person) RETURN p").rows
    path = row["p"]
    assert [n["properties"]["id"] for n in path["nodes"]] == ["p1", "p2"]
    assert [r["type"] for r in path["relationships"]] == ["KNOWS"]


def test_row_limit_truncates(graph: GraphStore) -> None:
    graph.write_batches(LOAD_PEOPLE, ({"id": f"p{i}", "name": str(i)} for i in range(5)), batch_size=2)
    result = graph.query("MATCH (p:Person) RETURN p.id AS id ORDER BY id", row_limit=3, read_only=True)
    assert [r["id"] for r in result.rows] == ["p0", "p1", "p2"]
    assert result.truncated
    exact = graph.query("MATCH (p:Person) RETURN p.id AS id", row_limit=5, read_only=True)
    assert len(exact.rows) == 5 and not exact.truncated


def test_read_only_refuses_writes_and_errors_are_cypher_errors(graph: GraphStore) -> None:
    with pytest.raises(CypherError):
        graph.query("CREATE (:Person {id: 'x'})", read_only=True)
    assert graph.counts()["nodes"] == {}
    with pytest.raises(CypherError, match="FalkorDB"):
        graph.query("MATCH (n) RETURN n.x +")


def test_ensure_index_is_idempotent(graph: GraphStore) -> None:
    graph.ensure_index("Odd Label", "id")
    graph.ensure_index("Odd Label", "id")
    rows = graph.query("CALL db.indexes() YIELD label, properties RETURN label, properties").rows
    assert [r for r in rows if r["label"] == "Odd Label"] == [{"label": "Odd Label", "properties": ["id"]}]
    with pytest.raises(CypherError, match="backtick"):
        graph.ensure_index("Bad`Label")


def test_a_runaway_read_is_cut_by_the_server_and_reported_truncated(graph: GraphStore) -> None:
    from vedana.stores.embedded_falkordb import RESULTSET_CEILING

    result = graph.query(f"UNWIND range(1, {RESULTSET_CEILING * 3}) AS i RETURN i", read_only=True)
    assert len(result.rows) == RESULTSET_CEILING
    assert result.truncated is True


def test_reading_a_graph_never_written_gives_empty_results(vedana_home) -> None:
    """Before the first `vedana index` the graph does not exist; FalkorDB refuses read-only
    queries on it ("empty key"), which must not reach the user or the agent as an error."""
    import uuid

    from vedana.stores.graph_falkordb import FalkorGraph

    name = f"never-written-{uuid.uuid4().hex[:8]}"
    store = FalkorGraph.embedded(vedana_home, graph_name=name)
    try:
        assert store.query("MATCH (n) RETURN count(n) AS n", read_only=True).rows == [{"n": 0}]
        assert store.query("RETURN 1 AS one", read_only=True).rows == [{"one": 1}]
        with pytest.raises(CypherError):
            store.query("CREATE (:Person {id: 'x'})", read_only=True)  # still read-only
        assert store.query("MATCH (n) RETURN count(n) AS n").rows == [{"n": 0}]
    finally:
        store._db.connection.delete(name)
        store.close()


def test_persist_waits_out_a_snapshot_already_running(graph) -> None:
    """The server snapshots by itself every minute with changes; persist() called meanwhile
    must wait for it, then save its own writes and return only once that save is on disk
    (Redis counts a snapshot in rdb_saves when it starts, not when it ends)."""
    conn = graph._db.connection
    conn.config_set("rdb-key-save-delay", 300_000)  # µs per key: each snapshot takes a while
    try:
        graph.query("CREATE (:Person {id: 'before'})")
        conn.execute_command("BGSAVE")
        graph.query("CREATE (:Person {id: 'after'})")  # not in the running snapshot
        running = conn.info("persistence")
        assert running["rdb_bgsave_in_progress"]
        graph.persist()
        info = conn.info("persistence")
        assert not info["rdb_bgsave_in_progress"], "persist() returned before its snapshot was written"
        assert info["rdb_saves"] == running["rdb_saves"] + 1  # one more, after the running one
        assert info["rdb_changes_since_last_save"] == 0 and info["rdb_last_bgsave_status"] == "ok"
    finally:
        conn.config_set("rdb-key-save-delay", 0)


def test_persist_returns_only_once_the_snapshot_is_on_disk(graph) -> None:
    conn = graph._db.connection
    conn.config_set("rdb-key-save-delay", 300_000)
    try:
        graph.query("CREATE (:Person {id: 'x'})")
        graph.persist()
        info = conn.info("persistence")
        assert not info["rdb_bgsave_in_progress"] and info["rdb_changes_since_last_save"] == 0
    finally:
        conn.config_set("rdb-key-save-delay", 0)


def test_persist_begin_returns_while_the_snapshot_runs_and_its_wait_until_it_is_on_disk(graph) -> None:
    """`persist_begin` starts the snapshot and returns at once (the index writes its vectors
    meanwhile); the wait it returns comes back only once that snapshot is on disk. With no
    change since the last snapshot there is nothing to wait for."""
    conn = graph._db.connection
    conn.config_set("rdb-key-save-delay", 300_000)  # µs per key: the snapshot takes a while
    try:
        graph.query("CREATE (:Person {id: 'x'})")
        before = conn.info("persistence")
        wait = graph.persist_begin()
        # BGSAVE is asked on a thread of its own: the snapshot (>= 300 ms with the delay) is seen
        # running after persist_begin() returned, which it never is if that had waited for it.
        deadline = time.monotonic() + 5
        while (
            not (running := conn.info("persistence")["rdb_bgsave_in_progress"])
            and time.monotonic() < deadline
        ):
            time.sleep(0.002)
        assert running, "persist_begin() waited for its snapshot"
        wait()
        info = conn.info("persistence")
        assert not info["rdb_bgsave_in_progress"] and info["rdb_changes_since_last_save"] == 0
        assert info["rdb_saves"] == before["rdb_saves"] + 1 and info["rdb_last_bgsave_status"] == "ok"
        graph.persist_begin()()  # nothing changed: no second snapshot
        assert conn.info("persistence")["rdb_saves"] == info["rdb_saves"]
    finally:
        conn.config_set("rdb-key-save-delay", 0)
