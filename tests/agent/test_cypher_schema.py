"""The schema check on its own: every kind of wrong name is refused with the closest real names,
also through WITH, map projections, property maps, subqueries and inferred labels; what cannot be
told (a variable of unknown kind, a label only the graph knows) is let through."""

from __future__ import annotations

import pytest

from support.cypher_corpus import sample_model
from vedana.agent.cypher_schema import graph_schema
from vedana.cypher.schema import MAX_PROBLEMS, GraphSchema, closest, ensure_known_names, schema_problems
from vedana.datamodel import DataModel
from vedana.errors import CypherSchemaMismatch


@pytest.fixture(scope="module")
def schema() -> GraphSchema:
    people, regulations = sample_model("people"), sample_model("regulations")
    both = graph_schema(
        DataModel(anchors=people.anchors + regulations.anchors, links=people.links + regulations.links)
    )
    assert both is not None
    return both


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("MATCH (p:Person) RETURN p", "unknown label `Person` (did you mean `person`?)"),
        ("MATCH (p:persn) RETURN p", "unknown label `persn` (did you mean `person`?)"),
        (
            "MATCH (h:Human) RETURN h",
            "unknown label `Human` (the labels are `city`, `document`, `document_chunk`, `interest`, "
            "`person`, `regulation`)",
        ),
        (
            "MATCH (p:person)-[:PERSON_HAS_INTEREST]->(i) RETURN i",
            "unknown relationship type `PERSON_HAS_INTEREST` (did you mean `PERSON_has_INTEREST`?)",
        ),
        (
            "MATCH (p:person)-[:LIVES_IN]->(c) RETURN c",
            "unknown relationship type `LIVES_IN` (did you mean `PERSON_lives_in_CITY`?)",
        ),
        (
            "MATCH (p:person) RETURN p.name",
            "`person` nodes have no property `name` (did you mean `person_name`?)",
        ),
        ("MATCH (p:person) WHERE p.age > 30 RETURN p", "`person` nodes have no property `age` (did you mean"),
        (
            "MATCH (:person)-[r:PERSON_has_INTEREST]->(:interest) RETURN r.since",
            "`PERSON_has_INTEREST` relationships have no property `since` (did you mean `since_year`?)",
        ),
        (
            "MATCH (p:person)-[r:PERSON_lives_in_CITY]->(c:city) RETURN r.since",
            "`PERSON_lives_in_CITY` relationships have no property `since` (they have no properties)",
        ),
        (
            "MATCH (c:city)-[:PERSON_lives_in_CITY]->(p:person) RETURN p",
            "`PERSON_lives_in_CITY` runs from `person` to `city`, against the arrow in "
            "`(c:city)-[:PERSON_lives_in_CITY]->(p:person)` (write `(c:city)<-[:PERSON_lives_in_CITY]-(p:person)`)",
        ),
        (
            "MATCH (p:person)<-[:PERSON_lives_in_CITY]-(c:city) RETURN p",
            "(write `(p:person)-[:PERSON_lives_in_CITY]->(c:city)`)",
        ),
        (
            "MATCH (p:person)-[:PERSON_lives_in_CITY]->(i:interest) RETURN i",
            "`PERSON_lives_in_CITY` runs from `person` to `city`, so it cannot link the nodes of "
            "`(p:person)-[:PERSON_lives_in_CITY]->(i:interest)`",
        ),
        ("MATCH (x:city)<-[:PERSON_has_INTEREST]-(p) RETURN p", "so it cannot link the nodes of"),
    ],
)
def test_each_kind_of_wrong_name_is_refused_with_the_closest_real_names(
    schema: GraphSchema, query: str, problem: str
) -> None:
    [found] = schema_problems(query, schema)
    assert problem in found, found


