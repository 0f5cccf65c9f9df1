"""Staging → graph: upsert changed nodes and edges, remove deleted ones, in `UNWIND` batches;
or, for a full load where the engine can, build the whole graph aside and swap it in
(`rebuild_graph`, FalkorDB's GRAPH.BULK).

The same Cypher runs on Memgraph (Bolt) and FalkorDB through `GraphStore.batch_writer()`.
Labels and relationship types come from data (anchor nouns, link sentences), so they are
backtick-quoted and refused when they could not be quoted safely.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vedana.datamodel.dtypes import json_type
from vedana.datamodel.names import graph_name_problem
from vedana.errors import CypherError, SourceError
from vedana.etl.gc_pause import cyclic_gc_paused
from vedana.handoff import put_unless
from vedana.stores.falkordb_bulk import encode_rows
from vedana.stores.graph import EncodedRows
from vedana.stores.staging_bulk import (
    GuessMissed,
    RecordBatch,
    edge_records_aside,
    encodes_records,
    node_records,
    node_starts,
)
from vedana.stores.staging_changes import (
    Declared,
    GroupsAside,
    StagedGroup,
    VersionRange,
    changed_counts,
    edge_batches,
    guessed_groups,
    node_batches,
    staged_groups,
    staged_type_counts,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from vedana.datamodel import DataModel
    from vedana.datamodel.model import Attribute
    from vedana.stores.graph import GraphBuild, GraphStore

Progress = Callable[[str, int, "int | None"], None]

NODE_STAGE = "graph nodes"
DEFAULT_BATCH = 5000  # rows per graph write: fewer, larger replies; FalkorDB's parse stays short
EDGE_STAGE = "graph edges"


def quote_name(name: str) -> str:
    """`name` (an anchor noun or link sentence) as a backtick-quoted Cypher label/type."""
    from vedana.stores.graph import quote_name as quote

    try:
        return quote(name)
    except CypherError:
        raise SourceError(
            f"cannot use {name!r} as a graph label or relationship type; rename the anchor or link "
            "in the data model (no backticks or control characters, at most 255 characters)"
        ) from None


def graph_value(value: Any) -> Any:
    """A property value both engines accept: scalars and lists of scalars; maps become JSON text."""
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, list):
        if all(v is None or isinstance(v, str | int | float | bool) for v in value):
            return [v for v in value if v is not None]
        return json.dumps(value, ensure_ascii=False)
    return value


def node_properties(node_id: str, attributes: dict[str, Any]) -> dict[str, Any]:
    """The properties a node gets: its attributes as graph values, nulls left out, and the node
    id as `id` (the loads send the same as lists: see `graph_writes`)."""
    props = {k: graph_value(v) for k, v in attributes.items() if v is not None and k != "id"}
    props["id"] = node_id
    return props


def property_key(name: str) -> str:
    """An attribute name as a backtick-quoted property key."""
    from vedana.stores.graph import quote_name as quote

    try:
        return quote(name)
    except CypherError:
        raise SourceError(
            f"cannot use {name!r} as a graph property name; rename the attribute in the data model "
            "(no backticks or control characters, at most 255 characters)"
        ) from None


def _props_map(keys: list[str], first: int) -> str:
    """`{k0: row[first], k1: row[first + 1], ...}`: the properties of a row sent as a list."""
    return ", ".join(f"{property_key(k)}: row[{i}]" for i, k in enumerate(keys, first))


def upsert_nodes_cypher(label: str, keys: list[str]) -> str:
    """Rows `[id, value of keys[0], ...]`. `SET n = map` replaces every property, so attributes
    removed in Grist disappear here too; a null value sets nothing."""
    props = _props_map(keys, 1)
    return (
        f"UNWIND $rows AS row MERGE (n:{quote_name(label)} {{id: row[0]}}) "
        f"SET n = {{{props}{', ' if props else ''}id: row[0]}}"
    )


def delete_nodes_cypher(label: str) -> str:
    """Rows `[id]`."""
    return f"UNWIND $rows AS row MATCH (n:{quote_name(label)} {{id: row[0]}}) DETACH DELETE n"


def upsert_edges_cypher(edge_label: str, from_type: str, to_type: str, keys: list[str]) -> str:
    """Rows `[from id, to id, value of keys[0], ...]`."""
    return (
        f"UNWIND $rows AS row MATCH (a:{quote_name(from_type)} {{id: row[0]}}) "
        f"MATCH (b:{quote_name(to_type)} {{id: row[1]}}) "
        f"MERGE (a)-[r:{quote_name(edge_label)}]->(b) SET r = {{{_props_map(keys, 2)}}}"
    )


def delete_edges_cypher(edge_label: str, from_type: str, to_type: str) -> str:
    """Rows `[from id, to id]`."""
    return (
        f"UNWIND $rows AS row MATCH (a:{quote_name(from_type)} {{id: row[0]}})"
        f"-[r:{quote_name(edge_label)}]->(b:{quote_name(to_type)} {{id: row[1]}}) DELETE r"
    )


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _graph_values(rows: Sequence[Sequence[Any]], lead: int) -> list[list[Any]]:
    """`rows` with each value after the first `lead` (the ids) as `graph_value` makes it."""
    return [
        [*row[:lead], *(v if type(v) in _SCALARS else graph_value(v) for v in row[lead:])] for row in rows
    ]


@dataclass
class GraphChanges:
    nodes_upserted: int = 0
    nodes_deleted: int = 0
    edges_upserted: int = 0
    edges_deleted: int = 0

    @property
    def rows(self) -> int:
        return self.nodes_upserted + self.nodes_deleted + self.edges_upserted + self.edges_deleted


def count_changes(conn: Connection, rows: VersionRange) -> GraphChanges:
    """What a load of `rows` would do, without doing it (for `--plan` and progress totals)."""
    counts = changed_counts(conn, rows)
    return GraphChanges(*counts["nodes"], *counts["edges"])


class _Counter:
    def __init__(self, stage: str, total: int, on_progress: Progress) -> None:
        self.stage, self.total, self.done, self.on_progress = stage, total, 0, on_progress
        on_progress(stage, 0, total)

    def add(self, n: int) -> None:
        self.done += n
        self.on_progress(self.stage, self.done, self.total)


@dataclass
class GraphWrite:
    """One graph write of a load, prepared by the reading thread: `rows` for `cypher`, or (with
    `rows` None) the index on `label`. `counts` names the `GraphChanges` field it adds to;
    `label`, `keys` and `ends` (an edge's endpoint labels) say the same for a bulk build, whose
    rows may come encoded (`EncodedRows`, then `read` says how many staging rows they were)."""

    cypher: str
    rows: list[Any] | EncodedRows | None
    stage: str
    counts: str = ""
    label: str = ""
    keys: list[str] = field(default_factory=list)
    ends: tuple[str, str] = ("", "")
    read: int = 0

    @property
    def size(self) -> int:
        """How many staging rows the write carries."""
        return self.read if isinstance(self.rows, EncodedRows) else len(self.rows or ())


def load_graph(
    conn: Connection,
    graph: GraphStore,
    rows: VersionRange,
    *,
    batch_size: int = DEFAULT_BATCH,
    on_progress: Progress = lambda stage, done, total: None,
) -> GraphChanges:
    """Apply staging rows in `rows` to `graph`: nodes first (so edges find their endpoints), then
    edges; tombstones delete. Idempotent, so a load cut short is simply run again.

    A thread reads staging and prepares the batches while this one sends them, so the Postgres
    fetch overlaps the graph's work; at most `_AHEAD` batches wait between the two. Writes go
    out in the order they were read, through the graph's `batch_writer` (FalkorDB's keeps the
    next batch in flight); a write is counted once the graph has acknowledged it, and every
    write has been when this returns. `conn` is the reading thread's until the load ends."""
    if rows.empty:
        return GraphChanges()
    edge_groups = GroupsAside(conn, "edges", rows)  # beside the plan and the nodes: see graph_writes
    try:
        return _load_graph(conn, graph, rows, batch_size, on_progress, edge_groups)
    finally:
        edge_groups.join()


