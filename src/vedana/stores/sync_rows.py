"""What the last data sync made of each source row (`sync_rows`), for the next sync's diff.

Per data table of the synced document: every source row's key (the row id the source gives), a
64-bit digest of the row as read, and its outcome (the staging keys it produced, as
`etl/resync.py` spells them). Stored packed, one Postgres row per table, and written in the sync's
own transaction, so a failed sync leaves the previous rows and staging together. One document's
rows are kept at a time; the summary the next sync needs (`STATE_KEY`) sits in `vedana_state`.
"""

from __future__ import annotations

import copy
import json
import struct
from abc import ABC, abstractmethod
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from vedana.sources.base import KeptLines

STATE_KEY = "sync.rows"
_ROW_SEPARATOR = "\x1d"
# Between packed runs as stored, so a re-sync can hold the runs as they are (one string each)
# and unpack one when a row of it is read. Rows stored before it came are one run. Outcomes are
# printable (the recorder vouches), so neither separator can occur inside one.
_RUN_SEPARATOR = "\x1a"
_RUN_ROWS = 4096  # the most rows a run packed here holds


class KeptOutcomes(ABC):
    """A stored table's outcomes read like the list they stand for, one string per row, without
    holding that list: rows set are kept beside what is stored, the others read from it."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._set: dict[int, str] = {}

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, position: int) -> str:
        found = self._set.get(position)
        if found is not None:
            return found
        if not 0 <= position < self._count:
            raise IndexError(position)
        return self._stored(position)

    def __setitem__(self, position: int, outcome: str) -> None:
        if not 0 <= position < self._count:
            raise IndexError(position)
        self._set[position] = outcome

    def __iter__(self) -> Iterator[str]:
        return map(self.__getitem__, range(self._count))

    def copy(self) -> Self:
        """Another view of what is stored, with the rows set so far; setting rows in either
        leaves the other as it was."""
        other = copy.copy(self)
        other._set = dict(self._set)
        return other

    def oversized(self) -> bool:
        """Whether what is stored must be packed anew at the next save, whatever changed."""
        return False

    @abstractmethod
    def _stored(self, position: int) -> str:
        """The outcome stored for row `position` (within range, not set)."""

    @abstractmethod
    def extended(self, more: int) -> Self:
        """Another view (as `copy` makes) of these rows and `more` empty ones after them."""

    @abstractmethod
    def packed_runs(self) -> Iterator[str]:
        """The rows as they are now, as packed runs of at most `_RUN_ROWS` (`pack_outcomes`)."""


class PackedOutcomes(KeptOutcomes):
    """The outcomes held as the packed runs stored: a run is unpacked when one of its rows is read
    (one at a time). At 1M rows the runs take ~50 MB where one string per row took ~110 MB."""

    def __init__(self, runs: list[str], starts: array, count: int) -> None:
        super().__init__(count)
        self._runs = runs
        self._starts = starts  # array('q'): the position of each run's first row
        self._rows: list[str] = []  # the run unpacked last: its rows, their positions' range
        self._low = self._high = 0

    @classmethod
    def stored(cls, text: str, rows: int) -> PackedOutcomes:
        """The outcomes field as stored for `rows` rows: runs joined by the run separator (a
        single row's empty outcome is an empty field too, so the count decides)."""
        return cls.runs_of(text.split(_RUN_SEPARATOR) if rows else [])

    @classmethod
    def runs_of(cls, runs: list[str]) -> PackedOutcomes:
        starts, count = array("q"), 0
        for run in runs:
            starts.append(count)
            count += run.count(_ROW_SEPARATOR) + 1
        return cls(runs, starts, count)

    def oversized(self) -> bool:
        """Whether a run holds more rows than one packed here does (kept the way of old)."""
        return any(end - start > _RUN_ROWS for start, end in zip(self._starts, self._ends(), strict=True))

    def _ends(self) -> list[int]:
        """Where each run's rows end (the next run's start)."""
        return [*self._starts[1:], self._count] if self._runs else []

    def extended(self, more: int) -> PackedOutcomes:
        other = self.copy()
        if more > 0:
            other._runs = [*self._runs, pack_outcomes([""] * more)]
            other._starts = array("q", [*self._starts, self._count])
            other._count = self._count + more
        return other

    def _stored(self, position: int) -> str:
        if not self._low <= position < self._high:  # not in the run open (reads mostly go in order)
            run = bisect_right(self._starts, position) - 1
            self._rows = unpack_outcomes(self._runs[run])
            self._low = self._starts[run]
            self._high = self._low + len(self._rows)
        return self._rows[position - self._low]

    def __iter__(self) -> Iterator[str]:
        for rows in map(unpack_outcomes, self.packed_runs()):
            yield from rows

    def packed_runs(self) -> Iterator[str]:
        """Untouched runs as stored, the others packed anew."""
        ends = self._ends()
        changed = sorted(self._set)
        k = 0
        for run, start, end in zip(self._runs, self._starts, ends, strict=True):
            if (k == len(changed) or changed[k] >= end) and end - start <= _RUN_ROWS:
                yield run
                continue
            rows = unpack_outcomes(run)
            while k < len(changed) and changed[k] < end:
                rows[changed[k] - start] = self._set[changed[k]]
                k += 1
            # Cut to runs of the usual size (rows kept before runs were stored whole are one run).
            for i in range(0, len(rows), _RUN_ROWS):
                yield pack_outcomes(rows[i : i + _RUN_ROWS])


class ReorderedOutcomes(KeptOutcomes):
    """Kept outcomes read in another order: row i is the kept row `order[i]`, "" where that is -1
    (a line new to its file). What a re-sync holds for a file whose lines moved: 8 bytes a row
    beside the kept runs, where a list would hold a string per row (~100 MB at 1M rows)."""

    def __init__(self, kept: KeptOutcomes, order: array) -> None:
        super().__init__(len(order))
        self._kept, self._order = kept, order

    def extended(self, more: int) -> ReorderedOutcomes:
        other = self.copy()
        other._order = self._order + array("q", [-1]) * max(more, 0)
        other._count = len(other._order)
        return other

    def _stored(self, position: int) -> str:
        kept = self._order[position]
        return self._kept[kept] if kept >= 0 else ""

    def packed_runs(self) -> Iterator[str]:
        for start in range(0, self._count, _RUN_ROWS):
            yield pack_outcomes([self[i] for i in range(start, min(start + _RUN_ROWS, self._count))])


@dataclass
class TableRows:
    """One table's source rows, in the order the source gave them."""

    keys: array  # array('q') of row keys
    low: array  # array('I'): each row's digest, two 32-bit halves
    high: array
    outcomes: list[str] | KeptOutcomes
    # Positions that differ from the packed rows stored (kept beside them as a small patch, so a
    # re-sync of a few rows rewrites only those); None: store the rows packed anew (and, of rows
    # loaded, those whose next save must pack them anew).
    patched: set[int] | None = None
    # The outcomes as runs already packed (`pack_outcomes`), in order, instead of `outcomes`: a
    # first sync's link tables, one string per run of rows rather than per row.
    packed: list[str] | None = None
    # With a patch: the rows the stored fields hold, when rows were added after them since (a
    # file that grew at its end): the save adds those rows to the fields rather than packing
    # every row anew. None: the fields hold every row but the patched.
    stored: int | None = None
    # A CSV file's block checksums as read this time (`sources.base.KeptLines`), stored whole at
    # every save (a few bytes a row); None for other sources.
    blocks: array | None = None


def pack_outcomes(outcomes: list[str]) -> str:
    """A run of outcomes as stored: packed runs joined by the same separator give the table's."""
    return _ROW_SEPARATOR.join(outcomes)


def unpack_outcomes(packed: str) -> list[str]:
    return packed.split(_ROW_SEPARATOR)


# A patch over this share of the rows is folded into the packed rows instead.
_PATCH_SHARE = 8
# Outcomes fields up to this size are read whole; bigger ones a few runs at a time.
_INLINE = 16 << 20


def kept_lines(conn: Connection, source: str) -> dict[str, KeptLines] | None:
    """Of each table of `source` read from a CSV file, what the last sync kept of its lines
    (each line's digest, as patched since, and the file's block checksums), for a re-sync to
    check the file against before the rest is loaded (`load_rows(lines=)`); None when no rows
    are kept for `source`."""
    from vedana.sources.base import KeptLines
    from vedana.stores.staging import get_state

    summary = get_state(conn, STATE_KEY)
    if not summary or summary.get("source") != source:
        return None
    driver = conn.connection.driver_connection
    assert driver is not None
    with driver.cursor(binary=True) as cursor:
        found = cursor.execute(
            "SELECT table_name, octet_length(row_keys), digests, line_blocks, patch FROM sync_rows"
            " WHERE source = %s AND line_blocks IS NOT NULL",
            (source,),
        ).fetchall()
    lines = {}
    for name, key_bytes, digests, stored_blocks, patch in found:
        halves, blocks = array("I"), array("I")
        halves.frombytes(bytes(digests))
        blocks.frombytes(bytes(stored_blocks))
        n = key_bytes // array("q").itemsize
        if len(halves) != 2 * n:  # not what this code stores: `load_rows` reads it and says so
            continue
        low, high = halves[:n], halves[n:]
        for position, patched_low, patched_high, _ in json.loads(patch) if patch else ():
            low[position], high[position] = patched_low, patched_high
        lines[name] = KeptLines(low, high, blocks)
    return lines


def load_rows(
    conn: Connection, source: str, lines: dict[str, KeptLines] | None = None
) -> tuple[dict[str, Any] | None, dict[str, TableRows]]:
    """The stored summary and rows of `source`, or (None, {}) when none are kept for it. The
    digests of the tables in `lines` (`kept_lines`, read under the same writer lock, so the same
    rows) are not read again."""
    from vedana.stores.staging import get_state

    summary = get_state(conn, STATE_KEY)
    if not summary or summary.get("source") != source:
        return None, {}
    lines = lines or {}
    tables: dict[str, TableRows] = {}
    driver = conn.connection.driver_connection  # same transaction; binary results: bytea as is, not hex
    assert driver is not None
    with driver.cursor(binary=True) as cursor:
        # Fields up to _INLINE come whole (one round trip; split into runs here), bigger ones
        # split into runs by Postgres and streamed (`_stored_runs`).
        found = cursor.execute(
            "SELECT table_name, row_keys, CASE WHEN NOT table_name = ANY(%s) THEN digests END, patch,"
            " CASE WHEN octet_length(outcomes) <= %s THEN outcomes END FROM sync_rows WHERE source = %s",
            (list(lines), _INLINE, source),
        ).fetchall()
    big = [name for name, *_, outcomes in found if outcomes is None]
    runs = _stored_runs(driver, source, big) if big else {}
    for name, keys, digests, patch, outcomes in found:
        packed = array("q")
        packed.frombytes(bytes(keys))
        n = len(packed)
        if digests is None:
            low, high = lines[name].low, lines[name].high  # patched already
        else:
            halves = array("I")
            halves.frombytes(bytes(digests))
            low, high = halves[:n], halves[n:]
        if outcomes is not None:
            kept = PackedOutcomes.stored(outcomes, n)
        else:  # a single row's empty outcome is an empty field, which Postgres splits into no runs
            kept = PackedOutcomes.runs_of((runs.get(name) or [""]) if n else [])
        if len(kept) != n or len(low) != n or len(high) != n:  # not what this code stores
            return None, {}
        rows = TableRows(packed, low, high, kept)
        rows.patched = set()
        for position, patched_low, patched_high, outcome in json.loads(patch) if patch else ():
            if digests is not None:
                rows.low[position], rows.high[position] = patched_low, patched_high
            rows.outcomes[position] = outcome
            rows.patched.add(position)
        if kept.oversized():  # stored whole, before runs were: the next save cuts it into runs
            rows.patched = None
        tables[name] = rows
    return summary, tables


def _stored_runs(driver: Any, source: str, tables: list[str]) -> dict[str, list[str]]:
    """These tables' stored outcomes as their packed runs, split apart by Postgres and fetched a
    few dozen at a time: the fields whole (~50 MB at 1M rows), then their runs, then libpq's
    copy of them, all at once, had put ~150 MB on a re-sync's peak. In the select list, unnest
    yields a field's runs in order a value at a time (a FROM-clause unnest, or an ORDER BY, would
    gather them all in a tuplestore: temp files at 1M)."""
    runs: dict[str, list[str]] = {}
    with driver.cursor(name="vedana_kept_outcomes", binary=True) as cursor:
        cursor.itersize = 64
        cursor.execute(
            "SELECT table_name, unnest(string_to_array(outcomes, %s)) FROM sync_rows"
            " WHERE source = %s AND table_name = ANY(%s)",
            (_RUN_SEPARATOR, source, tables),
        )
        for table, run in cursor:
            runs.setdefault(table, []).append(run)
    return runs


def save_rows(conn: Connection, source: str, summary: dict[str, Any], tables: dict[str, TableRows]) -> None:
    """Replace what is kept with `tables` of `source` (and forget any other document's rows):
    as a patch over the packed rows where only a few changed, else packed anew."""
    from vedana.stores.staging import set_state

    repack = {}
    for name, rows in tables.items():
        stored = len(rows.keys) if rows.stored is None else rows.stored
        if rows.patched is None or len(rows.patched) * _PATCH_SHARE > len(rows.keys) or not stored:
            repack[name] = rows  # (a table that held no row has no field to add to)
            continue
        patch = json.dumps([(i, rows.low[i], rows.high[i], rows.outcomes[i]) for i in sorted(rows.patched)])
        if stored == len(rows.keys):
            conn.exec_driver_sql(
                "UPDATE sync_rows SET patch = %s, line_blocks = %s WHERE source = %s AND table_name = %s",
                (patch, _blocks(rows), source, name),
            )
        else:
            _add_rows(conn, source, name, rows, stored, patch)
    conn.exec_driver_sql(
        "DELETE FROM sync_rows WHERE source <> %s OR NOT table_name = ANY(%s) OR table_name = ANY(%s)",
        (source, list(tables), list(repack)),
    )
    _copy_packed(conn, source, repack)
    set_state(conn, STATE_KEY, {**summary, "source": source})


def _add_rows(conn: Connection, source: str, name: str, rows: TableRows, stored: int, patch: str) -> None:
    """Add the rows after the first `stored` to the table's stored fields, in Postgres: the keys
    and each digest half grow at their ends, the outcomes by runs of the rows added. Only those
    rows are sent, where packing every row anew sent them all (~0.5 s at 1M rows)."""
    added = range(stored, len(rows.keys))
    runs = [
        pack_outcomes([rows.outcomes[i] for i in range(start, min(start + _RUN_ROWS, added.stop))])
        for start in range(added.start, added.stop, _RUN_ROWS)
    ]
    low_bytes = 4 * stored  # the low halves come first, each 4 bytes
    conn.exec_driver_sql(
        "UPDATE sync_rows SET row_keys = row_keys || %(keys)s,"
        " digests = substring(digests FROM 1 FOR %(low_bytes)s) || %(low)s"
        " || substring(digests FROM %(low_bytes)s + 1) || %(high)s,"
        " outcomes = outcomes || %(outcomes)s, patch = %(patch)s, line_blocks = %(blocks)s"
        " WHERE source = %(source)s AND table_name = %(name)s",
        {
            "keys": rows.keys[stored:].tobytes(),
            "low": rows.low[stored:].tobytes(),
            "high": rows.high[stored:].tobytes(),
            "low_bytes": low_bytes,
            "outcomes": _RUN_SEPARATOR + _RUN_SEPARATOR.join(runs),
            "patch": patch,
            "blocks": _blocks(rows),
            "source": source,
            "name": name,
        },
    )


def _blocks(rows: TableRows) -> bytes | None:
    return rows.blocks.tobytes() if rows.blocks is not None else None


# COPY's binary format, written by hand so the outcomes field can go out a slice at a time.
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
_TRAILER = struct.pack("!h", -1)
_NULL = struct.pack("!i", -1)  # a field's length: none


def _runs(rows: TableRows) -> Iterator[str]:
    """The table's outcomes a run at a time, packed: those packed already, else list slices."""
    if rows.packed is not None:
        yield from rows.packed
        return
    if isinstance(rows.outcomes, KeptOutcomes):
        yield from rows.outcomes.packed_runs()
        return
    # Runs of the size a re-sync reads them in (a bigger one is cut, and the table stored anew).
    for i in range(0, len(rows.outcomes), _RUN_ROWS):
        yield pack_outcomes(rows.outcomes[i : i + _RUN_ROWS])


def _field(data: bytes) -> bytes:
    return struct.pack("!i", len(data)) + data


def _copy_packed(conn: Connection, source: str, tables: dict[str, TableRows]) -> None:
    """One row per table. A table's outcomes (tens of MB at 1M rows) are encoded and sent a slice
    at a time: never joined into one string, then its bytes, then a formatted row, all at once
    (~100 MB more at the peak of a 1M-row first sync)."""
    driver = conn.connection.driver_connection
    assert driver is not None
    separator = _RUN_SEPARATOR.encode()
    with (
        driver.cursor() as cursor,
        cursor.copy(
            "COPY sync_rows (source, table_name, row_keys, digests, outcomes, line_blocks)"
            " FROM STDIN (FORMAT BINARY)"
        ) as copy,
    ):
        copy.write(_SIGNATURE)
        for name, rows in tables.items():
            # The field's length goes first: each run is measured, then (made again and) sent.
            count = size = 0
            for text in _runs(rows):
                count += 1
                size += len(text) if text.isascii() else len(text.encode())
            size += len(separator) * max(count - 1, 0)
            keys, low, high = (memoryview(a).cast("B") for a in (rows.keys, rows.low, rows.high))
            copy.write(struct.pack("!h", 6) + _field(source.encode()) + _field(name.encode()))
            copy.write(struct.pack("!i", keys.nbytes))
            copy.write(keys)  # the arrays as they are, not copied to bytes first
            copy.write(struct.pack("!i", low.nbytes + high.nbytes))  # digests: low halves, then high
            copy.write(low)
            copy.write(high)
            copy.write(struct.pack("!i", size))
            for k, text in enumerate(_runs(rows)):
                if k:
                    copy.write(separator)
                copy.write(text.encode())
            blocks = _blocks(rows)
            copy.write(_NULL if blocks is None else _field(blocks))
        copy.write(_TRAILER)


def forget_rows(conn: Connection) -> None:
    """Keep nothing: the next sync normalises every row (staging changed some other way)."""
    from vedana.stores.staging import set_state

    conn.exec_driver_sql("DELETE FROM sync_rows")
    set_state(conn, STATE_KEY, {})
