"""pgvector tables of embedded values, the embedding cache, and vector search.

The one place that knows these tables. Their vector column has the dimension of the model in
use, so they are created at index time (not by `ensure_schema`) and rebuilt when the model
changes; the model and dimension are recorded in `vedana_state` under `embeddings.model`.

- `rag_anchor_embeddings` / `rag_edge_embeddings`: one row per embedded (node or edge,
  attribute) value, with an HNSW cosine index.
- `embedding_cache`: vectors keyed by (model, dimension, sha256 of the text), so a text already
  embedded is never sent to a model again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from vedana.errors import EmbeddingError, NotIndexed, VedanaError

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from vedana.config import Settings
    from vedana.datamodel import Attribute, DataModel
    from vedana.embeddings import Embedder

NODE_TABLE = "rag_anchor_embeddings"
EDGE_TABLE = "rag_edge_embeddings"
CACHE_TABLE = "embedding_cache"
MODEL_STATE_KEY = "embeddings.model"
HNSW_MAX_DIM = 2000  # pgvector's HNSW limit for `vector`; wider models are indexed as halfvec
HNSW_HALFVEC_MAX_DIM = 4000

Kind = Literal["node", "edge"]

# Key columns of each table, in the order the index writes them.
NODE_KEY = ("node_type", "node_id", "attribute_name")
EDGE_KEY = ("edge_label", "from_node_type", "from_node_id", "to_node_type", "to_node_id", "attribute_name")


class SearchTargetError(VedanaError):
    """A label/attribute that has no embedded values to search."""

    exit_code = 2


@dataclass(frozen=True)
class ModelInfo:
    model: str
    dim: int

    def describe(self) -> str:
        return f"{self.model} ({self.dim} dimensions)"


# --- schema ----------------------------------------------------------------------------------


def _vector_expr(dim: int, column: str = "embedding") -> str:
    """The expression the HNSW index is built on and searches order by."""
    return column if dim <= HNSW_MAX_DIM else f"({column}::halfvec({dim}))"


def _ops(dim: int) -> str:
    return "vector_cosine_ops" if dim <= HNSW_MAX_DIM else "halfvec_cosine_ops"


def create_cache_table(conn: Connection) -> None:
    conn.exec_driver_sql(
        f"""CREATE TABLE IF NOT EXISTS {CACHE_TABLE} (
            model text NOT NULL,
            dim integer NOT NULL,
            text_hash bytea NOT NULL,
            embedding vector NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (model, dim, text_hash))"""
    )


def create_vector_tables(conn: Connection, dim: int) -> None:
    """Create the two embedding tables for `dim` if they do not exist (HNSW indexes included)."""
    if dim > HNSW_HALFVEC_MAX_DIM:
        raise EmbeddingError(
            f"{dim}-dimensional vectors are wider than pgvector can index ({HNSW_HALFVEC_MAX_DIM}); "
            "set EMBEDDINGS_DIM lower (e.g. 1024) for a model that supports shortened vectors"
        )
    create_cache_table(conn)
    conn.exec_driver_sql(
        f"""CREATE TABLE IF NOT EXISTS {NODE_TABLE} (
            node_id text NOT NULL,
            node_type text NOT NULL,
            attribute_name text NOT NULL,
            attribute_value text NOT NULL,
            embedding vector({dim}) NOT NULL,
            text_hash bytea NOT NULL,
            PRIMARY KEY (node_type, node_id, attribute_name))"""
    )
    conn.exec_driver_sql(
        f"""CREATE TABLE IF NOT EXISTS {EDGE_TABLE} (
            from_node_id text NOT NULL,
            to_node_id text NOT NULL,
            edge_label text NOT NULL,
            attribute_name text NOT NULL,
            attribute_value text NOT NULL,
            embedding vector({dim}) NOT NULL,
            from_node_type text NOT NULL,
            to_node_type text NOT NULL,
            text_hash bytea NOT NULL,
            PRIMARY KEY (edge_label, from_node_type, from_node_id, to_node_type, to_node_id, attribute_name))"""
    )
    conn.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS {NODE_TABLE}_target_idx ON {NODE_TABLE} (node_type, attribute_name)"
    )
    conn.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS {EDGE_TABLE}_target_idx ON {EDGE_TABLE} (edge_label, attribute_name)"
    )
    create_hnsw_indexes(conn, dim)


# HNSW build memory: pgvector builds far faster while the whole graph fits in
# maintenance_work_mem (measured: 210k×384 vectors in 167 s with 1 GB vs 995 s with 256 MB),
# so it is sized from the row count, within bounds any Postgres server should have to spare.
_HNSW_BYTES_PER_DIM = 4 * 1.5  # float4 plus the graph's share, per dimension
_HNSW_BYTES_PER_ROW = 512  # neighbour lists and tuple overhead
_HNSW_MEM_MIN_MB, _HNSW_MEM_MAX_MB = 256, 1024


def hnsw_build_memory_mb(rows: int, dim: int) -> int:
    needed = rows * (dim * _HNSW_BYTES_PER_DIM + _HNSW_BYTES_PER_ROW) / 2**20
    return int(min(max(needed, _HNSW_MEM_MIN_MB), _HNSW_MEM_MAX_MB))


def create_hnsw_indexes(conn: Connection, dim: int) -> None:
    rows = max(
        int(conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar() or 0)
        for table in (NODE_TABLE, EDGE_TABLE)
    )
    # SET LOCAL ends with the transaction.
    conn.exec_driver_sql(f"SET LOCAL maintenance_work_mem = '{hnsw_build_memory_mb(rows, dim)}MB'")
    for table in (NODE_TABLE, EDGE_TABLE):
        conn.exec_driver_sql(
            f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} USING hnsw ({_vector_expr(dim)} {_ops(dim)})"
        )


def drop_hnsw_indexes(conn: Connection) -> None:
    """Before a bulk load: building the index once afterwards is far cheaper than row by row."""
    for table in (NODE_TABLE, EDGE_TABLE):
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {table}_hnsw")


def tables_exist(conn: Connection) -> bool:
    found = conn.exec_driver_sql(
        f"SELECT to_regclass('{NODE_TABLE}') IS NOT NULL AND to_regclass('{EDGE_TABLE}') IS NOT NULL"
    ).scalar()
    return bool(found)


def recorded_model(conn: Connection) -> ModelInfo | None:
    """The model whose vectors the tables hold, or None before the first index."""
    from vedana.stores.staging import get_state

    value = get_state(conn, MODEL_STATE_KEY)
    if not value or not tables_exist(conn):
        return None
    return ModelInfo(model=str(value["model"]), dim=int(value["dim"]))


def reset_vector_tables(conn: Connection, model: ModelInfo) -> None:
    """Empty tables for `model`: drops the old ones (any dimension) and cached vectors of other
    models, so vectors of two models never meet. Caller commits."""
    from vedana.stores.staging import set_state

    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {NODE_TABLE}, {EDGE_TABLE}")
    create_vector_tables(conn, model.dim)
    conn.exec_driver_sql(
        f"DELETE FROM {CACHE_TABLE} WHERE model <> %(model)s OR dim <> %(dim)s",
        {"model": model.model, "dim": model.dim},
    )
    set_state(conn, MODEL_STATE_KEY, {"model": model.model, "dim": model.dim})


def vector_counts(conn: Connection) -> dict[str, int]:
    """Rows in each embedding table ({"node": n, "edge": m}); zeros before the first index."""
    if not tables_exist(conn):
        return {"node": 0, "edge": 0}
    return {
        kind: int(conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar() or 0)
        for kind, table in (("node", NODE_TABLE), ("edge", EDGE_TABLE))
    }


# --- the embedding cache -----------------------------------------------------------------------


def write_cache(conn: Connection, model: ModelInfo, items: Iterable[tuple[bytes, Sequence[float]]]) -> int:
    """Add (sha256 of text, vector) pairs to the cache with one binary COPY; pairs already cached
    are ignored. Returns the number of rows sent. Caller commits."""
    import numpy as np
    from pgvector.psycopg.vector import register_vector_info
    from psycopg.types import TypeInfo

    raw = conn.connection.driver_connection
    assert raw is not None  # a live psycopg connection inside this transaction
    info = TypeInfo.fetch(raw, "vector")
    conn.exec_driver_sql(
        "CREATE TEMP TABLE IF NOT EXISTS tmp_new_vectors (text_hash bytea, embedding vector) "
        "ON COMMIT DELETE ROWS"
    )
    sent = 0
    with raw.cursor() as cur:
        register_vector_info(cur, info)  # on this cursor only: pooled connections stay untouched
        with cur.copy("COPY tmp_new_vectors (text_hash, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["bytea", "vector"])
            for text_hash, vector in items:
                copy.write_row((text_hash, np.asarray(vector, dtype=np.float32)))
                sent += 1
    conn.exec_driver_sql(
        f"INSERT INTO {CACHE_TABLE} (model, dim, text_hash, embedding) "
        "SELECT %(model)s, %(dim)s, text_hash, embedding FROM tmp_new_vectors "
        "ON CONFLICT DO NOTHING",
        {"model": model.model, "dim": model.dim},
    )
    return sent


def prune_cache(conn: Connection, model: ModelInfo) -> int:
    """Drop cached vectors of `model` that no embedded value uses any more."""
    result = conn.exec_driver_sql(
        f"""DELETE FROM {CACHE_TABLE} c WHERE c.model = %(model)s AND c.dim = %(dim)s
            AND NOT EXISTS (SELECT 1 FROM {NODE_TABLE} n WHERE n.text_hash = c.text_hash)
            AND NOT EXISTS (SELECT 1 FROM {EDGE_TABLE} e WHERE e.text_hash = c.text_hash)""",
        {"model": model.model, "dim": model.dim},
    )
    return result.rowcount or 0


# --- search ----------------------------------------------------------------------------------


@dataclass
class VectorHit:
    """One search result: the embedded value, its cosine similarity, and its node or edge."""

    kind: Kind
    label: str
    attribute: str
    value: str
    score: float  # cosine similarity, higher is better
    node_id: str | None = None  # node hits
    from_node_id: str | None = None  # edge hits
    to_node_id: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)  # from staging; never vectors

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


class VectorStore:
    """Reads the embedding tables. Construct with an engine; nothing connects until a call."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._iterative_scan: bool | None = None

    def model(self) -> ModelInfo:
        with self.engine.connect() as conn:
            info = recorded_model(conn)
        if info is None:
            raise NotIndexed()
        return info

    def search(
        self,
        kind: Kind,
        label: str,
        attribute: str,
        vector: Sequence[float],
        *,
        threshold: float,
        top_n: int,
    ) -> list[VectorHit]:
        """The `top_n` values of `label.attribute` most similar to `vector` with cosine similarity
        of at least `threshold`, best first."""
        if kind not in ("node", "edge"):
            raise ValueError(f"kind must be 'node' or 'edge', not {kind!r}")
        with self.engine.begin() as conn:
            info = recorded_model(conn)
            if info is None:
                raise NotIndexed()
            if len(vector) != info.dim:
                raise EmbeddingError(
                    f"the search vector has {len(vector)} dimensions but the index holds "
                    f"{info.describe()} vectors; embed the query with the same model"
                )
            self._tune_scan(conn, top_n)
            sql = _NODE_SEARCH if kind == "node" else _EDGE_SEARCH
            expr = _vector_expr(info.dim)
            query_expr = (
                "%(vector)s::vector" if info.dim <= HNSW_MAX_DIM else f"%(vector)s::halfvec({info.dim})"
            )
            rows = conn.exec_driver_sql(
                sql.format(distance=f"{expr} <=> {query_expr}"),
                {
                    "label": label,
                    "attribute": attribute,
                    "vector": _vector_literal(vector),
                    "top_n": max(int(top_n), 0),
                    "threshold": float(threshold),
                },
            ).mappings()
            return [_hit(kind, label, attribute, row) for row in rows]

    def _tune_scan(self, conn: Connection, top_n: int) -> None:
        """A wider HNSW candidate list than pgvector's default of 40 (better recall, about the same
        latency); and since filtered scans can stop short of `top_n` rows, pgvector ≥ 0.8 is told
        to keep scanning."""
        if self._iterative_scan is None:
            version = conn.exec_driver_sql(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).scalar()
            parts = tuple(int(p) for p in str(version or "0").split(".")[:2] if p.isdigit())
            self._iterative_scan = parts >= (0, 8)
        conn.exec_driver_sql(f"SET LOCAL hnsw.ef_search = {max(100, min(int(top_n) * 4, 1000))}")
        if self._iterative_scan:
            conn.exec_driver_sql("SET LOCAL hnsw.iterative_scan = strict_order")


