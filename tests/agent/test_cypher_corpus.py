"""The schema check never refuses a valid query: a corpus gathered from the repository (the
samples' data models and playbooks, the README's and the golden sets' scripted queries, the
documented commands) and written by hand, each checked against its data model and run on the
embedded FalkorDB to prove it is valid Cypher there."""

from __future__ import annotations

import re

import pytest

from support.agent_kb import data_model
from support.cypher_corpus import (
    HANDWRITTEN,
    OTHER_DIALECTS,
    ROOT,
    command_queries,
    model_queries,
    sample_model,
    script_queries,
)
from vedana.agent.cypher_schema import graph_schema
from vedana.cypher.guard import refusal_reason, without_final_semicolon
from vedana.cypher.schema import GraphSchema, schema_problems
from vedana.datamodel import DataModel
from vedana.errors import CypherError
from vedana.stores.graph import GraphStore

PEOPLE, REGULATIONS = sample_model("people"), sample_model("regulations")
GATHERED = (
    model_queries(PEOPLE)
    + model_queries(REGULATIONS)
    + script_queries(ROOT / "scripts" / "readme_examples.py")
    + command_queries(ROOT / "README.md")
    + command_queries(ROOT / "scripts" / "demo.sh")
    + command_queries(ROOT / "src" / "vedana" / "cli" / "cypher.py")
)
SAMPLES_CORPUS = list(dict.fromkeys(GATHERED + HANDWRITTEN))
GOLDEN_KB_CORPUS = script_queries(ROOT / "tests" / "support" / "eval_golden.py")
# Parameters the corpus uses, so each query runs as written.
PARAMS = {"id": "x", "name": "x", "names": ["x"], "person_id": "x", "city_id": "x", "code": "x"}


def samples_schema() -> GraphSchema:
    """Both samples' names at once: they share none, so each query meets its own model's."""
    both = DataModel(anchors=PEOPLE.anchors + REGULATIONS.anchors, links=PEOPLE.links + REGULATIONS.links)
    schema = graph_schema(both)
    assert schema is not None
    return schema


def test_the_corpus_has_more_than_fifty_distinct_queries_from_every_source() -> None:
    assert len(SAMPLES_CORPUS) + len(OTHER_DIALECTS) + len(GOLDEN_KB_CORPUS) >= 100
    assert len(set(GATHERED)) >= 45 and len(GOLDEN_KB_CORPUS) >= 5
    assert all(refusal_reason(q) is None for q in SAMPLES_CORPUS + OTHER_DIALECTS + GOLDEN_KB_CORPUS)


@pytest.mark.parametrize("query", SAMPLES_CORPUS + OTHER_DIALECTS)
def test_no_valid_query_on_the_samples_is_refused(query: str) -> None:
    assert schema_problems(query, samples_schema()) == []


@pytest.mark.parametrize("query", GOLDEN_KB_CORPUS)
def test_no_golden_set_query_is_refused_on_its_own_model(query: str) -> None:
    schema = graph_schema(data_model())
    assert schema is not None
    assert schema_problems(query, schema) == []


def test_every_corpus_query_runs_on_the_embedded_falkordb(graph: GraphStore) -> None:
    """Valid Cypher, not only valid to the checker: each runs (on an empty graph)."""
    failed = {}
    for query in [q for q in SAMPLES_CORPUS if "=~" not in q]:  # the README's model A tries `=~` on purpose
        params = None if query.upper().startswith("CYPHER") else PARAMS
        try:
            graph.query(without_final_semicolon(query), params, read_only=True, row_limit=10, timeout_s=10)
        except Exception as exc:  # collected, so one run names every query the engine rejects
            failed[query] = str(exc)
    assert failed == {}


def test_the_other_dialects_forms_are_not_falkordbs(graph: GraphStore) -> None:
    """The forms kept out of the run above: FalkorDB rejects each (if one starts to run, move it)."""
    for query in OTHER_DIALECTS:
        with pytest.raises(CypherError):
            graph.query(query, PARAMS, read_only=True, row_limit=10, timeout_s=10)


def test_a_wrong_case_label_or_type_anywhere_in_the_corpus_is_caught() -> None:
    """The other side of the corpus: written in the wrong case, each data-model label or type of
    each query is refused, whatever form the query has."""
    schema, mutated = samples_schema(), 0
    for query in SAMPLES_CORPUS + OTHER_DIALECTS:
        for name in sorted(schema.labels | schema.types):
            written = re.compile(rf":{re.escape(name)}(?!\w)")
            if not written.search(query):
                continue
            wrong = name.swapcase()
            problems = schema_problems(written.sub(f":{wrong}", query, count=1), schema)
            kind = "label" if name in schema.labels else "relationship type"
            assert f"unknown {kind} `{wrong}` (did you mean `{name}`?)" in problems, query
            mutated += 1
    assert mutated >= 150
