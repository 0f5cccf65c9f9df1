"""Staging rows read as FalkorDB GRAPH.BULK records that Postgres encodes itself, for a full
rebuild: Python then only joins bytes, where turning every value into a Python object and
encoding it again was most of the rebuild's time.

Nodes are read group by group (in the groups' order), each sorted by its id: node `k` of a
type is then number `start + k` in the build, so an edge's query numbers the nodes of its two
endpoint types the same way and joins its rows to those numbers. A row whose end is no live
node comes back empty: the build skips it, as a `MATCH` that finds nothing would.

A value is encoded by its key's kind (`StagedGroup.kinds`); kind "any" (a sampled group, or a
declared "float", see `staging_changes.guessed_groups`) by the value's own JSON type, as
Python would encode what the load reads. A group with a "json" key (maps, lists, other
numbers) is read as today's load reads it, with the edge ends' numbers as one value, and
encoded by Python. The rows of a sampled group are checked against the guess as they are
read: a row holding a key the sample did not, or a value "any" cannot encode (a map, a list, a
number beyond a double), raises `GuessMissed`, and the caller rebuilds from the exact groups
instead. A group the data model declares is typed by its dtypes and not checked key by key
(a typed value costs a third of what "any" does, the key check a fifth of the read): a value
its kind's cast refuses, or that "any" cannot encode, raises `GuessMissed` the same way.

Integers go out in the machine's byte order, which only Postgres 18's `reverse(bytea)` makes
cheap: `encodes_records` says whether this server and machine can.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from vedana.handoff import put_unless
from vedana.stores.staging_changes import StagedGroup, VersionRange, fetch_batches

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

REVERSE_BYTEA_SINCE = 180000  # server_version_num of the first Postgres with reverse(bytea)
_CURSOR = "vedana_graph_records"

# One value of key `%(k{i})s` (of row alias `{a}`) as a bulk record value: a type byte and its
# bytes; SQL NULL (no such key, or a JSON null) is the null type. Staging text never holds NUL,
# which ends a string.
_STRING = "'\\x03'::bytea || convert_to({text}, 'UTF8') || '\\x00'::bytea"
_TEXT = "{a}attributes->>%(k{i})s"
_INT = "'\\x04'::bytea || reverse(int8send(({text})::bigint))"
_ENCODED = {
    "str": f"coalesce({_STRING.format(text=_TEXT)}, '\\x00'::bytea)",
    "int": f"coalesce({_INT.format(text=_TEXT)}, '\\x00'::bytea)",
    "bool": f"CASE ({_TEXT})::boolean WHEN true THEN '\\x0101'::bytea "
    "WHEN false THEN '\\x0100'::bytea ELSE '\\x00'::bytea END",
    # By the value's type, as Python's json reads it and `encode_value` writes it: a number
    # with no point is an integer (one beyond 64 bits clamped), else a double. A map, a list
    # or a double near its underflow or past 1e308 (Postgres refuses what Python reads as 0.0 or
    # inf; the largest double is 1.8e308) is NULL.
    "any": f"CASE coalesce(jsonb_typeof({{a}}attributes->%(k{{i}})s), 'null') "
    f"WHEN 'string' THEN {_STRING.format(text=_TEXT)} "
    "WHEN 'null' THEN '\\x00'::bytea "
    f"WHEN 'boolean' THEN CASE WHEN ({_TEXT})::boolean THEN '\\x0101'::bytea ELSE '\\x0100'::bytea END "
    f"WHEN 'number' THEN CASE WHEN strpos({_TEXT}, '.') = 0 AND length({_TEXT}) < 19 "
    f"THEN {_INT.format(text=_TEXT)} "
    f"WHEN strpos({_TEXT}, '.') = 0 THEN '\\x04'::bytea || reverse(int8send(greatest(least(({_TEXT})::numeric, "
    "9223372036854775807), -9223372036854775808)::bigint)) "
    f"WHEN abs(({_TEXT})::numeric) BETWEEN 1e-300 AND 1e308 OR ({_TEXT})::numeric = 0 "
    f"THEN '\\x02'::bytea || reverse(float8send(({_TEXT})::float8)) END END",
}
# A value as Python reads it, for a group encoded by Python (as `staging_changes._VALUE`).
_PLAIN = {
    "str": _TEXT,
    "int": f"({_TEXT})::bigint",
    "bool": f"({_TEXT})::boolean",
    "json": "{a}attributes->%(k{i})s",
}


class GuessMissed(Exception):
    """A row that a guessed group's keys or kinds do not cover."""


