"""Vector search that knows the graph: several phrasings at once, filters on the hit's own
attributes, each hit's typed neighbourhood (1–2 hops over staging edges) and optional
diversity (MMR) — all in ONE SQL statement per search.

The statement: the query vectors → for each, its nearest values of `label.attribute` among the
nodes that pass the filter (the HNSW index serves the ORDER BY; pgvector's iterative scan keeps
going when the filter rejects rows) → one row per node with its best score and the phrasings
that found it → the links of each hit in both directions (an undirected link is stored both
ways, so its incoming rows are skipped), capped per (hit, link, direction) with the count of
what the cap left out → the same again from each first-hop node → node and edge attributes
from staging.

The graph is loaded from these same staging rows, so the neighbourhood is the graph's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from vedana.datamodel.dtypes import canonical_dtype
from vedana.errors import VedanaError

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from vedana.config import Settings
    from vedana.datamodel import Anchor, DataModel
    from vedana.embeddings import Embedder

Op = Literal["=", ">=", "<=", "~"]
MAX_TEXTS = 5
MAX_DEPTH = 2
DEFAULT_LINK_CAP = 10
MMR_POOL_FACTOR = 3  # MMR chooses among this many times top_n candidates
MMR_LAMBDA = 0.5  # relevance vs. diversity

_NUMERIC = {"int", "float"}
_ORDERED_TEXT = {"date", "datetime"}  # ISO text: ordered as text


class SearchOptionError(VedanaError):
    """A `where`/`expand`/`texts` option that does not fit the data model."""

    exit_code = 2


@dataclass(frozen=True)
class Condition:
    attribute: str
    op: Op
    value: Any

    def describe(self) -> str:
        return f"{self.attribute}{self.op}{self.value}"


_CONDITION = re.compile(r"^\s*([^=<>~\s]+)\s*(>=|<=|=|~)\s*(.*?)\s*$", re.S)


def parse_condition(text: str) -> Condition:
    """`attr=value`, `attr>=n`, `attr<=n` or `attr~text` (contains, any case)."""
    match = _CONDITION.match(text)
    if not match or not match.group(3):
        raise SearchOptionError(
            f"--where {text!r}: write attr=value, attr>=number, attr<=number or attr~text"
        )
    attribute, op, value = match.groups()
    return Condition(attribute, op, value)  # type: ignore[arg-type]


def check_conditions(anchor: Anchor, conditions: Sequence[Condition]) -> list[tuple[Condition, str]]:
    """Each condition with its attribute's canonical dtype; a one-line error for an attribute the
    node type does not have, or an operator its type cannot take."""
    checked = []
    names = ", ".join(a.name for a in anchor.attributes) or "none"
    for cond in conditions:
        attribute = anchor.attribute(cond.attribute)
        if attribute is None:
            raise SearchOptionError(
                f"where: {cond.attribute!r} is not an attribute of {anchor.noun!r}; its attributes: {names}"
            )
        dtype = canonical_dtype(attribute.dtype) or ""
        if cond.op in (">=", "<=") and dtype not in _NUMERIC | _ORDERED_TEXT:
            raise SearchOptionError(
                f"where: {cond.describe()}: {cond.attribute!r} is {dtype or 'untyped'}; "
                "ranges take int, float, date or datetime attributes (use = or ~)"
            )
        if cond.op in (">=", "<=") and dtype in _NUMERIC:
            try:
                float(cond.value)
            except (TypeError, ValueError):
                raise SearchOptionError(f"where: {cond.describe()}: {cond.value!r} is not a number") from None
        checked.append((cond, dtype))
    return checked


@dataclass(frozen=True)
class NeighbourhoodQuery:
    label: str
    attribute: str
    vectors: Sequence[Sequence[float]]
    threshold: float
    top_n: int
    where: Sequence[tuple[Condition, str]] = ()
    expand: int = 0
    link_cap: int = DEFAULT_LINK_CAP
    mmr: bool = False
    undirected: frozenset[str] = frozenset()


@dataclass
class Linked:
    label: str
    node_id: str
    attributes: dict[str, Any]
    link: str
    direction: str  # out | in | both
    depth: int
    edge_attributes: dict[str, Any] = field(default_factory=dict)
    links: list[LinkGroup] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "label": self.label,
            "node_id": self.node_id,
            "reason": f"link {self.link}",
            "depth": self.depth,
            "attributes": self.attributes,
        }
        if self.edge_attributes:
            data["edge_attributes"] = self.edge_attributes
        if self.links:
            data["links"] = [g.to_dict() for g in self.links]
        return data


@dataclass
class LinkGroup:
    link: str
    direction: str
    nodes: list[Linked] = field(default_factory=list)
    total: int = 0  # before the cap

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "link": self.link,
            "direction": self.direction,
            "nodes": [n.to_dict() for n in self.nodes],
        }
        if self.total > len(self.nodes):
            data["more"] = self.total - len(self.nodes)
        return data


@dataclass
class NeighbourhoodHit:
    node_id: str
    value: str
    score: float
    attributes: dict[str, Any]
    matched_texts: list[int]  # 1-based indexes of the phrasings that found it
    links: list[LinkGroup] = field(default_factory=list)
    embedding: list[float] | None = None  # only for MMR

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "node_id": self.node_id,
            "value": self.value,
            "score": round(self.score, 4),
            "reason": "vector",
            "depth": 0,
            "attributes": self.attributes,
        }
        if len(self.matched_texts) > 0:
            data["matched_texts"] = self.matched_texts
        if self.links:
            data["links"] = [g.to_dict() for g in self.links]
        return data


# --- the statement -----------------------------------------------------------------------------


def _where_sql(where: Sequence[tuple[Condition, str]], params: dict[str, Any]) -> str:
    parts = []
    for i, (cond, dtype) in enumerate(where):
        key, value = f"w{i}_attr", f"w{i}_value"
        params[key] = cond.attribute
        field_json, field_text = f"n.attributes -> %({key})s", f"n.attributes ->> %({key})s"
        if cond.op == "~":
            params[value] = "%" + re.sub(r"([\\%_])", r"\\\1", str(cond.value)) + "%"
            parts.append(
                f"(CASE WHEN jsonb_typeof({field_json}) = 'array' THEN EXISTS ("
                f"SELECT 1 FROM jsonb_array_elements_text({field_json}) x WHERE x ILIKE %({value})s) "
                f"ELSE {field_text} ILIKE %({value})s END)"
            )
        elif dtype in _NUMERIC and cond.op in (">=", "<="):
            params[value] = float(cond.value)
            parts.append(
                f"(jsonb_typeof({field_json}) = 'number' AND ({field_json})::numeric {cond.op} %({value})s)"
            )
        elif cond.op in (">=", "<="):
            params[value] = str(cond.value)
            parts.append(f"({field_text} {cond.op} %({value})s)")
        elif dtype in _NUMERIC:
            params[value] = _number(cond.value)
            parts.append(f"(jsonb_typeof({field_json}) = 'number' AND ({field_json})::numeric = %({value})s)")
        else:  # equality on text, bools and list members, case as written
            params[value] = str(cond.value)
            parts.append(
                f"(CASE WHEN jsonb_typeof({field_json}) = 'array' THEN {field_json} ? %({value})s "
                f"ELSE lower({field_text}) = lower(%({value})s) END)"
            )
    return "".join(f" AND {p}" for p in parts)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SearchOptionError(f"where: {value!r} is not a number") from None


def _hop(source: str, depth: int, label_expr: str, id_expr: str, carry: str, exclude: str) -> str:
    """One hop out of `source`'s nodes, both directions; an undirected link only as stored
    outwards (its other direction is a row of its own)."""
    return f"""
    SELECT {carry}, ed.edge_label AS link,
           CASE WHEN ed.edge_label = ANY(%(undirected)s) THEN 'both' ELSE 'out' END AS dir,
           ed.to_node_type AS ntype, ed.to_node_id AS nid, ed.attributes AS eattrs
    FROM {source} s JOIN edges ed ON ed.from_node_type = {label_expr} AND ed.from_node_id = {id_expr}
    WHERE NOT ed.deleted AND %(depth)s >= {depth}{exclude.format(t="ed.to_node_type", i="ed.to_node_id")}
    UNION ALL
    SELECT {carry}, ed.edge_label, 'in', ed.from_node_type, ed.from_node_id, ed.attributes
    FROM {source} s JOIN edges ed ON ed.to_node_type = {label_expr} AND ed.to_node_id = {id_expr}
    WHERE NOT ed.deleted AND %(depth)s >= {depth} AND NOT (ed.edge_label = ANY(%(undirected)s))
          {exclude.format(t="ed.from_node_type", i="ed.from_node_id")}"""


def build_statement(query: NeighbourhoodQuery, dim: int, vector_expr: str) -> tuple[str, dict[str, Any]]:
    """The one SQL statement for `query`, and its parameters. `vector_expr` is how the index
    sees the embedding column (e.g. a halfvec cast for wide models)."""
    from vedana.stores.vectors import NODE_TABLE, _vector_literal

    params: dict[str, Any] = {
        "vectors": [_vector_literal(v) for v in query.vectors],
        "label": query.label,
        "attribute": query.attribute,
        "threshold": float(query.threshold),
        "k": max(int(query.top_n), 0) * (MMR_POOL_FACTOR if query.mmr else 1),
        "pool": max(int(query.top_n), 0) * (MMR_POOL_FACTOR if query.mmr else 1),
        "depth": int(query.expand),
        "cap": int(query.link_cap),
        "undirected": sorted(query.undirected),
    }
    where = _where_sql(query.where, params)
    cast = "vector" if vector_expr == "embedding" else f"halfvec({dim})"
    distance = vector_expr.replace("embedding", "e.embedding") + " <=> q.v"
    emb = "e.embedding::text" if query.mmr else "NULL::text"
    # `total` counts the whole group (no ORDER BY: with one, count() would be a running count).
    window = "WINDOW g AS (PARTITION BY {parts}), w AS (g ORDER BY nid)"
    sql = f"""
