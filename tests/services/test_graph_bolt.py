"""BoltGraph (the neo4j-driver path) against FalkorDB's Bolt port, and against a real Memgraph
when MEMGRAPH_URI is set. FalkorDB's Bolt listener crashes on messages over ~4 KB, so batches
here stay at a few small rows."""

from __future__ import annotations

import os
import random
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from vedana.errors import ConfigError, CypherError, ServiceError
from vedana.stores.embedded_falkordb import ensure_falkordb, stop_falkordb
from vedana.stores.graph_bolt import BoltGraph, endpoint_id, is_memgraph_agent, to_plain
from vedana.stores.graph_falkordb import FalkorGraph

BOLT_GRAPH_NAME = "falkordb"  # the graph FalkorDB's Bolt listener works on


@pytest.fixture(scope="module")
def bolt_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BoltGraph, Path]]:
    """A second embedded FalkorDB, also listening for Bolt on a free port <= 32767, and one
    BoltGraph on it for the whole module: this Bolt listener stops accepting new connections
    once a client has disconnected, so the test keeps a single driver open."""
    home = tmp_path_factory.mktemp("bolt-home")
    try:
        for _attempt in range(10):
            port = random.randint(20000, 32767)
            try:
                sock = ensure_falkordb(home, bolt_port=port)
                break
            except ServiceError as exc:
                if "busy" not in str(exc):
                    raise
        else:
            pytest.fail("no free Bolt port found")
        store = BoltGraph(f"bolt://127.0.0.1:{port}")
        try:
            yield store, sock
        finally:
            store.close()
    finally:
        # Throwaway data: kill it rather than wait ~2 s for the Bolt listener to shut down
        # (once a Bolt client has disconnected, the server stalls for ~2 s).
        pid_file = home / "falkordb" / "redis.pid"
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        stop_falkordb(home)


@pytest.fixture
def bolt_graph(bolt_server: tuple[BoltGraph, Path]) -> BoltGraph:
    store, _sock = bolt_server
    store.query("MATCH (n) DETACH DELETE n")
    return store


def _load(graph, label: str) -> None:
    people = [{"id": f"p{i}", "name": f"name {i}"} for i in range(5)]
    assert (
        graph.write_batches(
            f"UNWIND $rows AS row MERGE (p:{label} {{id: row.id}}) SET p.name = row.name", people, 2
        )
        == 5
    )
    links = [{"src": "p0", "dst": "p1", "since": 2020}, {"src": "p1", "dst": "p2", "since": 2021}]
    cypher = (
        f"UNWIND $rows AS row MATCH (a:{label} {{id: row.src}}), (b:{label} {{id: row.dst}}) "
        "MERGE (a)-[k:KNOWS]->(b) SET k.since = row.since"
    )
    assert graph.write_batches(cypher, links, 2) == 2


def test_bolt_node_and_edge_round_trip(bolt_graph: BoltGraph) -> None:
    _load(bolt_graph, "Person")
    [row] = bolt_graph.query(
        "MATCH (a:Person {id: $id})-[k:KNOWS]->(b) RETURN a, k, b, id(a) AS a_id, id(b) AS b_id", {"id": "p0"}
    ).rows
    assert row["a"] == {"labels": ["Person"], "properties": {"id": "p0", "name": "name 0"}}
    assert row["b"] == {"labels": ["Person"], "properties": {"id": "p1", "name": "name 1"}}
    assert row["k"] == {
        "type": "KNOWS",
        "properties": {"since": 2020},
        "start": row["a_id"],
        "end": row["b_id"],
    }
    assert bolt_graph.counts() == {"nodes": {"Person": 5}, "edges": {"KNOWS": 2}}


def test_bolt_and_native_adapters_return_the_same_values(bolt_graph: BoltGraph, bolt_server) -> None:
    _load(bolt_graph, "Person")
    _store, sock = bolt_server
    native = FalkorGraph(sock, graph_name=BOLT_GRAPH_NAME)
    try:
        for cypher in (
            "MATCH (a:Person)-[k:KNOWS]->(b:Person) RETURN a, k, b ORDER BY a.id",
            "MATCH p = (:Person {id: 'p0'})-[:KNOWS]->(:Person)-[:KNOWS]->(:Person) RETURN p",
            "MATCH (p:Person) RETURN p.id AS id, size(p.name) AS n, [1, 2.5, 'x', null] AS mixed ORDER BY id",
        ):
            # Not read_only over Bolt here: FalkorDB's Bolt listener answers some READ-access
            # queries with no rows (Memgraph honours READ access; see test_real_memgraph_round_trip).
            via_bolt = bolt_graph.query(cypher)
            via_socket = native.query(cypher, read_only=True)
            assert via_bolt.columns == via_socket.columns
            assert via_bolt.rows == via_socket.rows and via_bolt.rows
    finally:
        native.close()