@dataclass(frozen=True)
class RecordBatch:
    """Up to a batch size of one live group's rows. `records`: their bulk records joined, when
    Postgres encoded them (`kept` of the `count` rows: the others' ends are no node); else
    `rows` for Python to encode: a node `(id, value of keys[0], ...)`, an edge `(ends, value of
    keys[0], ...)` where `ends` is the two node numbers as bulk record bytes, None when either
    end is no node."""

    names: tuple[str, ...]
    keys: list[str]
    count: int
    records: bytes | None = None
    kept: int = 0
    rows: list[tuple[Any, ...]] | None = None


def encodes_records(conn: Connection) -> bool:
    """Whether this server can encode records for this machine (little-endian, Postgres 18+)."""
    if sys.byteorder != "little":
        return False
    raw = conn.connection.driver_connection
    assert raw is not None
    return int(raw.info.server_version) >= REVERSE_BYTEA_SINCE


def node_records(
    conn: Connection, rows: VersionRange, size: int, groups: list[StagedGroup]
) -> Iterator[RecordBatch]:
    """The live node rows of `groups` (the nodes' groups of a full range), group by group, each
    sorted by node id: the order `edge_records` numbers them in."""
    for group in groups:
        if group.deleted:
            continue
        params = _params(rows, group, ["id"])
        where = f"{rows.where()} AND node_type = %(g0)s AND NOT deleted"
        if "json" in group.kinds:
            columns = ", ".join(["node_id", *_columns(_PLAIN, group), *_checked(group, "")])
            sql = f"SELECT {columns} FROM nodes WHERE {where} ORDER BY node_id"
            yield from _plain(conn, sql, params, size, group)
            continue
        record = " || ".join([_STRING.format(text="node_id"), *_columns(_ENCODED, group)])
        if group.guessed:
            record = f"CASE WHEN {_checked(group, '')[0]} THEN {record} END"
        sql = f"SELECT {record} FROM nodes WHERE {where} ORDER BY node_id"
        yield from _encoded(conn, sql, params, size, group)


def node_starts(groups: list[StagedGroup]) -> dict[str, int]:
    """The number of each node type's first node in a build that `node_records` fed."""
    starts, number = {}, 0
    for group in groups:
        if not group.deleted:
            starts[group.names[0]] = number
            number += group.count
    return starts


def edge_records(
    conn: Connection, rows: VersionRange, size: int, groups: list[StagedGroup], starts: dict[str, int]
) -> Generator[RecordBatch, None, None]:
    """The live edge rows of `groups` (the edges' groups of a full range), each with its ends'
    node numbers (`starts`: `node_starts` of the nodes' groups). On a connection planned as
    `edge_records_aside` plans its own (`_EDGE_READ_SETTINGS`)."""
    for group in groups:
        if group.deleted:
            continue
        _, from_type, to_type = group.names
        params = {**_params(rows, group, []), "from_start": starts.get(from_type, 0)}
        params["to_start"] = starts.get(to_type, 0)
        ends = "f.number || t.number"
        where = (
            f"{rows.where('e')} AND e.edge_label = %(g0)s AND e.from_node_type = %(g1)s "
            "AND e.to_node_type = %(g2)s AND NOT e.deleted"
        )
        numbered = (
            f"WITH f AS ({_numbers(rows, 'g1', 'from_start')}), t AS ({_numbers(rows, 'g2', 'to_start')}) "
            "SELECT {columns} FROM edges e LEFT JOIN f ON f.node_id = e.from_node_id "
            f"LEFT JOIN t ON t.node_id = e.to_node_id WHERE {where}"
        )
        if "json" in group.kinds:
            columns = ", ".join([ends, *_columns(_PLAIN, group, "e."), *_checked(group, "e.")])
            yield from _plain(conn, numbered.format(columns=columns), params, size, group)
            continue
        # Empty for a row whose end is no node (skipped); NULL for one the guess does not cover.
        record = f"CASE WHEN {ends} IS NULL THEN ''::bytea ELSE {' || '.join([ends, *_columns(_ENCODED, group, 'e.')])} END"
        if group.guessed:
            record = f"CASE WHEN {_checked(group, 'e.')[0]} THEN {record} END"
        yield from _encoded(conn, numbered.format(columns=record), params, size, group)


