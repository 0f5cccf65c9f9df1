"""Writing one sync's nodes and edges into the staging tables.

Rows stream to Postgres through COPY while the sync is still normalising the next ones: each
COPY stays open for the whole stream and every 128 KiB of formatted rows goes to the socket at
once, so Postgres ingests on its own core while Python normalises (two cores, both busy). The
sending happens on this thread: psycopg's queued writer thread, starved of the GIL by the
CPU-bound normalising, sent almost nothing until the stream ended, leaving Postgres idle for two
thirds of a 100k-row sync and all of its ingest to do at the end (that sync: 2.9 s, then 2.0 s).

Two ways in, both inside the caller's transaction (a failure anywhere leaves staging as it was):

- **First sync** (staging holds no row at all, not even a tombstone): the rows are COPYed straight
  into `nodes` / `edges` with versions numbered here from a block reserved on
  `staging_version_seq`. Nothing can be "changed" or "deleted", so no diff is needed; this is
  the engine's own bulk-load speed. Duplicate edges (the same key twice) must still collapse to
  the first one streamed: a 64-bit hash per key finds repeats; a repeat goes to a temp table
  instead, and at the end only the repeats whose key really is absent (a hash collision, not a
  duplicate) are inserted, first one streamed first, so the result is exact.
- **Later syncs**: the rows stream into transaction-temporary tables and the difference is applied
  by one set-based statement per table (hash joins on the primary keys comparing `row_hash`): new
  or changed rows are upserted with a fresh `version`, rows the source no longer has are
  tombstoned (`deleted = true`, new `version`), unchanged rows are not touched (see
  docs/architecture.md, staging contract).
- **Scoped** (a re-sync of the changed rows only, `etl/resync.py`): only those rows stream in,
  with the keys they produced before (`scope`); the diff reads just those keys (index probes),
  upserting what is new or different and tombstoning old keys that did not come in again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psycopg import Copy, Cursor
    from sqlalchemy import Connection

_EDGE_KEY = "edge_label, from_node_type, from_node_id, to_node_type, to_node_id"
_NODE_COLUMNS = "node_type, node_id, attributes, row_hash"
_EDGE_COLUMNS = f"{_EDGE_KEY}, attributes, row_hash"


@dataclass
class Counts:
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    duplicates: int = 0


@dataclass
class WriteResult:
    nodes: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    edges: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    version: int | None = None
    first_sync: bool = False  # rows went straight in: staging held nothing before


# COPY's text format: a backslash, tab, newline or carriage return inside a value is escaped.
# Rows are formatted here, a line per row, and sent in blocks (`_flush`): psycopg's `write_row`
# formats one row per call through its own machinery, 1.5 µs a row, a third of a first sync's
# writing at 100k rows.
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_BLOCK_CHARS = 1 << 17


def copy_text(value: str) -> str:
    """A text value as one field of COPY's text format."""
    # Four scans in C beat one regular expression search by 5x on the usual short texts.
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_COPY_ESCAPES)
    return value


def _copy_line(fields: tuple[str, ...]) -> str:
    """Fields joined into one line of COPY's text format (no newline)."""
    line = "\t".join(fields)
    if line.count("\t") != len(fields) - 1 or "\\" in line or "\n" in line or "\r" in line:
        line = "\t".join(map(copy_text, fields))
    return line


_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _made_once() -> Callable[[dict[str, Any]], str]:
    """`_ENCODER.encode`, with json's C encoder made once instead of on every call (which is half
    the cost of encoding a short dict). The C encoder is CPython's own, not public API: it is used
    only if it writes exactly what `_ENCODER` writes, and refuses NaN as `_ENCODER` does."""
    from json import encoder

    make = getattr(encoder, "c_make_encoder", None)
    if make is None:
        return _ENCODER.encode
    try:
        iterencode = make(
            None, _ENCODER.default, encoder.encode_basestring, None, ":", ",", True, False, False
        )
        probe = {"b": [1, 2.5, None, True, 1e16], "a": 'é\n"', "c": {"y": 1, "x": "z"}}
        if "".join(iterencode(probe, 0)) != _ENCODER.encode(probe):
            return _ENCODER.encode
        try:
            iterencode({"n": float("nan")}, 0)
            return _ENCODER.encode
        except ValueError:
            pass
    except TypeError:  # another signature in another Python
        return _ENCODER.encode
    return lambda attributes: "".join(iterencode(attributes, 0))