def _load_graph(
    conn: Connection,
    graph: GraphStore,
    rows: VersionRange,
    batch_size: int,
    on_progress: Progress,
    edge_groups: GroupsAside,
) -> GraphChanges:
    """The totals come from the groups the read asks for anyway (the nodes' here, the edges'
    aside once the first edge write comes), not from a scan of each table before the first
    write: that scan kept the graph idle for a twentieth of a load of every row."""
    node_groups = staged_groups(conn, "nodes", rows)
    for name in sorted({group.names[0] for group in node_groups if not group.deleted}):
        quote_name(name)  # refuse an unusable label before anything is written
    changes = GraphChanges()
    nodes = _Counter(NODE_STAGE, sum(group.count for group in node_groups), on_progress)
    counters: dict[str, _Counter] = {NODE_STAGE: nodes}

    def edge_total() -> int:
        return sum(group.count for group in edge_groups.result())

    def written(done: list[GraphWrite]) -> None:
        """Count the writes the graph has acknowledged (`BatchWriter`)."""
        for write in done:
            setattr(changes, write.counts, getattr(changes, write.counts) + write.size)
            counters.get(write.stage, nodes).add(write.size)

    # Every label's index goes in at the first index write (nothing is in flight yet), not each
    # before its label's nodes: each of those waited for the writes in flight, and the graph then
    # sat idle while the next batch was sent. For the same reason the edges' counter starts
    # after the first edge batch is sent, not once the nodes' writes are all acknowledged.
    labels = sorted({g.names[0] for g in node_groups if not (g.deleted and graph_name_problem(g.names[0]))})
    indexed = False
    with graph.batch_writer() as writer:
        for write in _overlapped(graph_writes(conn, rows, batch_size, edge_groups, node_groups)):
            if write.rows is None:
                if not indexed:
                    written(writer.drain())
                    for label in labels:
                        graph.ensure_index(label, "id")
                    indexed = True
                continue
            assert not isinstance(write.rows, EncodedRows)  # only a bulk build reads them
            done = writer.send(write.cypher, write.rows, write)
            if EDGE_STAGE not in counters and write.counts != "nodes_upserted":  # node upserts are over
                counters[EDGE_STAGE] = _Counter(EDGE_STAGE, edge_total(), on_progress)
            written(done)
        written(writer.drain())
    if EDGE_STAGE not in counters:
        _Counter(EDGE_STAGE, edge_total(), on_progress)
    return changes


