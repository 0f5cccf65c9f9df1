"""Rendering the data model for the agent (text) and for the filter (compact JSON)."""

from __future__ import annotations

import json

from support.agent_kb import data_model
from vedana.datamodel.render import catalog, render_catalog, render_playbook, render_text


def test_text_names_every_label_type_and_property_with_what_is_searchable() -> None:
    text = render_text(data_model())
    assert "- (:Person) A club member. [id e.g. 'p1']" in text
    assert "  .name (str, searchable by meaning): Full name. e.g. 'Ada Okafor'" in text
    assert "  .age (int): Age in years. e.g. 34" in text
    assert "- (:Person)-[:LIKES]->(:Animal) The person likes the animal." in text
    assert "  .since (int): Year the liking started. e.g. 2015" in text


def test_undirected_links_say_so() -> None:
    dm = data_model()
    dm.links[1] = type(dm.links[1])(sentence="KNOWS", anchor1="Person", anchor2="Person", has_direction=False)
    assert "- (:Person)-[:KNOWS]-(:Person) (undirected: stored in both directions)" in render_text(dm)


def test_catalog_is_compact_json_with_numbered_queries() -> None:
    dm = data_model()
    text = render_catalog(dm)
    assert "\n" not in text and ", " not in text.replace("Who likes", "")
    data = json.loads(text)
    assert data == catalog(dm)
    assert [a["noun"] for a in data["anchors"]] == ["Person", "Animal", "City"]
    assert data["links"][0] == {
        "sentence": "LIKES",
        "from": "Person",
        "to": "Animal",
        "description": "The person likes the animal.",
        "attributes": [{"name": "since", "description": "Year the liking started."}],
    }
    assert data["queries"] == [
        {"id": 1, "name": "Who likes <animal>?"},
        {"id": 2, "name": "How old is <person>?"},
    ]


def test_playbook_keeps_catalog_numbers() -> None:
    dm = data_model()
    text = render_playbook([(2, dm.queries[1])])
    assert text.startswith("2. How old is <person>?\nMATCH (p:Person {name: $name}) RETURN p.age")
    assert render_playbook([]) == "(no playbook entries)"


def test_a_blank_prompts_row_keeps_the_built_in_template() -> None:
    from vedana.agent.templates import Templates, builtin
    from vedana.datamodel import Prompt

    templates = Templates(data_model(prompts=[Prompt("finalize", "  \n"), Prompt(" no_answer ", "Nope.")]))
    assert templates.text("finalize") == builtin("finalize")
    assert templates.text("no_answer") == "Nope."
    assert templates.overridden == ["no_answer"]


def test_the_built_in_instructions_say_how_to_answer_exactly() -> None:
    from vedana.agent.templates import Templates

    text = Templates(data_model()).render("instructions", row_limit=200, max_rounds=5)
    assert "{{" not in text and "capped\n  at 200 rows" in text and "at most 5 rounds" in text
    for point in (
        "turn a name or phrase from the question into exact graph ids",  # vector search resolves names
        "Use it for exact\n  lookups, counts, complete lists",  # Cypher for counts and lists
        "cite the ids of the nodes it rests on",
        "say that it is incomplete and give the total count",  # truncated results
        "stored in both directions",
    ):
        assert point in text