_encode = _made_once()


def _fast_once() -> Callable[[dict[str, Any]], str] | None:
    """orjson's encoder with sorted keys, a fifth of the time of `_encode` on the short dicts of
    text a sync writes (~90 ms of a 100k-row first sync), used only where it writes exactly what
    `_encode` writes: checked here on every character class json escapes, and used only on dicts
    whose values are all str, int, bool or None (`attributes_json`: floats keep json's notation)."""
    try:
        import orjson
    except ImportError:
        return None
    dumps, sort_keys = orjson.dumps, orjson.OPT_SORT_KEYS

    def encode(attributes: dict[str, Any]) -> str:
        return dumps(attributes, option=sort_keys).decode()

    probe = {
        "b": "".join(map(chr, range(0x30))) + '\x7f"\\/ é \u2028 \U0001f600 ',
        "a": [None],  # no lists on the fast path; here to see keys sorted around one
        "c": 2**63 - 1,
        "d": -(2**63),
        "é": True,
        "e": False,
        "f": None,
    }
    try:
        return encode if encode(probe) == _encode(probe) else None
    except TypeError:
        return None


_fast_encode = _fast_once()
# The only values orjson takes, by exact type: the same text as json's on them. Anything else
# takes json's own encoder: floats (its notation; NaN refused) and whatever may hold one (list,
# dict, tuple, their subclasses), and what json refuses but orjson would write its own way
# (datetime, date, UUID, Enum, dataclass): a TypeError still, not a text json never writes.
_FLAT = frozenset((str, int, bool, type(None)))


def attributes_json(attributes: dict[str, Any]) -> str:
    """Canonical JSON (sorted keys): equal attributes give equal text and so equal hashes."""
    if not attributes:
        return "{}"
    if _fast_encode is not None and _FLAT.issuperset(map(type, attributes.values())):
        try:
            return _fast_encode(attributes)  # no float: no exponent to write out
        except TypeError:  # an int past 64 bits, a lone surrogate: json's way below
            pass
    text = _encode(attributes)
    # A float Python writes with an exponent (1e+20, 1e-05) goes to jsonb as a plain number,
    # which keeps no point when the exponent is positive: read back it was an integer, and past
    # 64 bits a clamped one in the graph. Such rows are written again with those floats in
    # positional notation. The test for them is cheap; a string holding "e+" or "e-" merely
    # takes the longer way.
    if ("e+" in text or "e-" in text) and _EXPONENT.search(text):
        return _with_positional_floats(attributes)
    return text


_EXPONENT = re.compile(r"\de[+-]\d")


def _with_positional_floats(attributes: dict[str, Any]) -> str:
    """`_encode(attributes)` with every float (also inside a list) in positional notation with a
    point ("100000000000000000000.0"), which jsonb keeps as written: a placeholder string (NUL,
    which staging text never holds, and a number) goes in its place, then its text is swapped."""
    numbers: list[str] = []

    def swapped(value: Any) -> Any:
        if value.__class__ is float:
            numbers.append(_positional(value))
            return f"\x00{len(numbers) - 1}\x00"
        if value.__class__ is list:
            return [swapped(item) for item in value]
        return value

    text = _encode({key: swapped(value) for key, value in attributes.items()})
    for i, number in enumerate(numbers):
        text = text.replace(f'"\\u0000{i}\\u0000"', number, 1)
    return text


def _positional(number: float) -> str:
    """The float's shortest decimal text (`repr`), written out without an exponent, with a point."""
    text = format(Decimal(repr(number)), "f")
    return text if "." in text else f"{text}.0"


def row_hash(attributes_text: str) -> str:
    if attributes_text == "{}":
        return _EMPTY_HASH
    return hashlib.blake2b(attributes_text.encode("utf-8"), digest_size=16).hexdigest()


_EMPTY_HASH = hashlib.blake2b(b"{}", digest_size=16).hexdigest()

