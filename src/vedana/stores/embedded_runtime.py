"""What the embedded services share: a writable home, a start lock, short socket dirs, pid checks.

Each service is started on first need by whichever vedana process gets there first, detached
so it outlives that process, and found again by later processes through its pid file and socket.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from vedana.errors import ServiceError

# sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107
START_LOCK_TIMEOUT_S = 120.0


def prepare_home(home: Path) -> Path:
    """Create VEDANA_HOME if needed and prove it is writable (root ignores mode bits, so try it)."""
    home = home.expanduser().resolve()
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise ServiceError(
            f"VEDANA_HOME {home} is not writable ({exc.strerror or exc}); "
            "set VEDANA_HOME or --home to a writable directory"
        ) from None
    return home


@contextlib.contextmanager
def start_lock(home: Path, service: str) -> Iterator[None]:
    """Serialise detect-or-start of one service across processes and threads."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(home / f".{service}.lock"), timeout=START_LOCK_TIMEOUT_S)
    try:
        with lock:
            yield
    except Timeout:
        raise ServiceError(
            f"another vedana process has been starting {service} for {START_LOCK_TIMEOUT_S:.0f}s; "
            f"check `vedana services status` or remove {home / f'.{service}.lock'}"
        ) from None


def short_runtime_path(home: Path, service: str) -> Path:
    """/tmp/vedana-<hash of home>/<service>: where sockets go when their natural path is too long."""
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"vedana-{digest}" / service


def short_runtime_dir(home: Path, service: str, owner: tuple[int, int] | None = None) -> Path:
    """Create `short_runtime_path`; `owner` (uid, gid) hands it to the system user a server runs as."""
    path = short_runtime_path(home, service)
    base = path.parent
    allowed = {os.geteuid()} | ({owner[0]} if owner else set())
    for directory in (base, path):
        try:
            directory.mkdir(mode=0o700 if directory is path else 0o755, exist_ok=True)
            if directory is path and owner and directory.stat().st_uid != owner[0]:
                os.chown(directory, *owner)
        except OSError as exc:
            raise ServiceError(f"cannot create socket dir {directory} ({exc.strerror}); set TMPDIR") from None
        # Someone else's dir under /tmp could be a trap: only use our own.
        if directory.stat().st_uid not in allowed:
            raise ServiceError(f"socket dir {directory} belongs to another user; remove it and retry")
    return path


def remove_short_runtime_dir(home: Path, service: str) -> None:
    """Tidy /tmp after a stop: remove the service's short socket dir, and its parent, if empty."""
    path = short_runtime_path(home.expanduser().resolve(), service)
    for directory in (path, path.parent):
        with contextlib.suppress(OSError):
            directory.rmdir()


def socket_fits(path: Path) -> bool:
    return len(os.fsencode(path)) <= MAX_SOCKET_PATH


def socket_dir_for(
    preferred: Path, socket_name: str, home: Path, service: str, owner: tuple[int, int] | None = None
) -> Path:
    """`preferred` if a socket named `socket_name` fits there, else a short dir under /tmp."""
    if socket_fits(preferred / socket_name):
        return preferred
    return short_runtime_dir(home, service, owner)


def process_alive(pid: int | None, name_prefix: str, cwd: Path) -> bool:
    """True if `pid` runs (not a zombie), its process name starts with `name_prefix` and its
    working directory is `cwd` (both servers chdir to their data dir). So a pid reused after a
    crash or reboot by an unrelated process, or by the same server of another VEDANA_HOME,
    never counts as ours, and is never signalled."""
    import psutil

    if not pid or pid <= 0:
        return False
    try:
        proc = psutil.Process(pid)
        return (
            proc.status() != psutil.STATUS_ZOMBIE
            and proc.name().startswith(name_prefix)
            and Path(proc.cwd()) == cwd
        )
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
        return False


def socket_answers(path: Path, timeout_s: float = 1.0) -> bool:
    """True if something accepts connections on the unix socket `path`."""
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def send_signal(pid: int, sig: int) -> None:
    """Signal `pid`, which may have exited meanwhile."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def wait_for_exit(pid: int, timeout_s: float) -> bool:
    """Wait until `pid` is gone (or a zombie); True if it went away in time."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


def dir_size(path: Path) -> int:
    """Bytes used by the files under `path` (0 if it does not exist)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).lstat().st_size
    return total