# How the edge reads are planned. Every row is read (a cursor is planned for its first tenth by
# default), and the ends are joined by hash or merge, never by a nested loop: one was chosen
# where the tables had no statistics yet (an index just after a sync), and joined every edge to
# every node of its type, for minutes. No parallel workers: see `staged_groups`.
_EDGE_READ_SETTINGS = (
    "cursor_tuple_fraction = 1",
    "enable_nestloop = off",
    "max_parallel_workers_per_gather = 0",
)
EDGE_READERS = 2  # connections reading edge groups at once: the rebuild's reads are most of its time
_READ_AHEAD = 8  # batches read and waiting for the build, at most
_DONE = object()


def edge_records_aside(
    conn: Connection,
    rows: VersionRange,
    size: int,
    groups: Callable[[], list[StagedGroup]],
    starts: dict[str, int],
) -> EdgeReads:
    """`edge_records` of the groups `groups()` gives, read from now on by `EDGE_READERS` threads
    on connections of their own (out of `conn`'s engine), each taking the next group: Postgres
    works on two groups at once, and on the first ones while the caller still sends nodes. The
    rows are the caller's: the index holds the writer lock, so staging does not change between
    the connections' reads.

    The groups' batches come interleaved (a block names its type), but no group's first records
    come before those of a group ahead of it (or its end): a type and its keys get their
    numbers in the graph at their first block, in the order the groups would give them read one
    after another."""
    return EdgeReads(_EdgeReaders(conn.engine, rows, size, groups, starts))


class EdgeReads:
    """The batches `edge_records_aside` reads; `close()` stops its threads."""

    def __init__(self, readers: _EdgeReaders) -> None:
        self._readers = readers
        self._batches = _in_group_order(readers.batches())

    def __iter__(self) -> Iterator[RecordBatch]:
        return self._batches

    def close(self) -> None:
        self._batches.close()
        self._readers.stop()


class _EdgeReaders:
    """Threads reading the live groups of `groups()`, the next one each, into one queue of
    `(group index, batch)`, with `(group index, None)` once a group is read."""

    def __init__(
        self,
        engine: Engine,
        rows: VersionRange,
        size: int,
        groups: Callable[[], list[StagedGroup]],
        starts: dict[str, int],
    ) -> None:
        self._engine, self._rows, self._size, self._starts = engine, rows, size, starts
        self._ask = groups
        self._live: list[StagedGroup] | None = None
        self._lock = threading.Lock()
        self._todo = queue.SimpleQueue[int]()
        self._ready: queue.Queue[Any] = queue.Queue(maxsize=_READ_AHEAD)
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._read, name=f"graph-records-{i}", daemon=True)
            for i in range(EDGE_READERS)
        ]
        for thread in self._threads:
            thread.start()

    def _groups(self) -> list[StagedGroup]:
        with self._lock:
            if self._live is None:
                self._live = [group for group in self._ask() if not group.deleted]
                for index in range(len(self._live)):
                    self._todo.put(index)
            return self._live

    def batches(self) -> Iterator[tuple[int, RecordBatch | None]]:
        running = len(self._threads)
        while running:
            item = self._ready.get()
            if item is _DONE:
                running -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _put(self, item: Any) -> bool:
        return put_unless(self._ready, item, self._stop.is_set)

    def _read(self) -> None:
        try:
            live = self._groups()
            if self._todo.empty():
                self._put(_DONE)
                return
            with self._engine.connect() as own:
                for setting in _EDGE_READ_SETTINGS:
                    own.exec_driver_sql(f"SET LOCAL {setting}")  # for this connection's transaction
                while not self._stop.is_set():
                    try:
                        index = self._todo.get_nowait()
                    except queue.Empty:
                        break
                    batches = edge_records(own, self._rows, self._size, [live[index]], self._starts)
                    try:
                        for batch in batches:
                            if not self._put((index, batch)):
                                return
                    finally:
                        batches.close()  # ends the cursor here, on the thread that used it
                    self._put((index, None))
                own.rollback()
            self._put(_DONE)
        except BaseException as exc:  # handed to the caller, which raises it
            self._put(exc)


