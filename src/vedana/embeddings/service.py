"""The local embedding model as a warm service under VEDANA_HOME, so a CLI process does not pay
the seconds of importing torch + sentence-transformers and loading the model.

`python -m vedana.embeddings.model_server HOME` listens on a unix socket (`HOME/model/model.sock`, or a
short dir under /tmp when that path is too long for a socket) with stdlib
`multiprocessing.connection`; messages are JSON bytes (never pickles): a request
`{"model": name, "texts": [...]}` gets `{"vectors": [...]}` or `{"error": message}`. It loads each
model on first request, serves connections in threads, and exits after VEDANA_MODEL_IDLE_S
seconds without a request. Clients start it on first need (a file lock serialises starters),
restart it after a crash, and fall back to loading the model in-process when it cannot start.

This module is the client side and the lifecycle: it imports neither torch nor sentence-transformers
(nor `local.py`); `model_server.py` is the process that does.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SERVICE = "model"
MODULE = "vedana.embeddings.model_server"  # the server process; imports the model code
SOCKET_NAME = "model.sock"
MAX_SOCKET_PATH = 107
DEFAULT_IDLE_S = 900.0
START_TIMEOUT_S = 30.0  # the socket comes up before the model loads; loading happens per request
REQUEST_TIMEOUT_S = 300.0


def service_dir(home: Path) -> Path:
    return home / SERVICE


def socket_path(home: Path) -> Path:
    preferred = service_dir(home) / SOCKET_NAME
    if len(os.fsencode(preferred)) <= MAX_SOCKET_PATH:
        return preferred
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"vedana-{digest}" / SERVICE / SOCKET_NAME


def pid_file(home: Path) -> Path:
    return service_dir(home) / "model.pid"


def key_file(home: Path) -> Path:
    return service_dir(home) / "authkey"


def _read_pid(home: Path) -> int | None:
    try:
        return int(pid_file(home).read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int | None, home: Path) -> bool:
    """Our server: the pid runs, is not a zombie, and its command line names this module and home."""
    import psutil

    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        cmdline = proc.cmdline()
        return proc.status() != psutil.STATUS_ZOMBIE and MODULE in cmdline and str(home) in cmdline
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
        return False


def model_status(home: Path) -> dict[str, Any]:
    """What runs where, in the shape of the other services' status (never starts the service)."""
    home = home.expanduser().resolve()
    pid = _read_pid(home)
    running = _alive(pid, home) and socket_path(home).exists()
    size = (
        sum(f.stat().st_size for f in service_dir(home).glob("*") if f.is_file())
        if service_dir(home).is_dir()
        else 0
    )
    return {
        "service": SERVICE,
        "running": running,
        "state": "running" if running else "stopped",
        "pid": pid if running else None,
        "socket": str(socket_path(home)) if running else None,
        "data_dir": str(service_dir(home)),
        "size_bytes": size,
    }


def stop_model_service(home: Path, timeout_s: float = 10.0) -> bool:
    """Stop the service of `home`; True if it was running."""
    import signal

    import psutil

    home = home.expanduser().resolve()
    pid = _read_pid(home)
    if not _alive(pid, home):
        tidy(home)
        return False
    assert pid is not None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
        psutil.Process(pid).wait(timeout_s)
    if _alive(pid, home):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    tidy(home)
    return True


def tidy(home: Path) -> None:
    for path in (socket_path(home), pid_file(home)):
        with contextlib.suppress(OSError):
            path.unlink()


def ensure_model_service(home: Path, idle_s: float = DEFAULT_IDLE_S) -> tuple[Path, bytes]:
    """The service's socket and auth key, starting it if it is not running (or has crashed)."""
    from filelock import FileLock

    home = home.expanduser().resolve()
    service_dir(home).mkdir(parents=True, exist_ok=True)
    sock = socket_path(home)
    with FileLock(str(home / f".{SERVICE}.lock"), timeout=START_TIMEOUT_S * 2):
        if not (_alive(_read_pid(home), home) and sock.exists()):
            tidy(home)
            sock.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            key = key_file(home)
            if not key.exists():
                key.touch(mode=0o600)
                key.write_text(secrets.token_hex(32))
            log = open(service_dir(home) / "model.log", "ab")  # noqa: SIM115 - the child owns it
            subprocess.Popen(
                [sys.executable, "-m", MODULE, str(home), str(idle_s)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # outlives this process, like the other embedded services
                cwd=service_dir(home),
            )
            log.close()
            deadline = time.monotonic() + START_TIMEOUT_S
            while not sock.exists():
                if time.monotonic() > deadline:
                    raise OSError(f"the model service did not come up in {START_TIMEOUT_S:.0f}s")
                time.sleep(0.05)
    return sock, key_file(home).read_text().encode()


def request(home: Path, model: str, texts: list[str], idle_s: float = DEFAULT_IDLE_S) -> list[list[float]]:
    """Embed `texts` with `model` in the service (started or restarted as needed). OSError when
    the service cannot be reached; an EmbeddingError the server reports is raised as such."""
    from multiprocessing.connection import Client

    from vedana.errors import EmbeddingError

    for attempt in range(2):
        sock, key = ensure_model_service(home, idle_s)
        try:
            with Client(str(sock), family="AF_UNIX", authkey=key) as conn:
                conn.send_bytes(json.dumps({"model": model, "texts": texts}).encode())
                if not conn.poll(REQUEST_TIMEOUT_S):
                    raise OSError("the model service did not answer in time")
                reply = json.loads(conn.recv_bytes())
        except (OSError, EOFError) as exc:
            if attempt:  # a crash between requests: restarted once above
                raise OSError(str(exc) or type(exc).__name__) from None
            with contextlib.suppress(OSError):
                stop_model_service(home)
            continue
        if "error" in reply:
            raise EmbeddingError(str(reply["error"]))
        return [list(map(float, v)) for v in reply["vectors"]]
    raise OSError("unreachable")
