"""The agent loop against the scripted model: rounds, parallel tools, limits, prompts, no-answer."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from standins.fake_llm import FakeLLM, answer, structured, tool_calls
from support.agent_kb import data_model, save
from vedana.agent import ask
from vedana.config import Settings
from vedana.datamodel import DataModel, Prompt
from vedana.stores.graph import GraphStore, QueryResult

SELECT_PEOPLE_AND_ANIMALS = {
    "reasoning": "The question is about people and the animals they like.",
    "anchor_nouns": ["Person", "Animal", "Dragon"],
    "link_sentences": ["LIKES", "RIDES"],
    "anchor_attribute_names": ["Person.name", "Animal.name", "tail_length"],
    "link_attribute_names": [],
    "query_ids": [1],
}


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def system_message(request: dict[str, Any]) -> str:
    return request["messages"][0]["content"]


def test_filtered_slice_reaches_the_agent_and_invented_names_are_in_the_trace(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, kb: DataModel
) -> None:
    fake_llm.filter.append(structured(SELECT_PEOPLE_AND_ANIMALS))
    fake_llm.agent.append(
        tool_calls(
            (
                "cypher",
                {
                    "query": "MATCH (p:Person)-[:LIKES]->(:Animal {id: 'a1'}) RETURN p.name AS name ORDER BY name"
                },
            )
        )
    )
    fake_llm.agent.append(
        lambda body: answer(
            "Liked by: " + ", ".join(r["name"] for r in json.loads(tool_messages(body)[0]["content"])["rows"])
        )
    )

    result = ask(agent_settings, "Who likes quokkas?", graph=graph)

    first = fake_llm.agent_requests[0]
    system = system_message(first)
    assert "(:Person)" in system and "(:Animal)" in system and "[:LIKES]" in system
    assert "City" not in system and "LIVES_IN" not in system and "Dragon" not in system
    assert "Who likes <animal>?" in system and "How old is <person>?" not in system  # playbook slice
    assert ".age" not in system  # Person.age was not picked
    assert result.answer == "Liked by: Ada Okafor, Chen Wei, Dana Novak"
    assert result.trace.filter.ignored == {
        "anchor_nouns": ["Dragon"],
        "link_sentences": ["RIDES"],
        "anchor_attribute_names": ["tail_length"],
    }
    assert result.trace.filter.kept["anchors"] == 2 and result.trace.filter.total["anchors"] == 3
    assert result.trace.filter.reasoning == SELECT_PEOPLE_AND_ANIMALS["reasoning"]
    [call] = result.trace.tool_calls
    assert (call.name, call.rows, call.truncated, call.error) == ("cypher", 3, False, None)
    # The vector tool's enums come from the slice's embeddable attributes.
    vector_tool = next(t for t in first["tools"] if t["function"]["name"] == "vector_text_search")
    params = vector_tool["function"]["parameters"]["properties"]
    assert params["label"]["enum"] == ["Person", "Animal"]
    assert params["property"]["enum"] == ["name"]


class BarrierGraph(GraphStore):
    """The real graph, but every read waits until `parties` reads are in flight at once: calls
    made one after the other can never pass it, so success proves they ran side by side."""

    engine = "falkordb"

    def __init__(self, inner: GraphStore, parties: int) -> None:
        self.inner = inner
        self.barrier = threading.Barrier(parties, timeout=20)
        self.threads: list[str] = []

    def query(self, cypher: str, params: dict[str, Any] | None = None, **kwargs: Any) -> QueryResult:
        if kwargs.get("read_only"):
            self.threads.append(threading.current_thread().name)
            self.barrier.wait()
        return self.inner.query(cypher, params, **kwargs)

    def write_batches(self, *args: Any, **kwargs: Any) -> int:
        return self.inner.write_batches(*args, **kwargs)

    def ensure_index(self, *args: Any, **kwargs: Any) -> None:
        self.inner.ensure_index(*args, **kwargs)

    def clear(self, labels: Any) -> None:
        self.inner.clear(labels)

    def close(self) -> None:
        pass


def test_tool_calls_of_one_round_run_concurrently(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, kb: DataModel
) -> None:
    fake_llm.agent.append(
        tool_calls(
            ("cypher", {"query": "MATCH (p:Person) RETURN count(p) AS people"}),
            ("cypher", {"query": "MATCH (a:Animal) RETURN count(a) AS animals"}),
            ("cypher", {"query": "MATCH ()-[r:LIKES]->() RETURN count(r) AS likes"}),
        )
    )
    fake_llm.agent.append(answer("4 people, 3 animals, 5 likes"))
    barrier_graph = BarrierGraph(graph, parties=3)

    result = ask(agent_settings, "How big is the club?", use_filter=False, graph=barrier_graph)

    assert result.answer == "4 people, 3 animals, 5 likes"
    assert [c.error for c in result.trace.tool_calls] == [None, None, None]
    assert len(set(barrier_graph.threads)) == 3  # three different worker threads
    # Results come back in the order the model asked for them, each paired with its call id.
    second = fake_llm.agent_requests[1]
    assert [json.loads(m["content"])["rows"][0] for m in tool_messages(second)] == [
        {"people": 4},
        {"animals": 3},
        {"likes": 5},
    ]
    assistant = second["messages"][2]
    assert [tc["id"] for tc in assistant["tool_calls"]] == [m["tool_call_id"] for m in tool_messages(second)]
    assert [c.index for c in result.trace.tool_calls] == [0, 1, 2]
    assert {c.round for c in result.trace.tool_calls} == {1}


def test_round_limit_then_a_finalisation_call_without_tools(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, kb: DataModel
) -> None:
    def stubborn(body: dict[str, Any]) -> dict[str, Any]:
        if body.get("tool_choice") == "none":
            return answer(f"From {len(tool_messages(body))} results: 4 people.")
        return tool_calls(("cypher", {"query": "MATCH (p:Person) RETURN count(p) AS n"}))

    fake_llm.agent.append(stubborn)

    result = ask(agent_settings, "How many people?", use_filter=False, graph=graph)

    requests = fake_llm.agent_requests
    assert len(requests) == 6  # 5 rounds + the finalisation
    assert all(r.get("tool_choice") != "none" for r in requests[:5])
    final = requests[5]
    assert final["tool_choice"] == "none"
    assert final["messages"][-1]["role"] == "user"
    assert final["messages"][-1]["content"].startswith("The tool rounds are used up.")
    assert result.answer == "From 5 results: 4 people."
    assert result.trace.rounds == 5 and result.trace.finalized is True
    assert len(result.trace.tool_calls) == 5
    assert [c.purpose for c in result.trace.llm_calls] == ["agent"] * 5 + ["finalize"]


def test_round_limit_follows_settings(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, kb: DataModel
) -> None:
    fake_llm.agent.append(
        lambda body: (
            answer("done")
            if body.get("tool_choice") == "none"
            else tool_calls(("cypher", {"query": "RETURN 1 AS one"}))
        )
    )
    result = ask(
        agent_settings.model_copy(update={"agent_max_rounds": 2}), "q", use_filter=False, graph=graph
    )
    assert len(fake_llm.agent_requests) == 3 and result.trace.rounds == 2 and result.trace.finalized


def test_an_empty_answer_gets_the_not_found_reply(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, kb: DataModel
) -> None:
    fake_llm.agent.append(answer("   "))

    result = ask(agent_settings, "What is the airspeed of a swallow?", use_filter=False, graph=graph)

    assert result.trace.no_answer is True
    assert result.answer.startswith("I could not find an answer to this question in the knowledge base.")
    assert "Person, Animal, City" in result.answer  # suggestions name what the data is about
    assert "Who likes <animal>?" in result.answer
    assert len(fake_llm.agent_requests) == 1


def test_prompts_table_overrides_built_in_templates(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, kb: DataModel, pg_engine
) -> None:
    overrides = [
        Prompt("instructions", "You are the Quokka Oracle; {{max_rounds}} rounds, {{row_limit}} rows."),
        Prompt("no_answer", "Nothing about “{{question}}” here."),
        Prompt("filter", "Pick parts for: {{question}}\n{{data_model_json}}"),
        Prompt("unrelated", "ignored"),
    ]
    save(pg_engine, data_model(prompts=overrides))
    fake_llm.filter.append(structured({**SELECT_PEOPLE_AND_ANIMALS, "anchor_nouns": ["Person"]}))
    fake_llm.agent.append(answer(""))

    result = ask(agent_settings, "Who is the oldest?", graph=graph)

    system = system_message(fake_llm.agent_requests[0])
    assert system.startswith(f"You are the Quokka Oracle; 5 rounds, {agent_settings.cypher_rows_limit} rows.")
    assert "## The graph" in system  # data_model keeps its built-in template
    assert fake_llm.filter_requests[0]["messages"][0]["content"].startswith(
        "Pick parts for: Who is the oldest?\n{"
    )
    assert result.answer == "Nothing about “Who is the oldest?” here."
    assert result.trace.prompts_overridden == ["filter", "instructions", "no_answer"]


def test_filter_fallback_shows_the_full_model_to_the_agent(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, kb: DataModel
) -> None:
    fake_llm.filter.append({"content": "Sure! Here are the parts: Person, Animal."})
    fake_llm.agent.append(answer("ok"))

    result = ask(agent_settings, "Who lives where?", graph=graph)

    system = system_message(fake_llm.agent_requests[0])
    assert "(:City)" in system and "[:LIVES_IN]" in system and "How old is <person>?" in system
    assert result.trace.filter.fallback is True
    assert result.trace.filter.kept == result.trace.filter.total
    assert "not valid JSON" in result.trace.filter.error


def test_engine_errors_go_back_to_the_model_which_corrects_itself(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, kb: DataModel
) -> None:
    fake_llm.agent.append(tool_calls(("cypher", {"query": "MATCH (p:Person RETURN p"})))
    fake_llm.agent.append(tool_calls(("cypher", {"query": "MATCH (p:Person) DETACH DELETE p"})))
    fake_llm.agent.append(tool_calls(("cypher", {"query": "MATCH (p:Person) RETURN count(p) AS n"})))
    fake_llm.agent.append(answer("4"))

    result = ask(agent_settings, "How many people?", use_filter=False, graph=graph)

    last = fake_llm.agent_requests[-1]
    syntax, refused, fine = (m["content"] for m in tool_messages(last))
    assert syntax.startswith("error: ") and "fix the query" in syntax
    assert refused.startswith("error: refused before running") and "DETACH" in refused
    assert json.loads(fine)["rows"] == [{"n": 4}]
    calls = result.trace.tool_calls
    assert calls[0].error and calls[1].refused is True and calls[2].error is None
    assert graph.counts()["nodes"]["Person"] == 4


def test_no_api_key_is_one_clear_error(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from vedana.errors import LLMError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMError, match=r"^no API key for model gpt-4.1-mini: set OPENAI_API_KEY"):
        ask(settings.model_copy(update={"model": "gpt-4.1-mini", "llm_api_base": None}), "q")
    with pytest.raises(LLMError, match="no language model is configured"):
        ask(settings.model_copy(update={"model": " "}), "q")


def test_happy_path_vector_search_then_cypher_with_the_right_rows_reaching_the_model(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, indexed_kb: DataModel, local_embedder
) -> None:
    fake_llm.filter.append(structured(SELECT_PEOPLE_AND_ANIMALS))
    fake_llm.agent.append(
        tool_calls(("vector_text_search", {"label": "Animal", "property": "name", "text": "quokkas"}))
    )

    def follow_the_best_hit(body: dict[str, Any]) -> dict[str, Any]:
        results = [json.loads(m["content"]) for m in tool_messages(body)]
        if len(results) == 1:
            best = results[0]["hits"][0]["node_id"]
            query = (
                f"MATCH (p:Person)-[:LIKES]->(:Animal {{id: '{best}'}}) RETURN p.name AS name ORDER BY name"
            )
            return tool_calls(("cypher", {"query": query}))
        return answer("Quokkas are liked by " + ", ".join(r["name"] for r in results[1]["rows"]) + ".")

    fake_llm.agent.append(follow_the_best_hit)

    result = ask(agent_settings, "Who likes quokkas?", graph=graph, embedder=local_embedder)

    vector_result = json.loads(tool_messages(fake_llm.agent_requests[1])[0]["content"])
    assert vector_result["hits"][0]["node_id"] == "a1"
    assert vector_result["hits"][0]["value"] == "quokka"
    assert vector_result["hits"][0]["attributes"] == {"name": "quokka", "kind": "marsupial"}
    assert "embedding" not in json.dumps(vector_result)
    cypher_rows = json.loads(tool_messages(fake_llm.agent_requests[2])[1]["content"])["rows"]
    assert cypher_rows == [{"name": "Ada Okafor"}, {"name": "Chen Wei"}, {"name": "Dana Novak"}]
    assert result.answer == "Quokkas are liked by Ada Okafor, Chen Wei, Dana Novak."

    search, query = result.trace.tool_calls
    assert (search.name, search.kind, search.top_n, search.round) == ("vector_text_search", "node", 10, 1)
    assert search.hits[0]["node_id"] == "a1" and 0 < search.hits[0]["score"] <= 1
    assert (query.name, query.rows, query.truncated, query.round) == ("cypher", 3, False, 2)
    trace = result.to_dict()["trace"]
    assert trace["usage"]["openai/agent"]["calls"] == 3
    assert trace["usage"]["openai/filter"]["calls"] == 1
    assert trace["usage"]["openai/agent"]["prompt_tokens"] > 0
    assert trace["usage"]["openai/agent"]["cost_usd"] is None  # a price litellm does not know
    assert trace["timings"]["total_s"] >= trace["timings"]["llm_s"] > 0


def test_the_library_trace_masks_secrets_a_model_echoes(
    agent_settings: Settings,
    fake_llm: FakeLLM,
    graph: GraphStore,
    kb: DataModel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    fake_llm.agent.append(
        tool_calls(("cypher", {"query": f"MATCH (p:Person {{name: '{secret}'}}) RETURN p"}))
    )
    fake_llm.agent.append(answer(f"The key is {secret}."))

    data = ask(agent_settings, "What is the key?", use_filter=False, graph=graph).to_dict()

    assert secret not in json.dumps(data)
    assert data["answer"] == "The key is ***."
    assert data["trace"]["tool_calls"][0]["arguments"]["query"] == "MATCH (p:Person {name: '***'}) RETURN p"


def test_a_password_in_the_llm_api_base_never_reaches_the_output(
    settings: Settings, graph: GraphStore, kb: DataModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vedana.config import reset_settings
    from vedana.errors import LLMError
    from vedana.redaction import redact

    api_base = "http://gateway:pw-0123456789@127.0.0.1:1/v1"  # nothing listens on port 1
    monkeypatch.setenv("VEDANA_LLM_API_BASE", api_base)
    reset_settings()  # redaction reads the configured settings
    try:
        configured = settings.model_copy(update={"model": "openai/x", "llm_api_base": api_base})
        with pytest.raises(LLMError) as failed:
            ask(configured, "q", use_filter=False, graph=graph)
        assert "pw-0123456789" in str(failed.value)  # the library message names the server...
        assert "pw-0123456789" not in redact(str(failed.value))  # ...and every output masks it
    finally:
        monkeypatch.delenv("VEDANA_LLM_API_BASE")
        reset_settings()
