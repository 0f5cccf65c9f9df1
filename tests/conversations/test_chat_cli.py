"""`vedana ask --thread`, `vedana chat` and `vedana threads` as a user meets them: separate
processes, a pipe, and a real pseudo-terminal (with Ctrl-C while an answer is on its way)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from standins.fake_llm import FakeLLM, answer, http_error, structured, tool_calls
from support.terminal import Terminal
from vedana.config import Settings
from vedana.datamodel import DataModel
from vedana.ops.conversation import threads_show

START = "Hello from the club! Ask me who likes which animal."
QUOKKA_QUERY = "MATCH (p:Person)-[:LIKES]->(:Animal {id: 'a1'}) RETURN p.name AS name ORDER BY name"


def _env(fake_llm: FakeLLM) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    for name in ("DB_CONN_URI", "MEMGRAPH_URI", "VEDANA_DEBUG"):
        env.pop(name, None)
    env.update(
        MODEL=fake_llm.model("agent"),
        VEDANA_LLM_API_BASE=fake_llm.api_base,
        OPENAI_API_KEY="sk-chat-test",
        ENABLE_DM_FILTERING="false",
        PIPELINE_HISTORY_LENGTH="20",
        TERM="xterm",
        COLUMNS="120",
        PROMPT_TOOLKIT_NO_CPR="1",  # the test terminal does not answer cursor-position requests
    )
    return env


def _vedana(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vedana", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _by_question(replies: dict[str, Any]) -> Any:
    """A stand-in agent that answers by the last user question (and sees the whole request)."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        last_user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
        tool_results = [m for m in body["messages"] if m["role"] == "tool"]
        entry = replies.get(last_user, answer("I do not know."))
        return entry(body, tool_results) if callable(entry) else entry

    return reply


def test_a_thread_continues_across_two_ask_processes(
    fake_llm: FakeLLM, chat_kb: DataModel, settings: Settings
) -> None:
    def quokkas(body: dict[str, Any], tool_results: list[Any]) -> dict[str, Any]:
        if not tool_results:
            return tool_calls(("cypher", {"query": QUOKKA_QUERY}))
        return answer("Ada Okafor, Chen Wei and Dana Novak like quokkas.")

    def follow_up(body: dict[str, Any], tool_results: list[Any]) -> dict[str, Any]:
        earlier = [m.get("content") or "" for m in body["messages"] if m["role"] == "assistant"]
        return answer("Two of them: Ada and Dana." if any("Chen Wei" in e for e in earlier) else "Of whom?")

    fake_llm.agent.append(
        _by_question({"Who likes quokkas?": quokkas, "Which of them are over 30?": follow_up})
    )
    env = _env(fake_llm)

    first = _vedana(env, "ask", "Who likes quokkas?", "--thread", "new", "--json")
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    thread = data["thread"]
    assert re.fullmatch(r"[0-9a-f]{12}", thread)
    assert f"thread: {thread}" in first.stderr

    second = _vedana(env, "ask", "Which of them are over 30?", "--thread", thread, "--no-trace")
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "Two of them: Ada and Dana."

    listed = json.loads(_vedana(env, "threads", "--json").stdout)
    mine = next(t for t in listed if t["id"] == thread)
    assert mine["messages"] == 4 and mine["last_question"] == "Which of them are over 30?"
    shown = _vedana(env, "threads", "show", thread)
    assert shown.returncode == 0, shown.stderr
    assert "Ada Okafor, Chen Wei and Dana Novak like quokkas." in shown.stdout
    assert "cypher" in shown.stdout and "3 rows" in shown.stdout  # the first answer's trace

    unknown = _vedana(env, "ask", "Hi", "--thread", "0000deadbeef")
    assert unknown.returncode == 1
    assert unknown.stderr.strip().splitlines()[-1].startswith("error: no thread '0000deadbeef'")