WITH q AS (
    SELECT t.qi, t.vtext::{cast} AS v FROM unnest(%(vectors)s::text[]) WITH ORDINALITY AS t(vtext, qi)),
cand AS (
    SELECT q.qi, h.node_id, h.attribute_value, 1 - h.distance AS score, h.emb, h.attrs
    FROM q CROSS JOIN LATERAL (
        SELECT e.node_id, e.attribute_value, {distance} AS distance, {emb} AS emb, n.attributes AS attrs
        FROM {NODE_TABLE} e
        JOIN nodes n ON n.node_type = e.node_type AND n.node_id = e.node_id
        WHERE e.node_type = %(label)s AND e.attribute_name = %(attribute)s AND NOT n.deleted{where}
        ORDER BY distance LIMIT %(k)s) h
    WHERE 1 - h.distance >= %(threshold)s),
best AS (
    SELECT DISTINCT ON (node_id) node_id, attribute_value, score, emb, attrs FROM cand
    ORDER BY node_id, score DESC),
hits AS (
    SELECT b.*, ARRAY(SELECT DISTINCT c.qi FROM cand c WHERE c.node_id = b.node_id ORDER BY 1) AS matched
    FROM best b ORDER BY b.score DESC, b.node_id LIMIT %(pool)s),
e1 AS ({_hop("hits", 1, "%(label)s", "s.node_id", "s.node_id AS root", "")}),
k1 AS (
    SELECT * FROM (SELECT e1.*, row_number() OVER w AS rn, count(*) OVER g AS total FROM e1
                   {window.format(parts="root, link, dir")}) r WHERE rn <= %(cap)s),
