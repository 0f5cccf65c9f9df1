"""The read-only guard: every way of writing is refused before it runs; reads still pass."""

from __future__ import annotations

import pytest

from vedana.agent.tools import run_cypher
from vedana.cypher.guard import ensure_read_only, refusal_reason
from vedana.errors import CypherError, CypherWriteRefused
from vedana.stores.graph import GraphStore

WRITE_ATTEMPTS = [
    "CREATE (n:Person {id: 'x'})",
    "create (n:Person {id: 'x'})",
    "CrEaTe (n:Person {id: 'x'})",
    "MERGE (n:Person {id: 'p1'})",
    "MATCH (n:Person) SET n.name = 'hacked'",
    "MATCH (n:Person) SET n:Admin",
    "MATCH (n:Person) DELETE n",
    "MATCH (n) DETACH DELETE n",
    "MATCH (n:Person) REMOVE n.name",
    "MATCH (n) /* just reading */ DETACH /**/ DELETE n",
    "MATCH (n) // harmless\nDETACH DELETE n",
    "MATCH (n)/**/SET/**/n.x=1",
    "MATCH (n) RETURN n; CREATE (m:Person {id: 'y'})",
    "MATCH (n) RETURN n ; MATCH (m) RETURN m",
    "RETURN 'a\\' CREATE (n:Person {id: \"z\"}) //'",
    "ＣＲＥＡＴＥ (n:Person {id: 'w'})",
    "CRE\\u0041TE (n:Person)",
    "DROP INDEX ON :Person(id)",
    "CREATE INDEX FOR (n:Person) ON (n.name)",
    "CREATE CONSTRAINT ON (n:Person) ASSERT n.id IS UNIQUE",
    "LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row",
    "load csv with headers from 'http://x/y.csv' AS r CREATE (:Person {id: r.id})",
    "MATCH (n:Person) WITH collect(n) AS ns FOREACH (x IN ns | SET x.flag = true)",
    "CALL db.idx.fulltext.createNodeIndex('Person', 'name')",
    "CALL db.idx.fulltext.drop('Person')",
    "CALL `db`.`idx`.`fulltext`.`createNodeIndex`('Person', 'name')",
    "CALL `apoc.create.node`(['X'], {})",
    "call apoc.periodic.iterate('MATCH (n) RETURN n', 'DETACH DELETE n', {})",
    "CALL dbms.security.createUser('u', 'p', false)",
    "RETURN apoc.cypher.runFirstColumnSingle('CREATE (n) RETURN n', {})",
    "MATCH (n) CALL { WITH n DETACH DELETE n } RETURN 1",
    "UNWIND range(1, 3) AS i MERGE (:Person {id: toString(i)})",
    "ALTER DATABASE neo4j SET ACCESS READ WRITE",
    "STORAGE MODE IN_MEMORY_ANALYTICAL",
    "FREE MEMORY",
    "STOP DATABASE neo4j",
    "GRANT ALL ON DATABASE * TO reader",
    "MATCH (n) RETURN n UNION MATCH (m) SET m.x = 1 RETURN m",
    "PROFILE CREATE (:Person {id: 'profiled'})",
    "UNWIND [1] AS x CALL db.idx.fulltext.createNodeIndex('Person', 'id') RETURN x",
    # Admin statements no keyword list foresees: refused because they do not start with a read.
    "START STREAM people_stream",
    "START ALL STREAMS",
    'ENABLE TTL EVERY "1s"',
    "EXPLAIN START ALL STREAMS",
    "(MATCH (n) RETURN n)",
    "MATCH (n) RETURN n /* unterminated",
    "RETURN 'unterminated",
    "",
    "   ;  ",
]

