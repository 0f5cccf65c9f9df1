"""The graph load's staging reader (`vedana.stores.staging_changes`): each group's rows come as a
column per attribute key, read out of the jsonb by Postgres. Whatever the values, a batch must
hold exactly what the row's JSON says (as Python's `json` reads Postgres' text of it), each row
once, and `plain` must be True only when every value is a string, a whole number, a boolean or
None."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import Engine

from support.staging_rows import put_edge, put_node, reset_staging
from vedana.stores import staging_changes
from vedana.stores.index_state import staging_version
from vedana.stores.staging_changes import (
    ChangeBatch,
    GroupsAside,
    VersionRange,
    edge_batches,
    node_batches,
    staged_groups,
)

# Per node type, the attributes of its rows: each type mixes missing keys, nulls and one kind
# of value per key, or (the "mixed" type) kinds no single column type can hold.
NODES: dict[str, list[dict[str, Any]]] = {
    "plain": [
        {"name": 'quote " back \\ slash', "age": 41, "ok": True, "id": "stale own id"},
        {"name": "línea\nnueva\t✓", "age": -(2**63), "ok": None},
        {"age": 2**63 - 1, "ok": False, "extra": None},
        {},
    ],
    "mixed": [
        {"n": 1, "v": 1.5, "big": 2**63, "list": ["a", None, 2], "map": {"k": [1, {"z": None}]}},
        {"n": "one", "v": 2, "big": 3, "list": [], "map": None, "e": 1e300, "neg": -0.0},
        {"n": True, "v": 1e-7, "big": -(2**70), "list": "not a list"},
    ],
}


def _expected(raw: Any, kind: str) -> set[tuple[Any, ...]]:
    """The rows the reader must give, built from each row's whole JSON text."""
    rows = raw.execute(
        f"SELECT {'node_id' if kind == 'nodes' else 'from_node_id, to_node_id'}, attributes::text "
        f"FROM {kind} WHERE NOT deleted"
    ).fetchall()
    return {(*ids, json.dumps(json.loads(text), sort_keys=True)) for *ids, text in rows}


def _as_json(batch: ChangeBatch, ids: int) -> set[tuple[Any, ...]]:
    out = set()
    for row in batch.rows:
        values = {k: v for k, v in zip(batch.keys, row[ids:], strict=True) if v is not None}
        out.add((*row[:ids], json.dumps(values, sort_keys=True)))
    return out


def _without_nulls_and_id(found: set[tuple[Any, ...]], drop_id: bool) -> set[tuple[Any, ...]]:
    out = set()
    for *ids, text in found:
        values = {k: v for k, v in json.loads(text).items() if v is not None and not (drop_id and k == "id")}
        out.add((*ids, json.dumps(values, sort_keys=True)))
    return out


