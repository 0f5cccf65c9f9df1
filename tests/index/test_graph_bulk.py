"""The full load through FalkorDB's GRAPH.BULK: the graph it builds is the one the `UNWIND … MERGE`
load builds from the same staging rows (labels, types, every property with its type, indexes),
it replaces the live graph only when it is done, and it steps aside for a graph that holds
data that is not vedana's. Also the query-parameter writer both loads rely on."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

from support.index_kb import load_shop, scratch_graphs
from support.staging_rows import put_edge, put_node, tombstone_node
from vedana.etl.graph_load import load_graph, owned_types, rebuild_graph
from vedana.stores.falkordb_bulk import BulkBuild
from vedana.stores.graph import GraphStore
from vedana.stores.graph_falkordb import FalkorGraph
from vedana.stores.index_state import staging_version
from vedana.stores.staging_changes import VersionRange

# Values of every shape staging can hold, and text that needs escaping in a Cypher literal.
ODD_ATTRIBUTES: dict[str, Any] = {
    "name": 'Quote " backslash \\ and \\n (not a newline), é, 日本',
    "multiline": "line one\nline two\ttabbed\r\x01",
    "count": 42,
    "negative": -7,
    "huge": 2**70,  # beyond 64 bits: clamped by both loads
    "ratio": 0.1,
    "whole_float": 3.0,
    "tiny": 5e-324,
    "flag": True,
    "off": False,
    "tags": ["a", None, "b"],
    "numbers": [1, 2.5, True],
    "empty_list": [],
    "nested": {"k": [1, {"x": "y"}], "z": None},
    "mixed": [{"a": 1}, "b"],
    "missing": None,
    "empty_text": "",
    "id": "ignored: the node id wins",
}


def put_odd_rows(engine: Engine) -> None:
    """The shop, plus nodes and edges with every kind of value, a tombstone and an edge whose
    end is not a node."""
    load_shop(engine)
    with engine.begin() as conn:
        put_node(conn, "Odd Thing", "o1", ODD_ATTRIBUTES)
        put_node(conn, "Odd Thing", "o2", {"count": 1})
        put_node(conn, "Odd Thing", "o3", {"note": "[looks] like {json}"})
        put_node(
            conn, "Wide", "w1", {f"a{i:03}": i for i in range(120)}
        )  # more than one SQL call's arguments
        put_node(conn, "Wide", "w2", {"a000": "text", "a119": None})
        put_node(conn, "Odd Thing", "gone", {"count": 9})
        tombstone_node(conn, "Odd Thing", "gone")
        put_edge(
            conn, "looks like", "Odd Thing", "o1", "Odd Thing", "o2", {"how": "a bit", "score": 0.5, "id": 7}
        )
        put_edge(conn, "looks like", "Odd Thing", "o2", "Odd Thing", "o2", {})  # a self-loop
        put_edge(conn, "looks like", "Odd Thing", "o3", "Odd Thing", "nowhere", {"how": "dangling"})
        put_edge(conn, "sells odd", "Product", "p1", "Odd Thing", "o1", {"tags": ["x", "y"]})


def typed(value: Any) -> Any:
    """`value` with the type of every scalar made part of it (so 1 and 1.0 and True differ)."""
    if isinstance(value, list):
        return ["list", [typed(v) for v in value]]
    if isinstance(value, dict):
        return ["map", sorted((k, typed(v)) for k, v in value.items())]
    return [type(value).__name__, value]


def snapshot(graph: GraphStore) -> dict[str, Any]:
    nodes = graph.query("MATCH (n) RETURN labels(n) AS labels, properties(n) AS props").rows
    edges = graph.query(
        "MATCH (a)-[r]->(b) RETURN type(r) AS type, a.id AS a, b.id AS b, properties(r) AS props"
    ).rows
    indexes = graph.query("CALL db.indexes() YIELD label, types, entitytype RETURN label, types, entitytype")
    return {
        "nodes": sorted(repr((sorted(r["labels"]), typed(r["props"]))) for r in nodes),
        "edges": sorted(repr((r["type"], r["a"], r["b"], typed(r["props"]))) for r in edges),
        "indexes": sorted(repr(r) for r in indexes.rows),
    }


class Watched(FalkorGraph):
    """The real store, noting whether a rebuild went through GRAPH.BULK."""

    bulk: BulkBuild | None = None

    def bulk_build(self, owned: Iterable[str], names: Iterable[str]) -> BulkBuild | None:
        self.bulk = super().bulk_build(owned, names)
        return self.bulk


@pytest.fixture
def graphs(session_graph: GraphStore) -> Iterator[tuple[Watched, Watched]]:
    """Two graphs beside the session's: one loaded by UNWIND, one rebuilt by GRAPH.BULK."""
    assert isinstance(session_graph, FalkorGraph)
    yield from scratch_graphs(
        Watched(session_graph.socket_path, "cmp-unwind"), Watched(session_graph.socket_path, "cmp-bulk")
    )


