"""Staging rows read as FalkorDB GRAPH.BULK records that Postgres encodes itself, for a full
rebuild: Python then only joins bytes, where turning every value into a Python object and
encoding it again was most of the rebuild's time.

Nodes are read group by group (in `staged_groups`' order), each sorted by its id: node `k` of
a type is then number `start + k` in the build, so an edge's query numbers the nodes of its two
endpoint types the same way and joins its rows to those numbers. A row whose end is no live
node comes back as NULL: the build skips it, as a `MATCH` that finds nothing would.

A value is encoded by its key's kind (`StagedGroup.kinds`); a group with a "json" key (maps,
lists, other numbers) is read as today's load reads it, with the edge ends' numbers as one
value, and encoded by Python. Integers go out in the machine's byte order, which only
Postgres 18's `reverse(bytea)` makes cheap: `encodes_records` says whether this server and
machine can.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vedana.stores.staging_changes import StagedGroup, VersionRange

if TYPE_CHECKING:
    from sqlalchemy import Connection

REVERSE_BYTEA_SINCE = 180000  # server_version_num of the first Postgres with reverse(bytea)
_CURSOR = "vedana_graph_records"

# One value of key `%(k{i})s` as a bulk record value: a type byte and its bytes; SQL NULL (the
# row has no such key, or a JSON null) is the null type. Staging text never holds NUL, which
# ends a string.
_STRING = "'\\x03'::bytea || convert_to({text}, 'UTF8') || '\\x00'::bytea"
_ENCODED = {
    "str": "coalesce(" + _STRING.format(text="{a}attributes->>%(k{i})s") + ", '\\x00'::bytea)",
    "int": "coalesce('\\x04'::bytea || reverse(int8send(({a}attributes->>%(k{i})s)::bigint)), '\\x00'::bytea)",
    "bool": "CASE ({a}attributes->>%(k{i})s)::boolean WHEN true THEN '\\x0101'::bytea "
    "WHEN false THEN '\\x0100'::bytea ELSE '\\x00'::bytea END",
}
# A value as Python reads it, for a group encoded by Python (as `staging_changes._VALUE`).
_PLAIN = {
    "str": "{a}attributes->>%(k{i})s",
    "int": "({a}attributes->>%(k{i})s)::bigint",
    "bool": "({a}attributes->>%(k{i})s)::boolean",
    "json": "{a}attributes->%(k{i})s",
}


@dataclass(frozen=True)
class RecordBatch:
    """Up to a batch size of one live group's rows. `records`: their bulk records joined, when
    Postgres encoded them (`kept` of the `count` rows: the others' ends are no node); else
    `rows` for Python to encode: a node `(id, value of keys[0], ...)`, an edge `(ends, value of
    keys[0], ...)` where `ends` is the two node numbers as bulk record bytes, None when either
    end is no node."""

    names: tuple[str, ...]
    keys: list[str]
    count: int
    records: bytes | None = None
    kept: int = 0
    rows: list[tuple[Any, ...]] | None = None


def encodes_records(conn: Connection) -> bool:
    """Whether this server can encode records for this machine (little-endian, Postgres 18+)."""
    if sys.byteorder != "little":
        return False
    raw = conn.connection.driver_connection
    assert raw is not None
    return int(raw.info.server_version) >= REVERSE_BYTEA_SINCE


def node_records(
    conn: Connection, rows: VersionRange, size: int, groups: list[StagedGroup]
) -> Iterator[RecordBatch]:
    """The live node rows of `groups` (the nodes' `staged_groups`, full range), group by group,
    each sorted by node id: the order `edge_records` numbers them in."""
    for group in groups:
        if group.deleted:
            continue
        params = _params(rows, group)
        where = f"{rows.where()} AND node_type = %(g0)s AND NOT deleted"
        if "json" in group.kinds:
            columns = ", ".join(["node_id", *_columns(_PLAIN, group)])
            sql = f"SELECT {columns} FROM nodes WHERE {where} ORDER BY node_id"
            yield from _plain(conn, sql, params, size, group)
            continue
        record = " || ".join([_STRING.format(text="node_id"), *_columns(_ENCODED, group)])
        sql = f"SELECT {record} FROM nodes WHERE {where} ORDER BY node_id"
        yield from _encoded(conn, sql, params, size, group)


def node_starts(groups: list[StagedGroup]) -> dict[str, int]:
    """The number of each node type's first node in a build that `node_records` fed."""
    starts, number = {}, 0
    for group in groups:
        if not group.deleted:
            starts[group.names[0]] = number
            number += group.count
    return starts


def edge_records(
    conn: Connection, rows: VersionRange, size: int, groups: list[StagedGroup], starts: dict[str, int]
) -> Iterator[RecordBatch]:
    """The live edge rows of `groups` (the edges' `staged_groups`, full range), each with its
    ends' node numbers (`starts`: `node_starts` of the nodes' groups)."""
    for group in groups:
        if group.deleted:
            continue
        _, from_type, to_type = group.names
        params = {
            **_params(rows, group),
            "from_start": starts.get(from_type, 0),
            "to_start": starts.get(to_type, 0),
        }
        ends = "f.number || t.number"
        where = (
            f"{rows.where('e')} AND e.edge_label = %(g0)s AND e.from_node_type = %(g1)s "
            "AND e.to_node_type = %(g2)s AND NOT e.deleted"
        )
        numbered = (
            f"WITH f AS ({_numbers(rows, 'g1', 'from_start')}), t AS ({_numbers(rows, 'g2', 'to_start')}) "
            "SELECT {columns} FROM edges e LEFT JOIN f ON f.node_id = e.from_node_id "
            f"LEFT JOIN t ON t.node_id = e.to_node_id WHERE {where}"
        )
        if "json" in group.kinds:
            sql = numbered.format(columns=", ".join([ends, *_columns(_PLAIN, group, "e.")]))
            yield from _plain(conn, sql, params, size, group)
            continue
        sql = numbered.format(columns=" || ".join([ends, *_columns(_ENCODED, group, "e.")]))
        yield from _encoded(conn, sql, params, size, group)


def _numbers(rows: VersionRange, type_param: str, start_param: str) -> str:
    """The live nodes of a type with their numbers as 8 bytes in the machine's (little-endian)
    order: computed once per node rather than once per edge end."""
    return (
        f"SELECT node_id, reverse(int8send(%({start_param})s + row_number() OVER (ORDER BY node_id) - 1)) "
        f"AS number FROM nodes WHERE {rows.where()} AND node_type = %({type_param})s AND NOT deleted"
    )


def _params(rows: VersionRange, group: StagedGroup) -> dict[str, Any]:
    params: dict[str, Any] = {**rows.params()}
    params.update({f"g{i}": name for i, name in enumerate(group.names)})
    params.update({f"k{i}": key for i, key in enumerate(group.keys)})
    return params


def _columns(how: dict[str, str], group: StagedGroup, alias: str = "") -> list[str]:
    return [how[kind].format(a=alias, i=i) for i, kind in enumerate(group.kinds)]


def _encoded(
    conn: Connection, sql: str, params: dict[str, Any], size: int, group: StagedGroup
) -> Iterator[RecordBatch]:
    for batch in _fetch(conn, sql, params, size):
        records = [record for (record,) in batch if record is not None]
        yield RecordBatch(group.names, group.keys, len(batch), b"".join(records), len(records))


def _plain(
    conn: Connection, sql: str, params: dict[str, Any], size: int, group: StagedGroup
) -> Iterator[RecordBatch]:
    for batch in _fetch(conn, sql, params, size):
        yield RecordBatch(group.names, group.keys, len(batch), rows=batch)


def _fetch(conn: Connection, sql: str, params: dict[str, Any], size: int) -> Iterator[list[tuple[Any, ...]]]:
    """`sql`'s rows, `size` at a time, from a cursor on the server (see `staging_changes._fetch`);
    binary, so a bytea comes as bytes with no text decoding."""
    raw = conn.connection.driver_connection
    assert raw is not None
    with raw.cursor(name=_CURSOR, binary=True) as cursor:
        cursor.execute(sql, params)
        while batch := cursor.fetchmany(size):
            yield batch