def rebuild_graph(
    conn: Connection,
    graph: GraphStore,
    upto: int,
    owned: Iterable[str],
    *,
    batch_size: int = DEFAULT_BATCH,
    on_progress: Progress = lambda stage, done, total: None,
    dm: DataModel | None = None,
) -> GraphChanges:
    """Load every live staging row up to version `upto` into a graph that holds nothing else of
    vedana's `owned` labels. Where the engine can (FalkorDB's GRAPH.BULK, when the graph holds
    only vedana's data), the new graph is built aside and swapped in whole, so readers see the
    old one until then and a failed rebuild leaves it as it was; elsewhere the owned labels are
    cleared and `load_graph` loads them. `dm`: the data model the rows were synced with, whose
    attributes' dtypes say what their values are (else a sample of the rows is looked at)."""
    rows = VersionRange(None, upto)
    owned = list(owned)
    if encodes_records(conn):
        # The groups' keys and kinds from the data model or a sample of their rows, not from two
        # passes over every value (most of Postgres' share); checked as the rows are read.
        declared = declared_types(dm) if dm is not None else None
        edge_groups = GroupsAside(conn, "edges", rows, sampled=True, declared=declared)
        try:
            return _rebuild_graph(
                conn, graph, rows, owned, batch_size, on_progress, edge_groups, True, declared
            )
        except GuessMissed:
            pass  # nothing was swapped in: build again from the exact groups
        finally:
            edge_groups.join()
    edge_groups = GroupsAside(conn, "edges", rows, race=True)  # beside the nodes: see graph_writes
    try:
        return _rebuild_graph(conn, graph, rows, owned, batch_size, on_progress, edge_groups, False)
    finally:
        edge_groups.join()


