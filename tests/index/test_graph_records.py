"""The full rebuild's records encoded by Postgres (`vedana.stores.staging_bulk`): every kind of
value comes out as Python's encoder writes it, an edge whose end is no node is skipped, a group
whose sample missed a key or a kind sends the rebuild to the exact groups, and the graph built
is the one the Python encoder and the `UNWIND` load build, names in the same order. Groups the
data model types are encoded by their dtypes, and a row the model does not describe sends the
rebuild to the exact groups as well."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

from support.index_kb import scratch_graphs
from support.staging_rows import put_edge, put_node, reset_staging, tombstone_node
from vedana.datamodel.model import Anchor, Attribute, DataModel, Link
from vedana.etl.graph_load import declared_types, load_graph, rebuild_graph
from vedana.stores import staging_bulk
from vedana.stores.falkordb_bulk import encode_value
from vedana.stores.graph import GraphStore
from vedana.stores.graph_falkordb import FalkorGraph
from vedana.stores.index_state import staging_version
from vedana.stores.staging_bulk import (
    GuessMissed,
    edge_records,
    edge_records_aside,
    node_records,
    node_starts,
)
from vedana.stores.staging_changes import VersionRange, analyze_if_never, guessed_groups

# Scalars of every kind "any" encodes: unicode text, integers at and past 64 bits (clamped),
# 19- and 20-character integers, doubles (whole, tiny, huge), booleans, null.
SCALARS: dict[str, Any] = {
    "text": 'Quote " backslash \\ é 日本 \U0001f600 tab\t',
    "empty": "",
    "zero": 0,
    "negative": -7,
    "max": 2**63 - 1,
    "min": -(2**63),
    "past_max": 2**70,
    "past_min": -(2**70),
    "long_negative": -123456789012345678,
    "ratio": 0.1,
    "whole_float": 3.0,
    "negative_float": -2.5e-10,
    "huge_float": 1.5e300,  # jsonb writes it with no point: read back as an integer, clamped
    "yes": True,
    "no": False,
    "nothing": None,
}


@pytest.fixture
def graphs(session_graph: GraphStore) -> Iterator[tuple[FalkorGraph, FalkorGraph]]:
    """Two graphs beside the session's, for two builds of the same rows."""
    assert isinstance(session_graph, FalkorGraph)
    yield from scratch_graphs(
        FalkorGraph(session_graph.socket_path, "rec-a"), FalkorGraph(session_graph.socket_path, "rec-b")
    )


def put_rows(engine: Engine) -> None:
    """Three types, a sparse key, an `id` attribute, an undirected-style pair of edge groups, an
    edge with no attributes, an edge whose end is no node and a tombstone."""
    reset_staging(engine)
    with engine.begin() as conn:
        put_node(conn, "Thing", "t1", SCALARS)
        put_node(conn, "Thing", "t2", {"text": "second", "zero": 5, "id": "not the id"})
        put_node(conn, "Thing", "t3", {"rare": "only here"})
        for i in range(30):
            put_node(conn, "Person", f"p{i:02}", {"name": f"Person {i}", "age": 20 + i, "mentor": i % 2 == 0})
        put_node(conn, "City", "c1", {})
        put_node(conn, "Person", "gone", {"name": "Gone"})
        tombstone_node(conn, "Person", "gone")
        for i in range(30):
            put_edge(conn, "knows", "Person", f"p{i:02}", "Thing", f"t{i % 3 + 1}", {"since": 2000 + i})
            put_edge(conn, "knows", "Thing", f"t{i % 3 + 1}", "Person", f"p{i:02}", {"since": 2000 + i})
            put_edge(conn, "lives in", "Person", f"p{i:02}", "City", "c1", {})
        put_edge(conn, "knows", "Person", "p00", "Thing", "nowhere", {"since": 1, "how": "dangling"})
        put_edge(conn, "knows", "Person", "gone", "Thing", "t1", {"since": 2})


def _names(graph: GraphStore, what: str) -> list[str]:
    return [next(iter(row.values())) for row in graph.query(f"CALL db.{what}()").rows]


def snapshot(graph: GraphStore) -> dict[str, Any]:
    """Every node and edge with the type of each value, the indexes, and the names in order."""

    def typed(value: Any) -> Any:
        if isinstance(value, list):
            return ["list", [typed(v) for v in value]]
        return [type(value).__name__, value]

    nodes = graph.query("MATCH (n) RETURN labels(n) AS labels, properties(n) AS props").rows
    edges = graph.query(
        "MATCH (a)-[r]->(b) RETURN type(r) AS type, a.id AS a, b.id AS b, properties(r) AS props"
    ).rows
    indexes = graph.query("CALL db.indexes() YIELD label, properties RETURN label, properties").rows
    return {
        "nodes": sorted(
            repr((r["labels"], sorted((k, typed(v)) for k, v in r["props"].items()))) for r in nodes
        ),
        "edges": sorted(
            repr((r["type"], r["a"], r["b"], sorted((k, typed(v)) for k, v in r["props"].items())))
            for r in edges
        ),
        "indexes": sorted(repr(r) for r in indexes),
        **{what: _names(graph, what) for what in ("labels", "relationshipTypes", "propertyKeys")},
    }


