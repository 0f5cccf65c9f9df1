"""`GraphStore` over Bolt with the `neo4j` driver, for Memgraph at `MEMGRAPH_URI`.

Results are streamed: with `row_limit` the driver pulls at most `row_limit + 1` records, and
the rest are discarded on the server.

`read_only` opens a READ-access session (Bolt `mode: "r"`), which Neo4j enforces but Memgraph
does not (it uses the mode to pick a storage accessor and, in a cluster, to route to a replica:
memgraph/memgraph#2777). The Cypher guard (`vedana.cypher.guard`) that runs before any agent
or CLI query is the first defence; as the engine-level one, a read-only query also runs in an
explicit transaction that is always rolled back: a data change that got past the guard is undone,
and Memgraph refuses index, constraint and admin statements inside such a transaction. `SHOW ...`
and `EXPLAIN ...`, which never change anything and which Memgraph runs in auto-commit only, are
the exception.

`timeout_s` is sent as the Bolt transaction timeout (`tx_timeout`, in ms), which Memgraph reads
for each query; a server that ignores it falls back to its own limit
(Memgraph: `--query-execution-timeout-sec`, 600 s by default).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any, Literal

from vedana.errors import ConfigError, CypherError, ServiceError
from vedana.redaction import redact
from vedana.stores.graph import GraphStore, QueryResult, batched, quote_name

_COUNTERS = {
    "nodes_created": "nodes_created",
    "nodes_deleted": "nodes_deleted",
    "relationships_created": "relationships_created",
    "relationships_deleted": "relationships_deleted",
    "properties_set": "properties_set",
    "labels_added": "labels_added",
    "indexes_added": "indices_created",
}
_TRAILING_NUMBER = re.compile(r"(\d+)$")
_AUTO_COMMIT_ONLY = re.compile(r"\s*(SHOW|EXPLAIN)\b", re.IGNORECASE)
CLEAR_BATCH = 10_000
BOLT_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")
# Point field names by SRID: WGS-84 2D/3D, Cartesian 2D/3D.
_POINT_FIELDS = {
    4326: ("longitude", "latitude"),
    4979: ("longitude", "latitude", "height"),
    7203: ("x", "y"),
    9157: ("x", "y", "z"),
}


class BoltGraph(GraphStore):
    engine = "memgraph"

    def __init__(self, uri: str, user: str | None = None, password: str | None = None) -> None:
        from neo4j import GraphDatabase
        from neo4j.exceptions import DriverError, Neo4jError

        from vedana.config import redact_uri

        self.uri = redact_uri(uri)  # the form that may appear in messages
        scheme = uri.partition("://")[0].lower() if "://" in uri else ""
        if scheme not in BOLT_SCHEMES:
            raise ConfigError(
                f"MEMGRAPH_URI {self.uri!r} is not a Bolt URI; use bolt://host:7687 "
                "(or bolt+s:// for TLS, neo4j:// for a cluster)"
            )
        auth = (user or "", password or "") if user or password else None
        try:
            self._driver = GraphDatabase.driver(uri, auth=auth)
            self._driver.verify_connectivity()
            agent = self._driver.get_server_info().agent or ""
        except (DriverError, Neo4jError, ValueError) as exc:
            raise ServiceError(
                redact(
                    f"cannot reach the graph at {self.uri} ({_one_line(str(exc))}); check MEMGRAPH_URI, "
                    "MEMGRAPH_USER and MEMGRAPH_PWD",
                    [*_uri_secrets(uri), *([password] if password else [])],
                )
            ) from None
        self.server_agent = agent
        self.is_memgraph = is_memgraph_agent(agent)

    def query(
        self,
        cypher: str,
        params: dict[str, Any] | None = None,
        *,
        read_only: bool = False,
        row_limit: int | None = None,
        timeout_s: float | None = None,
    ) -> QueryResult:
        from neo4j import READ_ACCESS, WRITE_ACCESS, Query

        started = time.perf_counter()
        session_options: dict[str, Any] = {"default_access_mode": READ_ACCESS if read_only else WRITE_ACCESS}
        if row_limit is not None:
            session_options["fetch_size"] = max(1, min(row_limit + 1, 1000))
        with self._errors(), self._driver.session(**session_options) as session:
            if read_only and not _AUTO_COMMIT_ONLY.match(cypher):
                with session.begin_transaction(timeout=timeout_s) as tx:
                    try:
                        columns, rows, truncated, counters = _read(tx.run(cypher, params or {}), row_limit)
                    finally:
                        tx.rollback()  # never commit: see the module doc
            else:
                result = session.run(Query(cypher, timeout=timeout_s), params or {})
                columns, rows, truncated, counters = _read(result, row_limit)
        stats = {name: value for attr, name in _COUNTERS.items() if (value := getattr(counters, attr, 0))}
        return QueryResult(
            columns=columns,
            rows=rows,
            truncated=truncated,
            elapsed_s=time.perf_counter() - started,
            stats=stats,
        )

    def write_batches(self, cypher: str, rows: Iterable[Any], batch_size: int = 1000) -> int:
        sent = 0
        with self._errors(), self._driver.session() as session:
            for batch in batched(rows, batch_size):
                # A managed transaction retries transient conflicts; the loads are idempotent MERGEs.
                session.execute_write(_run_consumed, cypher, batch)
                sent += len(batch)
        return sent

    def ensure_index(self, label: str, prop: str = "id") -> None:
        if self._has_index(label, prop):
            return
        if self.is_memgraph:
            self.query(f"CREATE INDEX ON :{quote_name(label)}({quote_name(prop)})")
        else:
            self.query(f"CREATE INDEX FOR (n:{quote_name(label)}) ON (n.{quote_name(prop)})")

    def _has_index(self, label: str, prop: str) -> bool:
        if not self.is_memgraph:
            # Other openCypher servers over Bolt (FalkorDB's Bolt port): the db.indexes() procedure.
            try:
                rows = self.query("CALL db.indexes() YIELD label, properties RETURN label, properties").rows
            except CypherError:
                # No such procedure: a Memgraph that introduces itself under another name.
                self.is_memgraph = True
            else:
                return any(row["label"] == label and prop in (row["properties"] or []) for row in rows)
        # Memgraph: columns "index type", "label", "property" (a list for composite indexes), "count".
        for row in self.query("SHOW INDEX INFO").rows:
            properties = row.get("property", row.get("properties"))
            if not isinstance(properties, list):
                properties = [properties]
            if row.get("label") == label and properties == [prop]:
                return True
        return False

    def clear(self, labels: Iterable[str], batch_size: int = CLEAR_BATCH) -> None:
        # In slices, so a large graph is not deleted in one huge transaction.
        for label in labels:
            while True:
                result = self.query(
                    f"MATCH (n:{quote_name(label)}) WITH n LIMIT {int(batch_size)} "
                    "DETACH DELETE n RETURN count(*) AS deleted"
                )
                if not result.rows or not result.rows[0]["deleted"]:
                    break

    def close(self) -> None:
        self._driver.close()

    def _errors(self) -> Any:
        return _BoltErrors(self.uri)


def _read(result: Any, row_limit: int | None) -> tuple[list[str], list[dict[str, Any]], bool, Any]:
    """Columns, at most `row_limit` rows, whether more existed, and the update counters."""
    columns = list(result.keys())
    rows: list[dict[str, Any]] = []
    truncated = False
    for record in result:
        if row_limit is not None and len(rows) >= row_limit:
            truncated = True
            break
        rows.append({key: to_plain(value) for key, value in record.items()})
    return columns, rows, truncated, result.consume().counters  # consume discards what was not read


class _BoltErrors:
    """Maps driver exceptions to vedana errors: server-reported ones to `CypherError`,
    connection problems to `ServiceError`."""

    def __init__(self, uri: str) -> None:
        self.uri = uri

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        from neo4j.exceptions import DriverError, Neo4jError

        if exc is None:
            return False
        if isinstance(exc, Neo4jError):
            raise CypherError(redact(f"graph: {_one_line(exc.message or str(exc))}")) from None
        if isinstance(exc, DriverError):
            raise ServiceError(
                f"lost the connection to the graph at {self.uri} ({_one_line(str(exc))}); check MEMGRAPH_URI"
            ) from None
        return False


def _run_consumed(tx: Any, cypher: str, rows: list[dict[str, Any]]) -> None:
    tx.run(cypher, rows=rows).consume()


def is_memgraph_agent(agent: str) -> bool:
    """Memgraph introduces itself as "Neo4j/v5.11.0 compatible graph database server - Memgraph"
    by default (`--bolt-server-name-for-init`; a renamed one is caught by `ensure_index`)."""
    return "memgraph" in agent.lower()


def to_plain(value: Any) -> Any:
    """neo4j driver values -> the same plain shapes the FalkorDB adapter returns."""
    from neo4j.graph import Node, Path, Relationship
    from neo4j.spatial import Point
    from neo4j.time import Date, DateTime, Duration, Time

    if isinstance(value, Node):
        return {"labels": sorted(value.labels), "properties": {k: to_plain(v) for k, v in value.items()}}
    if isinstance(value, Relationship):
        return {
            "type": value.type,
            "properties": {k: to_plain(v) for k, v in value.items()},
            "start": endpoint_id(value.start_node.element_id) if value.start_node else None,
            "end": endpoint_id(value.end_node.element_id) if value.end_node else None,
        }
    if isinstance(value, Path):
        return {
            "nodes": [to_plain(n) for n in value.nodes],
            "relationships": [to_plain(r) for r in value.relationships],
        }
    # Duration and Point are tuples: they must be caught before plain lists and tuples.
    if isinstance(value, Duration):
        return str(value)  # ISO 8601, e.g. "P1DT2H"
    if isinstance(value, Point):
        names = _POINT_FIELDS.get(getattr(value, "srid", None) or 0, ("x", "y", "z"))
        return dict(zip(names, value, strict=False))
    if isinstance(value, Date | DateTime | Time):
        return value.to_native()
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode(errors="replace")  # as the FalkorDB adapter returns bytes
    return value


def endpoint_id(element_id: str) -> int | str:
    """The engine's internal id from an element id: Memgraph sends "12", FalkorDB "node_12",
    Neo4j "4:<db>:12"; all end in the number `id(n)` returns."""
    match = _TRAILING_NUMBER.search(element_id)
    return int(match.group(1)) if match else element_id


def _uri_secrets(uri: str) -> list[str]:
    from vedana.config import uri_password_forms

    return uri_password_forms(uri)


def _one_line(message: str) -> str:
    return " ".join(message.split())
