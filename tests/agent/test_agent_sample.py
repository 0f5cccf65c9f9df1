"""The full path on a real sample: samples/people synced and indexed into the embedded services,
the scripted model following the sample's playbook, and the right rows reaching the model."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from standins.fake_llm import FakeLLM, answer, structured, tool_calls
from vedana.agent import ask
from vedana.config import Settings
from vedana.stores.graph import GraphStore


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def people_interested_in(folder: Path, interest_name: str) -> tuple[str, list[str]]:
    """From the sample's CSV files directly: the interest's id and its people's names, sorted."""
    [interest_id] = [
        r["interest_id"]
        for r in rows(folder / "data/Anchor_interest.csv")
        if r["interest_name"] == interest_name
    ]
    names = {r["person_id"]: r["person_name"] for r in rows(folder / "data/Anchor_person.csv")}
    linked = {
        r["from_node_id"]
        for r in rows(folder / "data/Link_person_has_interest.csv")
        if r["to_node_id"] == interest_id
    }
    return interest_id, sorted(names[p] for p in linked)


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.slow
def test_who_is_interested_in_quokkas(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, people_sample: Path, local_embedder
) -> None:
    interest_id, expected_names = people_interested_in(people_sample, "quokkas")
    assert expected_names  # the sample has people for this interest

    fake_llm.filter.append(
        structured(
            {
                "reasoning": "People linked to an interest; find the interest by name first.",
                "anchor_nouns": ["person", "interest", "hobby"],
                "link_sentences": ["PERSON_has_INTEREST"],
                "anchor_attribute_names": ["person_name", "interest.interest_name"],
                "link_attribute_names": [],
                "query_ids": [1],
            }
        )
    )
    fake_llm.agent.append(
        tool_calls(
            ("vector_text_search", {"label": "interest", "property": "interest_name", "text": "quokkas"})
        )
    )

    def follow_playbook(body: dict[str, Any]) -> dict[str, Any]:
        results = tool_results(body)
        if len(results) == 1:
            best = results[0]["hits"][0]["node_id"]
            return tool_calls(
                (
                    "cypher",
                    {
                        "query": f"MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest {{id: '{best}'}}) RETURN p.person_name ORDER BY p.person_name"
                    },
                ),
                (
                    "cypher",
                    {
                        "query": f"MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest {{id: '{best}'}}) RETURN count(p) AS n"
                    },
                ),
            )
        names = [r["p.person_name"] for r in results[1]["rows"]]
        return answer(f"{results[2]['rows'][0]['n']} people: " + ", ".join(names))

    fake_llm.agent.append(follow_playbook)

    result = ask(agent_settings, "Who is interested in quokkas?", graph=graph, embedder=local_embedder)

    first = fake_llm.agent_requests[0]
    system = first["messages"][0]["content"]
    assert "(:person)" in system and "(:interest)" in system and "[:PERSON_has_INTEREST]" in system
    assert "- (:city)" not in system and "[:PERSON_lives_in_CITY]" not in system
    assert ".person_name (str, searchable by meaning)" in system and ".person_age (" not in system
    assert (
        "1. Who is interested in <interest>?" in system and "Which interests are most popular?" not in system
    )
    search_tool = next(t for t in first["tools"] if t["function"]["name"] == "vector_text_search")
    enums = search_tool["function"]["parameters"]["properties"]
    assert enums["label"]["enum"] == ["person", "interest"]
    assert enums["property"]["enum"] == ["person_name", "interest_name"]

    [search] = tool_results(fake_llm.agent_requests[1])
    assert search["hits"][0]["node_id"] == interest_id
    assert search["hits"][0]["value"] == "quokkas"
    listed, counted = tool_results(fake_llm.agent_requests[2])[1:]
    assert [r["p.person_name"] for r in listed["rows"]] == expected_names
    assert counted["rows"] == [{"n": len(expected_names)}]
    assert result.answer == f"{len(expected_names)} people: " + ", ".join(expected_names)

    trace = result.to_dict()["trace"]
    assert trace["filter"]["ignored"] == {"anchor_nouns": ["hobby"]}
    assert trace["filter"]["kept"]["anchors"] == 2 and trace["filter"]["total"]["anchors"] == 3
    assert trace["prompts_overridden"] == ["no_answer"]  # the sample's Prompts table
    assert [c["name"] for c in trace["tool_calls"]] == ["vector_text_search", "cypher", "cypher"]
    assert trace["tool_calls"][0]["threshold"] == 0.5 or trace["tool_calls"][0]["threshold"] > 0
    assert trace["tool_calls"][1]["rows"] == len(expected_names)
