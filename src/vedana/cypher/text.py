"""Reading Cypher text the way a parser sees it: tokens (strings, backticked names and comments
understood), and the column names of a query's final RETURN.

Used by the read-only guard (`vedana.cypher.guard`) and by the FalkorDB adapter, which
needs a query's column order to cap its rows on the server.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass


class MalformedCypher(ValueError):
    """The text cannot be read as Cypher at all."""


# Characters that end a `//` comment. Ending it at more characters than an engine does is safe:
# the scanner then reads more of the query as code, never less.
_LINE_ENDS = "\n\r\v\f\x85\u2028\u2029"


@dataclass(frozen=True)
class Token:
    kind: str  # "word", "name" (backticked), "punct", "number", "string"
    text: str  # folded text for words; raw content for names and strings
    start: int
    end: int


def fold(word: str) -> str:
    return unicodedata.normalize("NFKC", word).casefold()


def _is_word_char(ch: str) -> bool:
    return ch in "_$" or ch.isalnum() or unicodedata.category(ch) in {"Mn", "Mc", "Pc"}


def _string_end(query: str, i: int, *, escapes: bool) -> int:
    """Index of the quote that closes the string opened at `i`."""
    quote, j = query[i], i + 1
    while j < len(query) and query[j] != quote:
        j += 2 if escapes and query[j] == "\\" else 1
    if j >= len(query):
        raise MalformedCypher("it has an unterminated string")
    return j


def tokenize(query: str, *, escapes: bool = True) -> list[Token]:
    """The tokens of the code (comments dropped). `escapes=False` reads backslashes in strings as
    ordinary characters. Raises `MalformedCypher` when the text is not Cypher."""
    tokens: list[Token] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch.isspace() or unicodedata.category(ch) == "Cf":  # zero-width characters are blanks
            i += 1
        elif query.startswith("//", i):
            while i < n and query[i] not in _LINE_ENDS:
                i += 1
        elif query.startswith("/*", i):
            end = query.find("*/", i + 2)
            if end < 0:
                raise MalformedCypher("it has an unterminated /* comment")
            i = end + 2
        elif ch in "'\"":
            end = _string_end(query, i, escapes=escapes)
            tokens.append(Token("string", query[i + 1 : end], i, end + 1))
            i = end + 1
        elif ch == "`":
            end = query.find("`", i + 1)
            while end >= 0 and query.startswith("``", end):  # `` is an escaped backtick
                end = query.find("`", end + 2)
            if end < 0:
                raise MalformedCypher("it has an unterminated `name`")
            tokens.append(Token("name", query[i + 1 : end].replace("``", "`"), i, end + 1))
            i = end + 1
        elif ch == "\\":
            raise MalformedCypher("it has a backslash outside a string")
        elif _is_word_char(ch):
            j = i
            while j < n and _is_word_char(query[j]):
                j += 1
            kind = "number" if ch.isdigit() else "word"
            tokens.append(Token(kind, fold(query[i:j]) if kind == "word" else query[i:j], i, j))
            i = j
        else:
            tokens.append(Token("punct", ch, i, i + 1))
            i += 1
    return tokens


_OPEN, _CLOSE = "([{", ")]}"
_PROJECTION_ENDS = frozenset({"order", "skip", "limit"})


def _is_keyword(tokens: list[Token], k: int, words: frozenset[str] | set[str]) -> bool:
    """`tokens[k]` is one of `words` used as a keyword (not a property key such as `n.limit`)."""
    tok = tokens[k]
    after_dot = k > 0 and tokens[k - 1].kind == "punct" and tokens[k - 1].text == "."
    return tok.kind == "word" and tok.text in words and not after_dot


def first_word(query: str) -> str | None:
    """The query's first keyword, folded (`match`, `call`, ...); None if it starts otherwise."""
    try:
        tokens = tokenize(query)
    except MalformedCypher:
        return None
    return tokens[0].text if tokens and tokens[0].kind == "word" else None


def return_columns(query: str) -> list[str] | None:
    """The column names of the query's final top-level RETURN, in order, spelled the way FalkorDB
    names them (the alias, else the expression as written); None when they cannot be told
    (no RETURN, `RETURN *`, unreadable text)."""
    try:
        tokens = tokenize(query)
    except MalformedCypher:
        return None
    depth, last_return = 0, None
    for k, tok in enumerate(tokens):
        if tok.kind == "punct" and tok.text in _OPEN:
            depth += 1
        elif tok.kind == "punct" and tok.text in _CLOSE:
            depth -= 1
        elif depth == 0 and _is_keyword(tokens, k, {"return"}):
            last_return = k
    if last_return is None:
        return None
    k = last_return + 1
    if k < len(tokens) and _is_keyword(tokens, k, {"distinct"}):
        k += 1
    items: list[list[Token]] = [[]]
    depth = 0
    for j in range(k, len(tokens)):
        tok = tokens[j]
        if depth == 0 and (
            _is_keyword(tokens, j, _PROJECTION_ENDS) or (tok.kind == "punct" and tok.text == ";")
        ):
            break
        if tok.kind == "punct" and tok.text in _OPEN:
            depth += 1
        elif tok.kind == "punct" and tok.text in _CLOSE:
            depth -= 1
        if depth == 0 and tok.kind == "punct" and tok.text == ",":
            items.append([])
        else:
            items[-1].append(tok)
    names = []
    for item in items:
        if not item or (len(item) == 1 and item[0].text == "*"):
            return None
        if len(item) > 2 and _is_keyword(item, len(item) - 2, {"as"}) and item[-1].kind in {"word", "name"}:
            alias = item[-1]
            names.append(alias.text if alias.kind == "name" else query[alias.start : alias.end])
        else:
            names.append(query[item[0].start : item[-1].end])
    return names