def test_bolt_row_limit_streams_and_truncates(bolt_graph: BoltGraph) -> None:
    _load(bolt_graph, "Person")
    result = bolt_graph.query("MATCH (p:Person) RETURN p.id AS id ORDER BY id", row_limit=2)
    assert [r["id"] for r in result.rows] == ["p0", "p1"] and result.truncated
    whole = bolt_graph.query("MATCH (p:Person) RETURN p.id AS id", row_limit=5)
    assert len(whole.rows) == 5 and not whole.truncated


def test_bolt_read_only_queries_stream_in_a_rolled_back_transaction(bolt_graph: BoltGraph) -> None:
    _load(bolt_graph, "Person")
    result = bolt_graph.query(
        "MATCH (p:Person) RETURN p.id AS id ORDER BY id", read_only=True, row_limit=3, timeout_s=5
    )
    assert [r["id"] for r in result.rows] == ["p0", "p1", "p2"] and result.truncated
    with pytest.raises(CypherError):
        bolt_graph.query("MATCH (n) RETURN n.x +", read_only=True)
    # The session is still usable after a failed read-only transaction.
    assert bolt_graph.query("MATCH (p:Person) RETURN count(p) AS n", read_only=True).rows == [{"n": 5}]


def test_bolt_errors_and_index(bolt_graph: BoltGraph) -> None:
    with pytest.raises(CypherError):
        bolt_graph.query("MATCH (n) RETURN n.x +")
    bolt_graph.ensure_index("Person")
    bolt_graph.ensure_index("Person")
    rows = bolt_graph.query("CALL db.indexes() YIELD label, properties RETURN label, properties").rows
    assert rows == [{"label": "Person", "properties": ["id"]}]


def test_clear_deletes_only_the_given_labels_in_slices(bolt_graph: BoltGraph) -> None:
    _load(bolt_graph, "Person")
    _load(bolt_graph, "Other")  # someone else's data on the same server
    bolt_graph.clear(["Person"], batch_size=2)  # three slices and a last, empty one
    assert bolt_graph.counts() == {"nodes": {"Other": 5}, "edges": {"KNOWS": 2}}
    assert bolt_graph.counts(["Person", "Other"], ["KNOWS"]) == {"nodes": {"Other": 5}, "edges": {"KNOWS": 2}}


def test_unreachable_bolt_server_is_a_service_error() -> None:
    with pytest.raises(ServiceError, match="MEMGRAPH_URI"):
        BoltGraph("bolt://127.0.0.1:1")


def test_a_uri_that_is_not_bolt_is_a_config_error_without_its_password() -> None:
    with pytest.raises(ConfigError, match="not a Bolt URI") as raised:
        BoltGraph("http://neo:secret-pw@127.0.0.1:7474")
    assert "secret-pw" not in str(raised.value)


def test_memgraph_is_recognised_by_the_name_it_gives_over_bolt() -> None:
    assert is_memgraph_agent("Neo4j/v5.11.0 compatible graph database server - Memgraph")
    assert is_memgraph_agent("Neo4j/v5.11.0 compatible graph database server - memgraph")
    assert not is_memgraph_agent("Neo4j/5.13.0")  # FalkorDB's Bolt listener


def test_driver_values_become_plain_python() -> None:
    """Temporal, spatial and byte values as Memgraph sends them (FalkorDB's Bolt listener crashes
    on temporal values, so these are built directly)."""
    import datetime as dt

    from neo4j.spatial import CartesianPoint, WGS84Point
    from neo4j.time import Date, DateTime, Duration, Time

    assert to_plain(Date(2024, 2, 29)) == dt.date(2024, 2, 29)
    assert to_plain(DateTime(2024, 2, 29, 13, 5, 7)) == dt.datetime(2024, 2, 29, 13, 5, 7)
    assert to_plain(Time(13, 5, 7)) == dt.time(13, 5, 7)
    assert to_plain([Duration(days=1, hours=2)]) == ["P1DT2H"]
    assert to_plain(WGS84Point((2.5, 48.9))) == {"longitude": 2.5, "latitude": 48.9}
    assert to_plain(WGS84Point((2.5, 48.9, 35.0))) == {"longitude": 2.5, "latitude": 48.9, "height": 35.0}
    assert to_plain({"p": CartesianPoint((1.0, 2.0))}) == {"p": {"x": 1.0, "y": 2.0}}
    assert to_plain(CartesianPoint((1.0, 2.0, 3.0))) == {"x": 1.0, "y": 2.0, "z": 3.0}
    assert to_plain(bytearray(b"abc")) == "abc"


