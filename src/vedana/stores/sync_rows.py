"""What the last data sync made of each source row (`sync_rows`), for the next sync's diff.

Per data table of the synced document: every source row's key (the row id the source gives), a
64-bit digest of the row as read, and its outcome (the staging keys it produced, as
`etl/resync.py` spells them). Stored packed, one Postgres row per table, and written in the sync's
own transaction, so a failed sync leaves the previous rows and staging together. One document's
rows are kept at a time; the summary the next sync needs (`STATE_KEY`) sits in `vedana_state`.
"""

from __future__ import annotations

import json
from array import array
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


# A patch over this share of the rows is folded into the packed rows instead.
_PATCH_SHARE = 8


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


def _copy_packed(conn: Connection, source: str, tables: dict[str, TableRows]) -> None:
    driver = conn.connection.driver_connection
    assert driver is not None
    with (
        driver.cursor() as cursor,
        cursor.copy(
            "COPY sync_rows (source, table_name, row_keys, digests, outcomes) FROM STDIN (FORMAT BINARY)"
        ) as copy,
    ):
        copy.set_types(["text", "text", "bytea", "bytea", "text"])
        for name, rows in tables.items():
            digests = rows.low.tobytes() + rows.high.tobytes()
            copy.write_row((source, name, rows.keys.tobytes(), digests, _ROW_SEPARATOR.join(rows.outcomes)))


def forget_rows(conn: Connection) -> None:
    """Keep nothing: the next sync normalises every row (staging changed some other way)."""
    from vedana.stores.staging import set_state

    conn.exec_driver_sql("DELETE FROM sync_rows")
    set_state(conn, STATE_KEY, {})