def test_bulk_rebuild_builds_the_graph_the_unwind_load_builds(pg_engine: Engine, graphs) -> None:
    unwind, bulk = graphs
    put_odd_rows(pg_engine)
    with pg_engine.connect() as conn:
        upto = staging_version(conn)
        owned = owned_types(conn).nodes
        by_unwind = load_graph(conn, unwind, VersionRange(None, upto), batch_size=3)
        by_bulk = rebuild_graph(conn, bulk, upto, owned, batch_size=3)
    assert bulk.bulk is not None  # it did go through GRAPH.BULK
    assert by_bulk == by_unwind
    assert snapshot(bulk) == snapshot(unwind)
    [odd] = bulk.query("MATCH (n:`Odd Thing` {id: 'o1'}) RETURN properties(n) AS p").rows
    assert odd["p"]["huge"] == 2**63 - 1 and odd["p"]["tags"] == ["a", "b"]
    assert odd["p"]["nested"] == '{"k": [1, {"x": "y"}], "z": null}'
    assert odd["p"]["multiline"] == ODD_ATTRIBUTES["multiline"] and "missing" not in odd["p"]
    assert bulk.counts()["edges"] == {"sold at": 4, "looks like": 2, "sells odd": 1}
    [edge] = bulk.query("MATCH ()-[r:`looks like` {how: 'a bit'}]->() RETURN properties(r) AS p").rows
    assert edge["p"] == {"how": "a bit", "score": 0.5, "id": 7}  # an edge keeps an `id` attribute
    [wide] = bulk.query("MATCH (n:Wide {id: 'w1'}) RETURN properties(n) AS p").rows
    assert wide["p"] == {"id": "w1", **{f"a{i:03}": i for i in range(120)}}


def test_rebuild_replaces_the_graph_whole_and_keeps_its_names_in_order(pg_engine: Engine, graphs) -> None:
    _, bulk = graphs
    put_odd_rows(pg_engine)
    bulk.query("CREATE (:Store {id: 'old', zzz: 1})-[:`sold at` {old: true}]->(:Product {id: 'old'})")
    bulk.ensure_index("Store", "zzz")
    bulk.query("CREATE (:`Not ours, long gone` {id: 'x'})")
    bulk.query("MATCH (n:`Not ours, long gone`) DELETE n")  # a label with no node left does not matter
    before = {what: _names(bulk, what) for what in ("labels", "relationshipTypes", "propertyKeys")}
    with pg_engine.connect() as conn:
        rebuild_graph(conn, bulk, staging_version(conn), owned_types(conn).nodes)
    assert bulk.bulk is not None
    assert bulk.query("MATCH (n {id: 'old'}) RETURN n").rows == []
    # A client that cached names by number before the swap still reads the right ones.
    for what, names in before.items():
        assert _names(bulk, what)[: len(names)] == names
    indexes = bulk.query("CALL db.indexes() YIELD label, properties RETURN label, properties").rows
    assert {(r["label"], p) for r in indexes for p in r["properties"]} == {
        ("Odd Thing", "id"),
        ("Product", "id"),
        ("Store", "id"),
        ("Store", "zzz"),
        ("Wide", "id"),
    }


