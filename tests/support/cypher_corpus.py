"""Valid Cypher gathered from the repository and written by hand, for the schema check's corpus:
the samples' data models (every `query` column and the playbooks), the README's scripted
queries, the golden sets' scripted queries, and varied forms of our own."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from vedana.datamodel import DataModel

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
STARTS = re.compile(r"^\s*(MATCH|OPTIONAL|UNWIND|WITH|CALL|RETURN)\b", re.IGNORECASE)
# `2) MATCH …` in a playbook entry: the Cypher steps of a numbered plan.
PLAN_STEP = re.compile(r"(?:^|\n)\s*\d\)\s*")


def sample_model(name: str) -> DataModel:
    from vedana.datamodel.read import read_data_model
    from vedana.sources.csv_folder import CsvFolderSource

    dm, _ = read_data_model(CsvFolderSource(SAMPLES / name / "model"))
    return dm


def _cypher_parts(text: str) -> list[str]:
    return [part.strip() for part in PLAN_STEP.split(text) if STARTS.match(part)]


def model_queries(dm: DataModel) -> list[str]:
    """Every query the data model itself holds: anchors', attributes', links', the playbook's."""
    texts = [a.query for a in dm.anchors] + [lk.query for lk in dm.links]
    texts += [at.query for a in dm.anchors for at in a.attributes]
    texts += [at.query for lk in dm.links for at in lk.attributes]
    texts += [q.example for q in dm.queries]
    return [part for text in texts for part in _cypher_parts(text)]


# Queries a script writes wrong on purpose, to show the refusal (scripts/readme_examples.py).
WRONG_ON_PURPOSE = frozenset({"MATCH (d:document)-[:COVERS]->(r:regulation) RETURN r.title"})


def script_queries(path: Path) -> list[str]:
    """The read-only Cypher string constants of a script or test module (not the pieces of an
    f-string), templates filled with sample values (`{id}` → x, `{ids}` → ['x'])."""
    from vedana.cypher.guard import refusal_reason

    tree = ast.parse(path.read_text(encoding="utf-8"))
    pieces = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in pieces:
            text = node.value
            if "{{" in text or re.search(r"\{[a-z_]+\}", text):
                text = text.format_map(defaultdict(lambda: "x", ids="['x']"))
            if STARTS.match(text) and refusal_reason(text) is None and text not in WRONG_ON_PURPOSE:
                found.append(text)
    return found


def command_queries(path: Path) -> list[str]:
    """The queries of `vedana cypher "…"` commands written in a document or script."""
    from vedana.cypher.guard import refusal_reason

    found = re.findall(r'cypher\s+"([^"]+)"', path.read_text(encoding="utf-8"))
    return [q for q in found if STARTS.match(q) and refusal_reason(q) is None and q not in WRONG_ON_PURPOSE]


# Forms a model writes that the data model's own examples do not show, on the samples' names.
# Each runs on the embedded FalkorDB (tests/agent/test_cypher_corpus.py).
HANDWRITTEN = [
    "MATCH (n) WHERE n:person RETURN n {.person_name, .person_age} LIMIT 5",
    "MATCH (p:person) RETURN p {.*} LIMIT 2",
    "MATCH (p:person) RETURN p {.person_name, age: p.person_age, "
    "cities: [(p)-[:PERSON_lives_in_CITY]->(c:city) | c.city_name]} AS person LIMIT 3",
    "MATCH (n) RETURN labels(n) AS labels, keys(n) AS keys, count(*) AS n",
    "MATCH ()-[r]->() RETURN type(r) AS type, count(r) AS n",
    "CALL db.labels()",
    "CALL db.labels() YIELD label RETURN label ORDER BY label",
    "CALL db.relationshipTypes() YIELD relationshipType RETURN relationshipType",
    "CALL db.propertyKeys() YIELD propertyKey RETURN propertyKey AS key",
    "UNWIND [{name: 'a', n: 1}, {name: 'b', n: 2}] AS row RETURN row.name, row.n",
    "WITH {person_name: 'x', nme: 'y'} AS m RETURN m.nme",
    "MATCH (p:person) WITH p, size([(p)-[:PERSON_has_INTEREST]->() | 1]) AS n "
    "RETURN p.person_name, n ORDER BY n DESC LIMIT 5",
    "OPTIONAL MATCH (p:person {id: 'person:0001'})-[:PERSON_lives_in_CITY]->(c:city) RETURN p.person_name, c.city_name",
    "MATCH (p:person) WHERE p.person_name CONTAINS 'Ada' // (x:Person) and p.name, only a comment\n"
    "RETURN p.person_name AS `Person`",
    "MATCH (p:person) WHERE p.person_name <> ':Person' /* (x:Nope)-[:NOPE]->() */ AND p.id <> 'p.name' RETURN p.id",
    "MATCH (p:person) WHERE toLower(p.person_name) STARTS WITH 'ada' RETURN p.person_name",
    "MATCH (p:person) RETURN [x IN collect(p.person_age) WHERE x > 30 | x * 2][0..3] AS ages",
    "MATCH (p:person) RETURN CASE WHEN p.person_age > 60 THEN 'senior' ELSE 'other' END AS bucket, count(*) AS n",
    "MATCH path = (p:person)-[:PERSON_has_INTEREST*1..2]-(x) "
    "RETURN length(path) AS hops, [n IN nodes(path) | labels(n)[0]] AS kinds LIMIT 3",
    "MATCH (p:person) WHERE (p)-[:PERSON_lives_in_CITY]->(:city {id: 'lisbon'}) RETURN p.person_name",
    "MATCH (p:person) WHERE NOT (p)-[:PERSON_lives_in_CITY]->() RETURN count(p)",
    "MATCH (p:person) RETURN p.person_name AS name UNION MATCH (c:city) RETURN c.city_name AS name",
    "MATCH (p:person)-[r]->(x) RETURN p.person_name, type(r), labels(x)[0] LIMIT 5",
    "MATCH (p:`person`) RETURN p.`person_name`",
    "MATCH (p:person) WITH p.person_age AS age, count(*) AS c WHERE c > 1 RETURN age, c ORDER BY c DESC",
    "MATCH (p:person) RETURN avg(p.person_age), min(p.person_age), max(p.person_age), sum(p.person_age)",
    "MATCH (p:person) WHERE p.person_name IN $names RETURN p.id",
    "MATCH (a:person), (b:person) WHERE a.id < b.id AND a.person_age = b.person_age "
    "RETURN a.person_name, b.person_name LIMIT 3",
    "MATCH (p:person) RETURN DISTINCT p.person_age ORDER BY p.person_age",
    "MATCH (p:person) WHERE any(x IN ['Ada', 'Bo'] WHERE p.person_name STARTS WITH x) RETURN p.id",
    "MATCH (p:person) RETURN reduce(s = 0, x IN [1, 2, 3] | s + x) AS total LIMIT 1",
    "MATCH (p:person) RETURN coalesce(p.person_age, 0) AS age LIMIT 1",
    "MATCH (p:person) WHERE p.person_age IS NOT NULL RETURN count(p)",
    "MATCH (p:person)-[r:PERSON_has_INTEREST]->(i:interest) WHERE r.skill_level = 'expert' AND r.since_year < 2015 "
    "RETURN p.person_name, i.interest_name",
    "MATCH (i:interest)<-[:PERSON_has_INTEREST]-(p:person) RETURN i.interest_name, count(p) AS people",
    "MATCH (i:interest)-[:PERSON_has_INTEREST]->(p:person) RETURN count(*)",  # undirected: stored both ways
    "MATCH (c:city)<-[:PERSON_lives_in_CITY]-(p) RETURN c.city_name, count(p) AS people ORDER BY people DESC",
    "MATCH (p:person)-[:PERSON_lives_in_CITY]-(c:city) RETURN c.city_name LIMIT 3",
    "MATCH (p:person) WITH p AS member MATCH (member)-[:PERSON_lives_in_CITY]->(c:city) "
    "RETURN member.person_name, c.city_name LIMIT 3",
    "MATCH (p:person) WITH collect(p) AS people UNWIND people AS someone RETURN someone.person_name LIMIT 3",
    "MATCH (p:person) CALL { WITH p MATCH (p)-[:PERSON_has_INTEREST]->(i:interest) RETURN count(i) AS k } "
    "RETURN p.person_name, k ORDER BY k DESC LIMIT 3",
    "MATCH (p:person {id: $id}) RETURN p.person_name",
    "CYPHER id='person:0001' MATCH (p:person {id: $id}) RETURN p.person_name",
    "EXPLAIN MATCH (p:person) RETURN p.person_name",
    "MATCH (p:person) WITH p ORDER BY p.person_age DESC LIMIT 3 RETURN p.person_name, p.person_age",
    "MATCH (p:person) WITH * WHERE p.person_age > 70 RETURN p.person_name",
    "MATCH (p:person) RETURN p.person_name AS name, p.person_age AS age ORDER BY age DESC, name SKIP 2 LIMIT 3",
    "MATCH (p:person) WHERE p.person_is_mentor RETURN count(p) AS mentors",
    "MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest) WITH i, count(p) AS people WHERE people > 20 "
    "RETURN i.interest_name, people ORDER BY people DESC",
    "MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest) "
    "RETURN i.interest_category AS category, collect(DISTINCT i.interest_name)[0..3] AS examples",
    "MATCH (r:regulation)-[:REGULATION_amends_REGULATION*1..3]->(old:regulation) RETURN r.id, old.id",
    "MATCH (d:document)<-[:DOCUMENT_CHUNK_part_of_DOCUMENT]-(c:document_chunk) "
    "RETURN d.document_title, count(c) AS paragraphs",
    "MATCH (x) WHERE x.id = 'lisbon' RETURN labels(x), properties(x), x.anything",
    "MATCH (p:person) RETURN p.person_name + ' (' + toString(p.person_age) + ')' AS label LIMIT 2",
    "MATCH (a:person)-[:PERSON_has_INTEREST]->(i:interest)<-[:PERSON_has_INTEREST]-(b:person) WHERE a.id < b.id "
    "RETURN a.person_name, b.person_name, i.interest_name LIMIT 5",
    "MATCH (p:person {id: 'person:0001'}) OPTIONAL MATCH (p)-[r:PERSON_has_INTEREST]->(i) "
    "RETURN p.person_name, r.skill_level, i.interest_name",
    "MATCH (p:person) WITH p.person_name AS p RETURN p LIMIT 1",
    "MATCH (c:city) WITH c, [(c)<-[:PERSON_lives_in_CITY]-(p:person) | p.person_name] AS names "
    "RETURN c.city_name, size(names) AS n",
    "MATCH (p:person) WITH p LIMIT 1 MATCH (p)-[:PERSON_has_INTEREST]-(other) RETURN other.interest_name",
    "MATCH (i:interest) WHERE i.interest_category IN ['science', 'music'] "
    "RETURN i.interest_category, count(*) AS n ORDER BY n DESC",
    "MATCH (p:person) RETURN {name: p.person_name, age: p.person_age, nme: 1} AS info LIMIT 1",
    "MATCH (p:person)-[:PERSON_lives_in_CITY]->(c:city) "
    "RETURN c.city_name AS city, collect(p {.id, .person_name})[0..2] AS people",
    "MATCH (p:person) WHERE p:person AND NOT p:city RETURN count(p)",
    "UNWIND range(1, 3) AS i RETURN i, i * i AS square",
    "RETURN 1 AS one",
    "MATCH (n) RETURN n.id LIMIT 3",
    "MATCH (p:person) WITH p.person_age / 10 * 10 AS decade RETURN decade, count(*) AS n ORDER BY decade",
    "MATCH (p:person) RETURN [i IN [1, 2] | {n: i, who: p.person_name}] AS pairs LIMIT 1",
    "MATCH (c:city) RETURN c.city_country AS country, collect(c.city_name) AS cities ORDER BY country",
    "MATCH (p:person) RETURN p.person_name, size((p)-[:PERSON_has_INTEREST]->()) AS interests",
    "MATCH (p:person) WHERE exists(p.person_age) RETURN count(p)",
    "MATCH (p:person)\nWHERE p.person_age > 30\nRETURN p.person_name\nORDER BY p.person_name\nLIMIT 3;",
]

# Valid on other engines (Memgraph, Neo4j) but not FalkorDB's dialect: checked, not run.
OTHER_DIALECTS = [
    "MATCH (p:person) WHERE p.person_name =~ 'A.*' RETURN p.person_name",
    "MATCH (p:person) WHERE EXISTS { MATCH (p)-[:PERSON_lives_in_CITY]->(:city) } RETURN count(p)",
    "MATCH (p:person) RETURN p.person_name, COUNT { (p)-[:PERSON_has_INTEREST]->() } AS interests",
    "MATCH (n:person|city) RETURN labels(n)[0] AS label, count(*) AS n",
]
