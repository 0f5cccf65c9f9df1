"""Staging rows seen by the graph load: what changed between two versions, and which graph types
vedana owns. The only place the graph load's Postgres statements live."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Connection


@dataclass(frozen=True)
class VersionRange:
    """Staging rows with `since < version <= upto`; `since=None` means every live row (full load)."""

    since: int | None
    upto: int

    @property
    def full(self) -> bool:
        return self.since is None

    @property
    def empty(self) -> bool:
        """No staging row can be in range: the watermark is already at the latest version."""
        return self.since is not None and self.since >= self.upto

    def where(self, alias: str = "") -> str:
        """SQL condition on a staging table (columns qualified by `alias` if given)."""
        p = f"{alias}." if alias else ""
        if self.full:
            return f"NOT {p}deleted AND {p}version <= %(upto)s"
        return f"{p}version > %(since)s AND {p}version <= %(upto)s"

    def params(self) -> dict[str, int]:
        return {"since": self.since or 0, "upto": self.upto}


def changed_counts(conn: Connection, rows: VersionRange) -> dict[str, tuple[int, int]]:
    """(live, tombstone) staging rows in `rows`, per table ("nodes", "edges")."""
    counts: dict[str, tuple[int, int]] = {}
    for table in ("nodes", "edges"):
        live, dead = conn.exec_driver_sql(
            f"SELECT count(*) FILTER (WHERE NOT deleted), count(*) FILTER (WHERE deleted) "
            f"FROM {table} WHERE {rows.where()}",
            rows.params(),
        ).one()
        counts[table] = (int(live), int(dead))
    return counts


def live_type_names(conn: Connection, rows: VersionRange) -> Iterator[str]:
    """Every node type and edge label among the live (not tombstone) staging rows in `rows`."""
    for sql in (
        f"SELECT DISTINCT node_type FROM nodes WHERE {rows.where()} AND NOT deleted",
        f"SELECT DISTINCT edge_label FROM edges WHERE {rows.where()} AND NOT deleted",
    ):
        for (name,) in conn.exec_driver_sql(sql, rows.params()):
            yield name


@dataclass(frozen=True)
class ChangeBatch:
    """Up to a batch size of staging rows of one group, as lists: a node `[id, value of keys[0],
    ...]`, an edge `[from id, to id, value of keys[0], ...]`; a tombstone only its ids.

    `names` is `(node_type,)` or `(edge_label, from_node_type, to_node_type)`. A value is the
    attribute's JSON value, None where the row has none. `plain` says that no value is a map or
    a list (a test on the text that may say False of plain rows, never True of others)."""

    names: tuple[str, ...]
    deleted: bool
    keys: list[str]
    rows: list[list[Any]]
    plain: bool


_GROUPS = {
    "nodes": (("node_type",), ("node_id",)),
    "edges": (("edge_label", "from_node_type", "to_node_type"), ("from_node_id", "to_node_id")),
}
# A group's rows in primary-key order (the group's columns are fixed), for paging by key.
_ORDER = {"nodes": "node_id", "edges": "from_node_id, to_node_type, to_node_id"}


def node_batches(conn: Connection, rows: VersionRange, size: int) -> Iterator[ChangeBatch]:
    """Node rows in `rows`, by type then tombstone flag, `size` at a time. A node's own `id`
    attribute is left out (the node id is its `id`)."""
    return _batches(conn, "nodes", rows, size)


def edge_batches(conn: Connection, rows: VersionRange, size: int) -> Iterator[ChangeBatch]:
    """Edge rows in `rows`, by label, endpoint types, then tombstone flag, `size` at a time."""
    return _batches(conn, "edges", rows, size)


def _batches(conn: Connection, table: str, rows: VersionRange, size: int) -> Iterator[ChangeBatch]:
    """Postgres builds each batch as one JSON array of `[ids..., attributes]` (`json_agg`), so
    the reader decodes one text a batch (in C) instead of a row at a time, and turns each row's
    attributes into its values with a C call or two. A batch is the next `size` rows of its group
    in key order (a range of the primary key), so each comes as soon as it is built."""
    group_cols, id_cols = _GROUPS[table]
    order = _ORDER[table]
    grouped = ", ".join(group_cols)
    groups = conn.exec_driver_sql(
        f"SELECT {grouped}, deleted FROM {table} WHERE {rows.where()} "
        f"GROUP BY {grouped}, deleted ORDER BY {grouped}, deleted",
        rows.params(),
    ).all()
    ids = ", ".join(id_cols)
    for *names, deleted in groups:
        params: dict[str, Any] = {**rows.params(), "deleted": deleted}
        params.update({f"g{i}": name for i, name in enumerate(names)})
        same_group = " AND ".join(f"{col} = %(g{i})s" for i, col in enumerate(group_cols))
        row_json = f"json_build_array({ids})" if deleted else f"json_build_array({ids}, attributes)"
        first = (
            f"SELECT json_agg({row_json} ORDER BY {order})::text FROM (SELECT * FROM {table} "
            f"WHERE {rows.where()} AND {same_group} AND deleted = %(deleted)s{{after}} "
            f"ORDER BY {order} LIMIT {int(size)}) AS x"
        )
        after = f" AND ({order}) > ({', '.join(f'%(l{i})s' for i in range(order.count(',') + 1))})"
        sql = first.format(after="")
        while (text := _one_text(conn, sql, params)) is not None:
            batch = json.loads(text)
            last = batch[-1]
            params.update(_last_key(table, last, names))
            sql = first.format(after=after)
            if deleted:
                yield ChangeBatch(tuple(names), True, [], batch, True)
            else:
                keys = _spread(batch, len(id_cols), drop_id=table == "nodes")
                # Each row is `[ids..., {attributes}]`: one `[` and one `{` a row means no
                # value is a list or a map (a string holding either only costs the careful path).
                plain = text.count("[") == len(batch) + 1 and text.count("{") == len(batch)
                yield ChangeBatch(tuple(names), False, keys, batch, plain)
            if len(batch) < size:
                break


def _one_text(conn: Connection, sql: str, params: dict[str, Any]) -> str | None:
    """The one text `sql` returns, planned for these parameters every time: a prepared
    statement's generic plan (psycopg prepares from the fifth run) does not know the key range
    is narrow and scans and sorts the whole group for each batch (10× slower at 1M rows)."""
    raw = conn.connection.driver_connection
    assert raw is not None
    row = raw.execute(sql, params, prepare=False).fetchone()
    return None if row is None else row[0]


def _last_key(table: str, last: list[Any], names: list[str]) -> dict[str, Any]:
    """The key of a batch's last row (`last`), as the `%(lN)s` parameters of the next batch."""
    key = [last[0]] if table == "nodes" else [last[0], names[2], last[1]]
    return {f"l{i}": value for i, value in enumerate(key)}