def test_a_failed_rebuild_leaves_the_live_graph_readable(pg_engine: Engine, graphs) -> None:
    _, bulk = graphs
    put_odd_rows(pg_engine)
    bulk.query("CREATE (:Store {id: 'old'})")

    class Failing(Watched):
        def bulk_build(self, owned: Iterable[str], names: Iterable[str]) -> BulkBuild | None:
            build = super().bulk_build(owned, names)
            assert build is not None

            def fail(*args: Any) -> int:
                raise RuntimeError("the build broke halfway")

            build.add_edges = fail  # type: ignore[method-assign]
            return build

    failing = Failing(bulk.socket_path, bulk.graph_name)
    try:
        with pg_engine.connect() as conn, pytest.raises(RuntimeError, match="halfway"):
            rebuild_graph(conn, failing, staging_version(conn), owned_types(conn).nodes)
        assert bulk.query("MATCH (n) RETURN n.id AS id").rows == [{"id": "old"}]
        assert not bulk._db.connection.exists(bulk.graph_name + ".rebuild")
    finally:
        failing.close()


def test_a_graph_holding_other_data_is_cleared_and_loaded_instead(pg_engine: Engine, graphs) -> None:
    _, bulk = graphs
    put_odd_rows(pg_engine)
    bulk.query("CREATE (:Store {id: 'old'}), (:NotOurs {id: 'keep me'})")
    with pg_engine.connect() as conn:
        upto = staging_version(conn)
        rebuild_graph(conn, bulk, upto, owned_types(conn).nodes)
    assert bulk.bulk is None
    assert bulk.query("MATCH (n:NotOurs) RETURN n.id AS id").rows == [{"id": "keep me"}]
    assert bulk.query("MATCH (n:Store {id: 'old'}) RETURN n").rows == []
    assert bulk.counts()["nodes"]["Odd Thing"] == 3


@pytest.mark.parametrize(
    "value",
    [
        ["plain", 1, 2.5, True, None, [1, "x"]],
        ['q"uote', "back\\slash", "\\n literally", "new\nline", "\x01\x1f", "日本 é", ""],
        {"map key": {"inner": [1, None]}, "b": "{not json}"},
        [[2**70, -(2**70)], 1e300, -0.5],
    ],
)
def test_parameters_reach_falkordb_unchanged(session_graph: GraphStore, value: Any) -> None:
    [row] = session_graph.query("RETURN $v AS v", {"v": value}).rows
    expected = value
    if isinstance(value, list) and value and value[0] == [2**70, -(2**70)]:
        expected = [[2**63 - 1, -(2**63)], 1e300, -0.5]  # what FalkorDB makes of a 70-bit literal
    assert typed(row["v"]) == typed(expected)


def _names(graph: GraphStore, what: str) -> list[str]:
    return [next(iter(row.values())) for row in graph.query(f"CALL db.{what}()").rows]


def test_an_edge_label_the_bulk_format_cannot_carry_turns_the_rebuild_into_a_load(
    pg_engine: Engine, graphs
) -> None:
    """The edges' labels are known only once the nodes are in the build (they are asked beside
    the nodes' read): a label with a colon, which the bulk format would split, drops the build
    and loads the graph by UNWIND instead, with the same end state."""
    unwind, bulk = graphs
    load_shop(pg_engine)
    with pg_engine.begin() as conn:
        put_edge(conn, "rated: good", "Product", "p1", "Product", "p2", {"stars": 5})
    bulk.query("CREATE (:Product {id: 'stale'})")  # the rebuild must clear it
    with pg_engine.connect() as conn:
        upto = staging_version(conn)
        owned = owned_types(conn).nodes
        by_unwind = load_graph(conn, unwind, VersionRange(None, upto))
        by_bulk = rebuild_graph(conn, bulk, upto, owned)
    assert bulk.bulk is not None  # it started as a bulk build
    assert not bulk._db.connection.exists("cmp-bulk.rebuild")  # and dropped its scratch graph
    assert by_bulk == by_unwind
    assert snapshot(bulk) == snapshot(unwind)
    assert bulk.counts()["edges"]["rated: good"] == 1