def _in_group_order(items: Iterator[tuple[int, RecordBatch | None]]) -> Generator[RecordBatch, None, None]:
    """The batches of `items`, each group's held back until every group ahead of it has sent
    records or ended."""
    opened: set[int] = set()  # groups whose records have gone out
    ended: set[int] = set()  # groups read
    held: dict[int, list[RecordBatch]] = {}  # batches of groups whose turn has not come
    first = 0  # the first group neither opened nor ended
    for index, batch in items:
        if batch is None:
            ended.add(index)
        elif index <= first:
            yield batch
            if batch.kept:
                opened.add(index)
        else:
            held.setdefault(index, []).append(batch)
        while first in opened or first in ended:
            first += 1
            for batch in held.pop(first, []):
                yield batch
                if batch.kept:
                    opened.add(first)


def _numbers(rows: VersionRange, type_param: str, start_param: str) -> str:
    """The live nodes of a type with their numbers as 8 bytes in the machine's (little-endian)
    order: computed once per node rather than once per edge end."""
    return (
        f"SELECT node_id, reverse(int8send(%({start_param})s + row_number() OVER (ORDER BY node_id) - 1)) "
        f"AS number FROM nodes WHERE {rows.where()} AND node_type = %({type_param})s AND NOT deleted"
    )


def _params(rows: VersionRange, group: StagedGroup, left_out: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {**rows.params(), "guessed_keys": [*group.keys, *left_out]}
    params.update({f"g{i}": name for i, name in enumerate(group.names)})
    params.update({f"k{i}": key for i, key in enumerate(group.keys)})
    return params


def _columns(how: dict[str, str], group: StagedGroup, alias: str = "") -> list[str]:
    return [how[kind].format(a=alias, i=i) for i, kind in enumerate(group.kinds)]


def _checked(group: StagedGroup, alias: str) -> list[str]:
    """For a guessed group, the condition that a row holds no key but the guessed ones (and the
    node's own `id`, left out of the keys)."""
    if not group.guessed:
        return []
    return [f"{alias}attributes - %(guessed_keys)s::text[] = '{{}}'::jsonb"]


_FIRST = itemgetter(0)
_LAST = itemgetter(-1)


def _encoded(
    conn: Connection, sql: str, params: dict[str, Any], size: int, group: StagedGroup
) -> Iterator[RecordBatch]:
    checked = group.guessed or group.declared
    with _casts_refused(conn, group):
        for batch in fetch_batches(conn, sql, params, size, _CURSOR):
            records = list(map(_FIRST, batch))
            if checked and None in records:
                raise GuessMissed(group.names)
            kept = list(filter(None, records))  # an edge whose end is no node is empty
            yield RecordBatch(group.names, group.keys, len(batch), b"".join(kept), len(kept))


def _plain(
    conn: Connection, sql: str, params: dict[str, Any], size: int, group: StagedGroup
) -> Iterator[RecordBatch]:
    for batch in fetch_batches(conn, sql, params, size, _CURSOR):
        if group.guessed:
            if not all(map(_LAST, batch)):
                raise GuessMissed(group.names)
            batch = [row[:-1] for row in batch]
        yield RecordBatch(group.names, group.keys, len(batch), rows=batch)


@contextmanager
def _casts_refused(conn: Connection, group: StagedGroup) -> Iterator[None]:
    """For a declared group, a value its declared type's cast refuses (a row the data model does
    not describe: staging written some other way) as `GuessMissed`, with the connection's
    transaction as it was before the read, so the caller can read the exact groups on it."""
    if not group.declared:
        yield
        return
    import psycopg

    raw = conn.connection.driver_connection
    assert raw is not None
    raw.execute("SAVEPOINT vedana_declared")
    try:
        yield
    except psycopg.DataError:
        raw.execute("ROLLBACK TO SAVEPOINT vedana_declared")
        raise GuessMissed(group.names) from None
    raw.execute("RELEASE SAVEPOINT vedana_declared")