# Spotting repeated edge keys on a first sync: 2 bits per key in a 16 MiB filter, whatever the size
# (a set of the keys' hashes held ~80 bytes per edge: 150 MB at 1M data rows). Both bits are in
# the same byte (a blocked Bloom filter): one read and one write per edge, half the Python work of
# two separate bits, for more false "seen"s (1 in 2,700 keys at 170k edges, 1 in 200 at 2M), each
# of which only sends its row the exact, slower way (`_INSERT_REPEATS`).
# `_key_hash` has a name of its own so a test can force collisions.
_key_hash = hash
_FILTER_MASK = (1 << 24) - 1  # byte positions
_BIT_PAIRS = tuple((1 << a) | (1 << b) for a in range(8) for b in range(a + 1, 8))  # 28 of them


class StagingWriter:
    """`with StagingWriter(conn) as writer:` add every node, then every edge, then `apply()`.

    Nodes must all come before the first edge (each kind is one open COPY)."""

    def __init__(self, conn: Connection, *, scoped: bool = False) -> None:
        self.conn = conn
        # Scoped (a re-sync of the changed rows only, `etl/resync.py`): the diff covers only the
        # keys streamed in and the keys given to `scope`, never whole tables.
        self.scoped = scoped
        self._cursor: Cursor[Any] | None = None
        self._copy_context: AbstractContextManager[Copy] | None = None
        self._copy: Copy | None = None
        self._copying: str | None = None
        self._last_attributes: dict[str, Any] | None = None
        self._last_text, self._last_hash = "{}", _EMPTY_HASH
        self._last_cells = f"{{}}\t{_EMPTY_HASH}"  # the two last fields of the last edge's line
        self._lines: list[str] = []  # formatted rows not sent yet, `_chars` long in all
        self._chars = 0
        run = conn.exec_driver_sql
        # First sync: rows are numbered here, from a value the sequence gave us; `apply` moves the
        # sequence past the last one used. One round trip for both.
        empty, version = run(
            "SELECT NOT EXISTS (SELECT FROM nodes) AND NOT EXISTS (SELECT FROM edges),"
            " nextval('staging_version_seq')"
        ).one()
        self.first_sync = bool(empty)
        self._next_version = int(version)
        self._first_version = self._next_version
        self._new_nodes: Counter[str] = Counter()
        self._new_edges: Counter[str] = Counter()
        self._seen_edges = bytearray(_FILTER_MASK + 1) if self.first_sync else bytearray()
        self._repeat_rows: list[tuple[str, ...]] = []
        edge_table = "_sync_repeats" if self.first_sync else "_sync_edges"
        # `seq` orders repeated keys (the first streamed wins); a scoped write's keys are distinct
        # (`etl/resync.py` checks), so it goes without the column and the sequence behind it.
        seq = "" if scoped else "seq bigserial, "
        tables = [
            f"CREATE TEMP TABLE {edge_table} ({seq}edge_label text, from_node_type text,"
            " from_node_id text, to_node_type text, to_node_id text, attributes text, row_hash text)"
            " ON COMMIT DROP"
        ]
        if not self.first_sync:
            tables.append(
                "CREATE TEMP TABLE _sync_nodes (node_type text, node_id text, attributes text,"
                " row_hash text) ON COMMIT DROP"
            )
        if scoped and self.first_sync:
            raise ValueError("a scoped write needs staging rows to diff against")
        run("; ".join(tables))  # one round trip (no parameters: several statements may go at once)

    def __enter__(self) -> StagingWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        # On an error the open COPY is aborted with it; the caller's transaction rolls back.
        self._close_copy(kind, error, tb)

    # --- streaming ----------------------------------------------------------------------------

    def _open(self, kind: str) -> Copy:
        self._close_copy()
        driver = self.conn.connection.driver_connection  # the psycopg connection, same transaction
        assert driver is not None
        if self.first_sync:
            table = kind
            columns = (_NODE_COLUMNS if kind == "nodes" else _EDGE_COLUMNS) + ", version"
        else:
            table = f"_sync_{kind}"
            columns = _NODE_COLUMNS if kind == "nodes" else _EDGE_COLUMNS
        self._cursor = driver.cursor()
        self._copy_context = self._cursor.copy(f"COPY {table} ({columns}) FROM STDIN")
        self._copy = self._copy_context.__enter__()
        self._copying = kind
        return self._copy

    def _close_copy(
        self, kind: type[BaseException] | None = None, error: BaseException | None = None, tb: Any = None
    ) -> None:
        context, cursor = self._copy_context, self._cursor
        try:
            if context is not None:
                if kind is None and self._lines:
                    try:
                        self._flush()
                    except BaseException as exc:
                        context.__exit__(type(exc), exc, exc.__traceback__)
                        raise
                context.__exit__(kind, error, tb)
        finally:
            self._copy_context = self._copy = self._cursor = self._copying = None
            self._lines.clear()
            self._chars = 0
            if cursor is not None:
                cursor.close()

    def add_node(self, node_type: str, node_id: str, attributes: dict[str, Any]) -> None:
        if self._copying != "nodes":
            self._open("nodes")
        text = attributes_json(attributes)
        keys = _copy_line((node_type, node_id))
        if self.first_sync:
            line = f"{keys}\t{copy_text(text)}\t{row_hash(text)}\t{self._next_version}\n"
            self._next_version += 1
            self._new_nodes[node_type] += 1
        else:
            line = f"{keys}\t{copy_text(text)}\t{row_hash(text)}\n"
        self._lines.append(line)
        self._chars += len(line)
        if self._chars > _BLOCK_CHARS:
            self._flush()

    def add_edge(
        self,
        edge_label: str,
        from_node_type: str,
        from_node_id: str,
        to_node_type: str,
        to_node_id: str,
        attributes: dict[str, Any],
    ) -> None:
        if self._copying != "edges":
            self._open("edges")
        # An undirected edge comes twice in a row with the same attributes: encode them once.
        if attributes is not self._last_attributes:
            self._last_attributes = attributes
            self._last_text = attributes_json(attributes)
            self._last_hash = row_hash(self._last_text)
            self._last_cells = f"{copy_text(self._last_text)}\t{self._last_hash}"
        key = (edge_label, from_node_type, from_node_id, to_node_type, to_node_id)
        if not self.first_sync:
            line = f"{_copy_line(key)}\t{self._last_cells}\n"
        else:
            # Two bits of a fixed-size filter per key (a Bloom filter): a key seen before always
            # finds both set; a new key rarely does and then merely takes the exact, slower way.
            hashed = _key_hash(key)
            slot, bits = hashed & _FILTER_MASK, _BIT_PAIRS[(hashed >> 32) % 28]
            byte = self._seen_edges[slot]
            if byte & bits == bits:
                # A duplicate, or a new key the filter mistook for one.
                self._repeat_rows.append((*key, self._last_text, self._last_hash))
                return
            self._seen_edges[slot] = byte | bits
            line = f"{_copy_line(key)}\t{self._last_cells}\t{self._next_version}\n"
            self._next_version += 1
            self._new_edges[edge_label] += 1
        self._lines.append(line)
        self._chars += len(line)
        if self._chars > _BLOCK_CHARS:
            self._flush()

    def _flush(self) -> None:
        """Send the formatted lines as one block."""
        assert self._copy is not None
        self._copy.write("".join(self._lines))
        self._lines.clear()
        self._chars = 0

    def scope(self, nodes: Iterable[tuple[str, str]], edges: Iterable[tuple[str, ...]]) -> None:
        """Scoped writes: the keys the changed rows produced before; those not streamed in again
        are tombstoned. They go into the same temporary tables as the rows streamed, with no
        attributes and no hash (a table made and dropped for them cost more than its rows)."""
        self._close_copy()
        driver = self.conn.connection.driver_connection
        assert driver is not None
        # Each stream formatted here and sent as one block: `write_row` a key at a time cost more
        # than the statement (4 ms for a 1 % edit's 1,700 edge keys at 100k rows).
        with driver.cursor() as cursor:
            with cursor.copy("COPY _sync_nodes (node_type, node_id) FROM STDIN") as copy:
                copy.write("".join(f"{_copy_line(key)}\n" for key in nodes))
            with cursor.copy(f"COPY _sync_edges ({_EDGE_KEY}) FROM STDIN") as copy:
                copy.write("".join(f"{_copy_line(edge)}\n" for edge in edges))

    # --- applying -----------------------------------------------------------------------------

    def apply(self) -> WriteResult:
        """Finish the streams and write what they mean; returns the counts per type."""
        self._close_copy()
        result = WriteResult(first_sync=self.first_sync)
        if self.scoped:
            self._apply_scoped(result)
        elif self.first_sync:
            self._apply_first(result)
        else:
            self._apply_diff(result)
        result.version = self.conn.exec_driver_sql(
            "SELECT greatest((SELECT max(version) FROM nodes), (SELECT max(version) FROM edges))"
        ).scalar()
        return result

    def _apply_first(self, result: WriteResult) -> None:
        run = self.conn.exec_driver_sql
        self._seen_edges = bytearray()
        for kind, count in self._new_nodes.items():
            result.nodes[kind] = Counts(new=count)
        for label, count in self._new_edges.items():
            result.edges[label] = Counts(new=count)
        if self._repeat_rows:
            driver = self.conn.connection.driver_connection
            assert driver is not None
            with (
                driver.cursor() as cursor,
                cursor.copy(f"COPY _sync_repeats ({_EDGE_COLUMNS}) FROM STDIN") as copy,
            ):
                for row in self._repeat_rows:
                    copy.write_row(row)
            self._repeat_rows.clear()
            for label, inserted, streamed in run(_INSERT_REPEATS, (self._next_version,)):
                counts = result.edges[label]
                counts.new += inserted
                counts.duplicates += streamed - inserted
                self._next_version += inserted
        # Versions up to here are taken: the next writer continues after them.
        run("SELECT setval('staging_version_seq', %s)", (max(self._next_version - 1, self._first_version),))

    def _apply_diff(self, result: WriteResult) -> None:
        run = self.conn.exec_driver_sql
        # The incoming side holds every row of the source: hash joins beat index probes (which
        # the planner, without statistics on the temp tables, would pick), and a little more
        # memory keeps them from spilling to disk.
        run("SET LOCAL enable_nestloop = off")
        run("SET LOCAL work_mem = '64MB'")
        for kind, new, updated, unchanged, deleted in run(_DIFF_NODES):
            result.nodes[kind] = Counts(new=new, updated=updated, unchanged=unchanged, deleted=deleted)
        for label, new, updated, unchanged, deleted in run(_DIFF_EDGES):
            result.edges[label] = Counts(new=new, updated=updated, unchanged=unchanged, deleted=deleted)
        for label, streamed in run("SELECT edge_label, count(*) FROM _sync_edges GROUP BY edge_label"):
            counts = result.edges[label]
            counts.duplicates = streamed - (counts.new + counts.updated + counts.unchanged)

    def _apply_scoped(self, result: WriteResult) -> None:
        # No ANALYZE of the temp tables (9 ms of a 1 % edit's 30 ms in Postgres): unanalysed, the
        # planner sizes them from their pages, which is close enough to pick probes.
        run = self.conn.exec_driver_sql
        # A few keys: index probes into staging, never a scan of it, whatever the planner believes
        # of the tables' sizes (right after a first sync they have no statistics yet): a scan per
        # probed key would cost minutes at 100k rows.
        with _no_table_scans(self.conn):
            for kind, new, updated, deleted in run(_SCOPED_NODES):
                result.nodes[kind] = Counts(new=new, updated=updated, deleted=deleted)
            for label, new, updated, deleted in run(_SCOPED_EDGES):
                result.edges[label] = Counts(new=new, updated=updated, deleted=deleted)


