"""An HTTP server on 127.0.0.1 at a free port, answering from a daemon thread: what every stand-in
(Grist, the LLMs, the embeddings server) runs its handler in."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"