def _rebuild(engine: Engine, graph: FalkorGraph) -> Any:
    with engine.connect() as conn:
        upto = staging_version(conn)
        return rebuild_graph(conn, graph, upto, ["City", "Person", "Thing"], batch_size=7)


def test_records_encoded_by_postgres_build_the_graph_the_python_encoder_builds(
    pg_engine: Engine, graphs, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_postgres, by_python = graphs
    put_rows(pg_engine)
    with pg_engine.connect() as conn:
        assert staging_bulk.encodes_records(conn)
    _read(pg_engine)  # the samples held every key: no GuessMissed
    postgres_changes = _rebuild(pg_engine, by_postgres)
    monkeypatch.setattr(staging_bulk, "REVERSE_BYTEA_SINCE", 10**9)  # as on a server before 18
    python_changes = _rebuild(pg_engine, by_python)
    assert postgres_changes == python_changes
    assert postgres_changes.edges_upserted == 92  # the two whose end is no node counted, not sent
    assert snapshot(by_postgres) == snapshot(by_python)
    [thing] = by_postgres.query("MATCH (n:Thing {id: 't1'}) RETURN properties(n) AS p").rows
    assert thing["p"] == {
        "id": "t1",
        **{k: v for k, v in SCALARS.items() if v is not None and not k.startswith("past")},
        "past_max": 2**63 - 1,
        "past_min": -(2**63),
        "huge_float": 2**63 - 1,
    }
    assert by_postgres.counts()["edges"] == {"knows": 60, "lives in": 30}


def test_the_rebuild_builds_the_graph_the_unwind_load_builds(pg_engine: Engine, graphs) -> None:
    rebuilt, loaded = graphs
    put_rows(pg_engine)
    _rebuild(pg_engine, rebuilt)
    with pg_engine.connect() as conn:
        load_graph(conn, loaded, VersionRange(None, staging_version(conn)), batch_size=7)
    ours, theirs = snapshot(rebuilt), snapshot(loaded)
    for names in ("labels", "relationshipTypes", "propertyKeys"):  # a load registers names otherwise
        ours.pop(names), theirs.pop(names)
    assert ours == theirs


def _read(engine: Engine) -> tuple[list[Any], list[Any]]:
    with engine.connect() as conn:
        rows = VersionRange(None, staging_version(conn))
        node_groups = guessed_groups(conn, "nodes", rows)
        nodes = list(node_records(conn, rows, 1000, node_groups))
        edge_groups = guessed_groups(conn, "edges", rows)
        edges = list(edge_records(conn, rows, 1000, edge_groups, node_starts(node_groups)))
    return nodes, edges


def test_a_value_comes_out_as_the_python_encoder_writes_it(pg_engine: Engine) -> None:
    reset_staging(pg_engine)
    with pg_engine.begin() as conn:
        put_node(conn, "One", "o1", SCALARS)
    [batch], _ = _read(pg_engine)
    assert batch.keys == sorted(SCALARS)
    read = {**SCALARS, "huge_float": 15 * 10**299}  # as Python's json reads jsonb's text of it
    expected = bytearray()
    for value in ["o1", *(read[key] for key in batch.keys)]:
        encode_value(expected, value)
    assert (batch.records, batch.kept, batch.count) == (bytes(expected), 1, 1)


def test_an_edge_whose_end_is_no_live_node_is_counted_and_skipped(pg_engine: Engine) -> None:
    reset_staging(pg_engine)
    with pg_engine.begin() as conn:
        put_node(conn, "A", "a1", {})
        put_node(conn, "A", "a2", {})
        put_node(conn, "B", "b1", {})
        put_node(conn, "B", "b0", {})
        tombstone_node(conn, "B", "b0")
        put_edge(conn, "to", "A", "a2", "B", "b1", {})
        put_edge(conn, "to", "A", "a1", "B", "b0", {})  # a tombstone's edge
        put_edge(conn, "to", "A", "a9", "B", "b1", {})  # no such node
    nodes, [edges] = _read(pg_engine)
    assert [n.names for n in nodes] == [("A",), ("B",)]
    # A's nodes are 0 and 1 (by id), B's first is 2: a2 -> b1 is 1 -> 2, in the machine's order.
    assert (edges.count, edges.kept) == (3, 1)
    assert edges.records == (1).to_bytes(8, "little") + (2).to_bytes(8, "little")


@pytest.mark.parametrize(
    "late",
    [
        {"name": "n", "extra": 1},  # a key the sample did not hold
        {"name": {"a": 1}},  # a map where the sample held text
        {"name": ["x"]},  # a list
        {"name": 1e-320},  # a double Postgres cannot parse
    ],
)
def test_a_row_the_sample_missed_fails_the_guess_and_the_rebuild_uses_the_exact_groups(
    pg_engine: Engine, graphs, monkeypatch: pytest.MonkeyPatch, late: dict[str, Any]
) -> None:
    rebuilt, by_python = graphs
    monkeypatch.setattr("vedana.stores.staging_changes.GUESS_SAMPLE_ROWS", 2)
    reset_staging(pg_engine)
    with pg_engine.begin() as conn:
        for i in range(5):
            put_node(conn, "Thing", f"t{i}", {"name": f"thing {i}"})
        put_node(conn, "Thing", "z", late)  # read after the sample: ids sort, the sample need not
        for i in range(5):
            put_edge(conn, "next", "Thing", f"t{i}", "Thing", "z", {"name": "e"})
    with pytest.raises(GuessMissed):
        _read(pg_engine)
    rebuilt_changes = _rebuild(pg_engine, rebuilt)
    monkeypatch.setattr(staging_bulk, "REVERSE_BYTEA_SINCE", 10**9)  # today's Python encoder
    assert _rebuild(pg_engine, by_python) == rebuilt_changes
    assert snapshot(rebuilt) == snapshot(by_python)


def test_edge_groups_read_at_once_open_in_the_groups_order(pg_engine: Engine) -> None:
    """Two connections read the edge groups; the batches may interleave, but a group's first
    records (which give its type and keys their numbers in the graph) never come before those of
    a group ahead of it, nor before a group ahead of it has ended with none."""
    reset_staging(pg_engine)
    with pg_engine.begin() as conn:
        for i in range(40):
            put_node(conn, "N", f"n{i:02}", {})
        for label in ("a", "b", "c", "d"):
            for i in range(40 if label != "b" else 3):
                to = f"n{(i + 1) % 40:02}" if label != "c" else "nowhere"  # c: no edge is kept
                put_edge(conn, label, "N", f"n{i:02}", "N", to, {f"key_{label}": i})
    with pg_engine.connect() as conn:
        rows = VersionRange(None, staging_version(conn))
        node_groups = guessed_groups(conn, "nodes", rows)
        edge_groups = guessed_groups(conn, "edges", rows)
        batches = list(edge_records_aside(conn, rows, 4, lambda: edge_groups, node_starts(node_groups)))
    firsts = []
    for batch in batches:
        if batch.kept and batch.names[0] not in firsts:
            firsts.append(batch.names[0])
    assert firsts == ["a", "b", "d"]
    assert sum(b.count for b in batches) == 123 and sum(b.kept for b in batches) == 83
    last_c = max(i for i, b in enumerate(batches) if b.names[0] == "c")
    first_d = next(i for i, b in enumerate(batches) if b.names[0] == "d" and b.kept)
    assert batches[0].names[0] == "a" and last_c < first_d


def test_staging_with_no_statistics_is_analyzed_before_the_edges_are_joined(pg_engine: Engine) -> None:
    put_rows(pg_engine)
    stats = "SELECT min(reltuples) FROM pg_class WHERE relname IN ('nodes', 'edges') AND relkind = 'r'"
    with pg_engine.begin() as conn:
        for table in ("nodes", "edges"):
            conn.exec_driver_sql(f"SELECT pg_clear_relation_stats('public', '{table}')")
        assert conn.exec_driver_sql(stats).scalar_one() < 0
    with pg_engine.connect() as conn:
        analyze_if_never(conn)
    with pg_engine.connect() as conn:  # committed: the edge readers' connections see them
        assert conn.exec_driver_sql(stats).scalar_one() > 0


def _declaring(*, age: str = "int", since: str = "int", thing: str = "") -> DataModel:
    """A data model for `put_rows`' rows: Person's and "knows"' attributes typed, Thing's by
    `thing` (blank: as the source typed them, so its group is sampled)."""
    return DataModel(
        anchors=[
            Anchor(
                "Person",
                attributes=(
                    Attribute("name"),
                    Attribute("age", dtype=age),
                    Attribute("mentor", dtype="bool"),
                ),
            ),
            Anchor(
                "Thing", attributes=tuple(Attribute(key, dtype=thing) for key in ("text", "zero", "rare"))
            ),
            Anchor("City"),
        ],
        links=[
            Link("knows", "Person", "Thing", attributes=(Attribute("since", dtype=since), Attribute("how"))),
            Link("lives in", "Person", "City", has_direction=True),
        ],
    )


def test_the_data_model_declares_keys_and_kinds_by_dtype() -> None:
    declared = declared_types(_declaring())
    assert declared(("Person",)) == {"name": "string", "age": "integer", "mentor": "boolean"}
    assert declared(("Thing",)) == {"text": None, "zero": None, "rare": None}  # blank: not vouched for
    assert declared(("knows", "Thing", "Person")) == {"since": "integer", "how": "string"}
    assert declared(("knows", "Person", "City")) is None  # not the link's anchors
    assert declared(("Nobody",)) is None
    assert declared_types(_declaring(age="list[str]"))(("Person",))["age"] == "list"
    assert declared_types(_declaring(age="float"))(("Person",))["age"] == "number"
    assert declared_types(_declaring(age="date"))(("Person",))["age"] == "string"
    twice = DataModel(anchors=[Anchor("A", attributes=(Attribute("x", dtype="int"), Attribute("x")))])
    assert declared_types(twice)(("A",)) is None  # one name, two dtypes


def _groups_read(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[str, ...], bool, bool]]:
    """(names, declared, guessed) of every group the rebuild encodes in Postgres, as it reads it."""
    seen: list[tuple[tuple[str, ...], bool, bool]] = []
    encoded = staging_bulk._encoded

    def spy(conn: Any, sql: str, params: Any, size: int, group: Any) -> Any:
        seen.append((group.names, group.declared, group.guessed))
        return encoded(conn, sql, params, size, group)

    monkeypatch.setattr(staging_bulk, "_encoded", spy)
    return seen


