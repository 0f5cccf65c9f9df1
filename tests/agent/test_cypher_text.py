"""Reading a query's final RETURN: the column names FalkorDB gives, in order."""

from __future__ import annotations

import pytest

from vedana.cypher.text import first_word, return_columns


@pytest.mark.parametrize(
    ("query", "columns"),
    [
        ("MATCH (n) RETURN n.name, n.id ORDER BY n.id DESC LIMIT 3", ["n.name", "n.id"]),
        ("MATCH (n) RETURN DISTINCT n.kind AS Kind, count( n ) SKIP 1", ["Kind", "count( n )"]),
        ("MATCH (n) RETURN n.id AS `weird, name`, n {.id, .name}", ["weird, name", "n {.id, .name}"]),
        ("MATCH (n) RETURN n.limit, n.order", ["n.limit", "n.order"]),  # property keys, not clauses
        ("MATCH (n) RETURN [x IN n.tags WHERE x <> ',' | x] AS tags, ';' AS semi;", ["tags", "semi"]),
        ("MATCH (a) RETURN a.id AS id UNION MATCH (b) RETURN b.id AS id", ["id"]),
        ("MATCH (n) CALL { WITH n RETURN 1 AS inner } RETURN n.id, inner", ["n.id", "inner"]),
        ("RETURN CASE WHEN 1 = 1 THEN 'a' ELSE 'b' END", ["CASE WHEN 1 = 1 THEN 'a' ELSE 'b' END"]),
        ("MATCH (n) RETURN *", None),
        ("CALL db.labels()", None),
        ("MATCH (n) RETURN 'unterminated", None),
    ],
)
def test_return_columns(query: str, columns: list[str] | None) -> None:
    assert return_columns(query) == columns


def test_first_word_skips_comments_and_folds_case() -> None:
    assert first_word("// why\n/* how */ Match (n) RETURN n") == "match"
    assert first_word("(MATCH (n) RETURN n)") is None
