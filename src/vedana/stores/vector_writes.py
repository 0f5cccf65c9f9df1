"""Bringing the embedding tables in line with staging, inside Postgres.

The wanted values of changed staging rows go into temp tables and are compared with the
embedding tables by sha256 of the text; only texts no cache entry has are returned to be sent to
the model (`prepare`). Once their vectors are in the cache, `apply` deletes the values that went
away and fills the tables from the cache with one INSERT … SELECT per table. The temp tables live
with the session between the two; `drop_pending` removes them.

`rows` is any staging version range with `since` (None: every live row) and `upto`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from vedana.stores import vectors as vs

if TYPE_CHECKING:
    from sqlalchemy import Connection

BULK_ROWS = 1_000  # above this (and more rows than the table holds) rebuild HNSW after the load


class VersionSpan(Protocol):
    """Staging rows with `since < version <= upto`; `since=None` means every live row."""

    @property
    def since(self) -> int | None: ...

    @property
    def upto(self) -> int: ...


def _full(rows: VersionSpan) -> bool:
    return rows.since is None


def _in_range(rows: VersionSpan, alias: str) -> str:
    p = f"{alias}."
    if _full(rows):
        return f"NOT {p}deleted AND {p}version <= %(upto)s"
    return f"{p}version > %(since)s AND {p}version <= %(upto)s"


def _params(rows: VersionSpan) -> dict[str, int]:
    return {"since": rows.since or 0, "upto": rows.upto}


@dataclass
class PendingVectors:
    """The prepared diff: how many embedding rows a write changes, and the texts to embed."""

    values_written: int = 0  # rows to insert or update
    values_reused: int = 0  # of those, rows whose vector is already cached
    values_deleted: int = 0
    missing: list[tuple[bytes, str]] = field(default_factory=list)  # (sha256, text), shortest first


# What gets embedded: a non-blank JSON string value (the inventory counts by the same rule).
TEXT_VALUE = "jsonb_typeof({row}attributes -> {attr}) = 'string' AND btrim({row}attributes ->> {attr}) <> ''"
_TEXT_ONLY = TEXT_VALUE.format(row="s.", attr="t.attribute_name")


def prepare(
    conn: Connection,
    targets: list[tuple[str, str, str]],
    rows: VersionSpan,
    model: vs.ModelInfo,
    *,
    rebuild: bool,
) -> PendingVectors:
    """Build the temp tables of wanted values and pending writes; count deletions; list the
    texts to embed. A full range compares every live row; `rebuild` rewrites every value."""
    params = {**_params(rows), "model": model.model, "dim": model.dim}
    drop_pending(conn)
    conn.exec_driver_sql("CREATE TEMP TABLE tmp_targets (kind text, label text, attribute_name text)")
    if targets:
        conn.exec_driver_sql(
            "INSERT INTO tmp_targets VALUES " + ",".join(["(%s, %s, %s)"] * len(targets)),
            tuple(v for target in targets for v in target),
        )
    where = _in_range(rows, "s") + " AND NOT s.deleted"
    conn.exec_driver_sql(
        f"""CREATE TEMP TABLE tmp_node_values AS
        SELECT s.node_type, s.node_id, t.attribute_name,
               s.attributes ->> t.attribute_name AS attribute_value,
               sha256(convert_to(s.attributes ->> t.attribute_name, 'UTF8')) AS text_hash
        FROM nodes s JOIN tmp_targets t ON t.kind = 'node' AND t.label = s.node_type
        WHERE {where} AND {_TEXT_ONLY}""",
        params,
    )
    conn.exec_driver_sql(
        f"""CREATE TEMP TABLE tmp_edge_values AS
        SELECT s.edge_label, s.from_node_type, s.from_node_id, s.to_node_type, s.to_node_id, t.attribute_name,
               s.attributes ->> t.attribute_name AS attribute_value,
               sha256(convert_to(s.attributes ->> t.attribute_name, 'UTF8')) AS text_hash
        FROM edges s JOIN tmp_targets t ON t.kind = 'edge' AND t.label = s.edge_label
        WHERE {where} AND {_TEXT_ONLY}""",
        params,
    )
    if not _full(rows):
        conn.exec_driver_sql(
            f"CREATE TEMP TABLE tmp_touched_nodes AS SELECT DISTINCT node_type, node_id FROM nodes s WHERE {_in_range(rows, 's')}",
            params,
        )
        conn.exec_driver_sql(
            "CREATE TEMP TABLE tmp_touched_edges AS SELECT DISTINCT edge_label, from_node_type, from_node_id, "
            f"to_node_type, to_node_id FROM edges s WHERE {_in_range(rows, 's')}",
            params,
        )
    for name in ("node_values", "edge_values") + (() if _full(rows) else ("touched_nodes", "touched_edges")):
        conn.exec_driver_sql(f"ANALYZE tmp_{name}")  # temp tables get no autovacuum statistics

    # Pending writes: wanted values that the table lacks or holds with another text.
    changed = "" if rebuild else "WHERE r.text_hash IS DISTINCT FROM v.text_hash"
    conn.exec_driver_sql(
        f"""CREATE TEMP TABLE tmp_node_writes AS SELECT v.* FROM tmp_node_values v
        LEFT JOIN {vs.NODE_TABLE} r ON r.node_type = v.node_type AND r.node_id = v.node_id
            AND r.attribute_name = v.attribute_name {changed}"""
    )
    conn.exec_driver_sql(
        f"""CREATE TEMP TABLE tmp_edge_writes AS SELECT v.* FROM tmp_edge_values v
        LEFT JOIN {vs.EDGE_TABLE} r ON r.edge_label = v.edge_label AND r.from_node_type = v.from_node_type
            AND r.from_node_id = v.from_node_id AND r.to_node_type = v.to_node_type
            AND r.to_node_id = v.to_node_id AND r.attribute_name = v.attribute_name {changed}"""
    )
    conn.exec_driver_sql("ANALYZE tmp_node_writes, tmp_edge_writes")
    pending = PendingVectors()
    pending.values_deleted = sum(
        int(conn.exec_driver_sql(f"SELECT count(*) FROM {table} r WHERE {cond}").scalar() or 0)
        for table, cond in _stale_conditions(rows)
    )
    cached = f"EXISTS (SELECT 1 FROM {vs.CACHE_TABLE} c WHERE c.model = %(model)s AND c.dim = %(dim)s AND c.text_hash = w.text_hash)"
    written, reused = conn.exec_driver_sql(
        f"""SELECT count(*), count(*) FILTER (WHERE {cached}) FROM (
            SELECT text_hash FROM tmp_node_writes UNION ALL SELECT text_hash FROM tmp_edge_writes) w""",
        params,
    ).one()
    pending.values_written, pending.values_reused = int(written), int(reused)
    # Shortest first, so each batch holds texts of similar length and the model pads little.
    pending.missing = [
        (bytes(h), text)
        for h, text in conn.exec_driver_sql(
            f"""SELECT w.text_hash, min(w.attribute_value) FROM (
                SELECT text_hash, attribute_value FROM tmp_node_writes
                UNION ALL SELECT text_hash, attribute_value FROM tmp_edge_writes) w
            WHERE NOT {cached} GROUP BY w.text_hash
            ORDER BY length(min(w.attribute_value)), min(w.attribute_value)""",
            params,
        )
    ]
    return pending


_TEMP_TABLES = (
    "targets",
    "node_values",
    "edge_values",
    "node_writes",
    "edge_writes",
    "touched_nodes",
    "touched_edges",
)


def drop_pending(conn: Connection) -> None:
    """Drop the temp tables of a prepared diff (they would otherwise live with the session)."""
    conn.exec_driver_sql("DROP TABLE IF EXISTS " + ", ".join(f"tmp_{n}" for n in _TEMP_TABLES))


def _stale_conditions(rows: VersionSpan) -> list[tuple[str, str]]:
    """Embedding rows to delete: those of changed rows (or of any row, on a full pass) that no
    wanted value matches any more."""
    node_wanted = (
        "NOT EXISTS (SELECT 1 FROM tmp_node_values v WHERE v.node_type = r.node_type "
        "AND v.node_id = r.node_id AND v.attribute_name = r.attribute_name)"
    )
    edge_wanted = (
        "NOT EXISTS (SELECT 1 FROM tmp_edge_values v WHERE v.edge_label = r.edge_label "
        "AND v.from_node_type = r.from_node_type AND v.from_node_id = r.from_node_id "
        "AND v.to_node_type = r.to_node_type AND v.to_node_id = r.to_node_id "
        "AND v.attribute_name = r.attribute_name)"
    )
    if _full(rows):
        return [(vs.NODE_TABLE, node_wanted), (vs.EDGE_TABLE, edge_wanted)]
    node_touched = (
        "EXISTS (SELECT 1 FROM tmp_touched_nodes t WHERE t.node_type = r.node_type AND t.node_id = r.node_id)"
    )
    edge_touched = (
        "EXISTS (SELECT 1 FROM tmp_touched_edges t WHERE t.edge_label = r.edge_label "
        "AND t.from_node_type = r.from_node_type AND t.from_node_id = r.from_node_id "
        "AND t.to_node_type = r.to_node_type AND t.to_node_id = r.to_node_id)"
    )
    return [
        (vs.NODE_TABLE, f"{node_touched} AND {node_wanted}"),
        (vs.EDGE_TABLE, f"{edge_touched} AND {edge_wanted}"),
    ]


def apply(
    conn: Connection, rows: VersionSpan, model: vs.ModelInfo, pending: PendingVectors, *, rebuild: bool
) -> None:
    """Write a prepared diff whose missing texts are now cached: delete the values that went
    away (or, with `rebuild`, everything), insert or update the rest from the cache. A large
    load drops the HNSW indexes and builds them once afterwards. Caller commits."""
    bulk = rebuild or pending.values_written > max(BULK_ROWS, _row_estimate(conn))
    if bulk:
        vs.drop_hnsw_indexes(conn)
    if rebuild:
        conn.exec_driver_sql(f"TRUNCATE {vs.NODE_TABLE}, {vs.EDGE_TABLE}")
    else:
        for table, cond in _stale_conditions(rows):
            conn.exec_driver_sql(f"DELETE FROM {table} r WHERE {cond}")
    params = {"model": model.model, "dim": model.dim}
    node_cols = "node_id, node_type, attribute_name, attribute_value, text_hash"
    edge_cols = "from_node_id, to_node_id, edge_label, from_node_type, to_node_type, attribute_name, attribute_value, text_hash"
    for table, source, cols, key in (
        (vs.NODE_TABLE, "tmp_node_writes", node_cols, vs.NODE_KEY),
        (vs.EDGE_TABLE, "tmp_edge_writes", edge_cols, vs.EDGE_KEY),
    ):
        selected = ", ".join(f"w.{c}" for c in cols.split(", "))
        conn.exec_driver_sql(
            f"""INSERT INTO {table} ({cols}, embedding)
            SELECT {selected}, c.embedding FROM {source} w
            JOIN {vs.CACHE_TABLE} c ON c.model = %(model)s AND c.dim = %(dim)s AND c.text_hash = w.text_hash
            ON CONFLICT ({", ".join(key)}) DO UPDATE SET attribute_value = EXCLUDED.attribute_value,
                text_hash = EXCLUDED.text_hash, embedding = EXCLUDED.embedding""",
            params,
        )
    if bulk:
        vs.create_hnsw_indexes(conn, model.dim)
        # Fresh statistics, or the next small run may plan as if the tables were empty.
        conn.exec_driver_sql(f"ANALYZE {vs.NODE_TABLE}, {vs.EDGE_TABLE}")
    if rebuild:
        vs.prune_cache(conn, model)


def _row_estimate(conn: Connection) -> int:
    return int(
        conn.exec_driver_sql(
            f"SELECT coalesce(sum(greatest(reltuples, 0)), 0) FROM pg_class "
            f"WHERE relname IN ('{vs.NODE_TABLE}', '{vs.EDGE_TABLE}')"
        ).scalar()
        or 0
    )