e2 AS ({
        _hop(
            "k1",
            2,
            "s.ntype",
            "s.nid",
            "s.root, s.link AS via_link, s.dir AS via_dir, s.ntype AS via_type, s.nid AS via_id",
            " AND NOT ({t} = %(label)s AND {i} = s.root)",
        )
    }),
k2 AS (
    SELECT * FROM (SELECT e2.*, row_number() OVER w AS rn, count(*) OVER g AS total FROM e2
                   {window.format(parts="root, via_type, via_id, link, dir")}) r WHERE rn <= %(cap)s)
SELECT 0 AS depth, h.node_id AS root, NULL AS via_link, NULL AS via_dir, NULL AS via_type, NULL AS via_id,
       NULL AS link, NULL AS dir, %(label)s AS ntype, h.node_id AS nid, h.attribute_value AS value,
       h.score, h.matched, h.emb, h.attrs AS attributes, NULL::jsonb AS eattrs, 0::bigint AS total
FROM hits h
UNION ALL
SELECT 1, k.root, NULL, NULL, NULL, NULL, k.link, k.dir, k.ntype, k.nid, NULL, NULL, NULL, NULL,
       n.attributes, k.eattrs, k.total
FROM k1 k JOIN nodes n ON n.node_type = k.ntype AND n.node_id = k.nid AND NOT n.deleted
UNION ALL
SELECT 2, k.root, k.via_link, k.via_dir, k.via_type, k.via_id, k.link, k.dir, k.ntype, k.nid, NULL, NULL,
       NULL, NULL, n.attributes, k.eattrs, k.total
