"""One interface over the graph engines: Memgraph over Bolt, or the embedded FalkorDB.

Everything above this module talks to `GraphStore` and gets plain Python values back:
scalars, lists, dicts; a node as `{"labels": [...], "properties": {...}}`; a relationship as
`{"type": str, "properties": {...}, "start": <node id>, "end": <node id>}` where start/end are
the engine's internal ids of the endpoints; a path as `{"nodes": [...], "relationships": [...]}`.
So nothing above the adapter knows which engine it talks to.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from vedana.datamodel.names import graph_name_problem
from vedana.errors import CypherError

T = TypeVar("T")


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[dict[str, Any]]
    truncated: bool = False  # more rows existed than `row_limit`
    elapsed_s: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)


class GraphStore(ABC):
    """A graph engine. Implementations: `FalkorGraph` (embedded), `BoltGraph` (Memgraph)."""

    engine: str  # "falkordb" or "memgraph"

    @abstractmethod
    def query(
        self,
        cypher: str,
        params: dict[str, Any] | None = None,
        *,
        read_only: bool = False,
        row_limit: int | None = None,
        timeout_s: float | None = None,
    ) -> QueryResult:
        """Run one query. `read_only` uses the engine's read-only mode where it has one;
        `row_limit` stops reading after that many rows (sets `truncated` if more existed)."""

    @abstractmethod
    def write_batches(self, cypher: str, rows: Iterable[Any], batch_size: int = 1000) -> int:
        """Run `cypher` (which reads `$rows`, e.g. `UNWIND $rows AS row MERGE ...`) once per
        batch of `rows`; returns the number of rows sent."""

    @abstractmethod
    def ensure_index(self, label: str, prop: str = "id") -> None:
        """Create an index on `label.prop` if it does not exist (idempotent)."""

    @abstractmethod
    def clear(self, labels: Iterable[str]) -> None:
        """Delete the nodes carrying any of `labels`, with their relationships (used to rebuild
        the graph). Only the labels given: a server shared with other data keeps the rest."""

    @abstractmethod
    def close(self) -> None: ...

    def batch_writer(self) -> BatchWriter:
        """A writer for a load's batches, in order (see `BatchWriter`): this one sends each and
        waits for it; an engine that can keep the next batch in flight overrides it."""
        return BatchWriter(self)

    def bulk_build(self, owned: Iterable[str], names: Iterable[str]) -> GraphBuild | None:
        """A builder that makes a new graph of just what it is given and, on `finish()`, puts it
        in place of this one at once; or None when the engine has none, or when replacing the
        graph would lose anything but vedana's `owned` labels (then clear and load instead).
        `names` are the labels and types the build will hold."""
        return None

    def persist(self) -> None:
        """Make every write so far durable, before the caller records it as applied.

        Servers with their own write-ahead log (Memgraph, Neo4j) need nothing; the embedded
        FalkorDB snapshots to disk here."""
        return None

    def persist_begin(self) -> Callable[[], None]:
        """Start `persist` and return what waits for it to end, so the caller can do other work
        meanwhile (`vedana index` writes the vectors) and record the writes as applied only
        once the wait has returned. Here the wait does it all."""
        return self.persist

    def counts(
        self, labels: Iterable[str] | None = None, types: Iterable[str] | None = None
    ) -> dict[str, dict[str, int]]:
        """{"nodes": {label: n}, "edges": {type: n}}: of the whole graph, or, given `labels` and
        `types`, of just those (one count each, so other data on a shared server is not scanned;
        names with no nodes or relationships are left out, as in the whole-graph form)."""
        if labels is None or types is None:
            node_rows = self.query("MATCH (n) RETURN labels(n)[0] AS label, count(*) AS n").rows
            edge_rows = self.query("MATCH ()-[r]->() RETURN type(r) AS type, count(*) AS n").rows
            return {
                "nodes": {r["label"]: r["n"] for r in node_rows},
                "edges": {r["type"]: r["n"] for r in edge_rows},
            }
        nodes = {name: self._count(f"MATCH (n:{quote_name(name)}) RETURN count(n) AS n") for name in labels}
        edges = {
            name: self._count(f"MATCH ()-[r:{quote_name(name)}]->() RETURN count(r) AS n") for name in types
        }
        return {
            "nodes": {name: n for name, n in nodes.items() if n},
            "edges": {name: n for name, n in edges.items() if n},
        }

    def names(self) -> tuple[frozenset[str], frozenset[str]] | None:
        """The labels and relationship types the graph holds, or None when the engine cannot
        list them (Memgraph has no `db.labels()` unless built with it)."""
        try:
            labels = self.query("CALL db.labels()").rows
            types = self.query("CALL db.relationshipTypes()").rows
        except Exception:  # engines differ in what they lack and how they say it; None tells
            return None
        return (
            frozenset(str(v) for row in labels for v in row.values()),
            frozenset(str(v) for row in types for v in row.values()),
        )

    def _count(self, cypher: str) -> int:
        rows = self.query(cypher).rows
        return int(rows[0]["n"]) if rows else 0

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BatchWriter:
    """Sends a load's `UNWIND` batches in order. `send` and `drain` return the tags of the
    batches the engine has acknowledged since the last call, oldest first: a batch counts as
    written only then. This one writes each batch before `send` returns; a pipelined writer may
    return nothing until a later call, and `drain` waits for every batch still in flight.
    `close` ends the writer; batches never acknowledged are not written as far as the caller
    knows (a load is idempotent and runs again)."""

    def __init__(self, graph: GraphStore) -> None:
        self.graph = graph

    def send(self, cypher: str, rows: list[Any], tag: Any) -> list[Any]:
        self.graph.write_batches(cypher, rows, batch_size=max(len(rows), 1))
        return [tag]

    def drain(self) -> list[Any]:
        return []

    def close(self) -> None:
        return None

    def __enter__(self) -> BatchWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class EncodedRows:
    """`count` rows already encoded as a `GraphBuild`'s records (in the engine's bulk format),
    back to back in `data`."""

    data: bytes
    count: int


class GraphBuild(ABC):
    """A whole graph written at once (see `GraphStore.bulk_build`): nodes first, then the
    relationships between them; rows are lists, as in the loads' `UNWIND` batches, or (where
    `encoded_rows` says the build takes them) `EncodedRows`."""

    encoded_rows = False

    @abstractmethod
    def add_nodes(self, label: str, keys: list[str], rows: list[list[Any]] | EncodedRows) -> None:
        """Rows `[id, value of keys[0], ...]`."""

    @abstractmethod
    def add_edges(
        self,
        rel_type: str,
        from_label: str,
        to_label: str,
        keys: list[str],
        rows: list[list[Any]] | EncodedRows,
    ) -> int:
        """Rows `[from id, to id, value of keys[0], ...]`; those whose ends are not added nodes
        are skipped. Returns how many were kept."""

    @abstractmethod
    def add_index(self, label: str, prop: str = "id") -> None: ...

    @abstractmethod
    def send_pending(self) -> None:
        """Send what was added so far, if the build holds some back (the caller will be a while
        with the next rows)."""

    @abstractmethod
    def finish(self) -> None:
        """Put the new graph in place of the old one."""

    @abstractmethod
    def abort(self) -> None:
        """Drop what was built; the old graph stays as it was."""


def quote_name(name: str) -> str:
    """`name` as a backtick-quoted label, relationship type or property name; a `CypherError`
    for a name no engine can take quoted (see `vedana.datamodel.names`)."""
    problem = graph_name_problem(name)
    if problem is not None:
        raise CypherError(
            f"cannot use {name!r} as a graph label, relationship type or property name: {problem}"
        )
    return f"`{name}`"


def batched(rows: Iterable[T], size: int) -> Iterator[list[T]]:
    batch: list[T] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
