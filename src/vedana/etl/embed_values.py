"""Staging → pgvector: embed the embeddable text values of changed rows, drop those that went away.

The diff runs inside Postgres (`vedana.stores.vector_writes`): only texts that no cache entry
has are sent to the model. New vectors reach the cache by binary COPY (committed batch by batch,
so an interrupted run loses no paid-for embeddings); the embedding tables are then filled from
the cache in the same transaction that advances the watermark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vedana.datamodel.dtypes import NON_TEXT_DTYPES, is_identifier
from vedana.embeddings.base import batches_by_budget, check_vectors
from vedana.etl.graph_load import VersionRange
from vedana.stores import vector_writes
from vedana.stores import vectors as vs
from vedana.stores.index_state import VECTORS_VERSION_KEY, set_embedded_targets, set_watermark

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from vedana.datamodel import DataModel
    from vedana.embeddings import Embedder

Progress = Callable[[str, int, "int | None"], None]
EMBED_STAGE = "embed texts"
WRITE_STAGE = "write vectors"
CHARS_PER_TOKEN = 4  # rough average for estimating tokens before anything is sent


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


def plan_values(
    conn: Connection, dm: DataModel, rows: VersionRange, model: vs.ModelInfo, *, rebuild: bool = False
) -> tuple[VectorChanges, int]:
    """(what an embed pass would change, estimated tokens to embed). Creates temp tables only:
    the caller rolls its transaction back."""
    pending = vector_writes.prepare(conn, embed_targets(dm), rows, model, rebuild=rebuild)
    chars = sum(len(text) for _, text in pending.missing)
    changes = _changes(pending)
    changes.texts_embedded = len(pending.missing)
    changes.chars_embedded = chars
    return changes, -(-chars // CHARS_PER_TOKEN)


def _changes(pending: vector_writes.PendingVectors) -> VectorChanges:
    return VectorChanges(
        values_written=pending.values_written,
        values_reused=pending.values_reused,
        values_deleted=pending.values_deleted,
    )


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

    if rows.empty and not rebuild:
        return VectorChanges()  # the common cron case: nothing new since the last run
    targets = embed_targets(dm)
    pending = vector_writes.prepare(conn, targets, rows, model, rebuild=rebuild)
    conn.commit()  # temp tables live on with the session; the embedding batches commit one by one
    changes = _changes(pending)

    started = time.perf_counter()
    on_progress(EMBED_STAGE, 0, len(pending.missing))
    if pending.missing:
        changes.texts_embedded, changes.chars_embedded = _embed_missing(
            conn, embedder, model, pending.missing, on_progress
        )
    on_embedded(time.perf_counter() - started)

    on_progress(WRITE_STAGE, 0, None)  # one SQL statement per table: no steps to count
    vector_writes.apply(conn, rows, model, pending, rebuild=rebuild)
    set_watermark(conn, VECTORS_VERSION_KEY, rows.upto)
    set_embedded_targets(conn, targets)
    conn.commit()
    vector_writes.drop_pending(conn)
    conn.commit()
    on_progress(WRITE_STAGE, changes.values_written, changes.values_written)
    return changes


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
