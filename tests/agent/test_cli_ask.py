"""`vedana ask` and `vedana cypher` through the real CLI app: output shape, redaction, no vectors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from standins.fake_llm import FakeLLM, answer, structured, tool_calls
from vedana.agent.tools import run_cypher
from vedana.cli.app import app
from vedana.config import reset_settings
from vedana.datamodel import DataModel
from vedana.errors import CypherWriteRefused
from vedana.stores.graph import GraphStore

OPENAI_SECRET = "sk-test-9f8e7d6c5b4a39281706"
GRIST_SECRET = "grist-key-0a1b2c3d4e5f60718293"
VECTOR = [0.123456789] * 384


@pytest.fixture
def cli_env(fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The environment a user would set: models behind an OpenAI-compatible base, real-looking keys."""
    for name in ("DB_CONN_URI", "MEMGRAPH_URI", "ENABLE_DM_FILTERING", "CYPHER_ROWS_LIMIT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MODEL", fake_llm.model("agent"))
    monkeypatch.setenv("FILTER_MODEL", fake_llm.model("filter"))
    monkeypatch.setenv("VEDANA_LLM_API_BASE", fake_llm.api_base)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    monkeypatch.setenv("GRIST_API_KEY", GRIST_SECRET)
    reset_settings()
    yield
    reset_settings()


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=True)


def script_quokka_run(fake_llm: FakeLLM) -> None:
    fake_llm.filter.append(
        structured(
            {
                "reasoning": "People and the animals they like.",
                "anchor_nouns": ["Person", "Animal", "Griffin"],
                "link_sentences": ["LIKES"],
                "anchor_attribute_names": [],
                "link_attribute_names": [],
                "query_ids": [1],
            }
        )
    )
    fake_llm.agent.append(
        tool_calls(
            ("vector_text_search", {"label": "Animal", "property": "name", "text": "quokkas"}),
            (
                "cypher",
                {
                    "query": "MATCH (p:Person)-[:LIKES]->(:Animal {id: 'a1'}) RETURN p.name AS name ORDER BY name"
                },
            ),
        )
    )
    fake_llm.agent.append(answer("Ada Okafor, Chen Wei and Dana Novak like quokkas."))


def test_ask_prints_the_answer_on_stdout_and_the_trace_on_stderr(
    cli_env: None, fake_llm: FakeLLM, indexed_kb: DataModel
) -> None:
    script_quokka_run(fake_llm)
    result = invoke("ask", "Who likes quokkas?")

    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Ada Okafor, Chen Wei and Dana Novak like quokkas.\n"
    trace = result.stderr
    assert "--- trace ---" in trace
    assert "openai/filter: kept 2/3 anchors, 1/2 links" in trace
    assert "ignored (not in the data model) anchor_nouns: Griffin" in trace
    assert "1. [round 1] vector_text_search Animal.name ≈ 'quokkas'" in trace
    assert "-> 1 hit: a1 0." in trace
    assert "2. [round 1] cypher MATCH (p:Person)-[:LIKES]->" in trace and "-> 3 rows in" in trace
    assert "openai/agent: 2 calls" in trace and "cost unknown" in trace
    assert "outside the LLM" in trace


def test_ask_json_is_one_document_with_answer_and_trace(
    cli_env: None, fake_llm: FakeLLM, indexed_kb: DataModel
) -> None:
    script_quokka_run(fake_llm)
    result = invoke("ask", "Who likes quokkas?", "--json")

    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {"question", "answer", "sources", "trace"}
    assert data["answer"] == "Ada Okafor, Chen Wei and Dana Novak like quokkas."
    # The vector hit is a source (the Cypher rows show names, no ids); the answer cites nothing.
    assert [(s["marker"], s["label"], s["id"], s["cited"]) for s in data["sources"]] == [
        ("[1]", "Animal", "a1", False)
    ]
    trace = data["trace"]
    assert set(trace) >= {
        "filter",
        "tool_calls",
        "llm_calls",
        "usage",
        "timings",
        "rounds",
        "finalized",
        "no_answer",
    }
    assert trace["filter"]["kept"]["anchors"] == 2 and trace["filter"]["total"]["anchors"] == 3
    assert trace["filter"]["ignored"] == {"anchor_nouns": ["Griffin"]}
    search, cypher = trace["tool_calls"]
    assert search["arguments"] == {"label": "Animal", "property": "name", "text": "quokkas"}
    assert search["hits"][0]["node_id"] == "a1" and isinstance(search["hits"][0]["score"], float)
    assert (cypher["rows"], cypher["truncated"], cypher["error"]) == (3, False, None)
    assert set(trace["timings"]) == {"total_s", "llm_s", "outside_llm_s", "import_s"}
    assert trace["timings"]["outside_llm_s"] >= trace["timings"]["import_s"] >= 0
    assert [c["purpose"] for c in trace["llm_calls"]] == ["filter", "agent", "agent"]
    assert result.stderr == ""  # nothing but the JSON document


