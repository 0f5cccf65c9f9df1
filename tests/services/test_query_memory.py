"""A query past GRAPH_QUERY_MEMORY_MB is stopped by the embedded FalkorDB itself (its
QUERY_MEM_CAPACITY), the user and the agent get one clear line, and the server keeps answering
without holding on to the memory."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from support.agent_kb import data_model
from vedana.agent.tools import Toolbox
from vedana.cli.app import app
from vedana.config import Settings, default_query_memory_mb, get_settings, reset_settings
from vedana.errors import CypherError
from vedana.stores.embedded_falkordb import _client, socket_path
from vedana.stores.graph_factory import open_graph

CAP_MB = 32
# Builds a list far larger than the cap inside one expression (the report's query, a tenth of it).
HUGE = "UNWIND range(1, 10000000) AS x WITH collect(toString(x)) AS c RETURN size(c) AS n"


def server_rss_mb(home: Path) -> float:
    pid = int(_client(socket_path(home)).info("server")["process_id"])
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def capped_home(fresh_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("VEDANA_HOME", str(fresh_home))
    monkeypatch.setenv("GRAPH_QUERY_MEMORY_MB", str(CAP_MB))
    reset_settings()
    yield fresh_home
    reset_settings()


def test_vedana_cypher_stops_a_query_past_the_memory_cap(capped_home: Path) -> None:
    result = CliRunner().invoke(app, ["cypher", HUGE])

    assert isinstance(result.exception, CypherError), result.output  # main() prints it as one line
    message = str(result.exception)
    assert message.startswith(f"the query used too much memory (GRAPH_QUERY_MEMORY_MB={CAP_MB})"), message
    assert "\n" not in message and "mem consumption" not in message
    # The server set itself the cap, keeps answering, and let go of what the query held.
    sock = socket_path(capped_home)
    assert (
        _client(sock).execute_command("GRAPH.CONFIG", "GET", "QUERY_MEM_CAPACITY")[1] == CAP_MB * 1024 * 1024
    )
    after = CliRunner().invoke(app, ["cypher", "RETURN 1 AS one", "--json"])
    assert after.exit_code == 0, after.output
    assert json.loads(after.stdout)["rows"] == [{"one": 1}]
    assert server_rss_mb(capped_home) < 300


def test_the_agent_tool_is_told_in_one_line(capped_home: Path) -> None:
    settings = get_settings()
    graph = open_graph(settings)
    try:
        box = Toolbox(settings, data_model(), graph, vector_search=None)
        text, trace = box.run("cypher", json.dumps({"query": HUGE}), index=0, round_=1)
        assert text.startswith(f"error: the query used too much memory (GRAPH_QUERY_MEMORY_MB={CAP_MB})"), (
            text
        )
        assert trace.error is not None and "\n" not in text
        text, _ = box.run("cypher", json.dumps({"query": "RETURN 2 AS two"}), index=1, round_=1)
        assert json.loads(text)["rows"] == [{"two": 2}]
    finally:
        graph.close()


def test_the_default_cap_is_a_share_of_the_machine() -> None:
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    assert default_query_memory_mb() == max(64, min(1024, total_mb // 8))
    assert Settings().graph_query_memory_mb == default_query_memory_mb()
