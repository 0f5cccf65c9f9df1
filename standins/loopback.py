"""An HTTP server on 127.0.0.1 at a free port, answering from a daemon thread: what every stand-in
(Grist, the LLMs, the embeddings server) runs its handler in."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class LoopbackServer:
    def __init__(self, handler: type[BaseHTTPRequestHandler], name: str | None = None) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        return f"http://127.0.0.1:{self._server.server_port}"


class OpenAICompatible:
    """Base of the stand-ins for OpenAI-compatible APIs (the LLMs, the embeddings server): `with`
    starts and stops the server in `_http`; `api_base` is its `/v1` root, as clients are given it."""

    _http: LoopbackServer

    def __enter__(self) -> Self:
        self._http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.stop()

    @property
    def api_base(self) -> str:
        return f"{self._http.url}/v1"
