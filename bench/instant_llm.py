"""An "instant" OpenAI-compatible chat model for measuring `ask` outside the LLM.

It answers `/v1/chat/completions` on 127.0.0.1 at once, reached through litellm like any provider
(`openai/<name>` with the server as api base). The conversation it plays is fixed:

- a request with `response_format` is the data-model filter: it gets the configured selection;
- an agent request whose last message is not a tool result gets the configured tool calls
  (all in one round, so they run side by side as a real model's would);
- an agent request that follows tool results gets the final answer.

So one `ask` = filter call + two agent calls + the tools, and everything but the three HTTP
round trips is the pipeline's own work.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from standins.loopback import LoopbackServer, OpenAICompatible


@dataclass
class Script:
    selection: dict[str, Any]  # the filter's structured output
    tool_calls: list[tuple[str, dict[str, Any]]]  # (tool name, arguments) of the one tool round
    answer: str = "Done."
    requests: int = field(default=0, init=False)


class InstantLLM(OpenAICompatible):
    """`with InstantLLM(script) as llm:` then point the settings at `llm.api_base` / `llm.model`."""

    model = "openai/instant"

    def __init__(self, script: Script) -> None:
        self.script = script
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._http = LoopbackServer(self._handler(), name="instant-llm")

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """The completion for one request body."""
        with self._lock:
            self.script.requests += 1
            call_id = next(self._ids)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        messages = body.get("messages") or [{}]
        if "response_format" in body:
            message["content"] = json.dumps(self.script.selection)
        elif messages[-1].get("role") == "tool" or not self.script.tool_calls:
            message["content"] = self.script.answer
        else:
            message["tool_calls"] = [
                {
                    "id": f"call_{call_id}_{n}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for n, (name, args) in enumerate(self.script.tool_calls)
            ]
        finish = "tool_calls" if "tool_calls" in message else "stop"
        return {
            "id": f"chatcmpl-{call_id}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model", "instant"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        llm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a hosted provider would allow
            # Headers and body leave in two writes; with Nagle on, the body waits for the client's
            # delayed ACK (~40 ms on loopback) and that wait would be counted as model time.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/").endswith("/chat/completions"):
                    status, payload = 200, llm.reply(body)
                else:
                    status, payload = 404, {"error": {"message": f"no route {self.path}"}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
