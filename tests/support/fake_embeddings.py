"""A small OpenAI-compatible embeddings server (POST /v1/embeddings) for tests.

Reached through litellm like a real provider: model `openai/<name>`, api_base `server.api_base`.
Vectors come from the hash embedder (deterministic, `dimensions` honoured, else `default_dim`).
`ignore_dimensions` makes it behave like a model that cannot shorten its vectors.
`failures` holds HTTP statuses to answer, one per request, before answering normally; every
request body is recorded in `requests`.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler
from typing import Any

from standins.loopback import LoopbackServer, OpenAICompatible
from vedana.embeddings.hashing import HashEmbedder


class FakeEmbeddings(OpenAICompatible):
    def __init__(self, default_dim: int = 24) -> None:
        self.default_dim = default_dim
        self.failures: deque[int] = deque()
        self.ignore_dimensions = False
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._http = LoopbackServer(self._handler())

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            status = self.failures.popleft() if self.failures else 200
        if status != 200:
            return status, {
                "error": {"message": f"scripted failure {status}", "type": "server_error", "code": status}
            }
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        embedder = HashEmbedder(
            int((not self.ignore_dimensions and body.get("dimensions")) or self.default_dim)
        )
        data = [
            {"object": "embedding", "index": i, "embedding": vector}
            for i, vector in enumerate(embedder.embed([str(t) for t in texts]))
        ]
        tokens = sum(len(str(t).split()) for t in texts)
        return 200, {
            "object": "list",
            "data": data,
            "model": body.get("model", ""),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/embeddings"):
                    status, payload = 404, {"error": {"message": f"no route {self.path}"}}
                else:
                    status, payload = fake._answer(body)
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        return Handler