@contextmanager
def _no_table_scans(conn: Connection) -> Iterator[None]:
    conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
    try:
        yield
    finally:
        conn.exec_driver_sql("SET LOCAL enable_seqscan = on")


def live_edges(conn: Connection, keys: list[tuple[str, ...]]) -> int:
    """How many of these edge keys staging holds live."""
    if not keys:
        return 0
    columns = list(zip(*keys, strict=True))
    with _no_table_scans(conn):
        found = conn.exec_driver_sql(
            f"SELECT count(*) FROM edges e JOIN unnest(%s::text[], %s::text[], %s::text[], %s::text[],"
            f" %s::text[]) AS k({_EDGE_KEY}) USING ({_EDGE_KEY}) WHERE NOT e.deleted",
            tuple(list(c) for c in columns),
        ).scalar_one()
    return int(found)


def live_edges_touching(
    conn: Connection, nodes: list[tuple[str, str]]
) -> set[tuple[str, str, str, str, str]]:
    """The keys of the live edges with one of these (node type, node id) at either end. One scan
    of `edges` (no index leads with an end), asked only when anchor rows went away."""
    if not nodes:
        return set()
    types, ids = (list(c) for c in zip(*nodes, strict=True))
    found = conn.exec_driver_sql(
        f"WITH gone AS (SELECT * FROM unnest(%s::text[], %s::text[]) AS g(node_type, node_id))"
        f" SELECT {_EDGE_KEY} FROM edges e WHERE NOT e.deleted AND ("
        f" (e.from_node_type, e.from_node_id) IN (SELECT node_type, node_id FROM gone)"
        f" OR (e.to_node_type, e.to_node_id) IN (SELECT node_type, node_id FROM gone))",
        (types, ids),
    )
    return {(a, b, c, d, e) for a, b, c, d, e in found}


