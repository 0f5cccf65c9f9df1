"""A load's `UNWIND` batches sent to FalkorDB with the next one already on its way.

Sending a batch and waiting for its reply leaves FalkorDB idle while Python writes the next
query text (the `CYPHER rows=[...]` header), and Python idle while FalkorDB runs the batch. Here
batch n+1 is written to the socket before the reply to batch n is read: FalkorDB runs the
queries of one connection in the order they came, and starts n+1 as soon as n is done. The
replies are small (statistics), so a reply never waits on a full socket while the next query
is being sent. A batch counts as written only when its reply has been read (`BatchWriter`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from vedana.stores.falkordb_params import params_header
from vedana.stores.graph import BatchWriter, GraphStore

IN_FLIGHT = 2  # batches sent and not yet acknowledged, at most: one running, one waiting


class PipelinedWriter(BatchWriter):
    """`BatchWriter` on one connection of its own out of `client`'s pool (a `redis.Redis`).
    `failed(exc)` turns a redis error into the one to raise."""

    def __init__(
        self, graph: GraphStore, client: Any, graph_name: str, failed: Callable[[Exception], Exception]
    ) -> None:
        super().__init__(graph)
        self._pool = client.connection_pool
        self._conn: Any = self._pool.get_connection()
        self._graph_name = graph_name
        self._failed = failed
        self._waiting: deque[Any] = deque()  # tags of the batches sent, oldest first

    def send(self, cypher: str, rows: list[Any], tag: Any) -> list[Any]:
        query = params_header({"rows": rows}) + cypher
        self._call(self._conn.send_command, "GRAPH.QUERY", self._graph_name, query, "--compact")
        self._waiting.append(tag)
        done = []
        while len(self._waiting) >= IN_FLIGHT:
            done.append(self._acknowledged())
        return done

    def drain(self) -> list[Any]:
        return [self._acknowledged() for _ in range(len(self._waiting))]

    def _acknowledged(self) -> Any:
        from redis.exceptions import ResponseError

        reply = self._call(self._conn.read_response)
        # FalkorDB reports an error met while running the query as the reply's last item.
        if isinstance(reply, list) and reply and isinstance(reply[-1], ResponseError):
            raise self._failed(reply[-1])
        return self._waiting.popleft()

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        import redis

        try:
            return method(*args)
        except redis.RedisError as exc:
            raise self._failed(exc) from None

    def close(self) -> None:
        if self._conn is None:
            return
        if self._waiting:  # replies nobody will read: the connection cannot serve anyone else
            self._waiting.clear()
            self._conn.disconnect()
        self._pool.release(self._conn)
        self._conn = None
