"""vedana's Postgres advisory locks, and who holds them.

The writer lock (`stores.staging.WRITER_LOCK_KEY`) is taken by sync and index for each write;
the run lock (here) by `vedana run` for its whole length, so runs on machines that share one
`DB_CONN_URI` exclude each other. Both are session locks: they die with the connection, so a
killed process never leaves one behind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Connection

RUN_LOCK_KEY = 0x7665_6472  # "vedr"; distinct from the writer and schema locks


def try_run_lock(conn: Connection) -> bool:
    """Take the run lock on this connection's session if free; commits."""
    got = bool(conn.exec_driver_sql(f"SELECT pg_try_advisory_lock({RUN_LOCK_KEY})").scalar())
    conn.commit()
    return got


def release_run_lock(conn: Connection) -> None:
    conn.exec_driver_sql(f"SELECT pg_advisory_unlock({RUN_LOCK_KEY})")
    conn.commit()


def held_locks(conn: Connection) -> set[str]:
    """Which of vedana's advisory locks some session holds now ("run", "writer"); read from
    pg_locks, so it sees holders on every machine and never takes a lock itself."""
    from vedana.stores.staging import WRITER_LOCK_KEY

    # A bigint key below 2**32 shows up as objid with classid 0.
    keys = {RUN_LOCK_KEY: "run", WRITER_LOCK_KEY: "writer"}
    rows = conn.exec_driver_sql(
        "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = 0"
    ).scalars()
    return {keys[k] for k in rows if k in keys}
