"""The graph loader: safe quoting of data-made labels, and the same code path over Bolt (the
neo4j driver, as for Memgraph) against FalkorDB's Bolt port, with small batches because that
listener breaks on messages over ~4 KB."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.index_kb import CountingGraph
from support.staging_rows import live_counts, put_node, tombstone_node
from vedana.embeddings.hashing import HashEmbedder
from vedana.errors import ServiceError, SourceError
from vedana.etl.graph_load import graph_value, node_properties, quote_name, upsert_edges_cypher
from vedana.etl.index import index
from vedana.stores.embedded_falkordb import ensure_falkordb, stop_falkordb


def test_names_from_data_are_quoted_or_refused() -> None:
    assert quote_name("sold at") == "`sold at`"
    assert quote_name("Ünïcode-Label") == "`Ünïcode-Label`"
    for bad in ("", "evil`) DETACH DELETE (n", "line\nbreak", "x" * 256):
        with pytest.raises(SourceError, match="rename the anchor or link"):
            quote_name(bad)
    assert upsert_edges_cypher("sold at", "Product", "Store", ["note"]).count("`") == 8


def test_property_values_fit_both_engines() -> None:
    assert graph_value(["a", None, "b"]) == ["a", "b"]
    assert graph_value({"k": 1}) == '{"k": 1}'
    assert graph_value([{"k": 1}]) == '[{"k": 1}]'
    assert node_properties("p1", {"id": "stale", "name": "Bike", "gone": None}) == {
        "name": "Bike",
        "id": "p1",
    }


def test_refused_label_stops_the_run_with_a_clear_error(settings, shop, graph) -> None:
    with shop.begin() as conn:
        put_node(conn, "Bad`Label", "x1", {"name": "x"})
    with pytest.raises(SourceError, match="cannot use 'Bad`Label' as a graph label"):
        index(settings, engine=shop, graph=graph, embedder=HashEmbedder(16))


@pytest.fixture(scope="module")
def bolt_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A second embedded FalkorDB that also listens for Bolt on a free port <= 32767."""
    home: Path = tmp_path_factory.mktemp("index-bolt")
    try:
        for _attempt in range(10):
            port = random.randint(20000, 32767)
            try:
                ensure_falkordb(home, bolt_port=port)
                break
            except ServiceError as exc:
                if "busy" not in str(exc):
                    raise
        else:
            pytest.fail("no free Bolt port found")
        yield port
    finally:
        stop_falkordb(home)


def test_index_through_bolt_loads_and_updates_the_graph(settings, shop, bolt_port: int) -> None:
    from vedana.stores.graph_bolt import BoltGraph

    bolt = BoltGraph(f"bolt://127.0.0.1:{bolt_port}")
    try:
        bolt.query("MATCH (n) DETACH DELETE n")
        graph = CountingGraph(bolt)
        report = index(settings, engine=shop, graph=graph, embedder=HashEmbedder(16), graph_batch_size=2)
        assert bolt.counts() == live_counts(shop)
        assert report.nodes_upserted == 10 and graph.write_calls >= 7  # batches of two rows
        [bike] = bolt.query(
            "MATCH (p:Product {id: 'p1'})-[r:`sold at`]->(s:Store) RETURN p.name AS p, r.note AS note, s.id AS s"
        ).rows
        assert bike == {"p": "Mountain Bike", "note": "front window display", "s": "s1"}
        indexed = {row["label"] for row in bolt.query("CALL db.indexes() YIELD label RETURN label").rows}
        assert {"Product", "Store"} <= indexed

        with shop.begin() as conn:
            tombstone_node(conn, "Product", "p1")
            put_node(conn, "Store", "s2", {"name": "Central Market", "city": "Shelbyville"})
        writes = graph.write_calls
        report = index(settings, engine=shop, graph=graph, embedder=HashEmbedder(16), graph_batch_size=2)
        assert (report.nodes_upserted, report.nodes_deleted, report.edges_deleted) == (1, 1, 1)
        assert bolt.counts() == live_counts(shop)
        [store] = bolt.query("MATCH (s:Store {id: 's2'}) RETURN s.city AS city").rows
        assert store["city"] == "Shelbyville"
        assert graph.write_calls - writes == 3  # one upsert, one edge delete, one node delete
    finally:
        bolt.close()
