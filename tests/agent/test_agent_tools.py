"""The tools on the real graph: row cap and truncation notice, timeout, errors as text, no vectors."""

from __future__ import annotations

import json

import pytest

from support.agent_kb import data_model
from vedana.agent.budget import estimated_tokens
from vedana.agent.tools import (
    MAX_FLOAT_LIST,
    Toolbox,
    clean,
    searchables,
    vector_args_model,
)
from vedana.config import Settings
from vedana.datamodel import DataModel
from vedana.stores.graph import GraphStore


def toolbox(settings: Settings, graph: GraphStore, dm: DataModel | None = None, **changes: object) -> Toolbox:
    return Toolbox(settings.model_copy(update=changes), dm or data_model(), graph, vector_search=None)


def run_cypher_tool(box: Toolbox, query: str):
    return box.run("cypher", json.dumps({"query": query}), index=0, round_=1)


def test_rows_are_capped_and_the_model_is_told(settings: Settings, graph: GraphStore, kb: DataModel) -> None:
    box = toolbox(settings, graph, cypher_rows_limit=2)
    text, trace = run_cypher_tool(box, "MATCH (p:Person) RETURN p.id AS id ORDER BY id")

    payload = json.loads(text)
    assert payload["rows"] == [{"id": "p1"}, {"id": "p2"}]
    assert payload["truncated"] is True
    assert "only the first 2 rows" in payload["note"]
    assert (trace.rows, trace.truncated, trace.result_chars) == (2, True, len(text))


def test_a_result_within_the_cap_is_not_marked(settings: Settings, graph: GraphStore, kb: DataModel) -> None:
    text, trace = run_cypher_tool(
        toolbox(settings, graph, cypher_rows_limit=4), "MATCH (p:Person) RETURN p.id"
    )
    assert "truncated" not in json.loads(text) and trace.truncated is False and trace.rows == 4


def test_a_result_too_long_to_read_loses_rows_and_the_model_is_told(
    settings: Settings, graph: GraphStore, kb: DataModel
) -> None:
    box = toolbox(settings, graph, cypher_rows_limit=1000, tool_result_max_tokens=2000)
    text, trace = run_cypher_tool(
        box, "UNWIND range(1, 900) AS i RETURN i, reduce(s = '', x IN range(1, 100) | s + 'x') AS pad"
    )
    payload = json.loads(text)
    assert estimated_tokens(text) <= 2000
    assert 1 <= len(payload["rows"]) < 900 and payload["rows"][0]["i"] == 1
    assert payload["truncated"] is True and "tool-result budget" in payload["note"]
    assert (trace.rows, trace.truncated) == (len(payload["rows"]), True)


def test_the_row_cap_stops_the_engine_early(settings: Settings, graph: GraphStore) -> None:
    """Row 6 divides by zero: a server that evaluated past the cap would fail, so three rows and
    a truncation notice prove the cap stopped it. Columns keep the query's order."""
    box = toolbox(settings, graph, cypher_rows_limit=3)
    text, trace = run_cypher_tool(box, "UNWIND range(1, 10) AS i RETURN 10 / (i - 6) AS x, i")
    payload = json.loads(text)
    assert payload["columns"] == ["x", "i"]
    assert payload["rows"] == [{"x": -2, "i": 1}, {"x": -2, "i": 2}, {"x": -3, "i": 3}]
    assert payload["truncated"] is True and (trace.rows, trace.truncated) == (3, True)
    text, _ = run_cypher_tool(box, "UNWIND range(1, 10) AS i RETURN i, 10 / (i - 6) AS x ORDER BY i DESC")
    assert text.startswith("error: FalkorDB: Division by zero")  # ORDER BY needs every row first


@pytest.mark.parametrize(
    "query",
    [
        "WITH [3, 1, 2] AS xs UNWIND xs AS x RETURN x, x * 10 AS tens",  # CALL {} would take WITH as an import
        "UNWIND [3, 1, 2] AS x WITH x, x * 10 AS tens RETURN *",  # column order unknown
        "EXPLAIN MATCH (n) RETURN n",
    ],
)
def test_queries_that_cannot_be_capped_on_the_server_run_as_written(
    settings: Settings, graph: GraphStore, query: str
) -> None:
    box = toolbox(settings, graph, cypher_rows_limit=2)
    text, trace = run_cypher_tool(box, query)
    payload = json.loads(text)
    if not query.startswith("EXPLAIN"):
        assert payload["rows"] == [{"x": 3, "tens": 30}, {"x": 1, "tens": 10}] and payload["truncated"]
    assert trace.error is None


def test_an_engine_error_quotes_the_query_as_written(settings: Settings, graph: GraphStore) -> None:
    text, _ = run_cypher_tool(toolbox(settings, graph), "MATCH (n:Person) RETURN nosuch")
    assert "nosuch" in text and "fix the query" in text and "CALL {" not in text


def test_a_slow_query_times_out_and_the_model_is_told(settings: Settings, graph: GraphStore) -> None:
    box = toolbox(settings, graph, cypher_timeout_s=0.001)
    text, trace = run_cypher_tool(
        box, "UNWIND range(1, 20000000) AS x WITH x WHERE x % 7 = 3 RETURN count(x) AS n"
    )
    assert text.startswith("error: the query timed out after 0.001 s")
    assert trace.error is not None and trace.rows is None


