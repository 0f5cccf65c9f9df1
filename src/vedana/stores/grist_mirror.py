"""The kept copy of a Grist document's data tables (`grist_rows`), and the state it is at.

A sync from the Grist API keeps every data row as `/sql` sent it, with the action hash the copy
corresponds to. The next sync asks Grist what changed since that hash and fetches only those rows;
the normaliser then reads every row from here. The copy is refreshed and committed in its own
transaction before the staging one (it stands for the document at its recorded hash whatever
staging holds), so a failed sync still leaves a correct copy; the sync reads it back through a
second connection while its own transaction streams COPYs into staging.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

STATE_KEY = "sync.grist_mirror"
_FETCH_ROWS = 2000


def mirror_state(conn: Connection, source: str) -> str | None:
    """The action hash the copy of `source` stands for, or None without a (complete) copy."""
    from vedana.stores.staging import get_state

    stored = get_state(conn, STATE_KEY) or {}
    return stored.get("state") if stored.get("source") == source else None


def set_mirror_state(conn: Connection, source: str, state: str | None) -> None:
    from vedana.stores.staging import set_state

    set_state(conn, STATE_KEY, {"source": source, "state": state})


def clear_mirror(conn: Connection) -> None:
    """Forget every kept row (a full read follows; one document's copy at a time is kept)."""
    conn.exec_driver_sql("DELETE FROM grist_rows")
    set_mirror_state(conn, "", None)


def copy_records(conn: Connection, source: str, table: str, records: Iterable[dict[str, Any]]) -> int:
    """Append the table's rows (none of them may be kept already); returns how many."""
    driver = conn.connection.driver_connection
    assert driver is not None
    count = 0
    with (
        driver.cursor() as cursor,
        cursor.copy("COPY grist_rows (source, table_id, row_id, record) FROM STDIN") as copy,
    ):
        for record in records:
            copy.write_row((source, table, int(record["id"]), json.dumps(record)))
            count += 1
    return count


def apply_changes(
    conn: Connection, source: str, table: str, removed: Iterable[int], records: Iterable[dict[str, Any]]
) -> None:
    """Drop the removed rows, then write the fetched ones over what is kept."""
    gone = list(removed)
    if gone:
        conn.exec_driver_sql(
            "DELETE FROM grist_rows WHERE source = %s AND table_id = %s AND row_id = ANY(%s)",
            (source, table, gone),
        )
    rows = [(source, table, int(r["id"]), json.dumps(r)) for r in records]
    if rows:
        driver = conn.connection.driver_connection
        assert driver is not None
        with driver.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO grist_rows (source, table_id, row_id, record) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (source, table_id, row_id) DO UPDATE SET record = EXCLUDED.record",
                rows,
            )


def drop_tables(conn: Connection, source: str, tables: Iterable[str]) -> None:
    names = list(tables)
    if names:
        conn.exec_driver_sql(
            "DELETE FROM grist_rows WHERE source = %s AND table_id = ANY(%s)", (source, names)
        )


def kept_tables(conn: Connection, source: str) -> set[str]:
    rows = conn.exec_driver_sql("SELECT DISTINCT table_id FROM grist_rows WHERE source = %s", (source,))
    return {table for (table,) in rows}


def count_records(engine: Engine, source: str, table: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM grist_rows WHERE source = %s AND table_id = %s", (source, table)
            ).scalar_one()
        )


def read_records(engine: Engine, source: str, table: str) -> Iterator[dict[str, Any]]:
    """The kept rows in row id order, streamed through a server-side cursor on a connection of
    its own (the sync's connection is busy with its COPYs)."""
    with engine.connect() as conn:
        driver = conn.connection.driver_connection
        assert driver is not None
        with driver.cursor(name="grist_rows_read") as cursor:
            cursor.itersize = _FETCH_ROWS
            cursor.execute(
                "SELECT record::text FROM grist_rows WHERE source = %s AND table_id = %s ORDER BY row_id",
                (source, table),
            )
            loads = json.loads
            for (text,) in cursor:
                yield loads(text)
        conn.rollback()