@pytest.mark.parametrize("age", ["int", "float", "list"])
def test_groups_the_data_model_declares_build_the_graph_the_python_encoder_builds(
    pg_engine: Engine, graphs, monkeypatch: pytest.MonkeyPatch, age: str
) -> None:
    declared, by_python = graphs
    put_rows(pg_engine)
    seen = _groups_read(monkeypatch)
    with pg_engine.connect() as conn:
        upto = staging_version(conn)
        changes = rebuild_graph(
            conn, declared, upto, ["City", "Person", "Thing"], batch_size=7, dm=_declaring(age=age)
        )
    how = {names: (is_declared, guessed) for names, is_declared, guessed in seen}
    assert all(is_declared or guessed for _, is_declared, guessed in seen)  # no exact groups read
    assert how[("Thing",)] == (False, True)  # blank dtypes: sampled
    assert how[("knows", "Person", "Thing")] == how[("lives in", "Person", "City")] == (True, False)
    if age == "list":
        assert ("Person",) not in how  # a list attribute: the group's rows go to Python's encoder
    else:
        assert how[("Person",)] == (True, False)
    monkeypatch.setattr(staging_bulk, "REVERSE_BYTEA_SINCE", 10**9)  # today's Python encoder
    assert _rebuild(pg_engine, by_python) == changes
    assert snapshot(declared) == snapshot(by_python)


