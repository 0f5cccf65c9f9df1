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


def _stream(
    conn: Connection, sql: str, params: dict[str, Any], types: list[str]
) -> Iterator[tuple[Any, ...]]:
    """The rows of `sql` as tuples, through `COPY … TO STDOUT` on the connection's transaction:
    the rows stream without a round trip per batch and are parsed in C; `types` are the
    columns' (a `jsonb` column is decoded here, from text, with the json module)."""
    raw = conn.connection.driver_connection
    assert raw is not None
    json_at = [i for i, name in enumerate(types) if name == "jsonb"]
    with raw.cursor() as cursor, cursor.copy(f"COPY ({sql}) TO STDOUT", params) as copy:
        copy.set_types(["text" if name == "jsonb" else name for name in types])
        if not json_at:
            yield from copy.rows()
            return
        loads = json.loads
        (at,) = json_at
        for row in copy.rows():
            yield (*row[:at], loads(row[at]), *row[at + 1 :])


def changed_nodes(conn: Connection, rows: VersionRange) -> Iterator[Any]:
    """Node rows in `rows` as tuples (node_type, node_id, attributes, deleted), streamed, grouped
    by type then tombstone flag."""
    sql = (
        f"SELECT node_type, node_id, attributes, deleted FROM nodes WHERE {rows.where()} "
        "ORDER BY node_type, deleted"
    )
    return _stream(conn, sql, rows.params(), ["text", "text", "jsonb", "bool"])


def changed_edges(conn: Connection, rows: VersionRange) -> Iterator[Any]:
    """Edge rows in `rows` as tuples (edge_label, from_node_type, from_node_id, to_node_type,
    to_node_id, attributes, deleted), streamed, grouped by label, endpoint types, then tombstone
    flag."""
    sql = (
        "SELECT edge_label, from_node_type, from_node_id, to_node_type, to_node_id, attributes, deleted "
        f"FROM edges WHERE {rows.where()} ORDER BY edge_label, from_node_type, to_node_type, deleted"
    )
    return _stream(conn, sql, rows.params(), ["text", "text", "text", "text", "text", "jsonb", "bool"])


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
