"""A key set in the environment never reaches any command's output or log (issue 2).

Every command runs as a real `vedana --debug` process (debug logging on, the widest output),
with Grist, LLM and database secrets in its environment, against the fake Grist server and
the scripted LLM server; stdout, stderr and every log file under VEDANA_HOME are searched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from standins.fake_grist import FakeGrist
from standins.fake_llm import FakeLLM, answer, structured, tool_calls
from support.sync_kb import DATA_DOC_ID, MODEL_DOC_ID, club_data, club_model

GRIST_KEY = "grist-key-5e4d3c2b1a09f8e7"
OPENAI_KEY = "sk-openai-0f1e2d3c4b5a6978"
DB_PASSWORD = "pg-pass-8a7b6c5d4e3f"


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeGrist, FakeLLM]]:
    with FakeGrist(club_model(), club_data(), api_key=GRIST_KEY) as grist, FakeLLM() as llm:
        yield grist, llm


def _env(grist: FakeGrist, llm: FakeLLM, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    for name in ("DB_CONN_URI", "MEMGRAPH_URI"):
        env.pop(name, None)
    env.update(
        VEDANA_HOME=str(home),
        GRIST_SERVER_URL=grist.url,
        GRIST_API_KEY=GRIST_KEY,
        GRIST_DATA_MODEL_DOC_ID=MODEL_DOC_ID,
        GRIST_DATA_DOC_ID=DATA_DOC_ID,
        OPENAI_API_KEY=OPENAI_KEY,
        MODEL=llm.model("agent"),
        FILTER_MODEL=llm.model("filter"),
        VEDANA_LLM_API_BASE=llm.api_base,
        EMBEDDINGS_MODEL="hash-64",
    )
    return env


def _vedana(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vedana", "--debug", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=300,
    )  # fmt: skip


def _assert_clean(text: str, what: str) -> None:
    for secret in (GRIST_KEY, OPENAI_KEY, DB_PASSWORD):
        assert secret not in text, f"{what} leaks a secret"


def test_no_command_prints_or_logs_a_secret(
    servers: tuple[FakeGrist, FakeLLM], vedana_home: Path, tmp_path: Path
) -> None:
    grist, llm = servers
    env = _env(grist, llm, vedana_home)
    llm.filter.append(structured({"reasoning": "all", "anchor_nouns": [], "link_sentences": [],
                                  "anchor_attribute_names": [], "link_attribute_names": [], "query_ids": []}))  # fmt: skip
    llm.agent.append(tool_calls(("cypher", {"query": "MATCH (n) RETURN count(n) AS n"})))
    llm.agent.append(answer("Counted."))

    commands = [
        ("sync",),
        ("index",),
        ("run",),
        ("runs", "--json"),
        ("cypher", "MATCH (n) RETURN labels(n)[0] AS label, count(*) AS n"),
        ("ask", "How many nodes are there?", "--json"),
        ("check", "--json"),
        ("services", "status", "--json"),
    ]
    for args in commands:
        out = _vedana(env, tmp_path, *args)
        assert out.returncode in (0, 1), f"vedana {' '.join(args)}: {out.stderr[-2000:]}"
        _assert_clean(out.stdout + out.stderr, f"vedana {' '.join(args)}")
    # The secrets were really in play: Grist and the LLM saw them.
    assert grist.requests, "sync never reached the fake Grist server"
    assert any(h.get("authorization") == f"Bearer {OPENAI_KEY}" for h in llm.headers)

    for log in vedana_home.rglob("*.log"):
        _assert_clean(log.read_text(errors="replace"), str(log))


def test_a_failed_connection_does_not_print_the_database_password(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    env.update(
        VEDANA_HOME=str(tmp_path / "home"), DB_CONN_URI=f"postgresql://kb:{DB_PASSWORD}@127.0.0.1:9/kb"
    )
    out = _vedana(env, tmp_path, "runs")
    assert out.returncode == 1
    assert "cannot connect to Postgres" in out.stderr
    _assert_clean(out.stdout + out.stderr, "vedana runs with a bad DB_CONN_URI")


GRAPH_PASSWORD = "graph-pass-1f2e3d4c5b"


@pytest.mark.parametrize(
    ("args", "settings"),
    [
        # The driver refuses credentials in a bolt:// URI and echoes the URI in its error.
        (("cypher", "RETURN 1"), {"MEMGRAPH_URI": f"bolt://neo:{GRAPH_PASSWORD}@127.0.0.1:9"}),
        (("cypher", "RETURN 1"), {"MEMGRAPH_URI": "bolt://127.0.0.1:9", "MEMGRAPH_USER": "neo",
                                  "MEMGRAPH_PWD": GRAPH_PASSWORD}),
        # An unescaped "@" in the password: whatever a parser makes of it, no part may show.
        (("runs",), {"DB_CONN_URI": f"postgresql://kb:{DB_PASSWORD}@x/y@127.0.0.1:9/kb"}),
        (("runs",), {"DB_CONN_URI": f"postgresql://kb:{DB_PASSWORD}@127.0.0.1:port/kb"}),
    ],
)  # fmt: skip
def test_failed_graph_and_database_connections_print_no_password(
    tmp_path: Path, args: tuple[str, ...], settings: dict[str, str]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    env.update(VEDANA_HOME=str(tmp_path / "home"), **settings)
    out = _vedana(env, tmp_path, *args)  # with --debug: the traceback is printed too
    assert out.returncode in (1, 2) and "Traceback" in out.stderr, out.stderr
    for secret in (GRAPH_PASSWORD, DB_PASSWORD, "x/y@127"):
        assert secret not in out.stdout + out.stderr


URL_PASSWORD = "url-pass-3c4d5e6f7a"


def test_a_grist_url_with_user_info_is_masked_in_every_command(
    servers: tuple[FakeGrist, FakeLLM], vedana_home: Path, tmp_path: Path
) -> None:
    """`http://user:password@host`: every command, plain and --debug, masks the password, even
    in messages that embed the URL (the check report printed it; only --json masked it)."""
    grist, llm = servers
    env = _env(grist, llm, vedana_home)
    env["GRIST_SERVER_URL"] = grist.url.replace("http://", f"http://bob:{URL_PASSWORD}@")
    commands = [
        ("sync",),
        ("index",),
        ("run",),
        ("runs",),
        ("cypher", "RETURN 1 AS one"),
        ("check",),
        ("check", "--llm", "--ask", "How many?"),
        ("services", "status"),
    ]
    seen = ""
    for args in commands:
        for debug in ((), ("--debug",)):
            out = subprocess.run(
                [sys.executable, "-m", "vedana", *debug, *args],
                capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
            )  # fmt: skip
            seen += out.stdout + out.stderr
            assert URL_PASSWORD not in out.stdout + out.stderr, f"vedana {' '.join((*debug, *args))} leaks it"
    assert "bob:***@" in seen  # the URL was really printed, masked
    for log in vedana_home.rglob("*.log"):
        assert URL_PASSWORD not in log.read_text(errors="replace")