@pytest.mark.parametrize(
    ("node", "edge"),
    [
        ({"name": "n", "age": "thirty"}, None),  # text where the model says int: on the caller's connection
        ({"name": "n", "age": 2**70}, None),  # an integer past 64 bits
        ({"name": "n", "age": 1.5}, None),
        (None, {"since": "long ago"}),  # in an edge group, read on a connection of its own
        (None, {"since": {"year": 1999}}),
    ],
)
def test_a_row_its_declared_dtype_does_not_describe_sends_the_rebuild_to_the_exact_groups(
    pg_engine: Engine, graphs, monkeypatch: pytest.MonkeyPatch, node: Any, edge: Any
) -> None:
    """Staging the sync did not write (a sync casts every value by its dtype): the cast the
    declared kind makes refuses it, and nothing of the declared read is kept."""
    declared, by_python = graphs
    put_rows(pg_engine)
    with pg_engine.begin() as conn:
        if node is not None:
            put_node(conn, "Person", "p99", node)
        if edge is not None:
            put_edge(conn, "knows", "Person", "p01", "Thing", "t2", edge)
    seen = _groups_read(monkeypatch)
    with pg_engine.connect() as conn:
        upto = staging_version(conn)
        changes = rebuild_graph(
            conn, declared, upto, ["City", "Person", "Thing"], batch_size=7, dm=_declaring()
        )
    exact = next(i for i, (_, is_declared, guessed) in enumerate(seen) if not (is_declared or guessed))
    assert any(is_declared for _, is_declared, _ in seen[:exact])  # the declared read began, then gave way
    assert not any(is_declared or guessed for _, is_declared, guessed in seen[exact:])
    monkeypatch.setattr(staging_bulk, "REVERSE_BYTEA_SINCE", 10**9)
    assert _rebuild(pg_engine, by_python) == changes
    assert snapshot(declared) == snapshot(by_python)
