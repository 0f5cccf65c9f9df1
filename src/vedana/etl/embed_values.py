"""Staging → pgvector: embed the embeddable text values of changed rows, drop those that went away.

The diff runs inside Postgres: the wanted values of the changed rows go into temp tables, are
compared with the embedding tables by sha256 of the text, and only texts that no cache entry
has are sent to the model. New vectors reach the cache by binary COPY (committed batch by batch,
so an interrupted run loses no paid-for embeddings); the embedding tables are then filled from
the cache with one INSERT … SELECT in the same transaction that advances the watermark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vedana.datamodel.dtypes import NON_TEXT_DTYPES, is_identifier
from vedana.embeddings.base import batches_by_budget, check_vectors
from vedana.etl.graph_load import VersionRange
from vedana.stores import vectors as vs

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from vedana.datamodel import DataModel
    from vedana.embeddings import Embedder

Progress = Callable[[str, int, "int | None"], None]
EMBED_STAGE = "embed texts"
WRITE_STAGE = "write vectors"
CHARS_PER_TOKEN = 4  # rough average for estimating tokens before anything is sent
BULK_ROWS = 1_000  # above this (and more rows than the table holds) rebuild HNSW after the load


# Attribute types whose values are not prose, whatever the cell holds.
def embed_targets(dm: DataModel) -> list[tuple[str, str, str]]:
    """(kind, label, attribute) of every embeddable attribute that holds text (not ids, not
    numbers, dates or booleans), sorted so it can be stored and compared."""
    out = set()
    for kind, label, attribute in dm.embeddable():
        owner = dm.anchor(label) if kind == "node" else dm.link(label)
        spec = owner.attribute(attribute) if owner else None
        dtype = (spec.dtype if spec else "").strip().lower()
        if dtype not in NON_TEXT_DTYPES and not is_identifier(label, attribute):
            out.add((kind, label, attribute))
    return sorted(out)


@dataclass
class VectorChanges:
    texts_embedded: int = 0  # distinct texts sent to the model
    chars_embedded: int = 0
    values_written: int = 0  # rows inserted or updated in the embedding tables
    values_reused: int = 0  # of those, rows whose vector came from the cache
    values_deleted: int = 0

    @property
    def values_embedded(self) -> int:
        return self.values_written - self.values_reused


@dataclass
class _Pending:
    """The prepared diff: what to delete/write, and which texts no cache has yet."""

    changes: VectorChanges
    missing: list[tuple[bytes, str]]


_TEXT_ONLY = (
    "jsonb_typeof(s.attributes -> t.attribute_name) = 'string' "
    "AND btrim(s.attributes ->> t.attribute_name) <> ''"
)


def _prepare(
    conn: Connection,
    targets: list[tuple[str, str, str]],
    rows: VersionRange,
    model: vs.ModelInfo,
    *,
    rebuild: bool,
) -> _Pending:
    """Build the temp tables of wanted values and pending writes; count deletions; list the
    texts to embed. `rows.full` compares every live row; `rebuild` rewrites every value."""
    params = {**rows.params(), "model": model.model, "dim": model.dim}
    _drop_temp_tables(conn)
    conn.exec_driver_sql("CREATE TEMP TABLE tmp_targets (kind text, label text, attribute_name text)")
    if targets:
        conn.exec_driver_sql(
            "INSERT INTO tmp_targets VALUES " + ",".join(["(%s, %s, %s)"] * len(targets)),
            tuple(v for target in targets for v in target),
        )
    where = rows.where("s") + " AND NOT s.deleted"
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
    if not rows.full:
        conn.exec_driver_sql(
            f"CREATE TEMP TABLE tmp_touched_nodes AS SELECT DISTINCT node_type, node_id FROM nodes s WHERE {rows.where('s')}",
            params,
        )
        conn.exec_driver_sql(
            "CREATE TEMP TABLE tmp_touched_edges AS SELECT DISTINCT edge_label, from_node_type, from_node_id, "
            f"to_node_type, to_node_id FROM edges s WHERE {rows.where('s')}",
            params,
        )
    for name in ("node_values", "edge_values") + (() if rows.full else ("touched_nodes", "touched_edges")):
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
    changes = VectorChanges()
    changes.values_deleted = sum(
        int(conn.exec_driver_sql(f"SELECT count(*) FROM {table} r WHERE {cond}").scalar() or 0)
        for table, cond in _stale_conditions(rows)
    )
    cached = f"EXISTS (SELECT 1 FROM {vs.CACHE_TABLE} c WHERE c.model = %(model)s AND c.dim = %(dim)s AND c.text_hash = w.text_hash)"
    written, reused = conn.exec_driver_sql(
        f"""SELECT count(*), count(*) FILTER (WHERE {cached}) FROM (
            SELECT text_hash FROM tmp_node_writes UNION ALL SELECT text_hash FROM tmp_edge_writes) w""",
        params,
    ).one()
    changes.values_written, changes.values_reused = int(written), int(reused)
    # Shortest first, so each batch holds texts of similar length and the model pads little.
    missing = [
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
    return _Pending(changes=changes, missing=missing)


_TEMP_TABLES = (
    "targets",
    "node_values",
    "edge_values",
    "node_writes",
    "edge_writes",
    "touched_nodes",
    "touched_edges",
)


def _drop_temp_tables(conn: Connection) -> None:
    conn.exec_driver_sql("DROP TABLE IF EXISTS " + ", ".join(f"tmp_{n}" for n in _TEMP_TABLES))


def _stale_conditions(rows: VersionRange) -> list[tuple[str, str]]:
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
    if rows.full:
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


def plan_values(
    conn: Connection, dm: DataModel, rows: VersionRange, model: vs.ModelInfo, *, rebuild: bool = False
) -> tuple[VectorChanges, int]:
    """(what an embed pass would change, estimated tokens to embed). Creates temp tables only:
    the caller rolls its transaction back."""
    pending = _prepare(conn, embed_targets(dm), rows, model, rebuild=rebuild)
    chars = sum(len(text) for _, text in pending.missing)
    pending.changes.texts_embedded = len(pending.missing)
    pending.changes.chars_embedded = chars
    return pending.changes, -(-chars // CHARS_PER_TOKEN)


def embed_values(
    conn: Connection,
    dm: DataModel,
    embedder: Embedder,
    rows: VersionRange,
    model: vs.ModelInfo,
    *,
    rebuild: bool = False,
    on_progress: Progress = lambda stage, done, total: None,
    on_embedded: Callable[[float], None] = lambda seconds: None,
) -> VectorChanges:
    """Bring the embedding tables in line with staging rows in `rows` and commit, setting the
    `index.vectors.version` watermark to `rows.upto` in the same transaction. `rebuild`
    empties the tables and writes every value again (from the cache where possible)."""
    import time

    from vedana.stores.staging import set_state

    if rows.empty and not rebuild:
        return VectorChanges()  # the common cron case: nothing new since the last run
    targets = embed_targets(dm)
    pending = _prepare(conn, targets, rows, model, rebuild=rebuild)
    conn.commit()  # temp tables live on with the session; the embedding batches commit one by one
    changes = pending.changes

    started = time.perf_counter()
    on_progress(EMBED_STAGE, 0, len(pending.missing))
    if pending.missing:
        changes.texts_embedded, changes.chars_embedded = _embed_missing(
            conn, embedder, model, pending.missing, on_progress
        )
    on_embedded(time.perf_counter() - started)

    on_progress(WRITE_STAGE, 0, None)  # one SQL statement: no steps to count
    bulk = rebuild or changes.values_written > max(BULK_ROWS, _row_estimate(conn))
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
    set_state(conn, VECTORS_VERSION_KEY, rows.upto)
    set_state(conn, VECTORS_TARGETS_KEY, [list(t) for t in targets])
    conn.commit()
    _drop_temp_tables(conn)
    conn.commit()
    on_progress(WRITE_STAGE, changes.values_written, changes.values_written)
    return changes


VECTORS_VERSION_KEY = "index.vectors.version"
VECTORS_TARGETS_KEY = "index.vectors.targets"


def _row_estimate(conn: Connection) -> int:
    return int(
        conn.exec_driver_sql(
            f"SELECT coalesce(sum(greatest(reltuples, 0)), 0) FROM pg_class "
            f"WHERE relname IN ('{vs.NODE_TABLE}', '{vs.EDGE_TABLE}')"
        ).scalar()
        or 0
    )


def _embed_missing(
    conn: Connection,
    embedder: Embedder,
    model: vs.ModelInfo,
    missing: Sequence[tuple[bytes, str]],
    on_progress: Progress,
) -> tuple[int, int]:
    """Embed `missing` texts batch by batch; each batch's vectors are committed to the cache."""
    max_texts = int(getattr(embedder, "batch_size", 64))
    max_chars = int(getattr(embedder, "batch_chars", 64 * 512))
    by_text = dict((text, h) for h, text in missing)
    done = chars = 0
    for batch in batches_by_budget([text for _, text in missing], max_texts, max_chars):
        vectors = embedder.embed(batch)
        check_vectors(model.model, model.dim, len(batch), vectors)
        vs.write_cache(conn, model, zip((by_text[t] for t in batch), vectors, strict=True))
        conn.commit()
        done += len(batch)
        chars += sum(len(t) for t in batch)
        on_progress(EMBED_STAGE, done, len(missing))
    return done, chars
