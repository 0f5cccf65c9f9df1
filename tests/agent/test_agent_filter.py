"""The data-model filter: selection rules, invented names, fallback to the full model."""

from __future__ import annotations

import json

from standins.fake_llm import FakeLLM, raw, structured
from support.agent_kb import data_model
from vedana.agent.filter import FilterSelection, apply_selection, filter_data_model, parse_selection
from vedana.agent.llm import LLM
from vedana.agent.templates import Templates
from vedana.config import Settings


def test_selection_keeps_picked_parts_and_ignores_invented_names() -> None:
    dm = data_model()
    selection = FilterSelection(
        reasoning="people and the animals they like",
        anchor_nouns=["Person", "animal", "Dragon"],
        link_sentences=["LIKES", "LIVES_IN", "FLIES_TO"],
        anchor_attribute_names=["Person.name", "wingspan"],
        link_attribute_names=["since"],
        query_ids=[1, 7],
    )
    sliced, playbook, trace = apply_selection(dm, selection)

    assert [a.noun for a in sliced.anchors] == ["Person", "Animal"]  # "animal" matched ignoring case
    assert [lk.sentence for lk in sliced.links] == ["LIKES"]
    assert trace.dropped_links == ["LIVES_IN"]  # City was not kept, so the link cannot be
    assert [a.name for a in sliced.anchor("Person").attributes] == ["name"]
    assert [a.name for a in sliced.anchor("Animal").attributes] == ["name", "kind"]  # none picked: all kept
    assert [a.name for a in sliced.link("LIKES").attributes] == ["since"]
    assert [number for number, _ in playbook] == [1]
    assert trace.ignored == {
        "anchor_nouns": ["Dragon"],
        "link_sentences": ["FLIES_TO"],
        "anchor_attribute_names": ["wingspan"],
        "query_ids": [7],
    }
    assert trace.kept == {
        "anchors": 2,
        "links": 1,
        "anchor_attributes": 3,
        "link_attributes": 1,
        "queries": 1,
    }
    assert trace.total == {
        "anchors": 3,
        "links": 2,
        "anchor_attributes": 5,
        "link_attributes": 1,
        "queries": 2,
    }
    assert trace.selected["anchor_attributes"] == ["Person.name", "Animal.name", "Animal.kind"]


def test_structured_output_may_come_in_a_code_fence() -> None:
    selection = parse_selection('```json\n{"anchor_nouns": ["Person"], "query_ids": [2]}\n```')
    assert selection.anchor_nouns == ["Person"] and selection.query_ids == [2]


def test_filter_asks_for_structured_output_with_the_catalog(
    agent_settings: Settings, fake_llm: FakeLLM
) -> None:
    dm = data_model()
    fake_llm.filter.append(
        structured(
            {
                "reasoning": "r",
                "anchor_nouns": ["City"],
                "link_sentences": [],
                "anchor_attribute_names": [],
                "link_attribute_names": [],
                "query_ids": [],
            }
        )
    )
    result = filter_data_model(
        LLM(agent_settings), agent_settings.effective_filter_model, dm, "Which cities?", Templates(dm)
    )

    [request] = fake_llm.filter_requests
    assert request["model"] == "filter"
    assert request["response_format"]["type"] == "json_schema"
    schema = request["response_format"]["json_schema"]["schema"]
    assert set(schema["required"]) == {
        "reasoning",
        "anchor_nouns",
        "link_sentences",
        "anchor_attribute_names",
        "link_attribute_names",
        "query_ids",
    }
    prompt = request["messages"][0]["content"]
    catalog = json.loads(prompt.split("Data model:\n", 1)[1].split("\n\nQuestion:", 1)[0])
    assert [a["noun"] for a in catalog["anchors"]] == ["Person", "Animal", "City"]
    assert prompt.endswith("Which cities?")
    assert [a.noun for a in result.data_model.anchors] == ["City"]
    assert result.trace.fallback is False and result.trace.model == "openai/filter"


def test_bad_json_from_the_filter_means_the_full_model(agent_settings: Settings, fake_llm: FakeLLM) -> None:
    dm = data_model()
    fake_llm.filter.append(raw('{"anchor_nouns": ["Person", '))
    result = filter_data_model(
        LLM(agent_settings), agent_settings.effective_filter_model, dm, "q", Templates(dm)
    )

    assert result.data_model is dm
    assert result.trace.fallback is True
    assert "not valid JSON" in result.trace.error
    assert result.trace.kept == result.trace.total
    assert [n for n, _ in result.playbook] == [1, 2]


def test_a_selection_without_any_anchor_means_the_full_model(
    agent_settings: Settings, fake_llm: FakeLLM
) -> None:
    dm = data_model()
    fake_llm.filter.append(
        structured(
            {
                "reasoning": "",
                "anchor_nouns": ["Unicorn"],
                "link_sentences": [],
                "anchor_attribute_names": [],
                "link_attribute_names": [],
                "query_ids": [],
            }
        )
    )
    result = filter_data_model(
        LLM(agent_settings), agent_settings.effective_filter_model, dm, "q", Templates(dm)
    )
    assert result.trace.fallback is True and "no node type" in result.trace.error
    assert len(result.data_model.anchors) == 3


def test_a_provider_error_means_the_full_model(agent_settings: Settings, fake_llm: FakeLLM) -> None:
    dm = data_model()
    fake_llm.filter.append({"status": 400, "error": "response_format is not supported"})
    result = filter_data_model(
        LLM(agent_settings), agent_settings.effective_filter_model, dm, "q", Templates(dm)
    )
    assert result.trace.fallback is True and "LLMError" in result.trace.error
    assert len(result.data_model.anchors) == 3