def _spread(batch: list[list[Any]], at: int, *, drop_id: bool) -> list[str]:
    """Replace each row's attributes (its last item, at `at`) by their values in the order of
    the keys returned: the batch's attribute names, first seen first."""
    attributes = [row[at] for row in batch]
    shapes = dict.fromkeys(map(tuple, attributes))
    shape = next(iter(shapes))
    if len(shapes) == 1 and not (drop_id and "id" in shape):
        for row, values in zip(batch, attributes, strict=True):
            row[at:] = values.values()
        return list(shape)
    keys = [k for k in dict.fromkeys(k for shape in shapes for k in shape) if not (drop_id and k == "id")]
    for row, values in zip(batch, attributes, strict=True):
        row[at:] = map(values.get, keys)
    return keys


def staged_type_counts(conn: Connection, *, edges: bool = True) -> tuple[dict[str, int], dict[str, int]]:
    """Live row count of every node type (and edge label, unless `edges=False`) staging has ever
    held, tombstone-only types included with 0."""

    def per_type(table: str, column: str) -> dict[str, int]:
        rows = conn.exec_driver_sql(
            f"SELECT {column}, count(*) FILTER (WHERE NOT deleted) FROM {table} "
            f"GROUP BY {column} ORDER BY {column}"
        )
        return {name: int(n) for name, n in rows}

    return per_type("nodes", "node_type"), per_type("edges", "edge_label") if edges else {}
