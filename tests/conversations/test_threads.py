"""Threads: history reaches the filter and the agent, its length is honoured, turns are stored
with their traces, a provider error leaves the thread as it was, secrets are never stored."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from standins.fake_llm import FakeLLM, answer, http_error, structured, tool_calls
from vedana.cli.app import app
from vedana.config import Settings
from vedana.datamodel import DataModel
from vedana.errors import LLMError, UnknownThread
from vedana.ops.conversation import ask_in_thread, threads_list, threads_show

SELECT_PEOPLE = {
    "reasoning": "people and animals",
    "anchor_nouns": ["Person", "Animal"],
    "link_sentences": ["LIKES"],
    "anchor_attribute_names": [],
    "link_attribute_names": [],
    "query_ids": [],
}


def _chat_texts(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (m["role"], m.get("content") or "") for m in body["messages"] if m["role"] in ("user", "assistant")
    ]


def test_a_follow_up_is_answered_from_the_thread_history(
    chat_settings: Settings, fake_llm: FakeLLM, chat_kb: DataModel
) -> None:
    fake_llm.filter.append(structured(SELECT_PEOPLE))
    fake_llm.agent.append(
        tool_calls(("cypher", {"query": "MATCH (p:Person)-[:LIKES]->(:Animal {id: 'a1'}) RETURN p.id AS id"}))
    )
    fake_llm.agent.append(answer("Ada Okafor, Chen Wei and Dana Novak like quokkas."))
    first = ask_in_thread(chat_settings, "Who likes quokkas?")
    assert first.created and first.result.trace.history_messages == 0

    # The follow-up only makes sense with the previous turn: the stand-in answers from what it got.
    def follow_up(body: dict[str, Any]) -> dict[str, Any]:
        seen = _chat_texts(body)
        if ("user", "Who likes quokkas?") in seen and any(
            "Chen Wei" in t for r, t in seen if r == "assistant"
        ):
            return answer("Of them, Dana Novak is the oldest (45).")
        return answer("I don't know whom you mean.")

    fake_llm.filter.append(structured(SELECT_PEOPLE))
    fake_llm.agent.append(follow_up)
    second = ask_in_thread(chat_settings, "And which of them is the oldest?", first.thread_id)

    assert second.thread_id == first.thread_id and not second.created
    assert second.result.answer == "Of them, Dana Novak is the oldest (45)."
    assert second.result.trace.history_messages == 2
    # The last agent request: system, the previous question and answer, then the new question.
    roles = [m["role"] for m in fake_llm.agent_requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    # The filter saw the question in its context too (so it keeps Person for "them").
    filter_prompt = json.dumps(fake_llm.filter_requests[-1]["messages"])
    assert "Who likes quokkas?" in filter_prompt and "which of them is the oldest" in filter_prompt

    stored = threads_show(chat_settings, first.thread_id)
    assert [(m["role"], m["text"]) for m in stored["messages"]] == [
        ("user", "Who likes quokkas?"),
        ("assistant", "Ada Okafor, Chen Wei and Dana Novak like quokkas."),
        ("user", "And which of them is the oldest?"),
        ("assistant", "Of them, Dana Novak is the oldest (45)."),
    ]
    first_answer = stored["messages"][1]
    assert first_answer["trace"]["tool_calls"][0]["name"] == "cypher"
    assert first_answer["trace"]["tool_calls"][0]["rows"] == 3
    assert set(first_answer["usage"]) == {fake_llm.model("agent"), fake_llm.model("filter")}
    assert stored["messages"][0]["trace"] is None  # a question carries no trace


def test_the_history_length_is_honoured(
    chat_settings: Settings, fake_llm: FakeLLM, chat_kb: DataModel
) -> None:
    settings = chat_settings.model_copy(update={"pipeline_history_length": 3, "enable_dm_filtering": False})
    fake_llm.agent.append(lambda body: answer(f"answer {len(body['messages'])}"))
    thread = ask_in_thread(settings, "q1").thread_id
    for q in ("q2", "q3", "q4"):
        ask_in_thread(settings, q, thread)
    seen = _chat_texts(fake_llm.agent_requests[-1])
    # Only the last 3 earlier messages (an answer names how many messages its request had), then
    # the new question: q1 and its answer, and q2, are gone.
    assert [t for _, t in seen][:-1] == ["answer 4", "q3", "answer 5"]
    assert seen[-1] == ("user", "q4")


def test_a_provider_error_keeps_the_thread_usable(
    chat_settings: Settings, fake_llm: FakeLLM, chat_kb: DataModel
) -> None:
    settings = chat_settings.model_copy(update={"enable_dm_filtering": False})
    fake_llm.agent.append(answer("Four people."))
    thread = ask_in_thread(settings, "How many people are there?").thread_id
    fake_llm.agent.append(http_error(400, "the provider is unhappy"))
    with pytest.raises(LLMError):
        ask_in_thread(settings, "And animals?", thread)
    assert len(threads_show(settings, thread)["messages"]) == 2  # the failed turn left nothing

    fake_llm.agent.append(answer("Three animals."))
    ask_in_thread(settings, "And animals?", thread)
    assert [m["text"] for m in threads_show(settings, thread)["messages"]][-2:] == [
        "And animals?",
        "Three animals.",
    ]
    # A failed first turn creates no empty thread.
    before = {t["id"] for t in threads_list(settings, limit=1000)}
    fake_llm.agent.append(http_error(400, "still unhappy"))
    with pytest.raises(LLMError):
        ask_in_thread(settings, "Hello?")
    assert {t["id"] for t in threads_list(settings, limit=1000)} == before


def test_an_unknown_thread_is_a_one_line_error(chat_settings: Settings, chat_kb: DataModel) -> None:
    with pytest.raises(UnknownThread, match=r"no thread 'nope'.*vedana threads"):
        ask_in_thread(chat_settings, "Hi?", "nope")
    result = CliRunner().invoke(app, ["threads", "show", "nope"])
    assert result.exit_code == 1
    assert "no thread 'nope'" in str(result.exception)


def test_secrets_never_reach_a_stored_thread(
    chat_settings: Settings, fake_llm: FakeLLM, chat_kb: DataModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-thread-secret-5f4e3d2c1b0a99"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    settings = chat_settings.model_copy(update={"enable_dm_filtering": False})
    fake_llm.agent.append(tool_calls(("cypher", {"query": f"RETURN '{secret}' AS k"})))
    fake_llm.agent.append(answer(f"The key is {secret}."))
    thread = ask_in_thread(settings, f"Repeat {secret}").thread_id
    stored = json.dumps(threads_show(settings, thread), default=str)
    assert secret not in stored
    assert "The key is" in stored  # the turn itself was stored, masked