# Deny by default: text the guard cannot classify is refused, whatever an engine would make of it.
UNCLASSIFIABLE = [
    "MATCH (n) RETURN n LIMIT 1CREATE (m:Person {id: 'glued'})",  # a keyword glued to a number
    "MATCH (n) RETURN n LIMIT 1 CRE\u200bATE (m:Person {id: 'zw'})",  # split by a zero-width space
    "MATCH (n) RETURN n\u200b",
    "MATCH (n) RETURN n \r\nGRAPH.DELETE vedana",  # a second command after CRLF
    "MATCH (n) RETURN n.delete",  # a write keyword after a dot must be backticked
    "MATCH (n) RETURN n } MATCH (m) RETURN m //",  # an unmatched brace aimed at a CALL { } wrapper
    "MATCH (n) RETURN [n",
    "MATCH (n)\x00 RETURN n",
    "MATCH (n)\u00a0RETURN n",  # a look-alike blank
    "MATCH (n) # comment\nRETURN n",
    "MATCH (n) RETURN 0xZZ",
]

READS = [
    "MATCH (n:Person) RETURN n.id ORDER BY n.id",
    "match (n:Person) return n.`set`, n.`delete`, n.create_date",  # backticked keys may be any word
    "MATCH (n:Person) WHERE n.name = 'Create Delete Set' RETURN n.id",
    'MATCH (n:Person) WHERE n.name = "O\\"Brien // CREATE" RETURN n.id',
    "MATCH (n:`CREATE`) RETURN count(n)",  # a label that happens to be called CREATE
    "MATCH (n) RETURN count(n) // DELETE everything? no, a comment",
    "MATCH (n) /* SET n.x = 1 */ RETURN count(n);",
    "CALL db.labels() YIELD label RETURN label",
    "CALL `db`.`labels`() YIELD label RETURN label",
    "MATCH (start:Person)-[r]->(m) RETURN start.id, type(r), m.id",
    "MATCH (n:Person) WITH n.name AS name RETURN toUpper(name) AS upper",
    "MATCH (n:Person) WHERE exists(n.name) RETURN n.name AS created, count(n) AS counted",
    "MATCH (n:Person) WHERE n.name STARTS WITH 'Dropped' OR n.created_at IS NOT NULL RETURN n.id",
    "OPTIONAL MATCH (n:Person {id: 'nobody'}) RETURN n",
    "CALL dbms.procedures() YIELD name WHERE name STARTS WITH 'db.' RETURN count(name) AS n",
    "CALL db.meta.stats()",
    "MATCH (a:Person {id: 'p1'}), (b:Person {id: 'p2'}) "
    "CALL algo.SPpaths({sourceNode: a, targetNode: b, relTypes: ['KNOWS']}) YIELD path RETURN length(path)",
    "CYPHER who='p1' MATCH (n:Person {id: $who}) RETURN n.name",
    "MATCH (n:Person) RETURN count(n);\n",  # FalkorDB alone would take the blank after ; for a statement
    "MATCH (n:Person) RETURN count(n) ; // done",
]


@pytest.fixture
def people_graph(graph: GraphStore) -> GraphStore:
    graph.query("CREATE (:Person {id: 'p1', name: 'Ann'})-[:KNOWS]->(:Person {id: 'p2', name: 'Bob'})")
    return graph


def graph_state(graph: GraphStore) -> tuple[object, ...]:
    """Everything a write could change: counts, nodes with labels and properties, relationships,
    indexes."""
    return (
        graph.counts(),
        graph.query("MATCH (n) RETURN n.id AS id, properties(n) AS p, labels(n) AS l ORDER BY id").rows,
        graph.query("MATCH (a)-[r]->(b) RETURN a.id, type(r), properties(r), b.id ORDER BY a.id").rows,
        graph.query("CALL db.indexes() YIELD label, properties, types RETURN label, properties, types").rows,
    )


@pytest.mark.parametrize("query", WRITE_ATTEMPTS)
def test_write_attempts_are_refused_and_the_graph_is_unchanged(people_graph: GraphStore, query: str) -> None:
    before = graph_state(people_graph)

    assert refusal_reason(query) is not None
    with pytest.raises(CypherWriteRefused) as refused:
        run_cypher(people_graph, query, row_limit=10, timeout_s=5)

    assert str(refused.value).startswith("refused before running")
    assert graph_state(people_graph) == before


def test_the_table_covers_enough_write_attempts() -> None:
    assert len(WRITE_ATTEMPTS) >= 25