def test_ask_json_no_trace_and_plain_no_trace(
    cli_env: None, fake_llm: FakeLLM, indexed_kb: DataModel
) -> None:
    fake_llm.agent.append(answer("Four."))
    fake_llm.agent.append(answer("Four."))
    result = invoke("ask", "How many people?", "--json", "--no-trace", "--no-filter")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"question": "How many people?", "answer": "Four.", "sources": []}
    result = invoke("ask", "How many people?", "--no-trace", "--no-filter")
    assert result.exit_code == 0 and result.stdout == "Four.\n" and result.stderr == ""
    assert fake_llm.filter_requests == []


def test_model_flags_override_the_environment(
    cli_env: None, fake_llm: FakeLLM, indexed_kb: DataModel
) -> None:
    fake_llm.filter.append({"content": "not json"})
    fake_llm.agent.append(answer("ok"))
    result = invoke("ask", "q", "--json", "--model", "openai/other", "--filter-model", "openai/picker")
    assert result.exit_code == 0, result.stderr
    assert [r["model"] for r in fake_llm.requests] == ["picker", "other"]
    assert json.loads(result.stdout)["trace"]["filter"]["fallback"] is True


def test_no_secret_and_no_vector_reaches_the_output(
    cli_env: None,
    fake_llm: FakeLLM,
    graph: GraphStore,
    indexed_kb: DataModel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graph.query("MATCH (p:Person {id: 'p1'}) SET p.embedding = $v", {"v": VECTOR})
    monkeypatch.setenv("VEDANA_CYPHER_SCHEMA_CHECK", "false")  # `embedding` is in no data model: let it run
    for _ in range(2):  # one human run, one --json run
        fake_llm.agent.append(
            tool_calls(
                ("cypher", {"query": "MATCH (p:Person {id: 'p1'}) RETURN p, p.embedding AS e"}),
                ("cypher", {"query": f"MATCH (p:Person) WHERE p.name = '{GRIST_SECRET}' RETURN p"}),
                ("vector_text_search", {"label": "Person", "property": "name", "text": "Ada"}),
            )
        )
        fake_llm.agent.append(answer(f"Ada. (my key is {OPENAI_SECRET})"))

    human = invoke("ask", "Who is p1?", "--no-filter")
    machine = invoke("ask", "Who is p1?", "--no-filter", "--json")

    assert human.exit_code == 0, human.stderr
    assert machine.exit_code == 0, machine.stderr
    assert (
        fake_llm.headers[0]["authorization"] == f"Bearer {OPENAI_SECRET}"
    )  # the real key went to the provider
    tool_texts = [m["content"] for m in fake_llm.agent_requests[1]["messages"] if m["role"] == "tool"]
    assert "<384 floats omitted>" in tool_texts[0] and "0.123456789" not in "".join(tool_texts)
    for stream in (human.stdout, human.stderr, machine.stdout, machine.stderr):
        assert OPENAI_SECRET not in stream and GRIST_SECRET not in stream
        assert "0.123456789" not in stream and "floats omitted" not in stream
    assert human.stdout == "Ada. (my key is ***)\n"
    data = json.loads(machine.stdout)
    assert data["answer"] == "Ada. (my key is ***)"
    assert (
        data["trace"]["tool_calls"][1]["arguments"]["query"]
        == "MATCH (p:Person) WHERE p.name = '***' RETURN p"
    )
    assert data["trace"]["tool_calls"][2]["hits"][0]["node_id"] == "p1"


def test_no_api_key_is_one_line_and_exit_code_1(tmp_path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("API_KEY") and k not in {"MODEL", "VEDANA_LLM_API_BASE"}
    }
    env["VEDANA_HOME"] = str(tmp_path / "home")
    out = subprocess.run(
        [sys.executable, "-m", "vedana", "ask", "Who likes quokkas?"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.startswith("error: no API key for model gpt-4.1-mini: set OPENAI_API_KEY")
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "home").exists()  # failed before starting any service


# -- vedana cypher ---------------------------------------------------------------------------------


def test_cypher_prints_rows_and_says_when_it_truncated(cli_env: None, kb: DataModel) -> None:
    result = invoke("cypher", "MATCH (p:Person) RETURN p.id AS id, p.age AS age ORDER BY id", "--limit", "2")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "id\tage\np1\t34\np2\t61\n"
    assert "2 rows in" in result.stderr and "truncated at 2 rows" in result.stderr


def test_cypher_renders_nodes_compactly(cli_env: None, kb: DataModel) -> None:
    result = invoke("cypher", "MATCH (p:Person {id: 'p1'})-[r:LIKES]->(a) RETURN p, r, a.name")
    assert result.exit_code == 0, result.stderr
    header, row = result.stdout.splitlines()
    assert header == "p\tr\ta.name"
    assert row == '(:Person {id: "p1", name: "Ada Okafor", age: 34})\t[:LIKES {since: 2015}]\tquokka'


def test_cypher_json_is_what_the_library_returns(cli_env: None, graph: GraphStore, kb: DataModel) -> None:
    query = "MATCH (a:Animal) RETURN a.name AS name ORDER BY name"
    result = invoke("cypher", query, "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    expected = run_cypher(graph, query, row_limit=200, timeout_s=10).to_dict()
    assert {k: v for k, v in data.items() if k != "elapsed_s"} == {
        k: v for k, v in expected.items() if k != "elapsed_s"
    }
    assert data["rows"] == [{"name": "axolotl"}, {"name": "capybara"}, {"name": "quokka"}]


def test_cypher_refuses_writes_and_leaves_the_graph_alone(
    cli_env: None, graph: GraphStore, kb: DataModel
) -> None:
    before = graph.counts()
    result = invoke("cypher", "MATCH (p:Person) /* tidy up */ DETACH DELETE p")
    assert result.exit_code == 1
    assert isinstance(result.exception, CypherWriteRefused)
    assert graph.counts() == before


def test_the_trace_on_a_terminal_is_rich_tables(
    cli_env: None, fake_llm: FakeLLM, indexed_kb: DataModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    script_quokka_run(fake_llm)
    result = invoke("ask", "Who likes quokkas?", "--json")
    assert result.exit_code == 0, result.stderr
    text = rich_trace(result.stdout, monkeypatch, width=140)
    assert "filter  openai/filter: kept 2/3 anchors" in text
    assert "ignored (not in the data model) anchor_nouns: Griffin" in text
    assert "│ vector_text_search │ Animal.name ≈ 'quokkas'" in text
    assert "1 hit: a1" in text and "3 rows" in text
    assert "openai/agent" in text and "openai/filter" in text


def test_the_terminal_trace_shows_queries_and_model_text_as_written(
    cli_env: None, fake_llm: FakeLLM, kb: DataModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Square brackets are Cypher, not rich markup: `[r:LIKES]` must not vanish and a model's
    `[/b]` must not crash the trace."""
    query = "MATCH (p:Person)-[r:LIKES]->(a) RETURN p.id, [x IN labels(a) | x] AS l ORDER BY p.id"
    fake_llm.filter.append(
        structured(
            {
                "reasoning": "People [/b] and [bold]animals[/bold].",
                "anchor_nouns": ["Person", "Animal", "[red]Griffin"],
                "link_sentences": ["LIKES"],
                "anchor_attribute_names": [],
                "link_attribute_names": [],
                "query_ids": [],
            }
        )
    )
    fake_llm.agent.append(
        tool_calls(("cypher", {"query": query}), ("cypher", {"query": "MATCH [/x] RETURN 1"}))
    )
    fake_llm.agent.append(answer("done"))
    result = invoke("ask", "Who likes what?", "--json")
    assert result.exit_code == 0, result.stderr
    text = rich_trace(result.stdout, monkeypatch, width=400)
    assert query in text  # whole, brackets included: a wide terminal shows the full query
    assert "reasoning: People [/b] and [bold]animals[/bold]." in text
    assert "anchor_nouns: [red]Griffin" in text
    assert "MATCH [/x] RETURN 1" in text and "error: " in text


def test_an_error_quoting_cypher_prints_as_written_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from vedana.cli import output

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    output.print_error("FalkorDB: Invalid input at MATCH (n)-[r:X]->(m) RETURN n [/x]")
    output.print_warning("skipped [/y] and [bold]z")
    text = re.sub(r"\x1b\[[0-9;]*m", "", screen.getvalue())  # colours off
    assert "error: FalkorDB: Invalid input at MATCH (n)-[r:X]->(m) RETURN n [/x]\n" in text
    assert "warning: skipped [/y] and [bold]z\n" in text


def test_cypher_table_on_a_terminal_shows_values_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from vedana.cli import cypher as cypher_command
    from vedana.cli import output

    screen = io.StringIO()
    monkeypatch.setattr(output, "stdout_console", lambda: Console(file=screen, width=200, color_system=None))
    cypher_command._print_table(["[b]col"], [{"[b]col": "[/x] and [red]y"}, {"[b]col": ["a", "[i]"]}])
    assert "[b]col" in screen.getvalue()
    assert "[/x] and [red]y" in screen.getvalue() and '["a", "[i]"]' in screen.getvalue()


def rich_trace(stdout: str, monkeypatch: pytest.MonkeyPatch, width: int) -> str:
    """The trace of an `ask --json` output as the terminal renderer draws it, without colours."""
    import io

    from rich.console import Console

    from vedana.cli import ask as ask_command
    from vedana.cli import output

    screen = io.StringIO()
    monkeypatch.setattr(
        output, "stderr_console", lambda: Console(file=screen, width=width, color_system=None)
    )
    ask_command._print_rich_trace(json.loads(stdout)["trace"])
    return screen.getvalue()