def declared_types(dm: DataModel) -> Declared:
    """What the data model says a staging group's attributes are (`guessed_groups`): a node
    type's, its anchor's; an edge group's, its link's when the ends are the link's anchors."""
    nodes = {anchor.noun: _types(anchor.attributes) for anchor in dm.anchors}
    edges = {link.sentence: (link, _types(link.attributes)) for link in dm.links}

    def declared(names: tuple[str, ...]) -> dict[str, str | None] | None:
        if len(names) == 1:
            return nodes.get(names[0])
        label, from_type, to_type = names
        link, types = edges.get(label, (None, None))
        if link is None or {from_type, to_type} - {link.anchor1, link.anchor2}:
            return None
        return types

    return declared


def _types(attributes: Iterable[Attribute]) -> dict[str, str | None] | None:
    types: dict[str, str | None] = {}
    for attribute in attributes:
        if types.setdefault(attribute.name, json_type(attribute.dtype)) != json_type(attribute.dtype):
            return None  # one name, two dtypes: the model does not say
    return types


class _NotBulk(Exception):
    """An edge label the bulk format cannot carry, found once the build had begun."""


def _rebuild_graph(
    conn: Connection,
    graph: GraphStore,
    rows: VersionRange,
    owned: list[str],
    batch_size: int,
    on_progress: Progress,
    edge_groups: GroupsAside,
    sampled: bool,
    declared: Declared | None = None,
) -> GraphChanges:
    """The plan is the nodes' groups (read anyway) and, once the first edge comes, the edges'
    (asked aside): not a scan of each table of its own. Nothing is live before `finish()`, so an
    edge label refused then leaves the graph as it was. `sampled`: the groups are
    `guessed_groups` (with `declared`), which only a build taking encoded rows can read (else
    `GuessMissed`)."""
    # a full range holds live rows only
    if sampled:
        node_groups = guessed_groups(conn, "nodes", rows, declared)
    else:
        node_groups = staged_groups(conn, "nodes", rows)
    node_names = sorted({group.names[0] for group in node_groups})
    for name in node_names:
        quote_name(name)  # refuse an unusable name before anything is written
    node_total = sum(group.count for group in node_groups)
    build = graph.bulk_build(owned, node_names) if node_total else None
    if build is not None:
        if sampled and not build.encoded_rows:
            build.abort()
            raise GuessMissed("the build takes no encoded rows")
        try:
            return _build(conn, build, rows, batch_size, on_progress, node_groups, edge_groups)
        except _NotBulk:
            pass
    if sampled:
        raise GuessMissed("not a bulk build: the load reads the exact groups")
    graph.clear(owned)
    return _load_graph(conn, graph, rows, batch_size, on_progress, edge_groups)