# A repeat whose key is already in `edges` is a duplicate of a row streamed before it; the others
# (hash collisions) go in, the first streamed of each key winning, numbered after the COPYed rows.
_INSERT_REPEATS = f"""
WITH firsts AS (
    SELECT DISTINCT ON ({_EDGE_KEY}) r.*
    FROM _sync_repeats r
    WHERE NOT EXISTS (
        SELECT FROM edges e WHERE (e.edge_label, e.from_node_type, e.from_node_id, e.to_node_type,
        e.to_node_id) = (r.edge_label, r.from_node_type, r.from_node_id, r.to_node_type, r.to_node_id))
    ORDER BY {_EDGE_KEY}, seq
), written AS (
    INSERT INTO edges ({_EDGE_COLUMNS}, version)
    SELECT {_EDGE_KEY}, attributes::jsonb, row_hash,
           %s + row_number() OVER (ORDER BY seq) - 1
    FROM firsts
    RETURNING edge_label
)
SELECT r.edge_label, coalesce(w.inserted, 0), r.streamed
FROM (SELECT edge_label, count(*) AS streamed FROM _sync_repeats GROUP BY edge_label) r
LEFT JOIN (SELECT edge_label, count(*) AS inserted FROM written GROUP BY edge_label) w USING (edge_label)
"""


