"""The local-model service process: `python -m vedana.embeddings.model_server HOME [IDLE_S]`.

Listens where `service.socket_path(HOME)` says, answers JSON embed requests with the in-process
`LocalEmbedder`, one thread per connection, and exits after IDLE_S seconds with no request in
flight (see `service.py` for the protocol and the client)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from vedana.embeddings.service import DEFAULT_IDLE_S, key_file, pid_file, socket_path, tidy


def serve(home: Path, idle_s: float) -> None:
    from multiprocessing.connection import Listener

    home = home.expanduser().resolve()
    sock = socket_path(home)
    key = key_file(home).read_text().encode()
    state = _Activity()
    with contextlib.suppress(OSError):
        sock.unlink()
    listener = Listener(str(sock), family="AF_UNIX", authkey=key)
    pid_file(home).write_text(str(os.getpid()))

    def watchdog() -> None:
        while not state.idle_for(idle_s):
            time.sleep(min(1.0, idle_s / 4))
        tidy(home)
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    while True:
        try:
            conn = listener.accept()
        except (OSError, EOFError, ValueError):  # a client that failed the auth handshake
            continue
        state.begin()
        threading.Thread(target=_handle, args=(conn, state), daemon=True).start()


class _Activity:
    """Requests in flight and when the last one ended: a long load or batch is never idle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = 0
        self._last = time.monotonic()

    def begin(self) -> None:
        with self._lock:
            self._busy += 1

    def end(self) -> None:
        with self._lock:
            self._busy -= 1
            self._last = time.monotonic()

    def idle_for(self, seconds: float) -> bool:
        with self._lock:
            return self._busy == 0 and time.monotonic() - self._last >= seconds


def _handle(conn: Any, state: _Activity) -> None:
    try:
        _answer(conn)
    finally:
        state.end()


def _answer(conn: Any) -> None:
    from vedana.embeddings.local import LocalEmbedder
    from vedana.errors import VedanaError

    with conn:
        try:
            message = json.loads(conn.recv_bytes())
            vectors = LocalEmbedder(str(message["model"]), in_process=True).embed(list(message["texts"]))
            reply: dict[str, Any] = {"vectors": vectors}
        except VedanaError as exc:
            reply = {"error": str(exc)}
        except (EOFError, OSError):
            return
        except Exception as exc:  # the client shows it as one line
            reply = {"error": f"the model service failed: {type(exc).__name__}: {exc}"}
        with contextlib.suppress(OSError):
            conn.send_bytes(json.dumps(reply).encode())


if __name__ == "__main__":
    serve(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_IDLE_S)
