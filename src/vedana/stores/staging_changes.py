"""Staging rows seen by the graph load: what changed between two versions, and which graph types
vedana owns. The only place the graph load's Postgres statements live."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine


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


def changed_types(conn: Connection, rows: VersionRange) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """(live, tombstone) staging rows in `rows` per table ("nodes", "edges"), and every node type
    and edge label among the live ones: one scan per table."""
    counts: dict[str, tuple[int, int]] = {}
    names: list[str] = []
    for table, column in (("nodes", "node_type"), ("edges", "edge_label")):
        found = conn.exec_driver_sql(
            f"SELECT {column}, count(*) FILTER (WHERE NOT deleted), count(*) FILTER (WHERE deleted) "
            f"FROM {table} WHERE {rows.where()} GROUP BY {column} ORDER BY {column}",
            rows.params(),
        ).all()
        counts[table] = (sum(int(live) for _, live, _ in found), sum(int(dead) for *_, dead in found))
        names += [name for name, live, _ in found if live]
    return counts, names


def changed_counts(conn: Connection, rows: VersionRange) -> dict[str, tuple[int, int]]:
    """(live, tombstone) staging rows in `rows`, per table ("nodes", "edges")."""
    return changed_types(conn, rows)[0]


@dataclass(frozen=True)
class ChangeBatch:
    """Up to a batch size of staging rows of one group: a node `(id, value of keys[0], ...)`, an
    edge `(from id, to id, value of keys[0], ...)`; a tombstone only its ids.

    `names` is `(node_type,)` or `(edge_label, from_node_type, to_node_type)`. A value is the
    attribute's JSON value, None where the row has none. `plain` says that every value is a
    string, an integer, a boolean or None (False: some may be maps, lists or other numbers)."""

    names: tuple[str, ...]
    deleted: bool
    keys: list[str]
    rows: list[tuple[Any, ...]]
    plain: bool


_GROUPS = {
    "nodes": (("node_type",), ("node_id",)),
    "edges": (("edge_label", "from_node_type", "to_node_type"), ("from_node_id", "to_node_id")),
}
# How a key's values are read, by what they all are. Postgres takes each value out of the jsonb
# (cheap) rather than writing the jsonb out as text for Python to parse (most of a read's cost).
_VALUE = {
    "str": "attributes->>%(k{i})s",
    "int": "(attributes->>%(k{i})s)::bigint",
    "bool": "(attributes->>%(k{i})s)::boolean",
    "json": "attributes->%(k{i})s",  # anything else: the JSON value, as Python's json reads it
}
_CURSOR = "vedana_graph_load"


@dataclass(frozen=True)
class StagedGroup:
    """The staging rows of one group in a range: `names` as in `ChangeBatch`, how many rows, and
    (live rows only) the attribute keys they hold, sorted, with what each key's values are
    (`kinds`: "str", "int", "bool" or "json", as `_kinds` says)."""

    names: tuple[str, ...]
    deleted: bool
    count: int
    keys: list[str]
    kinds: list[str]
    guessed: bool = False  # keys and kinds from a sample (`guessed_groups`): the read must check them
    declared: bool = False  # keys and kinds from the data model (`guessed_groups`'s `declared`)


KEY_SAMPLE_ROWS = 1000  # rows whose keys the edges' kinds pass starts from (GroupsAside)
SHARED_KEYS_MAX = 16  # keys a table's rows hold in all, at most, for one kinds pass over every group


def staged_groups(conn: Connection, table: str, rows: VersionRange) -> list[StagedGroup]:
    """Every group ("nodes": by type; "edges": by label and endpoint types; then by tombstone
    flag) of `table`'s rows in `rows`, in that order, with its count, keys and kinds.

    A pass per group reads the whole table when a group is too large a share of it for an index
    to pay off (people, 100k: two passes per group were half the full load's read). So when the
    table's rows hold few keys in all, two scans serve every group: the keys of all the live rows,
    then per group the count and, for each of those keys, the OR of a code per value
    (`_kind_code`, NULL for the rows without it). With many keys in all (many types, each with
    attributes of its own) a row would be asked for every other type's keys (~0.1 µs each):
    then each group's keys and kinds are asked of its own rows, as Postgres finds them."""
    if table not in _GROUPS:
        raise KeyError(f"no staging table {table!r}")
    # Each pass is a short scan that Postgres would share out among parallel workers; with the
    # graph and Python busy on the same cores, starting them cost more CPU than they saved
    # (0.65 -> 0.54 Postgres CPU-s for 194k rows). For the rest of this transaction only.
    conn.exec_driver_sql("SET LOCAL max_parallel_workers_per_gather = 0")
    keys = _keys(conn, table, f"{rows.where()} AND NOT deleted", rows.params())
    if len(keys) > SHARED_KEYS_MAX:
        return _groups_one_by_one(conn, table, rows)
    return _groups_coded(conn, table, rows.where(), rows.params(), keys, by_group=True)


GUESS_SAMPLE_ROWS = 1000  # rows of each group whose keys `guessed_groups` takes


# The JSON type of a declared attribute's values -> the kind `staging_bulk` encodes it by.
# An integer beyond 64 bits fails the "int" cast: the read then gives way to the exact groups.
_DECLARED_KINDS = {"string": "str", "integer": "int", "boolean": "bool", "number": "any"}

Declared = Callable[[tuple[str, ...]], dict[str, str | None] | None]


def guessed_groups(
    conn: Connection, table: str, rows: VersionRange, declared: Declared | None = None
) -> list[StagedGroup]:
    """The live groups of `table`'s rows in a full range `rows`, as `staged_groups` gives them,
    but with keys and kinds that no pass over every value found: one short scan for the counts,
    then for each group what `declared(names)` says its rows' attributes are (`declared`: each
    key with the JSON type `vedana.datamodel.dtypes.json_type` gives its values; None for a
    group it cannot vouch for) or else what a look at `GUESS_SAMPLE_ROWS` of its rows finds.

    A sampled key's kind is "any" (every value a string, number, boolean or null, for the read
    to encode by its own type), "json" for every key of a group whose sample holds a map or list.
    The read (`vedana.stores.staging_bulk`) checks every row of a sampled group against the
    guess. A declared group is the data model's promise, which the sync keeps (it casts every
    value by its attribute's dtype, and re-reads every row when the model changes): a key no
    row holds costs a null per row, and the read only checks what its casts would refuse."""
    if table not in _GROUPS:
        raise KeyError(f"no staging table {table!r}")
    group_cols, _ = _GROUPS[table]
    grouped = ", ".join(group_cols)
    conn.exec_driver_sql("SET LOCAL max_parallel_workers_per_gather = 0")  # see staged_groups
    live = f"{rows.where()} AND NOT deleted"
    groups = []
    for *names, count in _rows(
        conn,
        f"SELECT {grouped}, count(*) FROM {table} WHERE {live} GROUP BY {grouped} ORDER BY {grouped}",
        rows.params(),
    ):
        group = _declared_group(tuple(names), int(count), table, declared) if declared else None
        if group is not None:
            groups.append(group)
            continue
        params: dict[str, Any] = {**rows.params(), **{f"g{i}": name for i, name in enumerate(names)}}
        same_group = " AND ".join(f"{col} = %(g{i})s" for i, col in enumerate(group_cols))
        sample = f"SELECT attributes FROM {table} WHERE {live} AND {same_group} LIMIT {GUESS_SAMPLE_ROWS}"
        found = _rows(
            conn,
            "SELECT key, bool_or(jsonb_typeof(value) IN ('object', 'array')) "
            f"FROM ({sample}) AS sample, jsonb_each(attributes) GROUP BY key ORDER BY key",
            params,
        )
        held = [(key, nested) for key, nested in found if not (table == "nodes" and key == "id")]
        kind = "json" if any(nested for _, nested in held) else "any"
        keys = [key for key, _ in held]
        groups.append(StagedGroup(tuple(names), False, int(count), keys, [kind] * len(keys), guessed=True))
    return groups


def _declared_group(names: tuple[str, ...], count: int, table: str, declared: Declared) -> StagedGroup | None:
    types = declared(names)
    if types is None or None in types.values():
        return None  # not in the model, or a blank dtype: the source's own types
    keys = sorted(key for key in types if not (table == "nodes" and key == "id"))
    if any(types[key] == "list" for key in keys):
        kinds = ["json"] * len(keys)  # read as the load reads it, encoded by Python
    else:
        kinds = [_DECLARED_KINDS[types[key] or ""] for key in keys]
    return StagedGroup(names, False, count, keys, kinds, declared=True)


ANALYZE_SAMPLE_TARGET = 10  # statistics target of `analyze_if_never`: a 3,000-row sample


def analyze_if_never(conn: Connection) -> None:
    """Give the staging tables statistics if Postgres has none yet (an index run just after the
    first sync, before autovacuum came by), and commit: the full rebuild joins edges to nodes
    on other connections, and without statistics the planner took a group's edges for a row or
    two, and sorted or hashed them on disk (1M rows: 4-6 s a group instead of 2). A small sample
    of the columns those reads filter and join on is enough for that (0.03 s; every column at
    the default target took 0.2 s at 100k rows), and a column list leaves autovacuum's count
    of changes as it was, so it still analyzes the tables in full when it comes by. A table
    autovacuum is working on is skipped rather than waited for (up to a second, until it gives
    way)."""
    never = _rows(
        conn,
        "SELECT relname FROM pg_class WHERE oid IN ('nodes'::regclass, 'edges'::regclass) AND reltuples < 0",
        {},
    )
    if never:
        conn.exec_driver_sql(f"SET LOCAL default_statistics_target = {ANALYZE_SAMPLE_TARGET}")
        conn.exec_driver_sql(
            "ANALYZE (SKIP_LOCKED) nodes (node_type, node_id, deleted, version), "
            "edges (edge_label, from_node_type, to_node_type, from_node_id, to_node_id, deleted, version)"
        )
        conn.commit()


def _keys(
    conn: Connection, table: str, where: str, params: dict[str, Any], *, sample: int | None = None
) -> list[str]:
    """The attribute keys of `table`'s rows `where` says (of the first `sample` of them, if
    given), sorted; a node's `id` left out (the node id is its `id`)."""
    source = f"{table} WHERE {where}"
    if sample is not None:
        source = f"(SELECT attributes FROM {source} LIMIT {int(sample)}) AS sample"
    found = _rows(conn, f"SELECT DISTINCT jsonb_object_keys(attributes) FROM {source}", params)
    return sorted(key for (key,) in found if not (table == "nodes" and key == "id"))


def _groups_one_by_one(conn: Connection, table: str, rows: VersionRange) -> list[StagedGroup]:
    group_cols, _ = _GROUPS[table]
    grouped = ", ".join(group_cols)
    groups = []
    for *names, deleted, count in _rows(
        conn,
        f"SELECT {grouped}, deleted, count(*) FROM {table} WHERE {rows.where()} "
        f"GROUP BY {grouped}, deleted ORDER BY {grouped}, deleted",
        rows.params(),
    ):
        if deleted:
            groups.append(StagedGroup(tuple(names), True, int(count), [], []))
            continue
        params: dict[str, Any] = {**rows.params(), **{f"g{i}": name for i, name in enumerate(names)}}
        same_group = " AND ".join(f"{col} = %(g{i})s" for i, col in enumerate(group_cols))
        where = f"{rows.where()} AND NOT deleted AND {same_group}"
        keys = _keys(conn, table, where, params)
        kinds: list[str] = []
        if keys:
            [group] = _groups_coded(conn, table, where, params, keys, by_group=False)
            keys, kinds = group.keys, group.kinds
        groups.append(StagedGroup(tuple(names), False, int(count), keys, kinds))
    return groups


def _groups_coded(
    conn: Connection, table: str, where: str, params: dict[str, Any], keys: list[str], *, by_group: bool
) -> list[StagedGroup]:
    """The groups of `table`'s rows `where` says (all of them as one, named (), unless
    `by_group`), each with its count and the `keys` its live rows hold, with their kinds: one
    scan."""
    group_cols, _ = _GROUPS[table]
    grouped = ", ".join(group_cols) if by_group else ""
    params = {**params, **{f"k{i}": key for i, key in enumerate(keys)}}
    codes = "".join(f", bit_or({_kind_code(i)}) FILTER (WHERE NOT deleted)" for i in range(len(keys)))
    sql = f"SELECT {grouped}{', ' if by_group else ''}deleted, count(*){codes} FROM {table} WHERE {where}"
    if by_group:
        sql += f" GROUP BY {grouped}, deleted ORDER BY {grouped}, deleted"
    else:
        sql += " GROUP BY deleted"
    width = len(group_cols) if by_group else 0
    groups = []
    for row in _rows(conn, sql, params):
        names, (deleted, count), per_key = row[:width], row[width : width + 2], row[width + 2 :]
        held = (
            []
            if deleted
            else [(key, code) for key, code in zip(keys, per_key, strict=True) if code is not None]
        )
        groups.append(
            StagedGroup(
                tuple(names),
                bool(deleted),
                int(count),
                [key for key, _ in held],
                [
                    _KIND_BITS.get(code & ~_NULL_BIT, "json") if code & ~_NULL_BIT else "str"
                    for _, code in held
                ],
            )
        )
    return groups


T = TypeVar("T")


class _Aside(Generic[T]):
    """`ask(connection)` run by a thread on a connection of its own out of `engine`."""

    def __init__(self, engine: Engine, name: str, ask: Callable[[Connection], T]) -> None:
        self._answer: list[T] = []
        self._error: BaseException | None = None

        def run() -> None:
            try:
                with engine.connect() as own:
                    self._answer.append(ask(own))
                    own.rollback()
            except BaseException as exc:  # raised to the caller by `result`
                self._error = exc

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._answer[0]

    def join(self) -> None:
        """Wait for the thread without looking at its answer (a caller that stopped early)."""
        self._thread.join()


class GroupsAside:
    """`staged_groups(table, rows)` asked on connections of their own (out of `conn`'s engine)
    by threads, while the caller goes on reading other rows: the edges' scans then run beside the
    nodes' read and writes instead of holding up the first edge batch (a quarter of a full
    load's read at 100k rows). The rows are those of the caller's: the index holds the writer
    lock, so staging does not change between the connections' reads.

    With `race`, the kinds pass does not wait for the keys pass: it is asked for the keys of a
    sample of the rows while a third connection finds them all. When the sample held them all
    (the rows of a group share their columns), its answer is `staged_groups`' (a key no row holds
    gets no code); else the kinds are asked again for every key. With `sampled`, the answer is
    `guessed_groups`' (with `declared`). Both are for a full rebuild,
    whose graph (FalkorDB) waits for the edges (0.07 s sooner at 100k); an incremental load keeps
    FalkorDB busy with the nodes meanwhile, and a third busy backend only slowed it."""

    def __init__(
        self,
        conn: Connection,
        table: str,
        rows: VersionRange,
        *,
        race: bool = False,
        sampled: bool = False,
        declared: Declared | None = None,
    ) -> None:
        engine = conn.engine

        def ask(own: Connection) -> list[StagedGroup]:
            if table not in _GROUPS:
                raise KeyError(f"no staging table {table!r}")
            if sampled:
                analyze_if_never(own)
                return guessed_groups(own, table, rows, declared)
            if not race:
                return staged_groups(own, table, rows)
            own.exec_driver_sql("SET LOCAL max_parallel_workers_per_gather = 0")  # see staged_groups
            live = f"{rows.where()} AND NOT deleted"
            guess = _keys(own, table, live, rows.params(), sample=KEY_SAMPLE_ROWS)
            if not guess or len(guess) > SHARED_KEYS_MAX:
                return staged_groups(own, table, rows)
            every = _Aside(engine, f"keys-{table}", lambda third: _keys(third, table, live, rows.params()))
            try:
                groups = _groups_coded(own, table, rows.where(), rows.params(), guess, by_group=True)
                keys = every.result()
            finally:
                every.join()
            if set(keys) <= set(guess):
                return groups
            if len(keys) > SHARED_KEYS_MAX:
                return _groups_one_by_one(own, table, rows)
            return _groups_coded(own, table, rows.where(), rows.params(), keys, by_group=True)

        self._aside = _Aside(engine, f"staged-{table}", ask)

    def result(self) -> list[StagedGroup]:
        return self._aside.result()

    def join(self) -> None:
        """Wait for the thread without looking at its answer (a load that stopped early)."""
        self._aside.join()


def node_batches(
    conn: Connection, rows: VersionRange, size: int, groups: list[StagedGroup] | None = None
) -> Iterator[ChangeBatch]:
    """Node rows in `rows`, by type then tombstone flag, `size` at a time. A node's own `id`
    attribute is left out (the node id is its `id`). `groups`: `staged_groups`' answer, when
    the caller has it already."""
    return _batches(conn, "nodes", rows, size, groups)


def edge_batches(
    conn: Connection, rows: VersionRange, size: int, groups: list[StagedGroup] | None = None
) -> Iterator[ChangeBatch]:
    """Edge rows in `rows`, by label, endpoint types, then tombstone flag, `size` at a time."""
    return _batches(conn, "edges", rows, size, groups)


def _batches(
    conn: Connection, table: str, rows: VersionRange, size: int, groups: list[StagedGroup] | None
) -> Iterator[ChangeBatch]:
    """Each group's rows come from one query, a column per attribute key taken out of the jsonb
    as `staged_groups` found its values to be: a server-side cursor hands the rows over `size`
    at a time, as tuples the driver builds in C, in no particular order (the loads need none;
    sorting text ids cost more than the rest of the read)."""
    group_cols, id_cols = _GROUPS[table]
    if groups is None:
        groups = staged_groups(conn, table, rows)
    for group in groups:
        params: dict[str, Any] = {**rows.params(), "deleted": group.deleted}
        params.update({f"g{i}": name for i, name in enumerate(group.names)})
        params.update({f"k{i}": key for i, key in enumerate(group.keys)})
        same_group = " AND ".join(f"{col} = %(g{i})s" for i, col in enumerate(group_cols))
        where = f"{rows.where()} AND {same_group} AND deleted = %(deleted)s"
        columns = [*id_cols, *(_VALUE[kind].format(i=i) for i, kind in enumerate(group.kinds))]
        plain = "json" not in group.kinds
        sql = f"SELECT {', '.join(columns)} FROM {table} WHERE {where}"
        for batch in fetch_batches(conn, sql, params, size):
            yield ChangeBatch(group.names, group.deleted, group.keys, batch, plain)


_KIND_BITS = {1: "str", 2: "bool", 4: "int"}  # the one kind a key's values have, else "json"
_NULL_BIT = 32  # a JSON null: the key is there (a missing key gives SQL NULL, which bit_or skips)


def _kind_code(i: int) -> str:
    """A code per value of key `%(k{i})s`, OR-ed together over a group by `staged_groups`: one
    bit per kind of value ("int": every number whole and within 64 bits), so one pass tells
    whether all the values are of one kind (cheaper than a test per kind); NULL where the row has
    no such key, so a group holds the key when the OR is not NULL. A number is tested on its text
    (numeric's text has no exponent): no point and under 19 characters is whole and within 64
    bits; only a longer one is compared as a `numeric`, which extracts the value twice more."""
    value, text = f"(attributes->%(k{i})s)", f"(attributes->>%(k{i})s)"
    return (
        f"CASE jsonb_typeof({value}) WHEN 'string' THEN 1 WHEN 'boolean' THEN 2 "
        f"WHEN 'number' THEN CASE WHEN strpos({text}, '.') > 0 THEN 8 WHEN length({text}) < 19 THEN 4 "
        f"WHEN {text}::numeric BETWEEN -9223372036854775808 AND 9223372036854775807 THEN 4 ELSE 8 END "
        f"WHEN 'null' THEN {_NULL_BIT} WHEN 'object' THEN 16 WHEN 'array' THEN 16 END"
    )


def _rows(conn: Connection, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """`sql`'s rows, planned for these parameters every time: psycopg prepares a statement from
    its fifth run, and a generic plan does not know how narrow a version range or a group is
    (it scanned whole tables per batch at 1M rows)."""
    raw = conn.connection.driver_connection
    assert raw is not None
    return raw.execute(sql, params, prepare=False).fetchall()


def fetch_batches(
    conn: Connection, sql: str, params: dict[str, Any], size: int, cursor_name: str = _CURSOR
) -> Iterator[list[tuple[Any, ...]]]:
    """`sql`'s rows, `size` at a time, from a cursor on the server (in the connection's
    transaction), so Python never holds more than a batch and Postgres plans the statement for
    these parameters (a named cursor is never a prepared statement's generic plan). Binary: a
    bytea comes as bytes, with no text decoding."""
    raw = conn.connection.driver_connection
    assert raw is not None
    with raw.cursor(name=cursor_name, binary=True) as cursor:
        cursor.execute(sql, params)
        while batch := cursor.fetchmany(size):
            yield batch


def staged_type_counts(conn: Connection, *, edges: bool = True) -> tuple[dict[str, int], dict[str, int]]:
    """Live row count of every node type (and edge label, unless `edges=False`) staging has ever
    held, tombstone-only types included with 0."""

    def per_type(table: str, column: str) -> dict[str, int]:
        rows = conn.exec_driver_sql(
            f"SELECT {column}, count(*) FILTER (WHERE NOT deleted) FROM {table} "
            f"GROUP BY {column} ORDER BY {column}"
        )
        return {name: int(n) for name, n in rows}

    return per_type("nodes", "node_type"), per_type("edges", "edge_label") if edges else {}