@pytest.mark.parametrize("query", UNCLASSIFIABLE)
def test_text_the_guard_cannot_classify_is_refused(people_graph: GraphStore, query: str) -> None:
    before = graph_state(people_graph)
    reason = refusal_reason(query)
    assert reason is not None
    with pytest.raises(CypherWriteRefused, match="refused before running"):
        run_cypher(people_graph, query, row_limit=10, timeout_s=5)
    assert graph_state(people_graph) == before


def test_the_guard_says_which_character_or_token_it_refused() -> None:
    assert "U+200B" in (refusal_reason("MATCH (n) RETURN n\u200b") or "")
    assert "'1CREATE'" in (refusal_reason("MATCH (n) RETURN n LIMIT 1CREATE") or "")
    assert "unmatched '}'" in (refusal_reason("MATCH (n) RETURN n }") or "")
    assert "`delete`" in (refusal_reason("MATCH (n) RETURN n.delete") or "")
    assert (
        refusal_reason("MATCH (n) WHERE n.x > 1.5e-3 AND n.y = 0x1F RETURN n") is None
    )  # numbers still read


@pytest.mark.parametrize("query", READS)
def test_reads_pass_the_guard_and_run(people_graph: GraphStore, query: str) -> None:
    assert refusal_reason(query) is None
    ensure_read_only(query)
    outcome = run_cypher(people_graph, query, row_limit=10, timeout_s=5)
    assert outcome.truncated is False


def test_a_person_read_returns_real_rows(people_graph: GraphStore) -> None:
    outcome = run_cypher(people_graph, READS[0], row_limit=10, timeout_s=5)
    assert [row["n.id"] for row in outcome.rows] == ["p1", "p2"]


def test_the_session_itself_is_read_only(people_graph: GraphStore) -> None:
    """The second fence: even a write that got past the guard fails in a read-only session."""
    before = people_graph.counts()
    with pytest.raises(CypherError):
        people_graph.query("CREATE (:Person {id: 'sneaky'})", read_only=True)
    assert people_graph.counts() == before


def test_explain_gives_the_plan_and_profile_and_show_are_refused_on_falkordb(
    people_graph: GraphStore,
) -> None:
    """FalkorDB runs EXPLAIN/PROFILE text as a data query: EXPLAIN goes through GRAPH.EXPLAIN
    instead, and PROFILE (which executes) and SHOW (which FalkorDB lacks) get a clear message."""
    for query in ("EXPLAIN MATCH (n) RETURN n", "PROFILE MATCH (n:Person) RETURN count(n)", "SHOW INDEXES"):
        assert refusal_reason(query) is None  # the guard is engine-neutral: they only read
    plan = run_cypher(people_graph, "EXPLAIN MATCH (n:Person) RETURN n", row_limit=10, timeout_s=5)
    assert plan.columns == ["plan"]
    assert any("Scan" in row["plan"] for row in plan.rows)  # operations, not the people
    assert not any("p1" in str(row) for row in plan.rows)
    with pytest.raises(CypherError, match="PROFILE runs the query"):
        run_cypher(people_graph, "PROFILE MATCH (n:Person) RETURN count(n)", row_limit=10, timeout_s=5)
    with pytest.raises(CypherError, match="SHOW statements are Memgraph/Neo4j commands"):
        run_cypher(people_graph, "SHOW INDEXES", row_limit=10, timeout_s=5)


def test_vedana_cypher_refuses_the_unclassifiable_and_writes_nothing(
    people_graph: GraphStore, monkeypatch
) -> None:
    from typer.testing import CliRunner

    from vedana.cli.app import app
    from vedana.config import reset_settings

    monkeypatch.delenv("MEMGRAPH_URI", raising=False)
    reset_settings()
    before = graph_state(people_graph)
    for query in UNCLASSIFIABLE[:6]:
        result = CliRunner().invoke(app, ["cypher", query])
        assert result.exit_code != 0
        assert isinstance(result.exception, CypherWriteRefused), result.output
    assert graph_state(people_graph) == before
