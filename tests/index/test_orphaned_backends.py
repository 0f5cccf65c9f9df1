"""After a `kill -9` of `vedana index`, its Postgres backend runs on with the writer lock and
table locks held. The next run ends such backends of dead vedana processes of this host (found
by their `application_name`), says so once, and proceeds; a live process's backend, and one of
another host, are left alone."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import psycopg
import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from vedana.cli.app import app
from vedana.config import reset_settings
from vedana.stores.backends import _host
from vedana.stores.staging import WRITER_LOCK_KEY

pytestmark = pytest.mark.slow

# Far longer than the test: were the orphan not ended, the watchdog below would have to.
WATCHDOG_S = 180.0


def dead_pid() -> int:
    """The pid of a process that has exited."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def conninfo(engine: Engine) -> str:
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


def backends(engine: Engine) -> set[int]:
    with psycopg.connect(conninfo(engine), autocommit=True) as conn:
        return {row[0] for row in conn.execute("SELECT pid FROM pg_stat_activity")}


def terminate(engine: Engine, backend: int) -> None:
    with psycopg.connect(conninfo(engine), autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (backend,))


@contextmanager
def sleeping_backend(engine: Engine, name: str, *, hold_locks: bool) -> Iterator[int]:
    """A backend named `name` busy in a long statement (as a killed vedana's would be), holding
    the writer lock and a lock on `nodes` inside its transaction when `hold_locks`."""
    conn = psycopg.connect(conninfo(engine), application_name=name)
    backend = conn.info.backend_pid
    if hold_locks:
        conn.execute(f"SELECT pg_advisory_lock({WRITER_LOCK_KEY})")
        conn.execute("LOCK TABLE nodes IN ACCESS EXCLUSIVE MODE")

    def sleep() -> None:
        with suppress(psycopg.Error):  # ended from outside
            conn.execute("SELECT pg_sleep(3600)")

    thread = threading.Thread(target=sleep, daemon=True)
    thread.start()
    try:
        yield backend
    finally:
        terminate(engine, backend)
        thread.join()
        conn.close()


def test_every_vedana_connection_names_its_process(shop: Engine) -> None:
    with shop.connect() as conn:
        name = conn.exec_driver_sql(
            "SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        )
        assert name.scalar_one().startswith(f"vedana:{os.getpid()}@{_host()}:")


def test_index_ends_the_backend_of_a_dead_vedana_and_proceeds(shop: Engine, graph) -> None:
    dead = dead_pid()
    live = subprocess.Popen(["sleep", "3600"])
    try:
        with (
            sleeping_backend(shop, f"vedana:{dead}@{_host()}:index", hold_locks=True) as orphan,
            sleeping_backend(shop, f"vedana:{live.pid}@{_host()}:index", hold_locks=False) as alive,
            sleeping_backend(
                shop, f"vedana:{dead_pid()}@not-{socket.gethostname()}:index", hold_locks=False
            ) as remote,
        ):
            watchdog = threading.Timer(WATCHDOG_S, terminate, (shop, orphan))
            watchdog.start()
            reset_settings()
            try:
                result = CliRunner().invoke(app, ["index"])
            finally:
                watchdog.cancel()
                reset_settings()

            assert result.exit_code == 0, result.output
            note = f"note: ended 1 orphaned Postgres backend of a dead vedana process (pid {dead})"
            assert result.stderr.count(note) == 1, result.stderr
            assert result.stdout.startswith("index: nodes +10 -0, edges +4 -0")
            still = backends(shop)
            assert orphan not in still
            assert alive in still and remote in still  # a live process's, another host's
    finally:
        live.kill()
        live.wait()