# Nearest `top_n` first (the HNSW index serves the ORDER BY), then the threshold and the
# staging row's attributes; tombstoned rows not yet indexed away are skipped.
_NODE_SEARCH = f"""
WITH nearest AS (
    SELECT node_type, node_id, attribute_value, {{distance}} AS distance
    FROM {NODE_TABLE}
    WHERE node_type = %(label)s AND attribute_name = %(attribute)s
    ORDER BY distance LIMIT %(top_n)s)
SELECT h.node_id, h.attribute_value, 1 - h.distance AS score, n.attributes
FROM nearest h JOIN nodes n ON n.node_type = h.node_type AND n.node_id = h.node_id
WHERE NOT n.deleted AND 1 - h.distance >= %(threshold)s
ORDER BY h.distance, h.node_id"""

_EDGE_SEARCH = f"""
WITH nearest AS (
    SELECT edge_label, from_node_type, from_node_id, to_node_type, to_node_id, attribute_value,
           {{distance}} AS distance
    FROM {EDGE_TABLE}
    WHERE edge_label = %(label)s AND attribute_name = %(attribute)s
    ORDER BY distance LIMIT %(top_n)s)
SELECT h.from_node_id, h.to_node_id, h.attribute_value, 1 - h.distance AS score, e.attributes
FROM nearest h JOIN edges e ON e.edge_label = h.edge_label
    AND e.from_node_type = h.from_node_type AND e.from_node_id = h.from_node_id
    AND e.to_node_type = h.to_node_type AND e.to_node_id = h.to_node_id
WHERE NOT e.deleted AND 1 - h.distance >= %(threshold)s
ORDER BY h.distance, h.from_node_id, h.to_node_id"""


