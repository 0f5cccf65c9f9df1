"""The shape of a query run with its rows capped on the server.

FalkorDB sends a whole result set in one reply, so a read-only query with a row limit is run as
`CALL { <query> } RETURN * LIMIT cap+1`, which FalkorDB evaluates lazily (a 200-row cap over
100k nodes: 3.4 s → 0.01 s). `RETURN *` sorts the columns by name, so the original order is
taken from the query's final RETURN. When that cannot be told (`RETURN *`, a leading WITH,
which CALL { } would read as importing variables, EXPLAIN, ...) there is no capped form and the
query runs as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vedana.cypher.text import first_word, return_columns

# Queries that may run inside CALL { }: one starting with WITH would be read as importing variables.
WRAPPABLE_STARTS = frozenset({"match", "optional", "unwind", "return", "call"})


@dataclass(frozen=True)
class CappedQuery:
    text: str  # the query to send
    columns: list[str]  # the original query's columns, in its order


def capped_query(cypher: str, row_limit: int) -> CappedQuery | None:
    """`cypher` wrapped to return at most `row_limit + 1` rows (one more tells that more exist),
    or None when it has to run as written. The guard has already checked that the query's
    brackets pair up, so it cannot close the wrapper early."""
    order = return_columns(cypher)
    if order is None or first_word(cypher) not in WRAPPABLE_STARTS:
        return None
    return CappedQuery(f"CALL {{\n{cypher}\n}} RETURN * LIMIT {row_limit + 1}", order)


def in_query_order(
    capped: CappedQuery, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> list[list[Any]] | None:
    """The rows of the wrapped query with their columns back in the original order; None when
    the reply's columns are not the query's (then the query runs as written)."""
    if sorted(columns) != sorted(capped.columns):
        return None
    at = [list(columns).index(name) for name in capped.columns]
    return [[row[i] for i in at] for row in rows]