def _build(
    conn: Connection,
    build: GraphBuild,
    rows: VersionRange,
    batch_size: int,
    on_progress: Progress,
    node_groups: list[StagedGroup],
    edge_groups: GroupsAside,
) -> GraphChanges:
    def edge_total() -> int:
        groups = edge_groups.result()
        labels = sorted({group.names[0] for group in groups})
        for name in labels:
            quote_name(name)
        if any(":" in name or graph_name_problem(name) for name in labels):
            raise _NotBulk  # the bulk format separates labels with a colon
        return sum(group.count for group in groups)

    changes = GraphChanges()
    nodes = _Counter(NODE_STAGE, sum(group.count for group in node_groups), on_progress)
    edges: _Counter | None = None
    if build.encoded_rows and encodes_records(conn):
        writes = _encoded_writes(conn, rows, batch_size, edge_groups, node_groups)
    else:
        writes = graph_writes(conn, rows, batch_size, edge_groups, node_groups)
    try:
        for write in _overlapped(writes):
            if write is _NODES_READ:
                build.send_pending()
            elif write.rows is None:
                build.add_index(write.label, "id")
            elif write.counts == "nodes_upserted":
                build.add_nodes(write.label, write.keys, write.rows)
                changes.nodes_upserted += write.size
                nodes.add(write.size)
            else:  # a full load has no tombstones: edge upserts
                edges = edges or _Counter(EDGE_STAGE, edge_total(), on_progress)
                build.add_edges(write.label, *write.ends, write.keys, write.rows)
                changes.edges_upserted += write.size
                edges.add(write.size)
        if edges is None:
            edges = _Counter(EDGE_STAGE, edge_total(), on_progress)
        build.finish()
    except BaseException:
        build.abort()
        raise
    return changes


def graph_writes(
    conn: Connection,
    rows: VersionRange,
    batch_size: int,
    edge_groups: GroupsAside | None = None,
    node_groups: list[StagedGroup] | None = None,
) -> Iterator[GraphWrite]:
    """Every write a load of `rows` makes, in order: node upserts (each label's index first),
    edge upserts and deletions, then node deletions. The edges' groups are asked aside
    (`edge_groups`, else here) while the nodes are read: the loads start asking before their
    plan, as the edges' two scans take longer than the nodes' whole read."""
    aside = edge_groups or GroupsAside(conn, "edges", rows)
    try:
        yield from _graph_writes(conn, rows, batch_size, aside, node_groups)
    finally:
        aside.join()


def _graph_writes(
    conn: Connection,
    rows: VersionRange,
    batch_size: int,
    edge_groups: GroupsAside,
    node_groups: list[StagedGroup] | None,
) -> Iterator[GraphWrite]:
    deleted_nodes: list[GraphWrite] = []
    indexed: set[str] = set()
    for batch in node_batches(conn, rows, batch_size, node_groups):
        (label,) = batch.names
        if batch.deleted and graph_name_problem(label):
            continue  # left by an older sync; it never reached the graph
        if label not in indexed:
            indexed.add(label)
            yield GraphWrite("", None, NODE_STAGE, label=label)
        if batch.deleted:  # removed after the edges are written, below
            deleted_nodes.append(
                GraphWrite(delete_nodes_cypher(label), batch.rows, NODE_STAGE, "nodes_deleted")
            )
            continue
        payload = batch.rows if batch.plain else _graph_values(batch.rows, 1)
        cypher = upsert_nodes_cypher(label, batch.keys)
        yield GraphWrite(cypher, payload, NODE_STAGE, "nodes_upserted", label, batch.keys)

    for batch in edge_batches(conn, rows, batch_size, edge_groups.result()):
        label, from_type, to_type = batch.names
        if batch.deleted:
            if any(graph_name_problem(name) for name in batch.names):
                continue  # left by an older sync; it never reached the graph
            cypher = delete_edges_cypher(label, from_type, to_type)
            yield GraphWrite(cypher, batch.rows, EDGE_STAGE, "edges_deleted")
            continue
        payload = batch.rows if batch.plain else _graph_values(batch.rows, 2)
        cypher = upsert_edges_cypher(label, from_type, to_type, batch.keys)
        yield GraphWrite(
            cypher, payload, EDGE_STAGE, "edges_upserted", label, batch.keys, (from_type, to_type)
        )
    yield from deleted_nodes


