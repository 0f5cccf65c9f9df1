"""Refuse, before it runs, any Cypher that could write.

The query is tokenized the way a Cypher parser would see it: string literals and comments are
skipped, backtick-quoted names are names (never keywords), words are compared after Unicode
NFKC folding and case folding. Then four checks:

* the statement starts with a reading clause (MATCH, OPTIONAL, WITH, UNWIND, RETURN, CALL, SHOW,
  or EXPLAIN/PROFILE/USING/CYPHER before one), so admin statements no list below foresees
  (Memgraph's `START STREAM`, `ENABLE TTL`, ...) are refused too;
* a write or admin keyword anywhere in the code (CREATE, MERGE, SET, DELETE, REMOVE, DROP,
  LOAD, FOREACH, ALTER, ...), or a write/admin phrase (`FREE MEMORY`, `STOP DATABASE`, ...);
* `CALL <procedure>` only for procedures on a read-only allow-list;
* exactly one statement, no backslash outside strings (escapes outside strings are never
  valid Cypher and only serve to confuse scanners), no unterminated string or comment.

Engines could disagree on backslash escapes in strings, so a query with a backslash in a
string is also read the other way (backslash as an ordinary character); if that reading is
valid and hides a write, the query is refused. Function calls that run Cypher given as text
(apoc.cypher.*, apoc.do.*, ...) are refused too. The graph session is read-only as well where the engine has such a mode; this guard is
the first of the two fences.
"""

from __future__ import annotations

import itertools

from vedana.cypher.text import MalformedCypher, Token, fold, tokenize
from vedana.errors import CypherWriteRefused

# Clauses and statements that change data, schema, users or the server.
WRITE_KEYWORDS = frozenset(
    {
        "create",
        "merge",
        "set",
        "delete",
        "detach",
        "remove",
        "drop",
        "load",  # LOAD CSV, Memgraph's LOAD JSONL / LOAD PARQUET
        "foreach",
        "alter",
        "rename",
        "grant",
        "revoke",
        "deny",
        "import",
        "analyze",  # Memgraph ANALYZE GRAPH writes statistics
        "trigger",
        "snapshot",
        "storage",  # STORAGE MODE ...
        "terminate",
        "register",
        "unregister",
        "optimize",
        "vacuum",
    }
)

# Word pairs that are admin statements although each word alone is an ordinary name.
WRITE_PHRASES = frozenset(
    {
        ("free", "memory"),
        ("lock", "data"),
        ("unlock", "data"),
        ("start", "database"),
        ("stop", "database"),
        ("enable", "server"),
        ("deallocate", "databases"),
        ("use", "database"),
        ("kill", "query"),
        ("recover", "snapshot"),
    }
)

# Words a read-only statement may start with. EXPLAIN/PROFILE/USING (Memgraph's query hints) and
# CYPHER (options or FalkorDB's inline parameters) only prefix a statement; what follows them is
# checked like the rest.
STATEMENT_STARTS = frozenset({"match", "optional", "with", "unwind", "return", "call", "show"})
STATEMENT_PREFIXES = frozenset({"explain", "profile", "using", "cypher"})

# Procedures that only read (names compared case-insensitively, with any backticks removed).
READ_PROCEDURES = frozenset(
    {
        "db.labels",
        "db.relationshiptypes",
        "db.propertykeys",
        "db.indexes",
        "db.constraints",
        "db.schema.visualization",
        "db.schema.nodetypeproperties",
        "db.schema.reltypeproperties",
        "db.idx.fulltext.querynodes",
        "db.idx.fulltext.queryrelationships",
        "db.idx.vector.querynodes",
        "db.idx.vector.queryrelationships",
        "db.meta.stats",
        "dbms.procedures",
        "dbms.functions",
        "dbms.components",
        "mg.procedures",
        "mg.functions",
        "schema.node_type_properties",
        "schema.rel_type_properties",
        "algo.bfs",
        "algo.pagerank",
        "algo.wcc",
        "algo.betweenness",
        "algo.labelpropagation",
        "algo.spanningforest",
        "algo.msf",
        "algo.sppaths",  # FalkorDB's shortest paths between two nodes
        "algo.sspaths",
    }
)

# Functions that execute a Cypher string (which the scanner cannot see into) or change data.
TEXT_RUNNING_FUNCTIONS = (
    "apoc.cypher.",
    "apoc.do.",
    "apoc.periodic.",
    "apoc.trigger.",
    "apoc.create.",
    "apoc.merge.",
    "apoc.refactor.",
    "apoc.schema.",
    "apoc.export.",
    "apoc.import.",
    "apoc.load.",
    "apoc.custom.",
    "apoc.systemdb.",
    "apoc.atomic.",
    "apoc.lock.",
    "apoc.nodes.",
    "dbms.",
)


class _Refused(Exception):
    pass


