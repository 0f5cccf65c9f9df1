"""The embedded services' life: reuse, recovery after kill -9, one server under concurrent
starts, stale pid files, long paths, and one-line errors for an unusable VEDANA_HOME."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import sqlalchemy as sa

from vedana.errors import ServiceError
from vedana.stores.embedded_falkordb import ensure_falkordb, falkordb_status, stop_falkordb
from vedana.stores.embedded_postgres import data_dir, ensure_postgres, postgres_status, stop_postgres
from vedana.stores.embedded_runtime import wait_for_exit
from vedana.stores.graph_falkordb import FalkorGraph


def _select_one(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT 1").scalar_one()
    finally:
        engine.dispose()


def _live(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _postmasters(pgdata: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["name"] == "postgres" and "-D" in cmdline and str(pgdata) in cmdline:
            found.append(proc)
    return _live(found)


def _redis_servers(sock: Path) -> list[psutil.Process]:
    found = [
        p for p in psutil.process_iter(["name", "cmdline"]) if str(sock) in " ".join(p.info["cmdline"] or [])
    ]
    return _live(found)


def test_postgres_is_reused_and_recovers_from_kill_9(vedana_home: Path) -> None:
    url = ensure_postgres(vedana_home)
    pid = postgres_status(vedana_home)["pid"]
    assert ensure_postgres(vedana_home) == url and postgres_status(vedana_home)["pid"] == pid

    os.kill(pid, signal.SIGKILL)
    assert wait_for_exit(pid, 5)
    assert postgres_status(vedana_home)["running"] is False

    assert ensure_postgres(vedana_home) == url
    status = postgres_status(vedana_home)
    assert status["running"] and status["pid"] != pid
    assert _select_one(url) == 1
    assert len(_postmasters(data_dir(vedana_home))) == 1


def test_falkordb_keeps_data_across_stop_and_recovers_from_kill_9(vedana_home: Path) -> None:
    graph = FalkorGraph.embedded(vedana_home, graph_name="lifecycle")
    try:
        graph.query("MATCH (n) DETACH DELETE n")
        graph.query("CREATE (:Probe {id: 'kept'})")
        assert stop_falkordb(vedana_home) is True
        assert falkordb_status(vedana_home)["running"] is False

        ensure_falkordb(vedana_home)  # the snapshot written on stop is loaded again
        assert graph.query("MATCH (p:Probe) RETURN p.id AS id").rows == [{"id": "kept"}]

        # Written after the last snapshot, then persisted as `vedana index` does before it
        # records its writes as applied; a later write that was not persisted may be lost.
        graph.query("CREATE (:Probe {id: 'after-snapshot'})")
        graph.persist()
        pid = falkordb_status(vedana_home)["pid"]
        os.kill(pid, signal.SIGKILL)
        assert wait_for_exit(pid, 5)
        sock = ensure_falkordb(vedana_home)
        status = falkordb_status(vedana_home)
        assert status["running"] and status["pid"] != pid
        rows = graph.query("MATCH (p:Probe) RETURN p.id AS id ORDER BY id").rows
        assert rows == [{"id": "after-snapshot"}, {"id": "kept"}]
        assert len(_redis_servers(sock)) == 1
    finally:
        graph.close()


def test_stale_pid_files_naming_an_unrelated_live_process_are_recovered(vedana_home: Path) -> None:
    stop_postgres(vedana_home)
    stop_falkordb(vedana_home)
    pgdata = data_dir(vedana_home)
    # A pid reused by some other live process (here: this test process) after a crash.
    (pgdata / "postmaster.pid").write_text(f"{os.getpid()}\n{pgdata}\n0\n5432\n{pgdata}\n\n0 0\nready\n")
    (vedana_home / "falkordb" / "redis.pid").write_text(f"{os.getpid()}\n")
    leftover = subprocess.run(
        [sys.executable, "-c", _BIND_AND_EXIT, str(vedana_home / "falkordb" / "falkor.sock")]
    )
    assert leftover.returncode == 0 and (vedana_home / "falkordb" / "falkor.sock").exists()

    assert _select_one(ensure_postgres(vedana_home)) == 1
    ensure_falkordb(vedana_home)
    assert postgres_status(vedana_home)["pid"] not in (None, os.getpid())
    assert falkordb_status(vedana_home)["pid"] not in (None, os.getpid())


def test_pid_files_naming_a_server_of_another_home_leave_it_alone(fresh_home: Path, tmp_path: Path) -> None:
    """After a reboot a stale pid may belong to the same kind of server of another
    VEDANA_HOME: it must be neither taken for ours nor stopped."""
    import shutil

    others = []
    for name in ("postgres", "redis-server"):
        fake = tmp_path / name
        shutil.copy("/bin/sleep", fake)
        others.append(subprocess.Popen([str(fake), "60"], cwd=tmp_path))
    try:
        pgdata = data_dir(fresh_home)
        pgdata.mkdir(parents=True)
        pid = others[0].pid
        (pgdata / "postmaster.pid").write_text(f"{pid}\n{pgdata}\n0\n5432\n{pgdata}\n\n0 0\nready\n")
        (fresh_home / "falkordb").mkdir()
        (fresh_home / "falkordb" / "redis.pid").write_text(f"{others[1].pid}\n")
        assert postgres_status(fresh_home)["running"] is False
        assert falkordb_status(fresh_home)["pid"] is None

        assert _select_one(ensure_postgres(fresh_home)) == 1
        ensure_falkordb(fresh_home)
        assert postgres_status(fresh_home)["pid"] != others[0].pid
        assert falkordb_status(fresh_home)["pid"] != others[1].pid
        assert [p.poll() for p in others] == [None, None], "another home's server was signalled"
    finally:
        for proc in others:
            proc.kill()
            proc.wait()


# Leaves a socket file nobody listens on, as a crashed server does.
_BIND_AND_EXIT = (
    "import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(); s.close()"
)

_START_BOTH = """
import sys
from pathlib import Path
from vedana.stores.embedded_falkordb import ensure_falkordb
from vedana.stores.embedded_postgres import ensure_postgres
home = Path(sys.argv[1])
print(ensure_postgres(home))
print(ensure_falkordb(home))
"""


def test_concurrent_first_starts_in_a_long_home_start_one_server_each(fresh_home: Path) -> None:
    home = fresh_home / ("h" * 60) / ("o" * 60)  # too long for a unix socket path
    starters = [
        subprocess.Popen([sys.executable, "-c", _START_BOTH, str(home)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120)[0] for p in starters]
    try:
        assert [p.returncode for p in starters] == [0, 0]
        assert len(set(outputs)) == 1
        url, sock = outputs[0].split()
        short_dir = Path(tempfile.gettempdir())
        assert Path(sock).is_relative_to(short_dir) and not Path(sock).is_relative_to(home)
        assert f"host={short_dir}/vedana-" in url
        # The starters have exited; the servers outlive them, one of each.
        assert len(_postmasters(data_dir(home))) == 1
        assert len(_redis_servers(Path(sock))) == 1
        assert _select_one(ensure_postgres(home)) == 1
        assert str(ensure_falkordb(home)) == sock
    finally:
        stop_falkordb(home)
        stop_postgres(home)
    assert postgres_status(home)["running"] is False and falkordb_status(home)["running"] is False
    assert not Path(sock).parent.exists()  # the short socket dir under /tmp is tidied away


def test_a_first_start_killed_during_initdb_initialises_again(fresh_home: Path) -> None:
    """kill -9 of the whole process group (vedana and its initdb) halfway through the first
    start: the next command must get a complete cluster, not a data dir without databases."""
    starter = subprocess.Popen(
        [sys.executable, "-c", _START_POSTGRES, str(fresh_home)], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _initdb_running(fresh_home):
            time.sleep(0.005)
        time.sleep(0.2)  # into the bootstrap, with some files written
        os.killpg(starter.pid, signal.SIGKILL)
    finally:
        starter.wait(10)
    assert not (data_dir(fresh_home) / "PG_VERSION").exists(), "initdb is not done in a side directory"

    url = ensure_postgres(fresh_home)
    assert _select_one(url) == 1  # the "postgres" database exists
    assert not (fresh_home / "postgres.initdb").exists()


_START_POSTGRES = (
    "import sys; from pathlib import Path; from vedana.stores.embedded_postgres import ensure_postgres; "
    "ensure_postgres(Path(sys.argv[1]))"
)


def _initdb_running(home: Path) -> bool:
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "initdb" and str(home) in " ".join(proc.info["cmdline"] or []):
            return True
    return False


def test_a_postmaster_still_starting_is_waited_for_not_killed(
    fresh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A postmaster in long crash recovery ("starting" in postmaster.pid) outlives the start
    timeout of whoever launched it; the next command must not kill it and begin again."""
    import shutil

    from vedana.stores import embedded_postgres

    fake = tmp_path / "postgres"  # a process named like the postmaster, in its data dir
    shutil.copy("/bin/sleep", fake)
    pgdata = data_dir(fresh_home)
    pgdata.mkdir(parents=True)
    postmaster = subprocess.Popen([str(fake), "60"], cwd=pgdata)
    try:
        (pgdata / "postmaster.pid").write_text(
            f"{postmaster.pid}\n{pgdata}\n0\n5432\n{pgdata}\n\n0 0\nstarting\n"
        )
        monkeypatch.setattr(embedded_postgres, "START_TIMEOUT_S", 0.5)
        with pytest.raises(ServiceError, match="still starting"):
            ensure_postgres(fresh_home)
        assert postmaster.poll() is None, "a starting postmaster was killed"
    finally:
        postmaster.kill()
        postmaster.wait()