@pytest.mark.parametrize(
    ("query", "wrong"),
    [
        ("MATCH (p:person) WITH p AS member RETURN member.name", "`name`"),  # a WITH alias keeps its labels
        ("MATCH (p:person) WITH p, count(*) AS n RETURN p.name, n", "`name`"),
        ("MATCH (p:person) RETURN p {.person_name, .nme}", "`nme`"),  # a map projection's keys
        ("MATCH (p:person {nme: 'x'}) RETURN p", "`nme`"),  # a pattern's property map
        ("MATCH (p:person)-[r:PERSON_has_INTEREST {level: 'x'}]->(i) RETURN i", "`level`"),
        (
            "MATCH (p:person)-[:PERSON_lives_in_CITY]->(c) RETURN c.name",
            "`city` nodes",
        ),  # inferred: c is a city
        ("MATCH (c:city)<-[:PERSON_lives_in_CITY]-(p) WHERE p.age > 3 RETURN c", "`person` nodes"),
        ("MATCH (n) WHERE n:Person RETURN n", "`Person`"),  # a label predicate
        ("MATCH (p:person) WHERE (p)-[:LIVES_IN]->() RETURN p", "`LIVES_IN`"),  # a pattern predicate
        ("MATCH (p:person) RETURN [(p)-->(i:Interest) | i]", "`Interest`"),  # a pattern comprehension
        ("MATCH (p:person) RETURN [(p)-[:PERSON_has_INTEREST]->(i:interest) | i.name]", "`name`"),
        ("MATCH (p:person) CALL { WITH p RETURN p.name AS n } RETURN n", "`name`"),  # a subquery
        ("MATCH (p:person) RETURN p.person_name UNION MATCH (c:city) RETURN c.name", "`name`"),
        ("OPTIONAL MATCH (p:person)-[:PERSON_lives_in_CITY]->(c:city) RETURN c.country", "`country`"),
        ("MATCH (p:`Person`) RETURN p", "`Person`"),
        ("MATCH (p:person) RETURN p.`full name`", "`full name`"),
        ("MATCH (n:person:Human) RETURN n", "`Human`"),
        ("MATCH ()-[r:PERSON_has_INTEREST|LIKES]->() RETURN r", "`LIKES`"),
        ("MATCH ()-[r:PERSON_has_INTEREST|:LIKES]->() RETURN r", "`LIKES`"),
        ("MATCH (p:person) RETURN {isCity: p:City} AS m", "`City`"),  # a label predicate as a map value
        ("MATCH (p:person) WITH p SKIP 1 LIMIT 2 RETURN p.nme", "`nme`"),
        ("MATCH (p:person) RETURN p ORDER BY p.nme", "`nme`"),
        ("MATCH (p:person) RETURN p{.nme}", "`nme`"),
        ("MATCH (`my p`:person) RETURN `my p`.nme", "`nme`"),
        ("MATCH (p:person {`nme`: 'x'}) RETURN p", "`nme`"),
        ("MATCH (p:person) MATCH (c:city {name: p.person_name}) RETURN c", "`city` nodes"),
        (
            "MATCH (p:person) WHERE EXISTS { MATCH (p)-[:PERSON_lives_in_CITY]->(c) WHERE c.name = 'x' } RETURN p",
            "`name`",
        ),
        ("MATCH (p:person) RETURN COUNT { (p)-[:PERSON_has_INTEREST]->(i) WHERE i.name = 'x' }", "`name`"),
        ("MATCH (p:person) RETURN [(p)-[:PERSON_lives_in_CITY]->(c) | c.name][0] AS city", "`name`"),
        ("MATCH (p:person)\n// the members\nWHERE p.nme = 'x' RETURN p", "`nme`"),
    ],
)
def test_names_are_checked_through_every_form_that_keeps_a_variables_kind(
    schema: GraphSchema, query: str, wrong: str
) -> None:
    problems = schema_problems(query, schema)
    assert len(problems) == 1 and wrong in problems[0], problems


