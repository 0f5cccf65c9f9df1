"""`GraphStore` on FalkorDB (the embedded default), through the `falkordb` client.

Row limits: a read-only query with `row_limit` runs in the capped shape of
`vedana.cypher.shape`, so the server itself stops after `row_limit + 1` rows; a query that has
no capped shape, or whose capped form fails, runs as written and the rows past the limit are
dropped. Either way the embedded server has a hard ceiling on reply size (`RESULTSET_CEILING`
rows), and a reply of exactly that size is reported truncated. EXPLAIN gives the plan through
GRAPH.EXPLAIN (FalkorDB would otherwise run the query); PROFILE and SHOW are refused with a
clear message.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from vedana.cypher.shape import capped_query, in_query_order
from vedana.cypher.text import first_word
from vedana.datamodel.names import graph_name_problem
from vedana.errors import CypherError, ServiceError
from vedana.redaction import redact
from vedana.stores.embedded_falkordb import RESULTSET_CEILING
from vedana.stores.falkordb_bulk import BulkBuild
from vedana.stores.falkordb_params import params_header
from vedana.stores.falkordb_writes import PipelinedWriter
from vedana.stores.graph import BatchWriter, GraphStore, QueryResult, batched, quote_name

DEFAULT_GRAPH_NAME = "vedana"
SCRATCH_SUFFIX = ".rebuild"  # the key a full rebuild is built under before it replaces the graph
DEADLINE_MARGIN_S = 1.0  # how long past its own timeout a read-only query may keep the caller waiting
# Statements FalkorDB would run as something else, or not know: a clear word instead.
_NOT_ON_FALKORDB = {
    "profile": "PROFILE runs the query to time it; on FalkorDB use EXPLAIN for the plan, which runs nothing",
    "show": "SHOW statements are Memgraph/Neo4j commands that FalkorDB does not have; "
    "use CALL db.labels(), CALL db.relationshipTypes() or CALL db.indexes()",
}
_EMPTY_KEY = "empty key"
_MEMORY_EXCEEDED = "mem consumption exceeded capacity"  # FalkorDB's error past QUERY_MEM_CAPACITY
_TOO_MUCH_MEMORY = (
    "the query used too much memory"  # FalkorDB's error for reading a graph that was never created
)
_STATS = (
    "nodes_created",
    "nodes_deleted",
    "relationships_created",
    "relationships_deleted",
    "properties_set",
    "labels_added",
    "indices_created",
)


class FalkorGraph(GraphStore):
    engine = "falkordb"

    def __init__(
        self,
        socket_path: Path | str,
        graph_name: str = DEFAULT_GRAPH_NAME,
        *,
        query_memory_mb: int | None = None,
    ) -> None:
        from falkordb import FalkorDB

        self.socket_path = Path(socket_path)
        self.graph_name = graph_name
        self.query_memory_mb = query_memory_mb  # the server's per-query cap, for the error message
        self._db = FalkorDB(unix_socket_path=str(socket_path))
        self._graph = self._db.select_graph(graph_name)
        self._deadline_graphs: dict[float, Any] = {}
        self._deadline_dbs: list[Any] = []

    def _deadline_graph(self, timeout_s: float) -> Any:
        """A connection whose reads give up `DEADLINE_MARGIN_S` after `timeout_s` (the server's
        own TIMEOUT does not interrupt a long expression); one per timeout, kept for reuse."""
        from falkordb import FalkorDB

        found = self._deadline_graphs.get(timeout_s)
        if found is None:
            db = FalkorDB(
                unix_socket_path=str(self.socket_path), socket_timeout=timeout_s + DEADLINE_MARGIN_S
            )
            self._deadline_dbs.append(db)
            found = self._deadline_graphs[timeout_s] = db.select_graph(self.graph_name)
        return found

    @classmethod
    def embedded(
        cls, home: Path, graph_name: str = DEFAULT_GRAPH_NAME, *, query_memory_mb: int | None = None
    ) -> FalkorGraph:
        """The graph on the embedded FalkorDB under `home`, starting the server if needed, with
        `query_memory_mb` as its per-query memory cap when given."""
        from vedana.stores.embedded_falkordb import ensure_falkordb

        sock = ensure_falkordb(home, query_memory_mb=query_memory_mb)
        return cls(sock, graph_name, query_memory_mb=query_memory_mb)

    def query(
        self,
        cypher: str,
        params: dict[str, Any] | None = None,
        *,
        read_only: bool = False,
        row_limit: int | None = None,
        timeout_s: float | None = None,
    ) -> QueryResult:
        started = time.perf_counter()
        first = first_word(cypher)
        if first == "explain":
            return self._explain(cypher, params)
        if first in _NOT_ON_FALKORDB:
            raise CypherError(_NOT_ON_FALKORDB[first])
        capped = self._capped(cypher, params, row_limit, timeout_s) if read_only and row_limit else None
        if capped is not None:
            columns, raw_rows, result = capped
        else:
            result = self._execute(cypher, params, read_only=read_only, timeout_s=timeout_s)
            columns = [_text(column[1]) for column in result.header]
            raw_rows = result.result_set
        truncated = (row_limit is not None and len(raw_rows) > row_limit) or len(
            raw_rows
        ) >= RESULTSET_CEILING
        if row_limit is not None:
            raw_rows = raw_rows[:row_limit]
        rows = [dict(zip(columns, (to_plain(value) for value in row), strict=True)) for row in raw_rows]
        stats = {name: int(value) for name in _STATS if (value := getattr(result, name, 0))}
        return QueryResult(
            columns=columns,
            rows=rows,
            truncated=truncated,
            elapsed_s=time.perf_counter() - started,
            stats=stats,
        )

    def _capped(
        self, cypher: str, params: dict[str, Any] | None, row_limit: int, timeout_s: float | None
    ) -> tuple[list[str], list[Any], Any] | None:
        """Columns, rows (at most `row_limit + 1`) and the reply of the query run with the cap on
        the server; None when it has to run as written (see `vedana.cypher.shape`)."""
        capped = capped_query(cypher, row_limit)
        if capped is None:
            return None
        try:
            result = self._execute(capped.text, params, read_only=True, timeout_s=timeout_s)
        except CypherError as exc:
            if "timed out" in str(exc).lower() or _TOO_MUCH_MEMORY in str(exc):
                raise  # running it again would only take as long, or as much
            return None  # the query as written gives the error the caller can act on
        rows = in_query_order(capped, [_text(column[1]) for column in result.header], result.result_set)
        return None if rows is None else (capped.columns, rows, result)

    def _explain(self, cypher: str, params: dict[str, Any] | None) -> QueryResult:
        """EXPLAIN through GRAPH.EXPLAIN: the plan, one row per operation; the query never runs."""
        import redis

        started = time.perf_counter()
        query = cypher.lstrip()[len("explain") :].lstrip()
        try:
            plan = self._graph.explain(query, params)
        except redis.exceptions.ResponseError as exc:
            raise CypherError(redact(f"FalkorDB: {_one_line(str(exc))}")) from None
        lines = [str(line) for line in getattr(plan, "plan", None) or str(plan).splitlines()]
        rows = [{"plan": line} for line in lines if line.strip()]
        return QueryResult(columns=["plan"], rows=rows, elapsed_s=time.perf_counter() - started)

    def _execute(
        self, cypher: str, params: dict[str, Any] | None, *, read_only: bool, timeout_s: float | None
    ) -> Any:
        import redis
        from falkordb.exceptions import SchemaVersionMismatchException

        graph = self._deadline_graph(timeout_s) if read_only and timeout_s else self._graph
        run = graph.ro_query if read_only else graph.query
        timeout_ms = max(1, int(timeout_s * 1000)) if timeout_s else None
        if params:  # written here: the client's own writer costs a Python call per value
            cypher = params_header(params) + cypher
        for attempt in range(2):
            try:
                return run(cypher, None, timeout=timeout_ms)
            except redis.exceptions.TimeoutError:
                if not (read_only and timeout_s):
                    raise ServiceError(
                        f"FalkorDB at {self.socket_path} did not answer; check `vedana services status`"
                    ) from None
                # FalkorDB checks its TIMEOUT only between records, so a query that spends its
                # time inside one expression runs on; the socket deadline ends the wait here.
                raise CypherError(_timed_out(timeout_s)) from None
            except SchemaVersionMismatchException:
                # The client refreshed its cached label/property names; running again is safe
                # because the server rejected the query before executing it.
                if attempt:
                    raise
            except redis.exceptions.ResponseError as exc:
                if read_only and not attempt and _EMPTY_KEY in str(exc):
                    # A read-only query cannot create the graph, and FalkorDB refuses to read a
                    # graph that does not exist yet (nothing indexed): create it empty, read again.
                    self._graph.query("RETURN 1")
                    continue
                if _MEMORY_EXCEEDED in str(exc):
                    raise CypherError(self._memory_message()) from None
                if timeout_ms and "query timed out" in str(exc).lower():
                    # The server's own TIMEOUT, met between records: the same words as the deadline.
                    raise CypherError(_timed_out(timeout_ms / 1000)) from None
                raise CypherError(redact(f"FalkorDB: {_one_line(str(exc))}")) from None
            except redis.exceptions.ConnectionError as exc:
                raise ServiceError(
                    f"lost the connection to FalkorDB at {self.socket_path} ({_one_line(str(exc))}); "
                    "check `vedana services status`"
                ) from None
        raise AssertionError("unreachable")

    def _memory_message(self) -> str:
        limit = (
            f"GRAPH_QUERY_MEMORY_MB={self.query_memory_mb}" if self.query_memory_mb else "the graph's limit"
        )
        return (
            f"{_TOO_MUCH_MEMORY} ({limit}) and was stopped; narrow it (fewer rows, "
            "no large range/collect/cartesian product)"
        )

    def write_batches(self, cypher: str, rows: Iterable[Any], batch_size: int = 1000) -> int:
        sent = 0
        for batch in batched(rows, batch_size):
            self.query(cypher, {"rows": batch})
            sent += len(batch)
        return sent

    def batch_writer(self) -> BatchWriter:
        """Batches pipelined on a connection of their own (`vedana.stores.falkordb_writes`)."""
        return PipelinedWriter(self, self._db.connection, self.graph_name, self._write_failed)

    def _write_failed(self, exc: Exception) -> Exception:
        """The error to raise for a redis error `exc` met by a pipelined write."""
        import redis

        if isinstance(exc, redis.exceptions.TimeoutError):
            return ServiceError(
                f"FalkorDB at {self.socket_path} did not answer; check `vedana services status`"
            )
        if isinstance(exc, redis.exceptions.ConnectionError):
            return ServiceError(
                f"lost the connection to FalkorDB at {self.socket_path} ({_one_line(str(exc))}); "
                "check `vedana services status`"
            )
        if _MEMORY_EXCEEDED in str(exc):
            return CypherError(self._memory_message())
        return CypherError(redact(f"FalkorDB: {_one_line(str(exc))}"))

    def bulk_build(self, owned: Iterable[str], names: Iterable[str]) -> BulkBuild | None:
        """A GRAPH.BULK rebuild (`vedana.stores.falkordb_bulk`), when every node of the graph has
        one label, one of the `owned` ones (a label left with no node is kept: the new graph gets
        every old name), and every index is a range index on nodes (recreated on the new graph):
        so replacing the graph loses nothing a clear would keep. Not when a name has a colon (the
        bulk format separates labels with one)."""
        owned = set(owned)
        labels, types, keys = (
            [
                _text(row[0])
                for row in self._execute(
                    f"CALL db.{what}()", None, read_only=False, timeout_s=None
                ).result_set
            ]
            for what in ("labels", "relationshipTypes", "propertyKeys")
        )
        if any(":" in name or graph_name_problem(name) for name in (*labels, *types, *names)):
            return None
        per_label = {
            name: self._count(f"MATCH (n:{quote_name(name)}) RETURN count(n) AS n") for name in labels
        }
        if any(n and name not in owned for name, n in per_label.items()):
            return None
        if self._count("MATCH (n) RETURN count(n) AS n") != sum(per_label.values()):
            return None  # a node with no label, or with two
        indexes = self.query(
            "CALL db.indexes() YIELD label, types, entitytype RETURN label, types, entitytype"
        )
        ranges: list[tuple[str, str]] = []
        for row in indexes.rows:
            kinds = row["types"] or {}
            if row["entitytype"] != "NODE" or any(k != ["RANGE"] for k in kinds.values()):
                return None
            ranges.extend((row["label"], prop) for prop in kinds)
        build = BulkBuild(
            self._db.connection, self.graph_name, f"{self.graph_name}{SCRATCH_SUFFIX}", (labels, types, keys)
        )
        for label, prop in ranges:
            build.add_index(label, prop)
        return build

    def ensure_index(self, label: str, prop: str = "id") -> None:
        existing = self.query(
            "CALL db.indexes() YIELD label, types, entitytype RETURN label, types, entitytype"
        )
        for row in existing.rows:
            if (
                row["entitytype"] == "NODE"
                and row["label"] == label
                and "RANGE" in (row["types"].get(prop) or [])
            ):
                return
        self.query(f"CREATE INDEX FOR (n:{quote_name(label)}) ON (n.{quote_name(prop)})")

    def clear(self, labels: Iterable[str]) -> None:
        # DETACH DELETE keeps the indexes, unlike deleting the graph key.
        for label in labels:
            self.query(f"MATCH (n:{quote_name(label)}) DETACH DELETE n")

    def persist(self, timeout_s: float = 600.0) -> None:
        """Snapshot the graph to disk (BGSAVE, so readers are not blocked) and wait until a
        snapshot that started after this call has finished."""
        self.persist_begin(timeout_s)()

    def persist_begin(self, timeout_s: float = 600.0) -> Callable[[], None]:
        """`persist` in two halves: this starts the snapshot (a forked process writes it, so the
        server and the caller go on) and returns the wait, which gets `timeout_s` of its own.
        Starting it is asked on a thread: the server answers BGSAVE once it has forked, ~50-100 ms
        for a graph of 200k rows, which the caller spends on its next phase instead."""
        outcome: list[Any] = []

        def start() -> None:
            try:
                outcome.append(self._snapshot_started(timeout_s))
            except BaseException as exc:  # raised by the wait, on the caller's thread
                outcome.append(exc)

        starting = threading.Thread(target=start, name="graph-snapshot", daemon=True)
        starting.start()

        def finished() -> None:
            starting.join()
            if isinstance(outcome[0], BaseException):
                raise outcome[0]
            outcome[0]()

        return finished

    def _snapshot_started(self, timeout_s: float) -> Callable[[], None]:
        """Start a snapshot (once one already running has ended) and return the wait for it."""
        import redis

        conn = self._db.connection

        def wait(done: Any) -> dict[str, Any]:
            deadline = time.monotonic() + timeout_s
            while not done(info := conn.info("persistence")):
                if time.monotonic() > deadline:
                    raise ServiceError(f"FalkorDB did not finish saving the graph within {timeout_s:.0f} s")
                time.sleep(0.005)
            return info

        try:
            # A snapshot already running (the server's own, every minute with changes, or another
            # process's) may predate our writes, and Redis refuses a second one meanwhile: let it end.
            info = wait(lambda i: not i["rdb_bgsave_in_progress"])
            if not info["rdb_changes_since_last_save"]:
                return lambda: None
            target = info["rdb_saves"] + 1
            try:
                conn.execute_command("BGSAVE")
            except redis.ResponseError as exc:
                # Another one started just now, after our writes: it will do.
                if "already in progress" not in str(exc):
                    raise
        except redis.RedisError as exc:
            raise ServiceError(redact(f"FalkorDB could not save the graph: {exc}")) from None

        def finished() -> None:
            try:
                info = wait(lambda i: i["rdb_saves"] >= target and not i["rdb_bgsave_in_progress"])
            except redis.RedisError as exc:
                raise ServiceError(redact(f"FalkorDB could not save the graph: {exc}")) from None
            if info["rdb_last_bgsave_status"] != "ok":
                raise ServiceError(
                    f"FalkorDB failed to save the graph to disk; see {self.socket_path.parent / 'redis.log'}"
                )

        return finished

    def close(self) -> None:
        self._db.connection.close()
        for db in self._deadline_dbs:
            db.connection.close()


def to_plain(value: Any) -> Any:
    """FalkorDB client values -> plain Python: nodes, edges and paths become dicts."""
    from falkordb.edge import Edge
    from falkordb.node import Node
    from falkordb.path import Path as FalkorPath

    if isinstance(value, Node):
        return {
            "labels": sorted(value.labels or []),
            "properties": {k: to_plain(v) for k, v in value.properties.items()},
        }
    if isinstance(value, Edge):
        return {
            "type": value.relation,
            "properties": {k: to_plain(v) for k, v in value.properties.items()},
            "start": _node_id(value.src_node),
            "end": _node_id(value.dest_node),
        }
    if isinstance(value, FalkorPath):
        return {
            "nodes": [to_plain(n) for n in value.nodes()],
            "relationships": [to_plain(e) for e in value.edges()],
        }
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {_text(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if type(value).__name__ == "relativedelta":  # durations
        return str(value)
    return value


def _node_id(node: Any) -> Any:
    return node if isinstance(node, int) else getattr(node, "id", node)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _timed_out(timeout_s: float) -> str:
    return (
        f"the query timed out: it ran past its time limit of {timeout_s:g} s (CYPHER_TIMEOUT_S); "
        "narrow it (fewer rows, no large range/cartesian product)"
    )