def _encoded_writes(
    conn: Connection,
    rows: VersionRange,
    batch_size: int,
    edge_groups: GroupsAside,
    node_groups: list[StagedGroup],
) -> Iterator[GraphWrite]:
    """A full load's writes (as `graph_writes`) with rows encoded as bulk records, by Postgres
    (`vedana.stores.staging_bulk`) or, for a group holding maps, lists or other numbers, here."""
    try:
        # The edges' reads start now, beside the nodes' (their numbers are known already).
        edge_reads = edge_records_aside(conn, rows, batch_size, edge_groups.result, node_starts(node_groups))
        with closing(edge_reads):  # its reading threads stop with the load
            indexed: set[str] = set()
            for batch in node_records(conn, rows, batch_size, node_groups):
                (label,) = batch.names
                if label not in indexed:
                    indexed.add(label)
                    yield GraphWrite("", None, NODE_STAGE, label=label)
                records = _records(batch, ends=False)
                yield GraphWrite(
                    "", records, NODE_STAGE, "nodes_upserted", label, batch.keys, read=batch.count
                )
            yield _NODES_READ
            for batch in edge_reads:
                label, from_type, to_type = batch.names
                records = _records(batch, ends=True)
                yield GraphWrite(
                    "",
                    records,
                    EDGE_STAGE,
                    "edges_upserted",
                    label,
                    batch.keys,
                    (from_type, to_type),
                    batch.count,
                )
    finally:
        edge_groups.join()


# Between a bulk build's nodes and its edges: the graph can build the nodes while the first
# edges are read.
_NODES_READ = GraphWrite("", None, EDGE_STAGE)


def _records(batch: RecordBatch, *, ends: bool) -> EncodedRows:
    if batch.records is not None:
        return EncodedRows(batch.records, batch.kept)
    assert batch.rows is not None
    return encode_rows(_graph_values(batch.rows, 1), ends=ends)


_AHEAD = 4  # prepared batches waiting for the graph: enough to cover a slow reply, little memory
_DONE = object()


def _overlapped(items: Iterator[GraphWrite]) -> Iterator[GraphWrite]:
    """`items`, produced by a thread of their own while the caller works on the previous ones.
    An error on either side stops both; the thread is gone when this generator ends."""
    waiting: queue.Queue[Any] = queue.Queue(maxsize=_AHEAD)
    stop = threading.Event()

    def put(item: Any) -> bool:
        return put_unless(waiting, item, stop.is_set)

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as exc:  # handed to the consumer, which raises it
            put(exc)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()  # ends the staging read (its cursor) here, on the thread that used it

    # The load's lists and dicts would only be rescanned by the cyclic collector (a sixth of
    # the reading thread's time).
    with cyclic_gc_paused():
        thread = threading.Thread(target=produce, name="graph-load-read", daemon=True)
        thread.start()
        try:
            while (item := waiting.get()) is not _DONE:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            thread.join()


@dataclass(frozen=True)
class OwnedTypes:
    """The labels and relationship types vedana loads into the graph, with the live staging
    count of each: every type staging has ever held (a type whose rows are all tombstones, e.g.
    one dropped from the data model, is still vedana's to delete) plus the data model's. Only
    these are counted, compared or cleared, so a graph server shared with other data keeps it."""

    nodes: dict[str, int]
    edges: dict[str, int]

    def live(self) -> dict[str, dict[str, int]]:
        """Staging counts in the shape of `GraphStore.counts()` (types with no live row left out)."""
        return {
            "nodes": {name: n for name, n in self.nodes.items() if n},
            "edges": {name: n for name, n in self.edges.items() if n},
        }


def owned_types(conn: Connection, dm: DataModel | None = None, *, edges: bool = True) -> OwnedTypes:
    """`edges=False` leaves out the relationship types (and their scan of the edges table)."""

    # A name no engine can take never reached the graph (sync refuses them now; an older
    # sync may have staged one): leaving it out lets index run once the source is fixed.
    nodes, edge_counts = (
        {name: n for name, n in counts.items() if graph_name_problem(name) is None}
        for counts in staged_type_counts(conn, edges=edges)
    )
    owned = OwnedTypes(nodes=nodes, edges=edge_counts)
    if dm is not None:
        for anchor in dm.anchors:
            owned.nodes.setdefault(anchor.noun, 0)
        for link in dm.links if edges else ():
            owned.edges.setdefault(link.sentence, 0)
    return owned