def _is_property_key(tokens: list[Token], k: int) -> bool:
    """`n.set` or `` `n`.delete ``: a word written right after a dot that follows a name is a
    property key, which Cypher allows to be any word."""
    if k < 2:
        return False
    dot, owner, word = tokens[k - 1], tokens[k - 2], tokens[k]
    return (
        dot.kind == "punct"
        and dot.text == "."
        and dot.end == word.start
        and owner.end == dot.start
        and (owner.kind in {"word", "name"} or (owner.kind == "punct" and owner.text in {")", "]"}))
    )


def _dotted_name(tokens: list[Token], start: int) -> tuple[str, int]:
    """The dotted name starting at `start` (`db`.`labels`, db . labels -> "db.labels") and the
    index after it."""
    parts: list[str] = []
    i = start
    expect_part = True
    while i < len(tokens):
        tok = tokens[i]
        if expect_part and tok.kind in {"word", "name"}:
            parts.append(fold(tok.text))
        elif not expect_part and tok.kind == "punct" and tok.text == ".":
            pass
        else:
            break
        expect_part = not expect_part
        i += 1
    # A backticked part may itself hold dots: `db.labels` is the same procedure.
    return ".".join(p.strip() for p in ".".join(parts).split(".")), i


def _runs_cypher_text(function: str) -> bool:
    return function.startswith(TEXT_RUNNING_FUNCTIONS)


def _check_start(tokens: list[Token]) -> None:
    """The statement must begin with a reading clause: anything else is an admin or write
    statement. After EXPLAIN or PROFILE, the clause they prefix is checked too."""
    words = [t.text for t in tokens if t.kind == "word"]
    if tokens[0].kind != "word":
        raise _Refused("it does not start with a clause such as MATCH")
    allowed = STATEMENT_STARTS | STATEMENT_PREFIXES
    first = words[0]
    if first not in allowed:
        raise _Refused(f"it starts with {first.upper()}, not a reading clause such as MATCH")
    if first in {"explain", "profile"} and (len(words) < 2 or words[1] not in allowed):
        raise _Refused(f"{first.upper()} is not followed by a reading clause")


def _check_code(tokens: list[Token]) -> None:
    words = [(k, t) for k, t in enumerate(tokens) if t.kind == "word" and not _is_property_key(tokens, k)]
    for _, tok in words:
        if tok.text in WRITE_KEYWORDS:
            raise _Refused(f"it uses {tok.text.upper()}")
    for (_, first), (_, second) in itertools.pairwise(words):
        if (first.text, second.text) in WRITE_PHRASES:
            raise _Refused(f"it uses {first.text.upper()} {second.text.upper()}")
    procedure_names: set[int] = set()  # token positions of allow-listed procedure names
    for k, tok in words:
        following = tokens[k + 1] if k + 1 < len(tokens) else None
        if tok.text == "call":
            if following is not None and following.kind == "punct" and following.text in "{(":
                continue  # CALL { subquery }: its clauses are checked like the rest
            name, after = _dotted_name(tokens, k + 1)
            if name not in READ_PROCEDURES:
                raise _Refused(f"procedure {name or '(none)'} is not on the read-only list")
            procedure_names.update(range(k + 1, after))
    for k, tok in enumerate(tokens):
        if k in procedure_names:
            continue  # e.g. CALL dbms.procedures(): allow-listed above, not a function call
        if tok.kind in {"word", "name"} and not _is_property_key(tokens, k):
            name, after = _dotted_name(tokens, k)
            called = after < len(tokens) and tokens[after].kind == "punct" and tokens[after].text == "("
            if called and _runs_cypher_text(name):
                raise _Refused(f"function {name} runs Cypher given as text or changes data")
    semicolons = [k for k, t in enumerate(tokens) if t.kind == "punct" and t.text == ";"]
    if any(k != len(tokens) - 1 for k in semicolons):
        raise _Refused("it holds more than one statement")


def refusal_reason(query: str) -> str | None:
    """Why `query` is refused, or None when it only reads."""
    try:
        tokens = tokenize(query)
        if all(t.kind == "punct" and t.text == ";" for t in tokens):
            return "it is empty"
        _check_code(tokens)
        _check_start(tokens)
    except (_Refused, MalformedCypher) as exc:
        return str(exc)
    if "\\" in query:
        try:
            literal_tokens = tokenize(query, escapes=False)
        except MalformedCypher:
            return None  # an engine reading it that way would reject it as a syntax error
        try:
            _check_code(literal_tokens)
            _check_start(literal_tokens)
        except _Refused as exc:
            return f"read without backslash escapes, {exc}"
    return None


def without_final_semicolon(query: str) -> str:
    """A query the guard accepted, without its closing `;` (and what follows it: blanks and
    comments), which FalkorDB reads as the start of a second statement."""
    tokens = tokenize(query)
    if tokens and tokens[-1].kind == "punct" and tokens[-1].text == ";":
        return query[: tokens[-1].start].rstrip()
    return query


def ensure_read_only(query: str) -> None:
    """Raise `CypherWriteRefused` unless `query` is a single read-only statement."""
    reason = refusal_reason(query)
    if reason is not None:
        raise CypherWriteRefused(
            f"refused before running: only read-only Cypher is allowed ({reason}); "
            "write one MATCH ... RETURN query"
        )
