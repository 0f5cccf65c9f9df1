"""Reading and writing the staging tables: the synced data model, and small state values.

Node/edge diffing and bulk writes live in `vedana.etl` (sync); this module holds what several
parts share: the data model round trip, the key/value state, and the writer lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from vedana.datamodel import Anchor, Attribute, DataModel, LifecycleEvent, Link, Prompt, Query
from vedana.errors import NotSynced

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

# Postgres advisory lock held by whoever writes staging, vectors or the graph (sync, index).
WRITER_LOCK_KEY = 0x7665_6462

_ATTRIBUTE_FIELDS = (
    "description",
    "data_example",
    "dtype",
    "embeddable",
    "query",
    "embed_threshold",
    "embed_top_n",
)


DATA_MODEL_DIGEST_KEY = "sync.data_model_digest"


def data_model_digest(dm: DataModel) -> str:
    """A digest of everything `dm` holds: equal digests, equal data models."""
    import hashlib
    import json

    text = json.dumps(dm.to_dict(), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def stored_data_model_is(conn: Connection, dm: DataModel) -> bool:
    """Whether the stored data model is `dm`: by the digest `save_data_model` stores beside it
    (one read, where loading it back was seven, each waiting its turn on a re-sync's busy
    interpreter), else by loading it (one stored before digests were; its digest is then
    stored, in the caller's transaction, when it is `dm`)."""
    digest = get_state(conn, DATA_MODEL_DIGEST_KEY)
    if digest is not None:
        return bool(digest == data_model_digest(dm))
    same = load_data_model(conn, required=False).to_dict() == dm.to_dict()
    if same:
        set_state(conn, DATA_MODEL_DIGEST_KEY, data_model_digest(dm))
    return same


# What the staged rows' values were last cast by (a data sync's model: its types, see
# `types_digest`), which a `--data-model-only` sync does not move: a changed model's dtypes do
# not describe rows the old one cast.
STAGED_TYPES_KEY = "sync.staged_types_digest"


def types_digest(dm: DataModel) -> str:
    """A digest of what `dm` says the staged values are: each node type's and link's attribute
    names and dtypes (and the link's anchors). Descriptions, prompts and queries, which a
    `--data-model-only` sync is for, leave it as it was."""
    import hashlib
    import json

    def attributes(owner: Anchor | Link) -> list[list[str]]:
        return [[a.name, a.dtype] for a in owner.attributes]

    text = json.dumps(
        {
            "anchors": [[a.noun, attributes(a)] for a in dm.anchors],
            "links": [[lk.sentence, lk.anchor1, lk.anchor2, attributes(lk)] for lk in dm.links],
        },
        ensure_ascii=False,
    )
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def mark_staged_by(conn: Connection, dm: DataModel) -> None:
    """Record that staging's rows are, once the caller's transaction commits, all cast by `dm`."""
    set_state(conn, STAGED_TYPES_KEY, types_digest(dm))


def staged_by(conn: Connection, dm: DataModel) -> bool:
    """Whether `dm`'s dtypes describe every staged value (`types_digest`): not after a
    `--data-model-only` sync changed an attribute, nor for staging no sync has marked."""
    staged = get_state(conn, STAGED_TYPES_KEY)
    return staged is not None and staged == types_digest(dm)


def save_data_model(conn: Connection, dm: DataModel) -> None:
    """Replace the stored data model with `dm` (inside the caller's transaction)."""
    from vedana.stores import tables as t

    set_state(conn, DATA_MODEL_DIGEST_KEY, data_model_digest(dm))

    for table in (
        t.dm_anchor_attributes,
        t.dm_link_attributes,
        t.dm_anchors,
        t.dm_links,
        t.dm_queries,
        t.dm_prompts,
        t.dm_conversation_lifecycle,
    ):
        conn.execute(table.delete())

    def attr_rows(owner_col: str, owner: str, attrs: tuple[Attribute, ...]) -> list[dict[str, Any]]:
        return [
            {
                owner_col: owner,
                "attribute_name": a.name,
                "position": i,
                **{f: getattr(a, f) for f in _ATTRIBUTE_FIELDS},
            }
            for i, a in enumerate(attrs)
        ]

    anchors = [
        {
            "noun": a.noun,
            "description": a.description,
            "id_example": a.id_example,
            "query": a.query,
            "position": i,
        }
        for i, a in enumerate(dm.anchors)
    ]
    links = [
        {
            "sentence": lk.sentence,
            "anchor1": lk.anchor1,
            "anchor2": lk.anchor2,
            "description": lk.description,
            "query": lk.query,
            "anchor1_link_column_name": lk.anchor1_link_column_name,
            "anchor2_link_column_name": lk.anchor2_link_column_name,
            "has_direction": lk.has_direction,
            "position": i,
        }
        for i, lk in enumerate(dm.links)
    ]
    anchor_attrs = [r for a in dm.anchors for r in attr_rows("anchor", a.noun, a.attributes)]
    link_attrs = [r for lk in dm.links for r in attr_rows("link", lk.sentence, lk.attributes)]
    queries = [
        {"position": i, "query_name": q.name, "query_example": q.example} for i, q in enumerate(dm.queries)
    ]
    prompts = [{"name": p.name, "text": p.text} for p in dm.prompts]
    lifecycle = [{"event": e.event, "text": e.text} for e in dm.lifecycle]
    for table, rows in (
        (t.dm_anchors, anchors),
        (t.dm_links, links),
        (t.dm_anchor_attributes, anchor_attrs),
        (t.dm_link_attributes, link_attrs),
        (t.dm_queries, queries),
        (t.dm_prompts, prompts),
        (t.dm_conversation_lifecycle, lifecycle),
    ):
        if rows:
            conn.execute(table.insert(), rows)


def load_data_model(conn: Connection, *, required: bool = True) -> DataModel:
    """The stored data model; raises `NotSynced` when there is none and `required`."""
    from sqlalchemy import select

    from vedana.stores import tables as t

    def rows(table: Any) -> list[dict[str, Any]]:
        order = table.c.position if "position" in table.c else next(iter(table.primary_key.columns))
        return [dict(r._mapping) for r in conn.execute(select(table).order_by(order))]

    def attrs(items: list[dict[str, Any]], owner_col: str, owner: str) -> tuple[Attribute, ...]:
        return tuple(
            Attribute(name=r["attribute_name"], **{f: r[f] for f in _ATTRIBUTE_FIELDS})
            for r in items
            if r[owner_col] == owner
        )

    anchor_attrs = rows(t.dm_anchor_attributes)
    link_attrs = rows(t.dm_link_attributes)
    anchors = [
        Anchor(
            noun=r["noun"],
            description=r["description"],
            id_example=r["id_example"],
            query=r["query"],
            attributes=attrs(anchor_attrs, "anchor", r["noun"]),
        )
        for r in rows(t.dm_anchors)
    ]
    if not anchors and required:
        raise NotSynced()
    links = [
        Link(
            sentence=r["sentence"],
            anchor1=r["anchor1"],
            anchor2=r["anchor2"],
            description=r["description"],
            query=r["query"],
            anchor1_link_column_name=r["anchor1_link_column_name"],
            anchor2_link_column_name=r["anchor2_link_column_name"],
            has_direction=r["has_direction"],
            attributes=attrs(link_attrs, "link", r["sentence"]),
        )
        for r in rows(t.dm_links)
    ]
    return DataModel(
        anchors=anchors,
        links=links,
        queries=[Query(name=r["query_name"], example=r["query_example"]) for r in rows(t.dm_queries)],
        prompts=[Prompt(name=r["name"], text=r["text"]) for r in rows(t.dm_prompts)],
        lifecycle=[
            LifecycleEvent(event=r["event"], text=r["text"]) for r in rows(t.dm_conversation_lifecycle)
        ],
    )


def get_state(conn: Connection, key: str, default: Any = None) -> Any:
    from sqlalchemy import select

    from vedana.stores import tables as t

    value = conn.execute(select(t.vedana_state.c.value).where(t.vedana_state.c.key == key)).scalar()
    return default if value is None else value


def set_state(conn: Connection, key: str, value: Any) -> None:
    from sqlalchemy import func
    from sqlalchemy.dialects.postgresql import insert

    from vedana.stores import tables as t

    stmt = insert(t.vedana_state).values(key=key, value=value)
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["key"], set_={"value": stmt.excluded.value, "updated_at": func.now()}
        )
    )