def _hit(kind: Kind, label: str, attribute: str, row: Any) -> VectorHit:
    return VectorHit(
        kind=kind,
        label=label,
        attribute=attribute,
        value=row["attribute_value"],
        score=float(row["score"]),
        node_id=row.get("node_id"),
        from_node_id=row.get("from_node_id"),
        to_node_id=row.get("to_node_id"),
        attributes=dict(row["attributes"] or {}),
    )


# --- search by text, as the agent's tool does ---------------------------------------------------


@dataclass(frozen=True)
class SearchTarget:
    kind: Kind
    label: str
    attribute: Attribute


def find_target(dm: DataModel, label: str, attribute: str) -> SearchTarget:
    """Which table `label.attribute` lives in, checked against the data model's embeddable
    attributes; the error lists the valid choices."""
    choices = ", ".join(f"{lbl}.{attr}" for _, lbl, attr in dm.embeddable()) or "none"
    anchor, link = dm.anchor(label), dm.link(label)
    owner = anchor or link
    if owner is None:
        raise SearchTargetError(f"unknown label {label!r}; embeddable attributes: {choices}")
    found = owner.attribute(attribute)
    if found is None or not found.embeddable:
        what = "not an attribute of" if found is None else "not embeddable in"
        raise SearchTargetError(f"{attribute!r} is {what} {label!r}; embeddable attributes: {choices}")
    return SearchTarget(kind="node" if anchor is not None else "edge", label=label, attribute=found)


