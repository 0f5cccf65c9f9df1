"""A small knowledge base built by hand for the agent tests: its data model and its graph."""

from __future__ import annotations

from vedana.datamodel import Anchor, Attribute, DataModel, Link, Prompt, Query

PEOPLE = [
    ("p1", "Ada Okafor", 34),
    ("p2", "Bruno Silva", 61),
    ("p3", "Chen Wei", 27),
    ("p4", "Dana Novak", 45),
]
ANIMALS = [("a1", "quokka", "marsupial"), ("a2", "axolotl", "amphibian"), ("a3", "capybara", "rodent")]
LIKES = [("p1", "a1", 2015), ("p3", "a1", 2020), ("p4", "a1", 2011), ("p2", "a2", 2019), ("p4", "a3", 2022)]


def data_model(prompts: list[Prompt] | None = None) -> DataModel:
    return DataModel(
        anchors=[
            Anchor(
                noun="Person",
                description="A club member.",
                id_example="p1",
                attributes=(
                    Attribute(
                        "name", "Full name.", "Ada Okafor", "str", embeddable=True, embed_threshold=0.4
                    ),
                    Attribute("age", "Age in years.", "34", "int"),
                ),
            ),
            Anchor(
                noun="Animal",
                description="An animal people may like.",
                id_example="a1",
                attributes=(
                    Attribute("name", "Common name.", "quokka", "str", embeddable=True),
                    Attribute("kind", "Zoological group.", "marsupial", "str"),
                ),
            ),
            Anchor(
                noun="City",
                description="Where people live.",
                attributes=(Attribute("city_name", "Name of the city.", "Lisbon", "str"),),
            ),
        ],
        links=[
            Link(
                sentence="LIKES",
                anchor1="Person",
                anchor2="Animal",
                description="The person likes the animal.",
                has_direction=True,
                attributes=(Attribute("since", "Year the liking started.", "2015", "int"),),
            ),
            Link(sentence="LIVES_IN", anchor1="Person", anchor2="City", has_direction=True),
        ],
        queries=[
            Query("Who likes <animal>?", "MATCH (p:Person)-[:LIKES]->(a:Animal {name: $name}) RETURN p.name"),
            Query("How old is <person>?", "MATCH (p:Person {name: $name}) RETURN p.age"),
        ],
        prompts=prompts or [],
    )


def load_graph(graph) -> None:  # graph: vedana.stores.graph.GraphStore
    graph.query(
        "UNWIND $rows AS r CREATE (:Person {id: r[0], name: r[1], age: r[2]})",
        {"rows": [list(p) for p in PEOPLE]},
    )
    graph.query(
        "UNWIND $rows AS r CREATE (:Animal {id: r[0], name: r[1], kind: r[2]})",
        {"rows": [list(a) for a in ANIMALS]},
    )
    graph.query(
        "UNWIND $rows AS r MATCH (p:Person {id: r[0]}), (a:Animal {id: r[1]}) CREATE (p)-[:LIKES {since: r[2]}]->(a)",
        {"rows": [list(x) for x in LIKES]},
    )


def save(engine, dm: DataModel) -> None:  # engine: sqlalchemy.Engine
    from vedana.stores.staging import save_data_model

    with engine.begin() as conn:
        save_data_model(conn, dm)


def put_into_staging(engine, dm: DataModel) -> None:  # engine: sqlalchemy.Engine
    """The same knowledge base as staging rows, the way `vedana sync` leaves them, so that
    `vedana index` builds its graph and vectors."""
    from support.staging_rows import put_data_model, put_edge, put_node, reset_staging

    reset_staging(engine)
    put_data_model(engine, dm)
    with engine.begin() as conn:
        for pid, name, age in PEOPLE:
            put_node(conn, "Person", pid, {"name": name, "age": age})
        for aid, name, kind in ANIMALS:
            put_node(conn, "Animal", aid, {"name": name, "kind": kind})
        for pid, aid, since in LIKES:
            put_edge(conn, "LIKES", "Person", pid, "Animal", aid, {"since": since})