@pytest.fixture(params=["shared", "one by one"])
def key_passes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways `staged_groups` asks for keys and kinds: two scans for every group of a table
    (few keys in all), or a pass per group (many)."""
    if request.param == "one by one":
        monkeypatch.setattr(staging_changes, "SHARED_KEYS_MAX", 0)
    return str(request.param)


def test_batches_hold_exactly_each_rows_json(pg_engine: Engine, key_passes: str) -> None:
    reset_staging(pg_engine)
    with pg_engine.begin() as conn:
        for node_type, rows in NODES.items():
            for n, attributes in enumerate(rows):
                put_node(conn, node_type, f"{node_type}:{n}", attributes)
        for n in range(7):  # more rows than a batch of 3
            put_edge(conn, "LINKS", "plain", f"plain:{n % 4}", "mixed", f"mixed:{n}", {"w": n, "s": str(n)})
        put_edge(conn, "LINKS", "mixed", "mixed:0", "plain", "plain:0", {"w": 0.5})
        put_node(conn, "plain", "gone", {"name": "x"}, deleted=True)

    with pg_engine.connect() as conn:
        rows = VersionRange(None, staging_version(conn))
        nodes = list(node_batches(conn, rows, 3))
        edges = list(edge_batches(conn, rows, 3))
        changed = list(node_batches(conn, VersionRange(0, rows.upto), 3))  # tombstones too
        raw = conn.connection.driver_connection
        want_nodes = _without_nulls_and_id(_expected(raw, "nodes"), drop_id=True)
        want_edges = _without_nulls_and_id(_expected(raw, "edges"), drop_id=False)

    assert all(len(b.rows) <= 3 for b in nodes + edges)
    got_nodes = [row for b in nodes for row in _as_json(b, 1)]
    got_edges = [row for b in edges for row in _as_json(b, 2)]
    assert len(got_nodes) == len(set(got_nodes)) == 7 and set(got_nodes) == want_nodes
    assert len(got_edges) == len(set(got_edges)) == 8 and set(got_edges) == want_edges
    # Types survive exactly: an int stays an int (not 41.0), a float a float, -2**63 fits.
    plain = {row[0]: row for b in nodes if b.names == ("plain",) for row in b.rows}
    keys = next(b.keys for b in nodes if b.names == ("plain",))
    assert "id" not in keys
    assert type(plain["plain:0"][1 + keys.index("age")]) is int
    assert plain["plain:1"][1 + keys.index("age")] == -(2**63)

    by_group = {(b.names, b.deleted): b.plain for b in nodes + edges}
    assert by_group[(("plain",), False)] is True  # strings, 64-bit ints, booleans, nulls
    assert by_group[(("mixed",), False)] is False  # lists, maps, floats, ints past 64 bits
    assert by_group[(("LINKS", "plain", "mixed"), False)] is True
    assert by_group[(("LINKS", "mixed", "plain"), False)] is False  # a float
    assert not any(b.deleted for b in nodes + edges)  # a full load reads live rows only
    tombstones = [b for b in changed if b.deleted]
    assert [list(row) for b in tombstones for row in b.rows] == [["gone"]]
    assert all(b.keys == [] for b in tombstones)


def test_each_group_gets_only_its_own_keys_and_their_kinds(pg_engine: Engine, key_passes: str) -> None:
    """The keys and kinds of every group of a table come from two scans of the whole table
    (`staged_groups`): a key one group holds must not leak into another, a key held only as
    null is still the group's, and a number is an "int" exactly when it is whole and within 64
    bits, however it is written."""
    reset_staging(pg_engine)
    with pg_engine.begin() as conn:
        put_node(conn, "a", "a:0", {"only_a": "x", "n": 2**63 - 1, "nothing": None, "id": "own"})
        put_node(conn, "a", "a:1", {"n": -(2**63), "w": 2.0})
        put_node(conn, "b", "b:0", {"n": 2**63, "w": 10**18, "t": "\\ \t\n ☃"})
        put_node(conn, "c", "c:0", {"w": -(10**17), "n": -(2**63) - 1})
        put_node(conn, "d", "d:0", {})
        put_node(conn, "a", "a:gone", {"tomb": 1}, deleted=True)

    with pg_engine.connect() as conn:
        everything = VersionRange(0, staging_version(conn))
        groups = {(g.names, g.deleted): g for g in staged_groups(conn, "nodes", everything)}
        batches = list(node_batches(conn, everything, 10))

    assert list(groups) == [
        (("a",), False),
        (("a",), True),
        (("b",), False),
        (("c",), False),
        (("d",), False),
    ]
    assert [g.count for g in groups.values()] == [2, 1, 1, 1, 1]
    a, tomb, b, c, d = groups.values()
    assert dict(zip(a.keys, a.kinds, strict=True)) == {
        "n": "int",
        "nothing": "str",
        "only_a": "str",
        "w": "json",
    }
    assert tomb.keys == [] and tomb.kinds == []
    assert dict(zip(b.keys, b.kinds, strict=True)) == {"n": "json", "t": "str", "w": "int"}
    assert dict(zip(c.keys, c.kinds, strict=True)) == {"n": "json", "w": "int"}
    assert d.keys == []
    values = {row[0]: dict(zip(batch.keys, row[1:], strict=True)) for batch in batches for row in batch.rows}
    assert values["a:1"] == {"n": -(2**63), "nothing": None, "only_a": None, "w": 2.0}
    assert type(values["a:1"]["w"]) is float and type(values["b:0"]["w"]) is int
    assert values["b:0"] == {"n": 2**63, "t": "\\ \t\n ☃", "w": 10**18}
    assert values["c:0"] == {"n": -(2**63) - 1, "w": -(10**17)}
    assert values["a:gone"] == {}


@pytest.mark.parametrize("race", [False, True])
@pytest.mark.parametrize("sample_rows", [1, 1000])
def test_groups_asked_aside_are_the_same_and_their_errors_reach_the_caller(
    pg_engine: Engine, key_passes: str, race: bool, sample_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`GroupsAside` asks on connections of its own, in threads: the same answer as asking on
    the caller's connection, whether or not the kinds pass races the keys pass, and whether or
    not the sample it starts from held every key; a failure there is raised where the answer is
    wanted."""
    monkeypatch.setattr(staging_changes, "KEY_SAMPLE_ROWS", sample_rows)
    reset_staging(pg_engine)
    with pg_engine.begin() as conn:
        put_edge(conn, "LINKS", "a", "a:0", "b", "b:0", {"w": 1, "s": "x"})
        put_edge(conn, "LINKS", "a", "a:1", "b", "b:0", {"w": 1.5})
        put_edge(conn, "LINKS", "a", "a:2", "b", "b:0", {"late": True})
        put_edge(conn, "MORE", "b", "b:0", "a", "a:0", {"other": "o"})
        put_edge(conn, "OTHER", "b", "b:0", "a", "a:0", {}, deleted=True)

    with pg_engine.connect() as conn:
        rows = VersionRange(0, staging_version(conn))
        aside = GroupsAside(conn, "edges", rows, race=race)
        assert aside.result() == staged_groups(conn, "edges", rows)
        assert [(g.names, g.deleted, g.keys, g.kinds) for g in aside.result()] == [
            (("LINKS", "a", "b"), False, ["late", "s", "w"], ["bool", "str", "json"]),
            (("MORE", "b", "a"), False, ["other"], ["str"]),
            (("OTHER", "b", "a"), True, [], []),
        ]
        broken = GroupsAside(conn, "no such table", rows, race=race)
        with pytest.raises(KeyError):
            broken.result()