def search_params(
    settings: Settings, attribute: Attribute, model: str, *, threshold: float | None, top_n: int | None
) -> tuple[float, int]:
    """(threshold, top_n): the explicit value, else the attribute's, else the settings', else the
    model's default threshold."""
    from vedana.embeddings import default_threshold

    if threshold is None:
        threshold = attribute.embed_threshold
    if threshold is None:
        threshold = settings.embeddings_threshold
    if threshold is None:
        threshold = default_threshold(model)
    if top_n is None:
        top_n = attribute.embed_top_n or settings.embeddings_top_n
    return float(threshold), int(top_n)


def check_model(index_model: ModelInfo, embedder: Embedder) -> None:
    if (index_model.model, index_model.dim) != (embedder.model, embedder.dim):
        raise EmbeddingError(
            f"the vector index holds {index_model.describe()} vectors but EMBEDDINGS_MODEL is "
            f"{embedder.model}; run `vedana index` to re-embed, or set EMBEDDINGS_MODEL={index_model.model}"
        )


def search_text(
    settings: Settings,
    label: str,
    attribute: str,
    text: str,
    *,
    threshold: float | None = None,
    top_n: int | None = None,
    engine: Engine | None = None,
    embedder: Embedder | None = None,
) -> list[VectorHit]:
    """Embed `text` and search `label.attribute` (a node or edge attribute, as the data model says)."""
    from vedana.stores.staging import load_data_model

    if engine is None:
        from vedana.stores.postgres import get_engine

        engine = get_engine(settings)
    if embedder is None:
        from vedana.embeddings import get_embedder

        embedder = get_embedder(settings)
    with engine.connect() as conn:
        target = find_target(load_data_model(conn), label, attribute)
    store = VectorStore(engine)
    index_model = store.model()
    check_model(index_model, embedder)
    threshold, top_n = search_params(
        settings, target.attribute, index_model.model, threshold=threshold, top_n=top_n
    )
    vector = embedder.embed([text])[0]
    return store.search(target.kind, label, attribute, vector, threshold=threshold, top_n=top_n)