@contextmanager
def writer_lock(
    engine: Engine, *, wait: bool = True, on_notice: Callable[[str], None] | None = None
) -> Iterator[bool]:
    """Hold the session-level writer lock for the duration; yields False if `wait` is off and
    another process holds it. First ends the backends a dead vedana process left running
    (`stores.backends`), which would hold the lock or the tables; `on_notice` hears of it."""
    from vedana.stores.backends import end_orphaned_backends, orphans_message

    with engine.connect() as conn:
        orphans = end_orphaned_backends(conn)
        if orphans and on_notice is not None:
            on_notice(orphans_message(orphans))
        if wait:
            conn.exec_driver_sql(f"SELECT pg_advisory_lock({WRITER_LOCK_KEY})")
            got = True
        else:
            got = bool(conn.exec_driver_sql(f"SELECT pg_try_advisory_lock({WRITER_LOCK_KEY})").scalar())
        conn.commit()
        try:
            yield got
        finally:
            if got:
                conn.exec_driver_sql(f"SELECT pg_advisory_unlock({WRITER_LOCK_KEY})")
                conn.commit()


def staging_counts(conn: Connection) -> dict[str, int]:
    """Live nodes and edges in staging (what an evaluation run records of the knowledge base)."""
    nodes = conn.exec_driver_sql("SELECT count(*) FROM nodes WHERE NOT deleted").scalar()
    edges = conn.exec_driver_sql("SELECT count(*) FROM edges WHERE NOT deleted").scalar()
    return {"nodes": int(nodes or 0), "edges": int(edges or 0)}
