"""What the knowledge base holds, counted per type in each store: staging, graph and vectors.

Shared by `vedana runs` (to show it) and the consistency check (to compare it). Counts are
`{"nodes": {type: n}, "edges": {label: n}}` in the shape of `GraphStore.counts()`; vector counts
are keyed `label.attribute`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vedana.etl.embed_values import VECTORS_VERSION_KEY, embed_targets
from vedana.etl.index import GRAPH_VERSION_KEY
from vedana.stores import vectors as vs

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from vedana.datamodel import DataModel

Counts = dict[str, dict[str, int]]


def staging_version(conn: Connection) -> int:
    """The highest staging version: what a fully indexed knowledge base is in line with."""
    return int(
        conn.exec_driver_sql(
            "SELECT greatest((SELECT coalesce(max(version), 0) FROM nodes), "
            "(SELECT coalesce(max(version), 0) FROM edges))"
        ).scalar()
        or 0
    )


@dataclass(frozen=True)
class Watermarks:
    """The staging version each index target has fully applied (None: never indexed)."""

    graph: int | None
    vectors: int | None

    def to_dict(self) -> dict[str, int | None]:
        return {"graph": self.graph, "vectors": self.vectors}


def watermarks(conn: Connection) -> Watermarks:
    from vedana.stores.staging import get_state

    def as_int(value: Any) -> int | None:
        return None if value is None else int(value)

    return Watermarks(
        graph=as_int(get_state(conn, GRAPH_VERSION_KEY)),
        vectors=as_int(get_state(conn, VECTORS_VERSION_KEY)),
    )


def vector_counts(conn: Connection) -> Counts:
    """Rows of the embedding tables per `label.attribute` (empty before the first index)."""
    if not vs.tables_exist(conn):
        return {"nodes": {}, "edges": {}}
    out: Counts = {}
    for kind, table, label in (("nodes", vs.NODE_TABLE, "node_type"), ("edges", vs.EDGE_TABLE, "edge_label")):
        rows = conn.exec_driver_sql(
            f"SELECT {label}, attribute_name, count(*) FROM {table} GROUP BY 1, 2 ORDER BY 1, 2"
        ).all()
        out[kind] = {f"{lbl}.{attr}": int(n) for lbl, attr, n in rows}
    return out


# The rule the index embeds by (vedana.etl.embed_values): a non-blank JSON string value.
_TEXT_VALUE = "jsonb_typeof(attributes -> %(attr)s) = 'string' AND btrim(attributes ->> %(attr)s) <> ''"


def expected_vector_counts(conn: Connection, dm: DataModel) -> Counts:
    """How many vectors each embeddable text attribute should have, given live staging rows."""
    out: Counts = {"nodes": {}, "edges": {}}
    for kind, label, attribute in embed_targets(dm):
        table, column, key = (
            ("nodes", "node_type", "nodes") if kind == "node" else ("edges", "edge_label", "edges")
        )
        n = conn.exec_driver_sql(
            f"SELECT count(*) FROM {table} WHERE {column} = %(label)s AND NOT deleted AND {_TEXT_VALUE}",
            {"label": label, "attr": attribute},
        ).scalar()
        out[key][f"{label}.{attribute}"] = int(n or 0)
    return out


def orphan_vectors(conn: Connection) -> Counts:
    """Vectors whose node or edge is not live in staging any more, per `label.attribute`."""
    if not vs.tables_exist(conn):
        return {"nodes": {}, "edges": {}}
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
        return {"nodes": {}, "edges": {}}
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
