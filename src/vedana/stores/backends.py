"""The Postgres backends of vedana's processes: how they are named, and ending those of dead ones.

A backend notices that its client died only between statements: after a `kill -9`, it runs its
current statement to the end with every lock held (the writer lock, row and table locks), and
the next run waits on it or deadlocks with it. So every vedana connection names itself
`vedana:<pid>@<host>:<command>` (`application_name`), and before a run takes its lock
(`stores.staging.writer_lock`, `ops.lock.advisory_lock`) it ends the backends named after a pid
of this host that is no longer alive. Backends of other hosts are never touched: their pids
mean nothing here.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Connection

_NAME_MAX = 63  # Postgres keeps this many bytes of application_name
_NAMED = re.compile(r"^vedana:(\d+)@([^:]+):")
ORPHAN_WAIT_S = 10.0


def _host() -> str:
    # Short enough that pid, host and the separators always fit in the kept 63 bytes.
    return re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:40] or "localhost"


def _command() -> str:
    """The vedana command this process runs (`index`, `sync`, …), for people reading
    pg_stat_activity; only the pid and host are relied on."""
    words = [a for a in sys.argv[1:] if re.fullmatch(r"[a-z][a-z-]*", a)]
    return words[0] if words else os.path.basename(sys.argv[0] or "python")


def application_name() -> str:
    """`vedana:<pid>@<host>:<command>`: how this process's connections show in pg_stat_activity."""
    return f"vedana:{os.getpid()}@{_host()}:{_command()}"[:_NAME_MAX]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, alive
    return True


def end_orphaned_backends(conn: Connection, wait_s: float = ORPHAN_WAIT_S) -> dict[int, int]:
    """End the backends of vedana processes of this host that have died, and wait until they
    are gone; returns {backend pid: the dead vedana process's pid}. Commits."""
    rows = conn.exec_driver_sql(
        "SELECT pid, application_name FROM pg_stat_activity "
        "WHERE left(application_name, 7) = 'vedana:' AND pid <> pg_backend_pid()"
    ).all()
    conn.commit()
    host, orphans = _host(), {}
    for backend, name in rows:
        match = _NAMED.match(name or "")
        if match and match.group(2) == host and not _alive(int(match.group(1))):
            orphans[int(backend)] = int(match.group(1))
    if not orphans:
        return {}
    from sqlalchemy.exc import DBAPIError

    for backend in list(orphans):
        try:
            ended = conn.exec_driver_sql("SELECT pg_terminate_backend(%s)", (backend,)).scalar()
            conn.commit()
        except DBAPIError:  # another role's backend, and this one may not signal it
            conn.rollback()
            ended = False
        if not ended:
            del orphans[backend]
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        # Each check in a transaction of its own: pg_stat_activity is read once per transaction.
        left = conn.exec_driver_sql(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (list(orphans),)
        ).scalar()
        conn.commit()
        if not left:
            break
        time.sleep(0.05)
    return orphans


def orphans_message(orphans: dict[int, int]) -> str:
    """ "ended 1 orphaned Postgres backend of a dead vedana process (pid 1234)"."""
    pids = sorted(set(orphans.values()))
    backends = (
        "1 orphaned Postgres backend" if len(orphans) == 1 else f"{len(orphans)} orphaned Postgres backends"
    )
    whose = "a dead vedana process (pid" if len(pids) == 1 else "dead vedana processes (pids"
    return f"ended {backends} of {whose} {', '.join(map(str, pids))})"
