"""`vedana mcp --http PORT` serves on 127.0.0.1:PORT and says where, once it listens; a port in
use is one line naming it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from support.agent_kb import data_model, load_graph, save
from vedana.stores.graph import GraphStore


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def env(graph: GraphStore, pg_engine: Any) -> dict[str, str]:
    """The session's home with the agent tests' small knowledge base synced and loaded."""
    save(pg_engine, data_model())
    load_graph(graph)
    return {k: v for k, v in os.environ.items() if not k.endswith("API_KEY") and k != "VEDANA_MCP_TOKEN"}


def test_a_bare_port_serves_on_loopback_and_says_where(env: dict[str, str]) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "vedana", "mcp", "--http", str(port), "--no-ask"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        line = server.stderr.readline()  # blocks until the server says it listens (or ends)
        assert line == f"serving MCP at http://127.0.0.1:{port}/mcp (Ctrl-C stops)\n", line
        deadline = time.monotonic() + 30
        while True:  # uvicorn starts answering right after the line
            try:
                reply = httpx.post(f"http://127.0.0.1:{port}/mcp", json={}, timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and server.poll() is None
                time.sleep(0.2)
        assert reply.status_code in (400, 406)  # the MCP endpoint, refusing an empty message

        taken = subprocess.run(
            [sys.executable, "-m", "vedana", "mcp", "--http", f"127.0.0.1:{port}", "--no-ask"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert taken.returncode == 1
        assert taken.stderr == (
            f"error: cannot serve on 127.0.0.1:{port} (Address already in use); pick another with --http HOST:PORT\n"
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_port_off_loopback_still_needs_the_token(env: dict[str, str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "vedana", "mcp", "--http", "0.0.0.0:18767"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2
    assert (
        "vedana mcp --http 0.0.0.0:18767 is reachable from other machines: set VEDANA_MCP_TOKEN" in out.stderr
    )