def test_chat_over_a_pipe_shows_the_start_message_and_answers_each_line(
    fake_llm: FakeLLM, chat_kb: DataModel, settings: Settings
) -> None:
    fake_llm.agent.append(
        _by_question({"How many people?": answer("Four."), "And animals?": answer("Three.")})
    )
    out = _vedana(_env(fake_llm), "chat", stdin="How many people?\n/trace\nAnd animals?\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [START, "Four.", "Three."]
    assert "--- trace ---" in out.stderr  # /trace, off a terminal, goes to stderr as plain text
    thread = re.search(r"thread: ([0-9a-f]{12})", out.stderr).group(1)  # type: ignore[union-attr]
    texts = [m["text"] for m in threads_show(settings, thread)["messages"]]
    assert texts == ["How many people?", "Four.", "And animals?", "Three."]
    # The second question reached the model with the first turn before it.
    last = [m["content"] for m in fake_llm.agent_requests[-1]["messages"] if m["role"] != "system"]
    assert last == ["How many people?", "Four.", "And animals?"]


def test_threads_show_prints_the_filter_line_as_the_answer_did(fake_llm: FakeLLM, chat_kb: DataModel) -> None:
    keep = {"reasoning": "r", "anchor_nouns": ["Person"], "link_sentences": [], "anchor_attribute_names": [],
            "link_attribute_names": [], "query_ids": []}  # fmt: skip
    fake_llm.filter.append(lambda body: structured(keep))
    fake_llm.agent.append(answer("Four."))
    env = {**_env(fake_llm), "ENABLE_DM_FILTERING": "true"}
    asked = _vedana(env, "ask", "How many people?", "--thread", "new")
    assert asked.returncode == 0, asked.stderr
    live = next(line for line in asked.stderr.splitlines() if ": kept " in line)
    thread = re.search(r"thread: ([0-9a-f]{12})", asked.stderr).group(1)  # type: ignore[union-attr]
    shown = _vedana(env, "threads", "show", thread)
    stored = next(line for line in shown.stdout.splitlines() if ": kept " in line)
    assert re.sub(r" in [\d.]+ s$", "", stored) == re.sub(r" in [\d.]+ s$", "", live)
    assert (
        "kept 1/3 anchors, 0/2 links, 2/5 anchor attributes, 0/1 link attributes, 0/2 queries" in live
    )  # the order: anchors, links, attributes, queries


def test_piped_chat_exits_1_when_an_answer_failed(
    fake_llm: FakeLLM, chat_kb: DataModel, settings: Settings
) -> None:
    down = http_error(400, "the provider refused this one")
    fake_llm.agent.append(_by_question({"And animals?": down, "How many people?": answer("Four.")}))
    out = _vedana(_env(fake_llm), "chat", stdin="And animals?\nHow many people?\n")
    assert out.returncode == 1
    assert out.stdout.splitlines() == [START, "Four."]  # the failure did not end the conversation
    notes = out.stderr.splitlines()
    assert notes[0].startswith("error: the call to openai/agent failed") and "refused this one" in notes[0]
    assert notes[-1] == "1 of 2 questions got no answer"


def test_piped_chat_with_a_model_it_cannot_use_fails_before_the_greeting(
    fake_llm: FakeLLM, chat_kb: DataModel, settings: Settings
) -> None:
    env = {k: v for k, v in _env(fake_llm).items() if k not in ("VEDANA_LLM_API_BASE", "OPENAI_API_KEY")}
    out = _vedana({**env, "MODEL": "gpt-4.1-mini"}, "chat", stdin="How many people?\n")
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.startswith("error: no API key for model gpt-4.1-mini")
    assert not fake_llm.requests


@pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminal test written for Linux")
def test_chat_on_a_terminal_with_trace_and_ctrl_c(
    fake_llm: FakeLLM, chat_kb: DataModel, settings: Settings
) -> None:
    slow_asked = threading.Event()

    def slow(body: dict[str, Any], tool_results: list[Any]) -> dict[str, Any]:
        slow_asked.set()
        time.sleep(8)  # long enough for the test to press Ctrl-C while it waits
        return answer("too late")

    def quokkas(body: dict[str, Any], tool_results: list[Any]) -> dict[str, Any]:
        if not tool_results:
            return tool_calls(("cypher", {"query": QUOKKA_QUERY}))
        return answer("Ada Okafor, Chen Wei and Dana Novak like quokkas.")

    fake_llm.agent.append(_by_question({"Tell me a long story": slow, "Who likes quokkas?": quokkas}))
    term = Terminal(_env(fake_llm), "chat")
    try:
        term.expect(re.escape(START))
        term.expect("you>")
        term.send("Tell me a long story\r")
        assert slow_asked.wait(60), "the question never reached the model"
        term.send("\x03")  # Ctrl-C while the answer is on its way
        term.expect("answer cancelled")
        term.expect("you>")
        term.send("Who likes quokkas?\r")
        thread = term.expect(r"thread: ([0-9a-f]{12})").group(1)
        term.expect(re.escape("Ada Okafor, Chen Wei and Dana Novak like quokkas."))
        term.expect("you>")
        term.send("/trace\r")
        term.expect(re.escape("MATCH (p:Person)-[:LIKES]->"))  # the trace shows the query as written
        term.expect("you>")
        term.send("/threads\r")
        term.expect(rf"{thread} +2 messages +Who likes quokkas\?")
        term.expect("you>")
        term.send("\x04")  # Ctrl-D leaves
        assert term.wait() == 0
    finally:
        term.close()
    texts = [m["text"] for m in threads_show(settings, thread)["messages"]]
    assert texts == [
        "Who likes quokkas?",
        "Ada Okafor, Chen Wei and Dana Novak like quokkas.",
    ]  # no cancelled turn
