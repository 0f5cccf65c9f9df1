"""Figures of what the vector tables hold, compared with staging: per `label.attribute`.

Counts are `{"nodes": {key: n}, "edges": {key: n}}` in the shape of `GraphStore.counts()`;
`vedana runs` shows them and the consistency check compares them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from vedana.stores import vectors as vs
from vedana.stores.vector_writes import TEXT_VALUE

if TYPE_CHECKING:
    from sqlalchemy import Connection

Counts = dict[str, dict[str, int]]


def _empty() -> Counts:
    return {"nodes": {}, "edges": {}}


def vector_counts(conn: Connection) -> Counts:
    """Rows of the embedding tables per `label.attribute` (empty before the first index)."""
    if not vs.tables_exist(conn):
        return _empty()
    out: Counts = {}
    for kind, table, label in (("nodes", vs.NODE_TABLE, "node_type"), ("edges", vs.EDGE_TABLE, "edge_label")):
        rows = conn.exec_driver_sql(
            f"SELECT {label}, attribute_name, count(*) FROM {table} GROUP BY 1, 2 ORDER BY 1, 2"
        ).all()
        out[kind] = {f"{lbl}.{attr}": int(n) for lbl, attr, n in rows}
    return out


def expected_vector_counts(conn: Connection, targets: Iterable[tuple[str, str, str]]) -> Counts:
    """How many vectors each (kind, label, attribute) target should have, given live staging rows."""
    out = _empty()
    text_value = TEXT_VALUE.format(row="", attr="%(attr)s")
    for kind, label, attribute in targets:
        table, column = ("nodes", "node_type") if kind == "node" else ("edges", "edge_label")
        n = conn.exec_driver_sql(
            f"SELECT count(*) FROM {table} WHERE {column} = %(label)s AND NOT deleted AND {text_value}",
            {"label": label, "attr": attribute},
        ).scalar()
        out[table][f"{label}.{attribute}"] = int(n or 0)
    return out


def orphan_vectors(conn: Connection) -> Counts:
    """Vectors whose node or edge is not live in staging any more, per `label.attribute`."""
    if not vs.tables_exist(conn):
        return _empty()
    nodes = conn.exec_driver_sql(
        f"""SELECT v.node_type, v.attribute_name, count(*) FROM {vs.NODE_TABLE} v
        WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.node_type = v.node_type
                          AND n.node_id = v.node_id AND NOT n.deleted)
        GROUP BY 1, 2"""
    ).all()
    edges = conn.exec_driver_sql(
        f"""SELECT v.edge_label, v.attribute_name, count(*) FROM {vs.EDGE_TABLE} v
        WHERE NOT EXISTS (SELECT 1 FROM edges e WHERE e.edge_label = v.edge_label
                          AND e.from_node_type = v.from_node_type AND e.from_node_id = v.from_node_id
                          AND e.to_node_type = v.to_node_type AND e.to_node_id = v.to_node_id
                          AND NOT e.deleted)
        GROUP BY 1, 2"""
    ).all()
    return {
        "nodes": {f"{a}.{b}": int(n) for a, b, n in nodes},
        "edges": {f"{a}.{b}": int(n) for a, b, n in edges},
    }


def stale_vectors(conn: Connection) -> Counts:
    """Vectors of a text that is no longer the live staging value, per `label.attribute`."""
    if not vs.tables_exist(conn):
        return _empty()
    nodes = conn.exec_driver_sql(
        f"""SELECT v.node_type, v.attribute_name, count(*) FROM {vs.NODE_TABLE} v
        JOIN nodes n ON n.node_type = v.node_type AND n.node_id = v.node_id AND NOT n.deleted
        WHERE (n.attributes ->> v.attribute_name) IS DISTINCT FROM v.attribute_value
        GROUP BY 1, 2"""
    ).all()
    edges = conn.exec_driver_sql(
        f"""SELECT v.edge_label, v.attribute_name, count(*) FROM {vs.EDGE_TABLE} v
        JOIN edges e ON e.edge_label = v.edge_label AND e.from_node_type = v.from_node_type
            AND e.from_node_id = v.from_node_id AND e.to_node_type = v.to_node_type
            AND e.to_node_id = v.to_node_id AND NOT e.deleted
        WHERE (e.attributes ->> v.attribute_name) IS DISTINCT FROM v.attribute_value
        GROUP BY 1, 2"""
    ).all()
    return {
        "nodes": {f"{a}.{b}": int(n) for a, b, n in nodes},
        "edges": {f"{a}.{b}": int(n) for a, b, n in edges},
    }


def vector_column_dims(conn: Connection) -> dict[str, int | None]:
    """The declared dimension of each embedding table's vector column (pgvector keeps it as
    the type modifier); None when the column has no fixed dimension."""
    if not vs.tables_exist(conn):
        return {}
    rows = conn.exec_driver_sql(
        """SELECT c.relname, a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        WHERE c.relname = ANY(%(tables)s) AND a.attname = 'embedding' AND NOT a.attisdropped
          AND pg_table_is_visible(c.oid)""",
        {"tables": [vs.NODE_TABLE, vs.EDGE_TABLE]},
    ).all()
    return {name: (int(mod) if mod and mod > 0 else None) for name, mod in rows}
