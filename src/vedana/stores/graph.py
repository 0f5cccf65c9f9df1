"""One interface over the graph engines: Memgraph over Bolt, or the embedded FalkorDB.

Everything above this module talks to `GraphStore` and gets plain Python values back:
scalars, lists, dicts; a node as `{"labels": [...], "properties": {...}}`; a relationship as
`{"type": str, "properties": {...}, "start": <node id>, "end": <node id>}` where start/end are
the engine's internal ids of the endpoints; a path as `{"nodes": [...], "relationships": [...]}`.
So nothing above the adapter knows which engine it talks to.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vedana.config import Settings


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
    def write_batches(self, cypher: str, rows: Iterable[dict[str, Any]], batch_size: int = 1000) -> int:
        """Run `cypher` (which reads `$rows`, e.g. `UNWIND $rows AS row MERGE ...`) once per
        batch of `rows`; returns the number of rows sent."""

    @abstractmethod
    def ensure_index(self, label: str, prop: str = "id") -> None:
        """Create an index on `label.prop` if it does not exist (idempotent)."""

    @abstractmethod
    def clear(self) -> None:
        """Delete every node and relationship (used by `vedana index --full`)."""

    @abstractmethod
    def close(self) -> None: ...

    def persist(self) -> None:
        """Make every write so far durable, before the caller records it as applied.

        Servers with their own write-ahead log (Memgraph, Neo4j) need nothing; the embedded
        FalkorDB snapshots to disk here."""
        return None

    def counts(self) -> dict[str, dict[str, int]]:
        """{"nodes": {label: n}, "edges": {type: n}} for the whole graph."""
        node_rows = self.query("MATCH (n) RETURN labels(n)[0] AS label, count(*) AS n").rows
        edge_rows = self.query("MATCH ()-[r]->() RETURN type(r) AS type, count(*) AS n").rows
        return {
            "nodes": {r["label"]: r["n"] for r in node_rows},
            "edges": {r["type"]: r["n"] for r in edge_rows},
        }

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def batched(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def open_graph(settings: Settings) -> GraphStore:
    """The configured graph: Memgraph at `MEMGRAPH_URI`, else the embedded FalkorDB."""
    if settings.uses_embedded_graph:
        from vedana.stores.graph_falkordb import FalkorGraph

        return FalkorGraph.embedded(settings.home)
    from vedana.stores.graph_bolt import BoltGraph

    assert settings.memgraph_uri is not None
    password = settings.memgraph_pwd.get_secret_value() if settings.memgraph_pwd else None
    return BoltGraph(settings.memgraph_uri, settings.memgraph_user, password)