FROM k2 k JOIN nodes n ON n.node_type = k.ntype AND n.node_id = k.nid AND NOT n.deleted
ORDER BY depth, root, link, dir, nid"""
    return sql, params


def run_neighbourhood_search(
    conn: Connection, query: NeighbourhoodQuery, dim: int, vector_expr: str
) -> list[NeighbourhoodHit]:
    """Execute the statement on `conn` (one round trip) and shape its rows: hits best first,
    each with its link groups and, at depth 2, theirs."""
    sql, params = build_statement(query, dim, vector_expr)
    rows = conn.exec_driver_sql(sql, params).mappings().all()
    hits: dict[str, NeighbourhoodHit] = {}
    first_hop: dict[tuple[str, str, str], Linked] = {}  # (root, type, id) -> node
    groups: dict[tuple[Any, ...], LinkGroup] = {}

    def group(
        owner: list[LinkGroup], key: tuple[Any, ...], link: str, direction: str, total: int
    ) -> LinkGroup:
        found = groups.get(key)
        if found is None:
            found = groups[key] = LinkGroup(link=link, direction=direction, total=int(total))
            owner.append(found)
        return found

    for row in rows:
        if row["depth"] == 0:
            hits[row["root"]] = NeighbourhoodHit(
                node_id=row["nid"],
                value=row["value"],
                score=float(row["score"]),
                attributes=row["attributes"] or {},
                matched_texts=[int(i) for i in row["matched"] or []] if len(query.vectors) > 1 else [],
                embedding=_parse_vector(row["emb"]) if row["emb"] else None,
            )
            continue
        linked = Linked(
            label=row["ntype"],
            node_id=row["nid"],
            attributes=row["attributes"] or {},
            link=row["link"],
            direction=row["dir"],
            depth=row["depth"],
            edge_attributes=row["eattrs"] or {},
        )
        if row["depth"] == 1:
            hit = hits.get(row["root"])
            if hit is None:
                continue
            key: tuple[Any, ...] = (row["root"], row["link"], row["dir"])
            group(hit.links, key, row["link"], row["dir"], row["total"]).nodes.append(linked)
            first_hop[(row["root"], row["ntype"], row["nid"])] = linked
        else:
            parent = first_hop.get((row["root"], row["via_type"], row["via_id"]))
            if parent is None:
                continue
            key = (row["root"], row["via_type"], row["via_id"], row["link"], row["dir"])
            group(parent.links, key, row["link"], row["dir"], row["total"]).nodes.append(linked)
    ordered = sorted(hits.values(), key=lambda h: (-h.score, h.node_id))
    if query.mmr:
        ordered = mmr_order(ordered, query.top_n)
    for hit in ordered:
        hit.embedding = None
    return ordered[: query.top_n]


def _parse_vector(text: str) -> list[float]:
    return [float(x) for x in text.strip("[]").split(",") if x]


def mmr_order(
    hits: list[NeighbourhoodHit], top_n: int, lambda_: float = MMR_LAMBDA
) -> list[NeighbourhoodHit]:
    """Maximal marginal relevance: repeatedly take the hit that is relevant (its score) and least
    like the ones already taken (cosine similarity of their vectors)."""
    import numpy as np

    if not hits or any(h.embedding is None for h in hits):
        return hits
    vectors = np.array([h.embedding for h in hits], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-12
    relevance = np.array([h.score for h in hits], dtype=np.float32)
    chosen: list[int] = []
    left = list(range(len(hits)))
    while left and len(chosen) < top_n:
        if chosen:
            redundancy = (vectors[left] @ vectors[chosen].T).max(axis=1)
        else:
            redundancy = np.zeros(len(left), dtype=np.float32)
        scores = lambda_ * relevance[left] - (1 - lambda_) * redundancy
        pick = left[int(np.argmax(scores))]
        chosen.append(pick)
        left.remove(pick)
    return [hits[i] for i in chosen]


def undirected_links(dm: DataModel) -> frozenset[str]:
    return frozenset(lk.sentence for lk in dm.links if not lk.has_direction)


# --- the retrieval function: texts → embeddings → one statement ---------------------------------

_models: dict[str, Any] = {}  # engine url -> ModelInfo: read once per process, not per search
_tuned: set[int] = set()  # engines whose new connections get the HNSW session settings


def _tune_sessions(engine: Engine) -> None:
    """Every new connection of `engine` scans HNSW with a wider candidate list and (pgvector ≥ 0.8)
    keeps scanning, in exact distance order, when a filter rejects rows: set once per
    connection, not per search."""
    from sqlalchemy import event

    if id(engine) in _tuned:
        return
    _tuned.add(id(engine))

    @event.listens_for(engine, "connect")
    def configure(dbapi_conn: Any, record: Any) -> None:
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute("SET hnsw.ef_search = 200")
            cursor.execute(
                "SELECT set_config('hnsw.iterative_scan', 'strict_order', false) "
                "FROM pg_extension WHERE extname = 'vector' AND string_to_array(extversion, '.')::int[] >= '{0,8}'"
            )
        finally:
            cursor.close()
        dbapi_conn.commit()

    engine.dispose()  # connections made before the hook get replaced by tuned ones


def _model(engine: Engine, refresh: bool = False) -> Any:
    from vedana.errors import NotIndexed
    from vedana.stores.vectors import recorded_model

    key = str(engine.url)
    if refresh or key not in _models:
        with engine.connect() as conn:
            info = recorded_model(conn)
        if info is None:
            raise NotIndexed()
        _models[key] = info
    return _models[key]


def search_neighbourhood(
    engine: Engine,
    dm: DataModel,
    label: str,
    attribute: str,
    vectors: Sequence[Sequence[float]],
    *,
    threshold: float,
    top_n: int,
    where: Sequence[Condition] = (),
    expand: int = 0,
    link_cap: int = DEFAULT_LINK_CAP,
    mmr: bool = False,
) -> list[NeighbourhoodHit]:
    """Search node attribute `label.attribute` for `vectors` (one per phrasing) with the options
    checked against the data model; one statement per search once the process has read the
    recorded model."""
    from vedana.errors import EmbeddingError
    from vedana.stores.vectors import _vector_expr

    anchor = dm.anchor(label)
    if anchor is None:
        raise SearchOptionError(
            f"{label!r} is not a node type; texts, where, expand and mmr search node attributes"
        )
    if not 1 <= len(vectors) <= MAX_TEXTS:
        raise SearchOptionError(f"search with 1 to {MAX_TEXTS} phrasings, not {len(vectors)}")
    if not 0 <= expand <= MAX_DEPTH:
        raise SearchOptionError(f"expand takes 0, 1 or 2 hops, not {expand}")
    query = NeighbourhoodQuery(
        label=label,
        attribute=attribute,
        vectors=vectors,
        threshold=threshold,
        top_n=top_n,
        where=check_conditions(anchor, where),
        expand=expand,
        link_cap=link_cap,
        mmr=mmr,
        undirected=undirected_links(dm),
    )
    _tune_sessions(engine)
    info = _model(engine)
    if any(len(v) != info.dim for v in vectors):
        info = _model(engine, refresh=True)  # the index may have been rebuilt by another process
        if any(len(v) != info.dim for v in vectors):
            raise EmbeddingError(
                f"the search vectors have {len(vectors[0])} dimensions but the index holds "
                f"{info.describe()} vectors; embed the query with the same model"
            )
    with engine.connect() as conn:
        return run_neighbourhood_search(conn, query, info.dim, _vector_expr(info.dim))


def search_text_neighbourhood(
    settings: Settings,
    label: str,
    attribute: str,
    texts: Sequence[str],
    *,
    where: Sequence[Condition] = (),
    expand: int = 0,
    mmr: bool = False,
    threshold: float | None = None,
    top_n: int | None = None,
    engine: Engine | None = None,
    embedder: Embedder | None = None,
) -> tuple[float, int, list[NeighbourhoodHit]]:
    """Embed `texts` and search node attribute `label.attribute` with the graph-aware options:
    (threshold, top_n in force, hits). What `vedana search --text/--where/--expand/--mmr` runs."""
    from vedana.stores.staging import load_data_model
    from vedana.stores.vectors import check_model, find_target, search_params

    if engine is None:
        from vedana.stores.postgres import get_engine

        engine = get_engine(settings)
    with engine.connect() as conn:
        dm = load_data_model(conn)
    target = find_target(dm, label, attribute)
    if target.kind != "node":
        raise SearchOptionError(f"--text, --where, --expand and --mmr search node types; {label!r} is a link")
    info = _model(engine, refresh=True)
    if embedder is None:
        from vedana.embeddings import get_embedder

        embedder = get_embedder(settings)
    check_model(info, embedder)
    threshold, top_n = search_params(settings, target.attribute, info.model, threshold=threshold, top_n=top_n)
    vectors = embedder.embed(list(texts))
    hits = search_neighbourhood(
        engine,
        dm,
        label,
        attribute,
        vectors,
        threshold=threshold,
        top_n=top_n,
        where=where,
        expand=expand,
        mmr=mmr,
    )
    return threshold, top_n, hits
