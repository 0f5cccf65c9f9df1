"""An imperfect model on samples/people, through the real agent loop on the embedded stores: each
typical Cypher mistake is refused with the right suggestion, and the query the model corrects
from the tool's error alone gives the golden answer in the next round. With the check off, the
same mistakes run silently and every answer is wrong: the failure the check exists for."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from standins.fake_llm import FakeLLM, corrected, imperfect_model
from vedana.agent import ask
from vedana.config import Settings
from vedana.stores.graph import GraphStore

# (the mistake, a golden question, the query written with it, the fix the refusal must name)
MISTAKES = [
    (
        "a label in the wrong case",
        "Which cities are in Portugal?",
        "MATCH (c:City) WHERE c.city_country = 'Portugal' RETURN c.city_name AS city ORDER BY city",
        "unknown label `City` (did you mean `city`?)",
    ),
    (
        "a misspelt relationship type",
        "How many people are interested in dominoes?",
        "MATCH (p:person)-[:PERSON_HAS_INTERESTS]->(i:interest {interest_name: 'dominoes'}) RETURN count(p) AS n",
        "unknown relationship type `PERSON_HAS_INTERESTS` (did you mean `PERSON_has_INTEREST`?)",
    ),
    (
        "a property that does not exist",
        "Who is interested in medieval furniture?",
        "MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest {interest_name: 'medieval furniture'}) "
        "RETURN p.name AS name ORDER BY name",
        "`person` nodes have no property `name` (did you mean `person_name`?)",
    ),
    (
        "a relationship against its direction",
        "How many people live in Lisbon?",
        "MATCH (c:city {city_name: 'Lisbon'})-[:PERSON_lives_in_CITY]->(p:person) RETURN count(p) AS n",
        "`PERSON_lives_in_CITY` runs from `person` to `city`, against the arrow in "
        "`(c:city {city_name: 'Lisbon'})-[:PERSON_lives_in_CITY]->(p:person)` "
        "(write `(c:city {city_name: 'Lisbon'})<-[:PERSON_lives_in_CITY]-(p:person)`)",
    ),
]


def golden(folder: Path) -> dict[str, str]:
    with (folder / "golden.csv").open(encoding="utf-8", newline="") as f:
        return {r["gds_question"]: r["gds_answer"] for r in csv.DictReader(f)}


def ask_imperfectly(settings: Settings, fake_llm: FakeLLM, graph: GraphStore, question: str, query: str):
    fake_llm.agent.clear()
    fake_llm.agent.append(imperfect_model(query))
    asked = len(fake_llm.agent_requests)
    result = ask(settings, question, use_filter=False, graph=graph)
    return result, len(fake_llm.agent_requests) - asked


@pytest.mark.slow
def test_each_mistake_is_refused_with_its_fix_and_the_corrected_query_answers_right(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, people_sample: Path
) -> None:
    answers = golden(people_sample)
    for mistake, question, query, fix in MISTAKES:
        result, rounds = ask_imperfectly(agent_settings, fake_llm, graph, question, query)

        first, second = result.trace.tool_calls
        assert first.error == f"refused before running: {fix}", mistake
        assert first.rows is None  # nothing ran
        assert second.arguments["query"] == corrected(query, first.error) != query
        assert second.error is None and second.rows, mistake
        assert result.answer == answers[question], mistake
        assert rounds == 3  # the mistake, its correction, the answer


@pytest.mark.slow
def test_without_the_check_the_same_mistakes_answer_wrong_in_silence(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, people_sample: Path
) -> None:
    answers = golden(people_sample)
    unchecked = agent_settings.model_copy(update={"cypher_schema_check": False})
    for mistake, question, query, _ in MISTAKES:
        result, rounds = ask_imperfectly(unchecked, fake_llm, graph, question, query)

        [call] = result.trace.tool_calls
        assert call.error is None, mistake  # the engine runs it: no error to learn from
        assert result.answer != answers[question] and rounds == 2, mistake
