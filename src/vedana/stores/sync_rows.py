"""What the last data sync made of each source row (`sync_rows`), for the next sync's diff.

Per data table of the synced document: every source row's key (the row id the source gives), a
64-bit digest of the row as read, and its outcome (the staging keys it produced, as
`etl/resync.py` spells them). Stored packed, one Postgres row per table, and written in the sync's
own transaction, so a failed sync leaves the previous rows and staging together. One document's
rows are kept at a time; the summary the next sync needs (`STATE_KEY`) sits in `vedana_state`.
"""

from __future__ import annotations

import json
import struct
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Connection

STATE_KEY = "sync.rows"
_ROW_SEPARATOR = "\x1d"


@dataclass
class TableRows:
    """One table's source rows, in the order the source gave them."""

    keys: array  # array('q') of row keys
    low: array  # array('I'): each row's digest, two 32-bit halves
    high: array
    outcomes: list[str]
    # Positions that differ from the packed rows stored (kept beside them as a small patch, so a
    # re-sync of a few rows rewrites only those); None: store the rows packed anew.
    patched: set[int] | None = None
    # The outcomes as runs already packed (`pack_outcomes`), in order, instead of `outcomes`: a
    # first sync's link tables, one string per run of rows rather than per row.
    packed: list[str] | None = None


def pack_outcomes(outcomes: list[str]) -> str:
    """A run of outcomes as stored: packed runs joined by the same separator give the table's."""
    return _ROW_SEPARATOR.join(outcomes)


def unpack_outcomes(packed: str) -> list[str]:
    return packed.split(_ROW_SEPARATOR)


# A patch over this share of the rows is folded into the packed rows instead.
_PATCH_SHARE = 8


def rows_kept_for(conn: Connection, source: str) -> bool:
    """Whether the last data sync kept its rows, and of this source (a re-sync can use them)."""
    from vedana.stores.staging import get_state

    summary = get_state(conn, STATE_KEY)
    return bool(summary) and summary.get("source") == source


def load_rows(conn: Connection, source: str) -> tuple[dict[str, Any] | None, dict[str, TableRows]]:
    """The stored summary and rows of `source`, or (None, {}) when none are kept for it."""
    from vedana.stores.staging import get_state

    summary = get_state(conn, STATE_KEY)
    if not summary or summary.get("source") != source:
        return None, {}
    tables: dict[str, TableRows] = {}
    driver = conn.connection.driver_connection  # same transaction; binary results: bytea as is, not hex
    assert driver is not None
    with driver.cursor(binary=True) as cursor:
        found = cursor.execute(
            "SELECT table_name, row_keys, digests, outcomes, patch FROM sync_rows WHERE source = %s",
            (source,),
        ).fetchall()
    for name, keys, digests, outcomes, patch in found:
        packed = array("q")
        packed.frombytes(bytes(keys))
        halves = array("I")
        halves.frombytes(bytes(digests))
        n = len(packed)
        rows = TableRows(packed, halves[:n], halves[n:], outcomes.split(_ROW_SEPARATOR) if packed else [])
        rows.patched = set()
        for position, low, high, outcome in json.loads(patch) if patch else ():
            rows.low[position], rows.high[position] = low, high
            rows.outcomes[position] = outcome
            rows.patched.add(position)
        tables[name] = rows
    return summary, tables


def save_rows(conn: Connection, source: str, summary: dict[str, Any], tables: dict[str, TableRows]) -> None:
    """Replace what is kept with `tables` of `source` (and forget any other document's rows):
    as a patch over the packed rows where only a few changed, else packed anew."""
    from vedana.stores.staging import set_state

    repack = {}
    for name, rows in tables.items():
        if rows.patched is None or len(rows.patched) * _PATCH_SHARE > len(rows.keys):
            repack[name] = rows
            continue
        patch = [(i, rows.low[i], rows.high[i], rows.outcomes[i]) for i in sorted(rows.patched)]
        conn.exec_driver_sql(
            "UPDATE sync_rows SET patch = %s WHERE source = %s AND table_name = %s",
            (json.dumps(patch), source, name),
        )
    conn.exec_driver_sql(
        "DELETE FROM sync_rows WHERE source <> %s OR NOT table_name = ANY(%s) OR table_name = ANY(%s)",
        (source, list(tables), list(repack)),
    )
    _copy_packed(conn, source, repack)
    set_state(conn, STATE_KEY, {**summary, "source": source})


# COPY's binary format, written by hand so the outcomes field can go out a slice at a time.
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
_TRAILER = struct.pack("!h", -1)
_SLICE = 20_000  # outcomes encoded at a time


def _runs(rows: TableRows) -> Iterator[str]:
    """The table's outcomes a run at a time, packed: those packed already, else list slices."""
    if rows.packed is not None:
        yield from rows.packed
        return
    for i in range(0, len(rows.outcomes), _SLICE):
        yield pack_outcomes(rows.outcomes[i : i + _SLICE])


def _field(data: bytes) -> bytes:
    return struct.pack("!i", len(data)) + data


def _copy_packed(conn: Connection, source: str, tables: dict[str, TableRows]) -> None:
    """One row per table. A table's outcomes (tens of MB at 1M rows) are encoded and sent a slice
    at a time: never joined into one string, then its bytes, then a formatted row, all at once
    (~100 MB more at the peak of a 1M-row first sync)."""
    driver = conn.connection.driver_connection
    assert driver is not None
    separator = _ROW_SEPARATOR.encode()
    with (
        driver.cursor() as cursor,
        cursor.copy(
            "COPY sync_rows (source, table_name, row_keys, digests, outcomes) FROM STDIN (FORMAT BINARY)"
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
            copy.write(struct.pack("!h", 5) + _field(source.encode()) + _field(name.encode()))
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
        copy.write(_TRAILER)


def forget_rows(conn: Connection) -> None:
    """Keep nothing: the next sync normalises every row (staging changed some other way)."""
    from vedana.stores.staging import set_state

    conn.exec_driver_sql("DELETE FROM sync_rows")
    set_state(conn, STATE_KEY, {})
