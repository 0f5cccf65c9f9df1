"""Staging → graph: upsert changed nodes and edges, remove deleted ones, in `UNWIND` batches.

The same Cypher runs on Memgraph (Bolt) and FalkorDB through `GraphStore.write_batches`.
Labels and relationship types come from data (anchor nouns, link sentences), so they are
backtick-quoted and refused when they could not be quoted safely.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING, Any

from vedana.datamodel.names import graph_name_problem
from vedana.errors import CypherError, SourceError

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from vedana.datamodel import DataModel
    from vedana.stores.graph import GraphStore

Progress = Callable[[str, int, "int | None"], None]

NODE_STAGE = "graph nodes"
EDGE_STAGE = "graph edges"
_STREAM_ROWS = 5000  # rows fetched from Postgres at a time


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
    props = {k: graph_value(v) for k, v in attributes.items() if v is not None and k != "id"}
    props["id"] = node_id
    return props


def edge_properties(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: graph_value(v) for k, v in attributes.items() if v is not None}


def upsert_nodes_cypher(label: str) -> str:
    # SET n = map replaces every property, so attributes removed in Grist disappear here too.
    return f"UNWIND $rows AS row MERGE (n:{quote_name(label)} {{id: row.id}}) SET n = row.props"


def delete_nodes_cypher(label: str) -> str:
    return f"UNWIND $rows AS row MATCH (n:{quote_name(label)} {{id: row.id}}) DETACH DELETE n"


def upsert_edges_cypher(edge_label: str, from_type: str, to_type: str) -> str:
    return (
        f"UNWIND $rows AS row MATCH (a:{quote_name(from_type)} {{id: row.from}}) "
        f"MATCH (b:{quote_name(to_type)} {{id: row.to}}) "
        f"MERGE (a)-[r:{quote_name(edge_label)}]->(b) SET r = row.props"
    )


def delete_edges_cypher(edge_label: str, from_type: str, to_type: str) -> str:
    return (
        f"UNWIND $rows AS row MATCH (a:{quote_name(from_type)} {{id: row.from}})"
        f"-[r:{quote_name(edge_label)}]->(b:{quote_name(to_type)} {{id: row.to}}) DELETE r"
    )


@dataclass
class GraphChanges:
    nodes_upserted: int = 0
    nodes_deleted: int = 0
    edges_upserted: int = 0
    edges_deleted: int = 0

    @property
    def rows(self) -> int:
        return self.nodes_upserted + self.nodes_deleted + self.edges_upserted + self.edges_deleted


@dataclass(frozen=True)
class VersionRange:
    """Staging rows with `since < version <= upto`; `since=None` means every live row (full load)."""

    since: int | None
    upto: int

    @property
    def full(self) -> bool:
        return self.since is None

    @property
    def empty(self) -> bool:
        """No staging row can be in range: the watermark is already at the latest version."""
        return self.since is not None and self.since >= self.upto

    def where(self, alias: str = "") -> str:
        """SQL condition on a staging table (columns qualified by `alias` if given)."""
        p = f"{alias}." if alias else ""
        if self.full:
            return f"NOT {p}deleted AND {p}version <= %(upto)s"
        return f"{p}version > %(since)s AND {p}version <= %(upto)s"

    def params(self) -> dict[str, int]:
        return {"since": self.since or 0, "upto": self.upto}


def count_changes(conn: Connection, rows: VersionRange) -> GraphChanges:
    """What a load of `rows` would do, without doing it (for `--plan` and progress totals)."""
    changes = GraphChanges()
    for table in ("nodes", "edges"):
        live, dead = conn.exec_driver_sql(
            f"SELECT count(*) FILTER (WHERE NOT deleted), count(*) FILTER (WHERE deleted) "
            f"FROM {table} WHERE {rows.where()}",
            rows.params(),
        ).one()
        if table == "nodes":
            changes.nodes_upserted, changes.nodes_deleted = int(live), int(dead)
        else:
            changes.edges_upserted, changes.edges_deleted = int(live), int(dead)
    return changes


def check_names(conn: Connection, rows: VersionRange) -> None:
    """Refuse unusable labels and types of live rows before anything is written. (A tombstone
    with such a name never reached the graph: the loops below skip it.)"""
    for sql in (
        f"SELECT DISTINCT node_type FROM nodes WHERE {rows.where()} AND NOT deleted",
        f"SELECT DISTINCT edge_label FROM edges WHERE {rows.where()} AND NOT deleted",
    ):
        for (name,) in conn.exec_driver_sql(sql, rows.params()):
            quote_name(name)


def _stream(conn: Connection, sql: str, params: dict[str, Any]) -> Iterator[Any]:
    # Per statement: `Connection.execution_options` would change the whole connection.
    options = {"stream_results": True, "yield_per": _STREAM_ROWS}
    result = conn.exec_driver_sql(sql, params, execution_options=options)
    yield from result.mappings()


class _Counter:
    def __init__(self, stage: str, total: int, on_progress: Progress) -> None:
        self.stage, self.total, self.done, self.on_progress = stage, total, 0, on_progress
        on_progress(stage, 0, total)

    def add(self, n: int) -> None:
        self.done += n
        self.on_progress(self.stage, self.done, self.total)


def load_graph(
    conn: Connection,
    graph: GraphStore,
    rows: VersionRange,
    *,
    batch_size: int = 1000,
    on_progress: Progress = lambda stage, done, total: None,
) -> GraphChanges:
    """Apply staging rows in `rows` to `graph`: nodes first (so edges find their endpoints), then
    edges; tombstones delete. Idempotent, so a load cut short is simply run again."""
    if rows.empty:
        return GraphChanges()
    check_names(conn, rows)
    planned = count_changes(conn, rows)
    changes = GraphChanges()
    nodes = _Counter(NODE_STAGE, planned.nodes_upserted + planned.nodes_deleted, on_progress)
    node_sql = (
        f"SELECT node_type, node_id, attributes, deleted FROM nodes WHERE {rows.where()} "
        "ORDER BY node_type, deleted"
    )
    indexed: set[str] = set()
    deleted_nodes: list[tuple[str, list[dict[str, Any]]]] = []
    for (label, deleted), group in groupby(
        _stream(conn, node_sql, rows.params()), lambda r: (r["node_type"], r["deleted"])
    ):
        if deleted and graph_name_problem(label):
            continue  # left by an older sync; it never reached the graph
        if label not in indexed:
            graph.ensure_index(label, "id")
            indexed.add(label)
        if deleted:  # removed after the edges are written, below
            deleted_nodes.append((label, [{"id": r["node_id"]} for r in group]))
            continue
        payload = (
            {"id": r["node_id"], "props": node_properties(r["node_id"], r["attributes"])} for r in group
        )
        sent = _write(graph, upsert_nodes_cypher(label), payload, batch_size, nodes)
        changes.nodes_upserted += sent

    edges = _Counter(EDGE_STAGE, planned.edges_upserted + planned.edges_deleted, on_progress)
    edge_sql = (
        "SELECT edge_label, from_node_type, from_node_id, to_node_type, to_node_id, attributes, deleted "
        f"FROM edges WHERE {rows.where()} ORDER BY edge_label, from_node_type, to_node_type, deleted"
    )
    key = lambda r: (r["edge_label"], r["from_node_type"], r["to_node_type"], r["deleted"])  # noqa: E731
    for (label, from_type, to_type, deleted), group in groupby(_stream(conn, edge_sql, rows.params()), key):
        if deleted and any(graph_name_problem(name) for name in (label, from_type, to_type)):
            continue  # left by an older sync; it never reached the graph
        if deleted:
            cypher = delete_edges_cypher(label, from_type, to_type)
            payload = ({"from": r["from_node_id"], "to": r["to_node_id"]} for r in group)
            changes.edges_deleted += _write(graph, cypher, payload, batch_size, edges)
        else:
            cypher = upsert_edges_cypher(label, from_type, to_type)
            payload = (
                {"from": r["from_node_id"], "to": r["to_node_id"], "props": edge_properties(r["attributes"])}
                for r in group
            )
            changes.edges_upserted += _write(graph, cypher, payload, batch_size, edges)

    for label, ids in deleted_nodes:
        changes.nodes_deleted += _write(graph, delete_nodes_cypher(label), iter(ids), batch_size, nodes)
    return changes


def _write(
    graph: GraphStore, cypher: str, payload: Iterator[dict[str, Any]], batch_size: int, counter: _Counter
) -> int:
    """Send `payload` in batches, reporting progress after each batch."""
    from vedana.stores.graph import batched

    sent = 0
    for batch in batched(payload, batch_size):
        graph.write_batches(cypher, batch, batch_size=batch_size)
        sent += len(batch)
        counter.add(len(batch))
    return sent


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

    def per_type(table: str, column: str) -> dict[str, int]:
        rows = conn.exec_driver_sql(
            f"SELECT {column}, count(*) FILTER (WHERE NOT deleted) FROM {table} "
            f"GROUP BY {column} ORDER BY {column}"
        )
        # A name no engine can take never reached the graph (sync refuses them now; an older
        # sync may have staged one): leaving it out lets index run once the source is fixed.
        return {name: int(n) for name, n in rows if graph_name_problem(name) is None}

    owned = OwnedTypes(
        nodes=per_type("nodes", "node_type"), edges=per_type("edges", "edge_label") if edges else {}
    )
    if dm is not None:
        for anchor in dm.anchors:
            owned.nodes.setdefault(anchor.noun, 0)
        for link in dm.links if edges else ():
            owned.edges.setdefault(link.sentence, 0)
    return owned
