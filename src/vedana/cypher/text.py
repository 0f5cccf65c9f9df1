"""Reading Cypher text the way a parser sees it: tokens (strings, backticked names and comments
understood), and the column names of a query's final RETURN.

Used by the read-only guard (`vedana.cypher.guard`) and by the FalkorDB adapter, which
needs a query's column order to cap its rows on the server.
"""

from __future__ import annotations

import re
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
        if ch in _BLANKS:
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
            if ch.isdigit():
                tokens.append(_number(query, i, j))
            else:
                tokens.append(Token("word", fold(query[i:j]), i, j))
            i = j
        elif ch in _PUNCTUATION:
            tokens.append(Token("punct", ch, i, i + 1))
            i += 1
        else:
            raise MalformedCypher(_unclassified(ch, i))
    return tokens


# Deny by default: outside strings, names and comments, only these blanks and punctuation marks
# are Cypher; anything else (a zero-width space splitting a keyword, a control character, a
# look-alike blank) is refused rather than guessed at.
_BLANKS = frozenset(" \t\n\r")
_PUNCTUATION = frozenset("()[]{},.:;=<>+-*/%^|!?~")
_NUMBER = re.compile(r"(?:0x[0-9a-f]+|0o[0-7]+|\d+(?:e\d*)?)", re.IGNORECASE)


def _number(query: str, start: int, end: int) -> Token:
    """A number literal; a number glued to letters (`1CREATE`) is no token of Cypher's."""
    text = query[start:end]
    if not _NUMBER.fullmatch(text):
        raise MalformedCypher(f"it has {text!r} at character {start + 1}, neither a number nor a name")
    return Token("number", text, start, end)


def _unclassified(ch: str, at: int) -> str:
    code = f"U+{ord(ch):04X}"
    if ch.isspace():
        return f"it has an unusual blank ({code}) at character {at + 1}; use plain spaces and newlines"
    if unicodedata.category(ch) in {"Cc", "Cf", "Co", "Cn", "Cs"}:
        return f"it has an invisible or control character ({code}) at character {at + 1}"
    return f"it has {ch!r} ({code}) at character {at + 1}, which Cypher does not use outside strings"


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
    at = _final_return(tokens)
    if at is None:
        return None
    names = [_column_name(query, item) for item in _projection_items(tokens, at + 1)]
    return None if any(name is None for name in names) else [n for n in names if n is not None]


def _final_return(tokens: list[Token]) -> int | None:
    """Position of the last RETURN outside any brackets (not one inside a CALL { } subquery)."""
    depth, last = 0, None
    for k, tok in enumerate(tokens):
        if tok.kind == "punct" and tok.text in _OPEN:
            depth += 1
        elif tok.kind == "punct" and tok.text in _CLOSE:
            depth -= 1
        elif depth == 0 and _is_keyword(tokens, k, {"return"}):
            last = k
    return last


def _projection_items(tokens: list[Token], start: int) -> list[list[Token]]:
    """The comma-separated items after RETURN [DISTINCT], up to ORDER/SKIP/LIMIT or `;`."""
    if start < len(tokens) and _is_keyword(tokens, start, {"distinct"}):
        start += 1
    items: list[list[Token]] = [[]]
    depth = 0
    for j in range(start, len(tokens)):
        tok = tokens[j]
        ends = _is_keyword(tokens, j, _PROJECTION_ENDS) or (tok.kind == "punct" and tok.text == ";")
        if depth == 0 and ends:
            break
        if tok.kind == "punct" and tok.text in _OPEN:
            depth += 1
        elif tok.kind == "punct" and tok.text in _CLOSE:
            depth -= 1
        if depth == 0 and tok.kind == "punct" and tok.text == ",":
            items.append([])
        else:
            items[-1].append(tok)
    return items


def _column_name(query: str, item: list[Token]) -> str | None:
    """`expr AS alias` → the alias as written; `expr` → the expression's text; `*` → None."""
    if not item or (len(item) == 1 and item[0].text == "*"):
        return None
    if len(item) > 2 and _is_keyword(item, len(item) - 2, {"as"}) and item[-1].kind in {"word", "name"}:
        alias = item[-1]
        return alias.text if alias.kind == "name" else query[alias.start : alias.end]
    return query[item[0].start : item[-1].end]