@pytest.mark.parametrize("ensure", [ensure_postgres, ensure_falkordb])
def test_unusable_home_is_a_one_line_service_error(tmp_path: Path, ensure) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(ServiceError) as raised:
        ensure(blocker / "home")
    message = str(raised.value)
    assert "\n" not in message
    assert "VEDANA_HOME" in message and str(blocker / "home") in message


def test_read_only_home_is_a_one_line_service_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes through mode bits; the not-a-directory case covers root")
    home = tmp_path / "ro"
    home.mkdir(mode=0o500)
    with pytest.raises(ServiceError, match="not writable"):
        ensure_falkordb(home)


# Holds the server's main thread for 1.2 s of CPU time, as a long write does (TIME is frozen
# inside a script, os.clock is not), longer than the 0.5 s a PING may take to be "up".
_BUSY_SCRIPT = "local start = os.clock() while os.clock() - start < 1.2 do end return 1"


def test_a_busy_falkordb_is_not_mistaken_for_a_dead_one(vedana_home: Path) -> None:
    sock = ensure_falkordb(vedana_home)
    pid = falkordb_status(vedana_home)["pid"]
    with socket.socket(socket.AF_UNIX) as blocker:
        blocker.connect(str(sock))
        blocker.sendall(_resp("EVAL", _BUSY_SCRIPT, "0"))  # no waiting for the reply
        time.sleep(0.2)
        assert ensure_falkordb(vedana_home) == sock  # no answer within its timeout: busy, not dead
        blocker.settimeout(60)
        assert blocker.recv(64).startswith(b":1")  # the script finished undisturbed
    status = falkordb_status(vedana_home)
    assert status["state"] == "running" and status["pid"] == pid


def _resp(*args: str) -> bytes:
    """One command in the Redis protocol."""
    parts = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        parts.append(f"${len(data)}\r\n".encode() + data + b"\r\n")
    return b"".join(parts)


def _hold_a_low_port() -> socket.socket:
    """Listen on a free port <= 32767 (FalkorDB's Bolt limit), like another server would."""
    for _attempt in range(50):
        holder = socket.socket()
        try:
            holder.bind(("0.0.0.0", random.randint(20000, 32767)))
        except OSError:
            holder.close()
            continue
        holder.listen()
        return holder
    pytest.fail("no free port found")


def test_a_busy_or_invalid_bolt_port_is_a_one_line_service_error(tmp_path: Path) -> None:
    with _hold_a_low_port() as holder:
        port = holder.getsockname()[1]
        with pytest.raises(ServiceError) as raised:
            ensure_falkordb(tmp_path / "home", bolt_port=port)
    assert str(raised.value) == f"port {port} is busy; choose a free Bolt port"
    with pytest.raises(ServiceError, match="1-32767"):
        ensure_falkordb(tmp_path / "home", bolt_port=40000)
    assert falkordb_status(tmp_path / "home")["running"] is False