def _diff_sql(table: str, key: list[str], incoming: str) -> str:
    """One statement per table. A full join of the incoming rows with the live staging rows (on
    the primary key, one hash join) gives every row's fate: new or changed rows are upserted with
    a fresh version, live rows the source no longer has are tombstoned (found again by `ctid`),
    unchanged rows are left alone. The counts come from the same snapshot."""
    label = key[0]
    match = " AND ".join(f"t.{k} = s.{k}" for k in key)
    columns = ", ".join(key)
    return f"""
WITH diff AS (
    SELECT coalesce(s.{label}, t.{label}) AS {label}, {", ".join(f"s.{k} AS s_{k}" for k in key)},
           s.attributes, s.row_hash, t.row_hash AS old_hash, t.deleted AS was_deleted,
           t.ctid AS old_ctid, s.{key[-1]} IS NULL AS gone
    FROM ({incoming}) s
    FULL JOIN (SELECT ctid, * FROM {table}) t ON {match}
    WHERE s.{key[-1]} IS NOT NULL OR NOT t.deleted
), written AS (
    INSERT INTO {table} ({columns}, attributes, row_hash, deleted, version, updated_at)
    SELECT {", ".join(f"s_{k}" for k in key)}, attributes::jsonb, row_hash, false,
           nextval('staging_version_seq'), now()
    FROM diff
    WHERE NOT gone AND (old_hash IS NULL OR was_deleted OR old_hash <> row_hash)
    ON CONFLICT ({columns}) DO UPDATE SET
        attributes = EXCLUDED.attributes, row_hash = EXCLUDED.row_hash, deleted = false,
        version = EXCLUDED.version, updated_at = EXCLUDED.updated_at
), tombstoned AS (
    UPDATE {table} SET deleted = true, version = nextval('staging_version_seq'), updated_at = now()
    WHERE ctid = ANY (ARRAY(SELECT old_ctid FROM diff WHERE gone))
)
SELECT {label},
       count(*) FILTER (WHERE NOT gone AND (old_hash IS NULL OR was_deleted)),
       count(*) FILTER (WHERE NOT gone AND NOT was_deleted AND old_hash <> row_hash),
       count(*) FILTER (WHERE NOT gone AND NOT was_deleted AND old_hash = row_hash),
       count(*) FILTER (WHERE gone)
FROM diff GROUP BY {label}
"""