@pytest.mark.parametrize(
    "query",
    [
        "UNWIND [{name: 1}] AS p RETURN p.name",  # a value, not a node
        "MATCH (p:person) WITH collect(p) AS ps UNWIND ps AS p RETURN p.anything",  # unknown once unwound
        "MATCH (p:person) RETURN [p IN [{name: 1}] | p.name] AS names",  # a comprehension's own p
        "MATCH (p:person) RETURN any(p IN [{name: 1}] WHERE p.name = 1)",
        "MATCH (p:person) RETURN reduce(p = {name: 0}, x IN [1] | p) AS r",
        "MATCH (p:person) WITH p.person_name AS p RETURN p.name",  # p is now a string
        "MATCH (n) RETURN n.name",  # no label: not known
        "MATCH (p:person) CALL { MATCH (p:city) RETURN p.city_name AS c } RETURN p.person_name, c",
        "CALL db.labels() YIELD label RETURN label.name",
        "MATCH (p:person) RETURN p {.person_name, name: p.person_name, nme: 1}",  # keys of the new map
        "MATCH (p:person) RETURN {name: 1, nme: p.person_name} AS m",
        "MATCH (p:person) WHERE p.person_name = 'p.name :Person' RETURN p // p.name (x:Human)",
        "MATCH (p:person) RETURN date.truncate('month', p.person_joined)",  # a function's namespace
        "MATCH (p:person) RETURN p.person_name AS `p.name`",
        "MATCH (x:person) MATCH (x:city) RETURN x.city_name, x.person_name",  # both labels: either's
        "MATCH (x)-[:PERSON_lives_in_CITY]-(y) RETURN x.person_name, y.city_name",  # either end
        "MATCH (a:person)-[:PERSON_has_INTEREST*1..2]->(b) RETURN b.anything",  # many hops: b unknown
        "MATCH (p:person)-[r]->(x) WHERE type(r) = 'PERSON_has_INTEREST' RETURN r.anything",
        "CALL db.idx.fulltext.queryNodes('person', 'ada') YIELD node RETURN node.anything",
        "MATCH (p:person) WITH p.person_age AS age, collect(p) AS ps RETURN ps[0].anything, head(ps).anything",
        "UNWIND $rows AS row MATCH (p:person {id: row.key}) RETURN row.anything",
        "MATCH (a)-[r:PERSON_has_INTEREST *WSHORTEST (r, n | r.weight)]->(b) RETURN b",  # Memgraph
        "CALL { MATCH (c:city) RETURN c } RETURN c.anything",
        "MATCH (p:person) RETURN p.person_name AS name UNION ALL MATCH (p:city) RETURN p.city_name AS name",
    ],
)
def test_what_cannot_be_told_is_let_through(schema: GraphSchema, query: str) -> None:
    assert schema_problems(query, schema) == []


def test_the_graphs_own_labels_and_types_are_known_and_their_properties_unchecked() -> None:
    schema = graph_schema(sample_model("people"))
    assert schema is not None
    more = GraphSchema(
        schema.node_properties,
        schema.edge_properties,
        schema.ends,
        more_labels=frozenset({"Legacy"}),
        more_types=frozenset({"OLD_LINK"}),
    )
    query = "MATCH (l:Legacy)-[r:OLD_LINK]->(p:person) RETURN l.whatever, r.anything, p.person_name"
    assert schema_problems(query, more) == []
    assert schema_problems(query, schema)[:2] == [
        "unknown label `Legacy` (the labels are `city`, `interest`, `person`)",
        "unknown relationship type `OLD_LINK` (the types are `PERSON_has_INTEREST`, `PERSON_lives_in_CITY`)",
    ]


def test_nothing_to_check_against_means_no_schema() -> None:
    assert graph_schema(DataModel()) is None


def test_a_refusal_is_one_line_naming_at_most_a_handful_of_problems(schema: GraphSchema) -> None:
    query = "MATCH (a:A), (b:B), (c:C), (d:D), (e:E), (f:F), (g:G) RETURN a"
    with pytest.raises(CypherSchemaMismatch) as refused:
        ensure_known_names(query, schema)
    message = str(refused.value)
    assert message.startswith("refused before running: unknown label `A` (")
    assert "\n" not in message and message.count("unknown label") == MAX_PROBLEMS
    assert message.endswith("; and 2 more")
    ensure_known_names("MATCH (p:person) RETURN p.person_name", schema)  # a good query passes


def test_closest_prefers_another_case_then_similar_names_then_containing_ones() -> None:
    names = ["person", "Person_x", "person_name", "PERSON_has_INTEREST", "PERSON_lives_in_CITY"]
    assert closest("PERSON", names) == ["person"]
    assert closest("PERSON_HAS_INTERESTS", names) == ["PERSON_has_INTEREST"]
    assert closest("name", names) == ["person_name"]
    assert closest("zzz", names) == []
