"""The lock that keeps two `vedana run`s from writing at the same time.

Two layers, both released by the operating system or the database when a process dies, however
it dies (so there is never a stale lock to clean up by hand):

- a file lock under VEDANA_HOME, taken first, before any service is started or touched;
- a Postgres advisory lock on a key of its own, so runs on different machines that share one
  `DB_CONN_URI` exclude each other too.

The advisory lock's statements live in `vedana.stores.locks`. The writer lock of
`vedana.stores.staging` is a different key: sync and index take it for each
write, so a standalone `vedana sync` or `vedana index` still waits for a run's current phase.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vedana.errors import LockBusy
from vedana.stores.locks import RUN_LOCK_KEY, release_run_lock, try_run_lock

if TYPE_CHECKING:
    from sqlalchemy import Engine

__all__ = ["RUN_LOCK_KEY", "advisory_lock", "file_lock", "is_run_locked", "lock_path", "read_holder"]
LOCK_FILE = "run.lock"
HOLDER_FILE = "run.lock.json"  # who holds it: read only to say so when busy
POLL_S = 0.2


def lock_path(home: Path) -> Path:
    return home / LOCK_FILE


def _busy(holder: str, wait: float) -> LockBusy:
    waited = f"after waiting {wait:g} s" if wait > 0 else "without waiting"
    return LockBusy(
        f"another `vedana run` is in progress ({holder}); this one stopped {waited} and changed "
        "nothing: let cron try again, or pass --wait SECONDS to wait longer"
    )


def read_holder(home: Path) -> dict[str, Any] | None:
    """The pid/host/start time the current (or last) holder wrote, if readable."""
    try:
        return json.loads((home / HOLDER_FILE).read_text())
    except (OSError, ValueError):
        return None


def _describe_holder(home: Path) -> str:
    holder = read_holder(home)
    if not holder:
        return f"lock file {lock_path(home)}"
    return f"pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started_at')}"


@contextmanager
def file_lock(home: Path, wait: float) -> Iterator[None]:
    """Hold VEDANA_HOME's run lock; wait up to `wait` seconds for it, then raise `LockBusy`."""
    from filelock import FileLock, Timeout

    home.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path(home)), timeout=max(wait, 0.0))
    try:
        lock.acquire(poll_interval=min(POLL_S, max(wait, 0.01)))
    except Timeout:
        raise _busy(_describe_holder(home), wait) from None
    try:
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        with suppress(OSError):  # the lock itself is what matters; this file only informs
            (home / HOLDER_FILE).write_text(json.dumps(holder))
        yield
    finally:
        lock.release()


@contextmanager
def advisory_lock(
    engine: Engine, wait: float, on_notice: Callable[[str], None] | None = None
) -> Iterator[None]:
    """Hold the database's run lock on a dedicated connection for the duration; poll for up to
    `wait` seconds, then raise `LockBusy`. First ends the backends a dead vedana process left
    running (`stores.backends`); `on_notice` hears of it."""
    from vedana.stores.backends import end_orphaned_backends, orphans_message

    deadline = time.monotonic() + max(wait, 0.0)
    with engine.connect() as conn:
        orphans = end_orphaned_backends(conn)
        if orphans and on_notice is not None:
            on_notice(orphans_message(orphans))
        while True:
            if try_run_lock(conn):
                break
            if time.monotonic() >= deadline:
                raise _busy("it holds the database's run lock, possibly on another machine", wait)
            time.sleep(POLL_S)
        try:
            yield
        finally:
            release_run_lock(conn)


def is_run_locked(home: Path) -> bool:
    """True while some process holds VEDANA_HOME's run lock (a quick, non-blocking probe)."""
    from filelock import FileLock, Timeout

    if not lock_path(home).exists():
        return False
    probe = FileLock(str(lock_path(home)), timeout=0)
    try:
        probe.acquire()
    except Timeout:
        return True
    probe.release()
    return False