def _scoped_sql(table: str, key: list[str], incoming: str, scope: str) -> str:
    """The diff of a re-sync of changed rows only: the incoming rows are upserted when new or
    different, the scope's keys (what those rows produced before) that did not come in again
    are tombstoned; nothing else of the table is read. Counts per type: new, updated, deleted
    (unchanged ones are the type's live rows less those written, `etl/sync.py`)."""
    label = key[0]
    columns = ", ".join(key)
    match = " AND ".join(f"t.{k} = s.{k}" for k in key)
    return f"""
WITH diff AS MATERIALIZED (
    SELECT s.*, t.ctid AS old_ctid, t.row_hash AS old_hash, t.deleted AS was_deleted
    FROM ({incoming}) s LEFT JOIN {table} t ON {match}
), updated AS (
    -- Rows found are rewritten where they lie (by ctid: no second index probe, no conflict check);
    -- the incoming keys are distinct (`etl/resync.py` checks), so the rest are plain inserts.
    UPDATE {table} t SET attributes = d.attributes::jsonb, row_hash = d.row_hash, deleted = false,
        version = nextval('staging_version_seq'), updated_at = now()
    FROM diff d WHERE t.ctid = d.old_ctid AND (d.was_deleted OR d.old_hash <> d.row_hash)
), inserted AS (
    INSERT INTO {table} ({columns}, attributes, row_hash, deleted, version, updated_at)
    SELECT {columns}, attributes::jsonb, row_hash, false, nextval('staging_version_seq'), now()
    FROM diff WHERE old_hash IS NULL
), gone AS MATERIALIZED (
    -- Index probes for the few keys that did not come in again (a join would scan the table).
    SELECT t.ctid AS old_ctid
    FROM (SELECT DISTINCT * FROM {scope} g
          WHERE NOT EXISTS (SELECT FROM ({incoming}) i WHERE {" AND ".join(f"i.{k} = g.{k}" for k in key)})) s
    CROSS JOIN LATERAL (SELECT ctid FROM {table} t WHERE {match} AND NOT t.deleted) t
), tombstoned AS (
    UPDATE {table} SET deleted = true, version = nextval('staging_version_seq'), updated_at = now()
    WHERE ctid = ANY (ARRAY(SELECT old_ctid FROM gone))
    RETURNING {label}
), counted AS (
    SELECT {label}, (old_hash IS NULL OR was_deleted) AS is_new,
           (NOT was_deleted AND old_hash <> row_hash) AS is_updated, false AS is_gone
    FROM diff
    UNION ALL
    SELECT {label}, false, false, true FROM tombstoned
)
SELECT {label}, count(*) FILTER (WHERE is_new), count(*) FILTER (WHERE is_updated),
       count(*) FILTER (WHERE is_gone)
FROM counted GROUP BY {label}
"""


_DIFF_NODES = _diff_sql("nodes", ["node_type", "node_id"], "SELECT * FROM _sync_nodes")
# Duplicate edges collapse to the first one streamed (lowest seq), found by hashing, not sorting.
_DIFF_EDGES = _diff_sql(
    "edges",
    [c.strip() for c in _EDGE_KEY.split(",")],
    f"SELECT * FROM _sync_edges WHERE seq IN (SELECT min(seq) FROM _sync_edges GROUP BY {_EDGE_KEY})",
)
# A scoped write's temporary tables hold the rows streamed (with a hash) and the scope's keys
# (`StagingWriter.scope`: no hash).
_SCOPED_NODES = _scoped_sql(
    "nodes",
    ["node_type", "node_id"],
    "SELECT * FROM _sync_nodes WHERE row_hash IS NOT NULL",
    "(SELECT node_type, node_id FROM _sync_nodes WHERE row_hash IS NULL)",
)
_SCOPED_EDGES = _scoped_sql(
    "edges",
    [c.strip() for c in _EDGE_KEY.split(",")],
    "SELECT * FROM _sync_edges WHERE row_hash IS NOT NULL",
    f"(SELECT {_EDGE_KEY} FROM _sync_edges WHERE row_hash IS NULL)",
)
