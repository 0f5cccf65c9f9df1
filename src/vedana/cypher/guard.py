"""Refuse, before it runs, any Cypher that could write: deny by default.

The query is tokenized the way a Cypher parser would see it (string literals and comments
skipped, backtick-quoted names are names, never keywords; words compared after Unicode NFKC
and case folding), and the tokenizer itself refuses what it cannot classify: an invisible,
control or unusual blank character outside a string, a character Cypher does not use, a
number glued to a word (`LIMIT 1CREATE`), a backslash outside a string, an unterminated string
or comment. Then the rules of `RULES` (below, as one table) must all hold.

Engines could disagree on backslash escapes in strings, so a query with a backslash in a
string is also read the other way (backslash as an ordinary character); if that reading is
valid and breaks a rule, the query is refused. The graph session is read-only as well where the
engine has such a mode; this guard is the first of the two fences.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

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


def _is_property_key(tokens: list[Token], k: int) -> bool:
    """`n.name`: a word written right after a dot that follows a name is a property key."""
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


def _words(tokens: list[Token]) -> list[tuple[int, Token]]:
    return [(k, t) for k, t in enumerate(tokens) if t.kind == "word"]


def _procedure_calls(tokens: list[Token]) -> list[tuple[str, range]]:
    """`CALL name(...)`: each procedure's name and the token positions it spans (a `CALL { }`
    subquery is not a procedure: its clauses are checked like the rest)."""
    calls = []
    for k, tok in _words(tokens):
        following = tokens[k + 1] if k + 1 < len(tokens) else None
        if tok.text != "call" or (
            following is not None and following.kind == "punct" and following.text in "{("
        ):
            continue
        name, after = _dotted_name(tokens, k + 1)
        calls.append((name, range(k + 1, after)))
    return calls


# --- the rules: each returns why the query is refused, or None ---------------------------------


def _one_statement(tokens: list[Token]) -> str | None:
    semicolons = [k for k, t in enumerate(tokens) if t.kind == "punct" and t.text == ";"]
    return "it holds more than one statement" if any(k != len(tokens) - 1 for k in semicolons) else None


def _balanced(tokens: list[Token]) -> str | None:
    """Brackets pair up: an unmatched `}` could close a wrapper the query is run inside."""
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for tok in tokens:
        if tok.kind != "punct":
            continue
        if tok.text in "([{":
            stack.append(tok.text)
        elif tok.text in pairs and (not stack or stack.pop() != pairs[tok.text]):
            return f"its brackets do not pair up (an unmatched {tok.text!r} at character {tok.start + 1})"
    return f"its brackets do not pair up (an unclosed {stack[-1]!r})" if stack else None


def _reading_start(tokens: list[Token]) -> str | None:
    """A reading clause first: anything else is an admin or write statement. After EXPLAIN or
    PROFILE, the clause they prefix is checked too."""
    words = [t.text for t in tokens if t.kind == "word"]
    if tokens[0].kind != "word":
        return "it does not start with a clause such as MATCH"
    allowed = STATEMENT_STARTS | STATEMENT_PREFIXES
    if words[0] not in allowed:
        return f"it starts with {words[0].upper()}, not a reading clause such as MATCH"
    if words[0] in {"explain", "profile"} and (len(words) < 2 or words[1] not in allowed):
        return f"{words[0].upper()} is not followed by a reading clause"
    return None


def _no_write_keyword(tokens: list[Token]) -> str | None:
    """Also as a property key (`n.delete`, `GRAPH.DELETE`): the guard cannot tell a property
    from a command glued to a name, so such a property must be backticked: n.`delete`."""
    for k, tok in _words(tokens):
        if tok.text in WRITE_KEYWORDS:
            if _is_property_key(tokens, k):
                return (
                    f"it uses {tok.text.upper()} after a dot (write a property of that name as `{tok.text}`)"
                )
            return f"it uses {tok.text.upper()}"
    return None


def _no_write_phrase(tokens: list[Token]) -> str | None:
    words = [t for k, t in _words(tokens) if not _is_property_key(tokens, k)]
    for first, second in itertools.pairwise(words):
        if (first.text, second.text) in WRITE_PHRASES:
            return f"it uses {first.text.upper()} {second.text.upper()}"
    return None


def _read_procedures_only(tokens: list[Token]) -> str | None:
    for name, _ in _procedure_calls(tokens):
        if name not in READ_PROCEDURES:
            return f"procedure {name or '(none)'} is not on the read-only list"
    return None


def _no_text_running_function(tokens: list[Token]) -> str | None:
    procedure_names = {k for _, span in _procedure_calls(tokens) for k in span}
    for k, tok in enumerate(tokens):
        if k in procedure_names or tok.kind not in {"word", "name"} or _is_property_key(tokens, k):
            continue  # e.g. CALL dbms.procedures(): allow-listed, not a function call
        name, after = _dotted_name(tokens, k)
        called = after < len(tokens) and tokens[after].kind == "punct" and tokens[after].text == "("
        if called and name.startswith(TEXT_RUNNING_FUNCTIONS):
            return f"function {name} runs Cypher given as text or changes data"
    return None


# The guard, as a table: what a read-only query must be, and the rule that checks it. Before
# these, the tokenizer refuses any character or token it cannot classify (see cypher.text).
RULES: tuple[tuple[str, Callable[[list[Token]], str | None]], ...] = (
    ("exactly one statement", _one_statement),
    ("brackets that pair up", _balanced),
    ("a reading clause first (MATCH, OPTIONAL, WITH, UNWIND, RETURN, CALL, SHOW)", _reading_start),
    ("no write or admin keyword, even as a property key", _no_write_keyword),
    ("no write or admin phrase (FREE MEMORY, STOP DATABASE, ...)", _no_write_phrase),
    ("only procedures from the read-only list", _read_procedures_only),
    ("no function that runs Cypher given as text or writes", _no_text_running_function),
)


def _first_refusal(tokens: list[Token]) -> str | None:
    for _, rule in RULES:
        reason = rule(tokens)
        if reason is not None:
            return reason
    return None


_UNREADABLE = "it cannot be read as Cypher: "


def refusal_reason(query: str) -> str | None:
    """Why `query` is refused, or None when it only reads."""
    try:
        tokens = tokenize(query)
    except MalformedCypher as exc:
        return _UNREADABLE + str(exc)
    if all(t.kind == "punct" and t.text == ";" for t in tokens):
        return "it is empty"
    unbalanced = _balanced(tokens)
    if unbalanced is not None:
        return _UNREADABLE + unbalanced
    reason = _first_refusal(tokens)
    if reason is not None or "\\" not in query:
        return reason
    try:
        literal_tokens = tokenize(query, escapes=False)
    except MalformedCypher:
        return None  # an engine reading it that way would reject it as a syntax error
    reason = _first_refusal(literal_tokens)
    return None if reason is None else f"read without backslash escapes, {reason}"


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
    if reason is not None and reason.startswith(_UNREADABLE):
        raise CypherWriteRefused(f"refused before running: {reason}; fix the query and try again")
    if reason is not None:
        raise CypherWriteRefused(
            f"refused before running: only read-only Cypher is allowed ({reason}); "
            "write one MATCH ... RETURN query"
        )
