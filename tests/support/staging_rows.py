"""Put rows into the staging tables directly, the way `vedana sync` leaves them (see the staging
contract in docs/architecture.md), so index tests need no sync.

Every write takes a fresh `version` from `staging_version_seq`; a write that changes nothing
keeps the row's version, as sync does.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.dialects.postgresql import insert

from vedana.datamodel import DataModel
from vedana.stores import tables as t
from vedana.stores.staging import save_data_model


def row_hash(attributes: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(attributes, sort_keys=True, default=str).encode()).hexdigest()


def reset_staging(engine: Engine) -> None:
    """Empty staging, the index state and the vector tables: a blank knowledge base."""
    from vedana.stores import vectors

    with engine.begin() as conn:
        conn.execute(t.nodes.delete())
        conn.execute(t.edges.delete())
        conn.execute(t.vedana_state.delete().where(t.vedana_state.c.key.like("index.%")))
        conn.execute(t.vedana_state.delete().where(t.vedana_state.c.key == vectors.MODEL_STATE_KEY))
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {vectors.NODE_TABLE}, {vectors.EDGE_TABLE}")
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {vectors.CACHE_TABLE}")


def put_data_model(engine: Engine, dm: DataModel) -> None:
    with engine.begin() as conn:
        save_data_model(conn, dm)


def _next_version(conn: Connection) -> int:
    return int(conn.execute(select(t.staging_version_seq.next_value())).scalar_one())


def put_node(
    conn: Connection, node_type: str, node_id: str, attributes: dict[str, Any], *, deleted: bool = False
) -> None:
    digest = row_hash(attributes)
    current = conn.execute(
        select(t.nodes.c.row_hash, t.nodes.c.deleted).where(
            t.nodes.c.node_type == node_type, t.nodes.c.node_id == node_id
        )
    ).first()
    if current is not None and tuple(current) == (digest, deleted):
        return
    values = {
        "node_type": node_type,
        "node_id": node_id,
        "attributes": attributes,
        "row_hash": digest,
        "deleted": deleted,
        "version": _next_version(conn),
    }
    stmt = insert(t.nodes).values(**values)
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["node_type", "node_id"],
            set_={
                **{k: stmt.excluded[k] for k in ("attributes", "row_hash", "deleted", "version")},
                "updated_at": func.now(),
            },
        )
    )


def put_edge(
    conn: Connection,
    edge_label: str,
    from_type: str,
    from_id: str,
    to_type: str,
    to_id: str,
    attributes: dict[str, Any] | None = None,
    *,
    deleted: bool = False,
) -> None:
    attributes = attributes or {}
    key = {
        "edge_label": edge_label,
        "from_node_type": from_type,
        "from_node_id": from_id,
        "to_node_type": to_type,
        "to_node_id": to_id,
    }
    digest = row_hash(attributes)
    current = conn.execute(
        select(t.edges.c.row_hash, t.edges.c.deleted).where(*(t.edges.c[k] == v for k, v in key.items()))
    ).first()
    if current is not None and tuple(current) == (digest, deleted):
        return
    stmt = insert(t.edges).values(
        **key, attributes=attributes, row_hash=digest, deleted=deleted, version=_next_version(conn)
    )
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=list(key),
            set_={
                **{k: stmt.excluded[k] for k in ("attributes", "row_hash", "deleted", "version")},
                "updated_at": func.now(),
            },
        )
    )


def tombstone_node(conn: Connection, node_type: str, node_id: str) -> None:
    """Mark a node and every edge touching it deleted, as sync does when a row disappears."""
    attrs = conn.execute(
        select(t.nodes.c.attributes).where(t.nodes.c.node_type == node_type, t.nodes.c.node_id == node_id)
    ).scalar_one()
    put_node(conn, node_type, node_id, attrs, deleted=True)
    touching = conn.execute(
        select(t.edges).where(
            ~t.edges.c.deleted,
            ((t.edges.c.from_node_type == node_type) & (t.edges.c.from_node_id == node_id))
            | ((t.edges.c.to_node_type == node_type) & (t.edges.c.to_node_id == node_id)),
        )
    ).mappings()
    for edge in list(touching):
        put_edge(
            conn,
            edge["edge_label"],
            edge["from_node_type"],
            edge["from_node_id"],
            edge["to_node_type"],
            edge["to_node_id"],
            edge["attributes"],
            deleted=True,
        )


def live_counts(engine: Engine) -> dict[str, dict[str, int]]:
    """{"nodes": {type: n}, "edges": {label: n}} of live staging rows, in `GraphStore.counts()` shape."""
    with engine.connect() as conn:
        nodes = conn.exec_driver_sql(
            "SELECT node_type, count(*) FROM nodes WHERE NOT deleted GROUP BY node_type"
        ).all()
        edges = conn.exec_driver_sql(
            "SELECT edge_label, count(*) FROM edges WHERE NOT deleted GROUP BY edge_label"
        ).all()
    return {"nodes": {k: int(v) for k, v in nodes}, "edges": {k: int(v) for k, v in edges}}