def test_element_ids_become_engine_ids() -> None:
    assert [endpoint_id(e) for e in ("12", "node_7", "4:9f0c:33", "weird")] == [12, 7, 33, "weird"]


@pytest.mark.memgraph
@pytest.mark.skipif(not os.environ.get("MEMGRAPH_URI"), reason="needs a real Memgraph at MEMGRAPH_URI")
def test_real_memgraph_round_trip() -> None:
    """On a real Memgraph: dialect detection, idempotent index creation (`SHOW INDEX INFO`),
    batched loads at the production batch size, streaming with a row cap, a read-only session,
    the transaction timeout, and driver values (temporal, path) as plain Python. Touches only
    nodes with its own random label; never calls `clear()`, which would empty the database."""
    import datetime as dt

    graph = BoltGraph(
        os.environ["MEMGRAPH_URI"], os.environ.get("MEMGRAPH_USER"), os.environ.get("MEMGRAPH_PWD")
    )
    label = f"VedanaTest_{uuid.uuid4().hex[:8]}"
    try:
        assert graph.is_memgraph, f"not recognised as Memgraph: {graph.server_agent!r}"
        graph.ensure_index(label)
        graph.ensure_index(label)
        indexes = [r for r in graph.query("SHOW INDEX INFO").rows if r.get("label") == label]
        assert len(indexes) == 1

        # The loader's batch size; Memgraph has no message-size limit like FalkorDB's Bolt port.
        rows = [{"id": f"p{i}", "name": f"name {i}"} for i in range(2500)]
        cypher = f"UNWIND $rows AS row MERGE (p:{label} {{id: row.id}}) SET p.name = row.name"
        assert graph.write_batches(cypher, rows, 1000) == 2500
        assert graph.write_batches(cypher, rows[:10], 1000) == 10  # MERGE: no duplicates
        _load(graph, label)
        [row] = graph.query(
            f"MATCH path = (a:{label} {{id: 'p0'}})-[k:KNOWS]->(b) "
            "RETURN a, k, id(a) AS a_id, path, date('2024-02-29') AS day"
        ).rows
        assert row["a"] == {"labels": [label], "properties": {"id": "p0", "name": "name 0"}}
        assert row["k"]["start"] == row["a_id"] and row["k"]["type"] == "KNOWS"
        assert [n["properties"]["id"] for n in row["path"]["nodes"]] == ["p0", "p1"]
        assert row["day"] == dt.date(2024, 2, 29)

        result = graph.query(f"MATCH (p:{label}) RETURN p.id AS id", read_only=True, row_limit=3)
        assert len(result.rows) == 3 and result.truncated
        # Memgraph ignores the READ access mode; the rolled-back transaction is the engine fence.
        graph.query(f"MATCH (p:{label}) SET p.name = 'changed'", read_only=True)
        with pytest.raises(CypherError):
            graph.query(f"CREATE INDEX ON :{label}(name)", read_only=True)
        names = graph.query(f"MATCH (p:{label}) RETURN DISTINCT p.name AS name").rows
        assert {"name": "changed"} not in names
        assert graph.query("SHOW INDEX INFO", read_only=True).columns
        assert graph.query(f"EXPLAIN MATCH (p:{label}) RETURN p", read_only=True).rows
        assert graph.query(f"MATCH (p:{label}) RETURN count(p) AS n", read_only=True).rows == [{"n": 2500}]

        # Bolt tx_timeout: a query far longer than the timeout (10^10 rows, little memory) is
        # stopped by the server ("Transaction was asked to abort because of transaction timeout").
        started = time.monotonic()
        with pytest.raises(CypherError, match=r"(?i)timeout"):
            graph.query(
                "UNWIND range(1, 100000) AS i UNWIND range(1, 100000) AS j "
                "WITH i, j WHERE i + j < 0 RETURN count(*) AS n",
                read_only=True,
                timeout_s=0.5,
            )
        assert time.monotonic() - started < 30
    finally:
        graph.query(f"MATCH (n:{label}) DETACH DELETE n")
        graph.query(f"DROP INDEX ON :{label}(id)")
        graph.close()