def test_nodes_come_back_as_plain_values_without_vectors(settings: Settings, graph: GraphStore) -> None:
    embedding = [0.125] * 384
    graph.query(
        "CREATE (:Person {id: 'v1', name: 'Vera', embedding: $e, scores: [0.5, 1.5]})", {"e": embedding}
    )
    text, _ = run_cypher_tool(  # properties no data model describes: the schema check would refuse them
        toolbox(settings, graph, cypher_schema_check=False),
        "MATCH (p:Person {id: 'v1'}) RETURN p, p.embedding AS e",
    )
    [row] = json.loads(text)["rows"]
    assert row["p"] == {
        "labels": ["Person"],
        "properties": {"id": "v1", "name": "Vera", "embedding": "<384 floats omitted>", "scores": [0.5, 1.5]},
    }
    assert row["e"] == "<384 floats omitted>"
    assert "0.125" not in text


def test_clean_drops_only_long_float_lists() -> None:
    short = [0.1] * MAX_FLOAT_LIST
    assert clean({"a": short, "b": [0.1] * (MAX_FLOAT_LIST + 1), "c": list(range(100))}) == {
        "a": short,
        "b": f"<{MAX_FLOAT_LIST + 1} floats omitted>",
        "c": list(range(100)),
    }


def test_bad_arguments_and_unknown_tools_are_errors_for_the_model(
    settings: Settings, graph: GraphStore
) -> None:
    box = toolbox(settings, graph)
    text, trace = box.run("cypher", "{not json", index=0, round_=1)
    assert text.startswith("error: the arguments are not valid JSON") and trace.error
    text, _ = box.run("cypher", json.dumps({"cypher": "MATCH (n) RETURN n"}), index=1, round_=1)
    assert text.startswith("error: invalid arguments for cypher: query: Field required")
    text, _ = box.run("drop_everything", "{}", index=2, round_=1)
    assert text.startswith("error: there is no tool 'drop_everything'")


def test_vector_tool_enums_come_from_embeddable_attributes() -> None:
    dm = data_model()
    args = vector_args_model(searchables(dm))
    schema = args.model_json_schema()
    assert schema["$defs"]["SearchLabel"]["enum"] == ["Person", "Animal"]
    assert schema["$defs"]["SearchProperty"]["enum"] == ["name"]
    with pytest.raises(ValueError):
        args.model_validate({"label": "City", "property": "name", "text": "x"})


def test_vector_tool_takes_free_strings_when_nothing_is_embeddable(
    settings: Settings, graph: GraphStore
) -> None:
    dm = DataModel(anchors=[a.__class__(noun=a.noun) for a in data_model().anchors])
    box = toolbox(settings, graph, dm)
    spec = box.specs()[0]["function"]["parameters"]
    assert spec["properties"]["label"] == {
        "description": "Node label or relationship type to search",
        "title": "Label",
        "type": "string",
    }
    text, _ = box.run(
        "vector_text_search", json.dumps({"label": "City", "property": "x", "text": "t"}), index=0, round_=1
    )
    assert text == "error: vector search is not available (no vector index configured)"


def test_vector_tool_rejects_a_pair_that_is_not_searchable(settings: Settings, graph: GraphStore) -> None:
    calls = []
    box = Toolbox(settings, data_model(), graph, lambda *a: calls.append(a) or [])
    text, _ = box.run(
        "vector_text_search",
        json.dumps({"label": "Person", "property": "name", "text": "Ada"}),
        index=0,
        round_=1,
    )
    assert json.loads(text)["hits"] == [] and calls[0][:4] == ("node", "Person", "name", "Ada")
    assert calls[0][4] == 0.4  # the attribute's own threshold
    dm = data_model()
    dm.anchors[1] = dm.anchors[1].__class__(
        noun="Animal", attributes=(dm.anchors[1].attributes[1].__class__("kind", embeddable=True),)
    )
    box = Toolbox(settings, dm, graph, lambda *a: [])
    text, _ = box.run(
        "vector_text_search",
        json.dumps({"label": "Person", "property": "kind", "text": "x"}),
        index=0,
        round_=1,
    )
    assert text == "error: Person.kind is not searchable by meaning; searchable: Person.name, Animal.kind"


def test_vector_tool_searches_the_edge_table_for_a_link_attribute_with_its_own_settings(
    settings: Settings, graph: GraphStore
) -> None:
    from dataclasses import replace

    from vedana.datamodel import Attribute

    dm = data_model()
    note = Attribute(
        "note", "Why they like it.", "cute", "str", embeddable=True, embed_threshold=0.25, embed_top_n=3
    )
    dm.links[0] = replace(dm.links[0], attributes=(*dm.links[0].attributes, note))
    calls = []
    box = Toolbox(
        settings.model_copy(update={"embeddings_top_n": 7}), dm, graph, lambda *a: calls.append(a) or []
    )
    schema = box.specs()[0]["function"]["parameters"]["properties"]
    assert schema["label"]["enum"] == ["Person", "Animal", "LIKES"]
    for label, prop in (("LIKES", "note"), ("Person", "name")):
        _, trace = box.run(
            "vector_text_search",
            json.dumps({"label": label, "property": prop, "text": "t"}),
            index=0,
            round_=1,
        )
        assert trace.error is None
    assert calls == [("edge", "LIKES", "note", "t", 0.25, 3), ("node", "Person", "name", "t", 0.4, 7)]
