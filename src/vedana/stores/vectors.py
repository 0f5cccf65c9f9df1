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

import contextlib
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, cast

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
    return "[" + ",".join(map(repr, map(float, vector))) + "]"


class VectorStore:
    """Reads the embedding tables. Construct with an engine; nothing connects until a call.

    A search is one statement, one round trip: what does not change between searches is cached
    here (the recorded model, hence the tables' existence) or set once on a connection this
    store holds in autocommit mode (no BEGIN/COMMIT; the HNSW and plan-cache session settings),
    where each kind's statement is prepared on its first search. `close()` gives the connection
    back to the pool."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._info: ModelInfo | None = None
        self._conn: Connection | None = None
        self._ef_search: int | None = None  # what the held connection's session has
        self._lock = threading.Lock()  # the agent searches from parallel threads

    def model(self) -> ModelInfo:
        if self._info is None:
            with self.engine.connect() as conn:
                info = recorded_model(conn)
            if info is None:
                raise NotIndexed()
            self._info = info
        return self._info

    def close(self) -> None:
        with self._lock:
            self._release()

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        import psycopg
        from sqlalchemy.exc import DBAPIError

        if kind not in ("node", "edge"):
            raise ValueError(f"kind must be 'node' or 'edge', not {kind!r}")
        try:
            return self._search_once(kind, label, attribute, vector, threshold=threshold, top_n=top_n)
        except (DBAPIError, psycopg.Error):
            # A lost connection, or tables rebuilt by an index since the model was cached:
            # start afresh once (model() raises NotIndexed if the tables are gone).
            with self._lock:
                self._release()
            self._info = None
            return self._search_once(kind, label, attribute, vector, threshold=threshold, top_n=top_n)

    def _search_once(
        self, kind: Kind, label: str, attribute: str, vector: Sequence[float], *, threshold: float, top_n: int
    ) -> list[VectorHit]:
        info = self.model()
        if len(vector) != info.dim:
            raise EmbeddingError(
                f"the search vector has {len(vector)} dimensions but the index holds "
                f"{info.describe()} vectors; embed the query with the same model"
            )
        params = search_params_sql(label, attribute, vector, threshold=threshold, top_n=top_n)
        with self._lock:
            conn = self._connection()
            self._tune_scan(conn, top_n)
            # Straight to the driver: SQLAlchemy's execution context and result rows cost about
            # 0.4 ms a search, a quarter of what the HNSW scan itself takes at 100k vectors.
            # Prepared (the first search of a kind on a connection pays one more round trip), so
            # later ones skip parsing and analysis: 0.04-0.07 ms of a 0.35-1.1 ms warm search.
            # Planned afresh every time all the same (`plan_cache_mode`, see `_tune_scan`).
            with conn.connection.dbapi_connection.cursor() as cursor:  # type: ignore[union-attr]
                cursor.execute(search_sql(kind, info.dim), params, prepare=True)
                rows = cursor.fetchall()
        return _hits(kind, label, attribute, rows)

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            self._ef_search = None
        return self._conn

    def _release(self) -> None:
        from sqlalchemy.exc import DBAPIError

        if self._conn is not None:
            if not (self._conn.closed or self._conn.invalidated):
                # Custom plans for every prepared statement are this store's choice, not the
                # pool's: others' repeated statements may keep their generic plans.
                with contextlib.suppress(DBAPIError):
                    self._conn.exec_driver_sql("RESET plan_cache_mode")
            self._conn.close()  # the pool resets the isolation level
        self._conn, self._ef_search = None, None

    def _tune_scan(self, conn: Connection, top_n: int) -> None:
        """A wider HNSW candidate list than pgvector's default of 40 (better recall, about the same
        latency); and since filtered scans can stop short of `top_n` rows, pgvector ≥ 0.8 is told
        to keep scanning. Session settings, sent only when they change (they only steer HNSW
        scans, so the pooled connection may keep them).

        With them, `plan_cache_mode = force_custom_plan`: the prepared search is planned for each
        search's own label and LIMIT. A generic plan would know neither, and could leave the
        HNSW index for a scan of every vector (Postgres would switch to one after five custom
        plans if it looked no dearer)."""
        ef_search = ef_search_for(top_n)
        if ef_search == self._ef_search:
            return
        if _iterative_scan_supported(self.engine, conn):
            conn.exec_driver_sql(
                "SELECT set_config('hnsw.ef_search', %(ef)s, false), "
                "set_config('hnsw.iterative_scan', 'strict_order', false), "
                "set_config('plan_cache_mode', 'force_custom_plan', false)",
                {"ef": str(ef_search)},
            )
        else:
            conn.exec_driver_sql(
                "SELECT set_config('hnsw.ef_search', %(ef)s, false), "
                "set_config('plan_cache_mode', 'force_custom_plan', false)",
                {"ef": str(ef_search)},
            )
        self._ef_search = ef_search


_iterative_scan: dict[str, bool] = {}  # per database URL, for the process


def _iterative_scan_supported(engine: Engine, conn: Connection) -> bool:
    key = engine.url.render_as_string(hide_password=True)
    if key not in _iterative_scan:
        version = conn.exec_driver_sql(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).scalar()
        parts = tuple(int(p) for p in str(version or "0").split(".")[:2] if p.isdigit())
        _iterative_scan[key] = parts >= (0, 8)
    return _iterative_scan[key]


# Nearest `top_n` first (the HNSW index serves the ORDER BY), then the threshold and the
# staging row's attributes; tombstoned rows not yet indexed away are skipped. `_hits` reads the
# outer SELECT lists by position.
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


@lru_cache(maxsize=16)
def search_sql(kind: Kind, dim: int) -> str:
    """The one statement a search runs (psycopg `%(name)s` parameters from `search_params_sql`);
    the benchmark runs it from a bare connection as the baseline."""
    sql = _NODE_SEARCH if kind == "node" else _EDGE_SEARCH
    query_expr = "%(vector)s::vector" if dim <= HNSW_MAX_DIM else f"%(vector)s::halfvec({dim})"
    return sql.format(distance=f"{_vector_expr(dim)} <=> {query_expr}")


def search_params_sql(
    label: str, attribute: str, vector: Sequence[float], *, threshold: float, top_n: int
) -> dict[str, Any]:
    return {
        "label": label,
        "attribute": attribute,
        "vector": _vector_literal(vector),
        "top_n": max(int(top_n), 0),
        "threshold": float(threshold),
    }


def ef_search_for(top_n: int) -> int:
    return max(100, min(int(top_n) * 4, 1000))


def _hits(kind: Kind, label: str, attribute: str, rows: list[tuple[Any, ...]]) -> list[VectorHit]:
    """Hits from the rows of `search_sql(kind, …)`, by position (its SELECT list): no column
    descriptions or per-row dicts (4 µs for 10 hits, against 19 µs by column name). The jsonb
    loader already gives each row a fresh dict of attributes."""
    if kind == "node":
        return [
            VectorHit(
                kind, label, attribute, value, float(score), node_id=node_id, attributes=attributes or {}
            )
            for node_id, value, score, attributes in rows
        ]
    return [
        VectorHit(
            kind, label, attribute, value, float(score),
            from_node_id=from_id, to_node_id=to_id, attributes=attributes or {},
        )
        for from_id, to_id, value, score, attributes in rows
    ]  # fmt: skip


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


class Retriever:
    """The one retrieval path: question text → embedding → one-statement vector search over a
    label/attribute with a threshold and top-n. The agent's tool and `vedana search` both use it
    (so will eval and mcp). The embedder is made, and checked against the model the index holds,
    on the first search; the store keeps what does not change between searches."""

    def __init__(self, settings: Settings, engine: Engine, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.store = VectorStore(engine)
        self._embedder = embedder
        self._checked = False
        self._lock = threading.Lock()

    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                from vedana.embeddings import get_embedder

                self._embedder = get_embedder(self.settings)
            if not self._checked:
                check_model(self.store.model(), self._embedder)
                self._checked = True
            return self._embedder

    def params(
        self, attribute: Attribute, *, threshold: float | None, top_n: int | None
    ) -> tuple[float, int]:
        return search_params(
            self.settings, attribute, self.store.model().model, threshold=threshold, top_n=top_n
        )

    def search(
        self, kind: str, label: str, attribute: str, text: str, threshold: float, top_n: int
    ) -> list[VectorHit]:
        """`kind` is "node" or "edge" (the agent's tool signature, hence positional)."""
        [vector] = self.embedder().embed([text])
        return self.store.search(cast(Kind, kind), label, attribute, vector, threshold=threshold, top_n=top_n)

    def search_target(
        self, target: SearchTarget, text: str, *, threshold: float | None = None, top_n: int | None = None
    ) -> tuple[float, int, list[VectorHit]]:
        """Search with the attribute's / settings' threshold and top-n where not given:
        (threshold, top_n, hits)."""
        threshold, top_n = self.params(target.attribute, threshold=threshold, top_n=top_n)
        hits = self.search(
            target.kind, target.label, target.attribute.name, text, threshold=threshold, top_n=top_n
        )
        return threshold, top_n, hits

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Retriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    with engine.connect() as conn:
        target = find_target(load_data_model(conn), label, attribute)
    with Retriever(settings, engine, embedder) as retriever:
        return retriever.search_target(target, text, threshold=threshold, top_n=top_n)[2]
