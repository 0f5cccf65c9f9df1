"""Vector search that knows the graph, on the embedded Postgres with real local embeddings:
filters, several phrasings, typed neighbourhoods (1 and 2 hops, capped) and MMR, each search
one SQL statement."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from vedana.datamodel import DataModel
from vedana.stores.neighbourhood import (
    NeighbourhoodQuery,
    SearchOptionError,
    check_conditions,
    parse_condition,
    run_neighbourhood_search,
    undirected_links,
)


@contextmanager
def counted(engine) -> Iterator[list[str]]:  # engine: sqlalchemy.Engine
    """The SQL statements the engine sends while the block runs."""
    from sqlalchemy import event

    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def search(engine, embedder, dm: DataModel, label: str, attribute: str, texts: list[str], **options: Any):
    where = check_conditions(dm.anchor(label), [parse_condition(w) for w in options.pop("where", [])])
    query = NeighbourhoodQuery(
        label=label,
        attribute=attribute,
        vectors=embedder.embed(texts),
        threshold=options.pop("threshold", 0.3),
        top_n=options.pop("top_n", 10),
        where=where,
        undirected=undirected_links(dm),
        **options,
    )
    with engine.connect() as conn, counted(engine) as statements:
        hits = run_neighbourhood_search(conn, query, 384, "embedding")
    assert len(statements) == 1, statements  # one round trip, whatever the options
    return [h.to_dict() for h in hits]


def test_a_filter_keeps_only_the_nodes_that_meet_it(pg_engine, indexed_kb: DataModel, local_embedder) -> None:
    everyone = search(pg_engine, local_embedder, indexed_kb, "Person", "name", ["a person"], threshold=0.0)
    assert {h["node_id"] for h in everyone} == {"p1", "p2", "p3", "p4"}
    older = search(pg_engine, local_embedder, indexed_kb, "Person", "name", ["a person"], threshold=0.0,
                   where=["age>=40"])  # fmt: skip
    assert {h["node_id"] for h in older} == {"p2", "p4"}
    assert all(h["attributes"]["age"] >= 40 for h in older)
    exact = search(pg_engine, local_embedder, indexed_kb, "Person", "name", ["a person"], threshold=0.0,
                   where=["age<=40", "name~wei"])  # fmt: skip
    assert [h["node_id"] for h in exact] == ["p3"]  # Chen Wei, 27
    kind = search(pg_engine, local_embedder, indexed_kb, "Animal", "name", ["an animal"], threshold=0.0,
                  where=["kind=Marsupial"])  # fmt: skip
    assert [h["node_id"] for h in kind] == ["a1"]


def test_an_unknown_or_mistyped_filter_says_what_to_fix(indexed_kb: DataModel) -> None:
    person = indexed_kb.anchor("Person")
    assert person is not None
    with pytest.raises(
        SearchOptionError, match=r"'height' is not an attribute of 'Person'; its attributes: name, age"
    ):
        check_conditions(person, [parse_condition("height>=3")])
    with pytest.raises(SearchOptionError, match="ranges take int, float, date or datetime"):
        check_conditions(person, [parse_condition("name>=A")])
    with pytest.raises(SearchOptionError, match="is not a number"):
        check_conditions(person, [parse_condition("age>=old")])
    with pytest.raises(SearchOptionError, match="write attr=value"):
        parse_condition("age")


def test_several_phrasings_find_each_node_once(pg_engine, indexed_kb: DataModel, local_embedder) -> None:
    hits = search(pg_engine, local_embedder, indexed_kb, "Animal", "name",
                  ["quokka", "a small marsupial, the quokka", "quokkas"], threshold=0.5)  # fmt: skip
    ids = [h["node_id"] for h in hits]
    assert ids.count("a1") == 1 and len(ids) == len(set(ids))
    quokka = next(h for h in hits if h["node_id"] == "a1")
    assert quokka["matched_texts"] == [1, 2, 3] and quokka["reason"] == "vector" and quokka["depth"] == 0


def test_expand_one_hop_gives_the_linked_people_with_link_and_direction(
    pg_engine, indexed_kb: DataModel, local_embedder
) -> None:
    [quokka] = search(pg_engine, local_embedder, indexed_kb, "Animal", "name", ["quokka"], threshold=0.7,
                      expand=1)  # fmt: skip
    assert quokka["node_id"] == "a1"
    [group] = quokka["links"]
    assert (group["link"], group["direction"]) == ("LIKES", "in")  # Person -[:LIKES]-> Animal
    assert [n["node_id"] for n in group["nodes"]] == ["p1", "p3", "p4"]
    first = group["nodes"][0]
    assert first == {
        "label": "Person",
        "node_id": "p1",
        "reason": "link LIKES",
        "depth": 1,
        "attributes": {"name": "Ada Okafor", "age": 34},
        "edge_attributes": {"since": 2015},
    }


def test_expand_two_hops_stops_at_two_and_at_the_cap(
    pg_engine, indexed_kb: DataModel, local_embedder
) -> None:
    [quokka] = search(pg_engine, local_embedder, indexed_kb, "Animal", "name", ["quokka"], threshold=0.7,
                      expand=2, link_cap=2)  # fmt: skip
    [group] = quokka["links"]
    assert [n["node_id"] for n in group["nodes"]] == ["p1", "p3"] and group["more"] == 1  # capped at 2 of 3
    # p1 and p3 like only the quokka: their second hop must not lead back to the hit.
    assert all("links" not in n for n in group["nodes"])
    [unlimited] = search(pg_engine, local_embedder, indexed_kb, "Animal", "name", ["quokka"], threshold=0.7,
                         expand=2)  # fmt: skip
    depths = set()

    def walk(node: dict[str, Any]) -> None:
        depths.add(node["depth"])
        for g in node.get("links", []):
            for n in g["nodes"]:
                walk(n)

    walk(unlimited)
    assert depths == {0, 1, 2}  # never a third hop (a3's other likers are not listed)
    dana = next(n for n in unlimited["links"][0]["nodes"] if n["node_id"] == "p4")
    [onward] = dana["links"]
    assert (onward["link"], onward["direction"], [n["node_id"] for n in onward["nodes"]]) == (
        "LIKES",
        "out",
        ["a3"],
    )
    assert onward["nodes"][0]["depth"] == 2 and onward["nodes"][0]["reason"] == "link LIKES"


def test_mmr_prefers_diverse_hits(pg_engine, indexed_kb: DataModel, local_embedder) -> None:
    plain = search(
        pg_engine, local_embedder, indexed_kb, "Animal", "name", ["an animal"], threshold=0.0, top_n=2
    )
    diverse = search(pg_engine, local_embedder, indexed_kb, "Animal", "name", ["an animal"], threshold=0.0, top_n=2,
                     mmr=True)  # fmt: skip
    assert len(plain) == len(diverse) == 2
    assert diverse[0]["node_id"] == plain[0]["node_id"]  # the most relevant hit stays first


def test_the_agent_tool_expands_in_one_statement_per_call(
    agent_settings, pg_engine, graph, indexed_kb: DataModel, local_embedder
) -> None:
    import json

    from vedana.agent.loop import neighbourhood_search_for
    from vedana.agent.sources import SourceRegistry
    from vedana.agent.tools import Toolbox

    sources = SourceRegistry()
    toolbox = Toolbox(
        agent_settings, indexed_kb, graph, None, sources=sources,
        neighbourhood=neighbourhood_search_for(agent_settings, pg_engine, local_embedder, indexed_kb),
    )  # fmt: skip
    args = {"label": "Animal", "property": "name", "text": "quokka", "texts": ["quokkas"], "expand": 1}
    toolbox.run("vector_text_search", json.dumps(args), index=0, round_=1)  # reads the model once
    with counted(pg_engine) as statements:
        text, trace = toolbox.run("vector_text_search", json.dumps(args), index=1, round_=1)
    assert len(statements) == 1, statements
    assert trace.error is None, text
    result = json.loads(text)
    quokka = next(h for h in result["hits"] if h["node_id"] == "a1")
    assert quokka["cite"] == "[1]" and quokka["matched_texts"] == [1, 2]
    people = quokka["links"][0]["nodes"]
    assert [(p["node_id"], p["reason"]) for p in people] == [
        ("p1", "link LIKES"),
        ("p3", "link LIKES"),
        ("p4", "link LIKES"),
    ]
    assert all(p["cite"] for p in people)  # the neighbours are sources the answer can cite

    bad = {
        "label": "Person",
        "property": "name",
        "text": "x",
        "where": [{"attribute": "height", "op": ">=", "value": 2}],
    }
    text, trace = toolbox.run("vector_text_search", json.dumps(bad), index=2, round_=1)
    assert text.startswith("error: where: 'height' is not an attribute of 'Person'")


def test_vedana_search_takes_the_same_options(people_sample, settings) -> None:
    import json

    from typer.testing import CliRunner

    from vedana.cli.app import app
    from vedana.config import reset_settings

    reset_settings()
    result = CliRunner().invoke(
        app,
        ["search", "interest", "interest_name", "quokkas", "--text", "quokka documentaries", "--expand", "1",
         "--top-n", "2", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["texts"] == ["quokkas", "quokka documentaries"] and data["expand"] == 1
    first = data["hits"][0]
    assert (first["node_id"], first["reason"], first["depth"]) == ("interest:0410", "vector", 0)
    [group] = first["links"]
    assert group["link"] == "PERSON_has_INTEREST" and group["direction"] == "both"
    assert all(n["depth"] == 1 and n["reason"] == "link PERSON_has_INTEREST" for n in group["nodes"])

    older = CliRunner().invoke(
        app,
        [
            "search",
            "person",
            "person_name",
            "a person",
            "--where",
            "person_age>=70",
            "--threshold",
            "0",
            "--json",
        ],
    )
    assert older.exit_code == 0, older.output
    ages = [h["attributes"]["person_age"] for h in json.loads(older.stdout)["hits"]]
    assert ages and all(age >= 70 for age in ages)

    unknown = CliRunner().invoke(app, ["search", "person", "person_name", "x", "--where", "height>=2"])
    assert (
        isinstance(unknown.exception, SearchOptionError) and unknown.exception.exit_code == 2
    )  # main() exits 2
    assert "'height' is not an attribute of 'person'" in str(unknown.exception)
