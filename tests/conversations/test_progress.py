"""While the agent works, a terminal shows what it is doing (the filter, each model call, each tool
call) on one transient line of stderr; a pipe or --json gets none of it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import pytest

from standins.fake_llm import FakeLLM, answer, structured, tool_calls
from support.terminal import Terminal
from vedana.datamodel import DataModel

QUERY = "MATCH (p:Person)-[:LIKES]->(:Animal {id: 'a1'}) RETURN p.name AS name ORDER BY name"
ANSWER = "Ada Okafor, Chen Wei and Dana Novak like quokkas."
KEEP_ALL = {
    "reasoning": "people and animals",
    "anchor_nouns": ["Person", "Animal"],
    "link_sentences": ["LIKES"],
    "anchor_attribute_names": [],
    "link_attribute_names": [],
    "query_ids": [],
}
STEPS = (
    "choosing the part of the data model the question needs (openai/filter)",
    "thinking (openai/agent)",
    f"thinking (openai/agent), after cypher: {QUERY}",
)


def _env(fake_llm: FakeLLM) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    for name in ("DB_CONN_URI", "MEMGRAPH_URI", "VEDANA_DEBUG"):
        env.pop(name, None)
    env.update(
        MODEL=fake_llm.model("agent"),
        FILTER_MODEL=fake_llm.model("filter"),
        VEDANA_LLM_API_BASE=fake_llm.api_base,
        OPENAI_API_KEY="sk-progress-test",
        ENABLE_DM_FILTERING="true",
        TERM="xterm",
        COLUMNS="200",
        PROMPT_TOOLKIT_NO_CPR="1",
    )
    return env


def _script(fake_llm: FakeLLM) -> None:
    """Each reply comes after a pause, so every step is on screen long enough to be drawn."""

    def slowly(reply: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.6)
        return reply

    def agent(body: dict[str, Any]) -> dict[str, Any]:
        last_user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
        if body["messages"][-1]["role"] == "tool" or last_user != "Who likes quokkas?":
            return slowly(answer(ANSWER))
        return slowly(tool_calls(("cypher", {"query": QUERY})))

    fake_llm.filter.append(lambda body: slowly(structured(KEEP_ALL)))
    fake_llm.agent.append(agent)


def _steps_shown(screen: str) -> list[str]:
    """The texts the spinner showed, in order, each once (a frame is a spinner glyph, then text)."""
    return list(dict.fromkeys(part.strip() for part in re.split("[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]", screen)[1:] if part.strip()))


def _run_on_terminal(env: dict[str, str], *args: str, keys: str = "") -> str:
    term = Terminal(env, *args)
    try:
        if keys:
            term.expect("you>")
            term.send(keys)
        assert term.wait(timeout=120) == 0, term.screen()[-2000:]
        return term.screen()
    finally:
        term.close()


@pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminal test written for Linux")
def test_ask_on_a_terminal_shows_each_step_then_clears_it(fake_llm: FakeLLM, chat_kb: DataModel) -> None:
    _script(fake_llm)
    screen = _run_on_terminal(_env(fake_llm), "ask", "Who likes quokkas?")
    shown = _steps_shown(screen.split(ANSWER)[0])
    assert [s for s in shown if s in STEPS] == list(STEPS)  # each step, in the order they happened
    assert shown[0] == "reading the knowledge base"
    assert ANSWER in screen


@pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminal test written for Linux")
def test_chat_on_a_terminal_shows_the_steps_of_an_answer(fake_llm: FakeLLM, chat_kb: DataModel) -> None:
    _script(fake_llm)
    screen = _run_on_terminal(_env(fake_llm), "chat", keys="Who likes quokkas?\r/quit\r")
    asked = screen.split("Who likes quokkas?", 1)[1]
    shown = _steps_shown(asked.split(ANSWER)[0])
    assert [s for s in shown if s in STEPS] == list(STEPS)
    assert "(1 tool call · " in asked  # the footer under the answer


def test_a_pipe_and_json_get_no_steps(fake_llm: FakeLLM, chat_kb: DataModel) -> None:
    _script(fake_llm)
    env = _env(fake_llm)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "vedana", *args], env=env, capture_output=True, text=True, timeout=120
        )

    piped = run("ask", "Who likes quokkas?", "--no-trace")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == ANSWER + "\n" and piped.stderr == ""
    as_json = run("ask", "Who likes quokkas?", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["answer"] == ANSWER and as_json.stderr == ""
