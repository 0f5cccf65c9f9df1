"""A small OpenAI-compatible chat server that plays scripted replies, for tests.

Reached through litellm exactly like a real provider: model `openai/<name>`, `api_base` =
`server.api_base`, any api key. Two scripts: requests that carry a `response_format` (the
data-model filter's structured output) take the next `filter` reply, except the judge's of
`vedana eval` (a `verdict` schema), which take the next `judge` reply; every other request
takes the next `agent` reply. A script entry is a reply dict (see the helpers below) or a callable
`(request_body) -> reply`, which lets a test answer from what actually reached the model.
A reply with `delay_s` is sent that much later (a slow or hung provider). Every request body is
recorded in `requests` (and per purpose in `filter_requests` / `judge_requests` / `agent_requests`).
`imperfect_model(query)` is an agent script that makes a Cypher mistake and corrects it only from
the tool's error text, as a real model would have to.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from standins.loopback import LoopbackServer, OpenAICompatible

Reply = dict[str, Any]
Script = Reply | Callable[[dict[str, Any]], Reply]


def answer(text: str) -> Reply:
    """A final assistant message without tool calls."""
    return {"content": text}


def structured(payload: Any) -> Reply:
    """Structured output: the JSON text of `payload` as the message content."""
    return {"content": json.dumps(payload)}


def raw(text: str) -> Reply:
    """Content sent as-is (e.g. broken JSON for the filter)."""
    return {"content": text}


def tool_calls(*calls: tuple[str, dict[str, Any]], content: str | None = None) -> Reply:
    """One assistant message asking for several tool calls at once."""
    return {"content": content, "tool_calls": list(calls)}


def http_error(status: int, message: str) -> Reply:
    return {"status": status, "error": message}


def delayed(seconds: float, reply: Reply) -> Reply:
    """`reply`, sent after `seconds` (longer than the client's timeout: a hung provider)."""
    return {**reply, "delay_s": seconds}


def _is_judge(body: dict[str, Any]) -> bool:
    schema = (body.get("response_format") or {}).get("json_schema") or {}
    return schema.get("name") == "verdict"


class FakeLLM(OpenAICompatible):
    """Start with `with FakeLLM() as llm:`; script with `llm.filter.append(...)` / `llm.agent.append(...)`."""

    def __init__(self, measure: Callable[[Any], int] | None = None) -> None:
        # The characters a request's messages or a reply count as (usage is ~4 a token): their
        # JSON text, unless the caller measures otherwise (the README's outputs leave out call ids).
        self._measure = measure or (lambda value: len(json.dumps(value)))
        self.filter: deque[Script] = deque()
        self.judge: deque[Script] = deque()
        self.agent: deque[Script] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._http = LoopbackServer(self._handler())

    # -- addressing (`with`, `api_base`: `OpenAICompatible`) ---------------------------------
    @staticmethod
    def model(name: str = "scripted") -> str:
        return f"openai/{name}"

    # -- what reached the model ----------------------------------------------------------------
    @property
    def filter_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if "response_format" in r and not _is_judge(r)]

    @property
    def judge_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if _is_judge(r)]

    @property
    def agent_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if "response_format" not in r]

    # -- serving -------------------------------------------------------------------------------
    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if _is_judge(body):
                queue = self.judge
            else:
                queue = self.filter if "response_format" in body else self.agent
            if not queue:
                return http_error(500, "fake LLM: script exhausted")
            entry = queue[0]
            if not callable(entry):
                queue.popleft()
                return entry
        # A callable stays in place and answers every later request of its kind.
        return entry(body)

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        calls = reply.get("tool_calls") or []
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for name, args in calls
            ]
        prompt_chars = self._measure(body.get("messages", []))
        completion_chars = self._measure(message)
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            # Roughly 4 characters per token, so usage numbers move with what was sent.
            "usage": {
                "prompt_tokens": prompt_chars // 4,
                "completion_tokens": completion_chars // 4,
                "total_tokens": (prompt_chars + completion_chars) // 4,
            },
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a delayed reply past its timeout)

            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    # Header names are case-insensitive; clients differ in how they spell them.
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = fake._next_reply(body)
                if reply.get("delay_s"):
                    time.sleep(reply["delay_s"])
                if "error" in reply:
                    err = {"message": reply["error"], "type": "invalid_request_error"}
                    self._send(reply.get("status", 500), {"error": err})
                    return
                self._send(200, fake._completion(body, reply))

        return Handler


# -- an imperfect model: Cypher mistakes, corrected only from what the tool answers ------------------

# The fixes a refusal names: "did you mean `right`?" after "`wrong`", and "write `fixed`" after
# the fragment as written ("in `written`").
_MEANT = re.compile(r"`([^`]+)`[^`;]*?\(did you mean `([^`]+)`")
_REWRITE = re.compile(r"in `([^`]+)` \(write `([^`]+)`\)")


def corrected(query: str, error: str) -> str | None:
    """`query` with the fixes `error` names applied, as a model that reads the error would; None
    when the error names none (then the model gives up)."""
    fixed = query
    for written, rewrite in _REWRITE.findall(error):
        fixed = fixed.replace(written, rewrite)
    for wrong, right in _MEANT.findall(error):
        name = re.escape(wrong)  # as a label or type (`:x`), a property (`.x`) or a map key (`{x:`)
        fixed = re.sub(rf"(?<=[:.]){name}\b", right, fixed)
        fixed = re.sub(rf"([{{,]\s*){name}(\s*:)", rf"\g<1>{right}\g<2>", fixed)
    return fixed if fixed != query else None


def imperfect_model(query: str) -> Callable[[dict[str, Any]], Reply]:
    """An agent script that sends `query` (written with a typical mistake: a label in the wrong
    case, a misspelt type, a property that does not exist, an arrow the wrong way) to the cypher
    tool, sends it again corrected when the tool's error names a fix, and answers with the values
    of the rows it gets (every non-citation value, comma-separated; "Nobody." for none)."""

    def reply(body: dict[str, Any]) -> Reply:
        sent = [
            json.loads(call["function"]["arguments"])["query"]
            for m in body["messages"]
            if m["role"] == "assistant"
            for call in m.get("tool_calls") or []
        ]
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if not sent:
            return tool_calls(("cypher", {"query": query}))
        if results[-1].startswith("error:"):
            fixed = corrected(sent[-1], results[-1])
            return (
                tool_calls(("cypher", {"query": fixed})) if fixed else answer("I could not query the graph.")
            )
        rows = json.loads(results[-1])["rows"]
        values = [str(v) for row in rows for k, v in row.items() if k != "cite" and v is not None]
        return answer(", ".join(values) or "Nobody.")

    return reply
