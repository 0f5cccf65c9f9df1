"""Query parameters for FalkorDB, written as its `CYPHER name=value ...` header.

FalkorDB takes parameters as Cypher literals in front of the query text. The `falkordb` client
builds them with a Python call per value, which was a tenth of a graph load's time. The loads
send lists of lists of scalars, for which `json.dumps` (one C call for a whole batch) writes
exactly the Cypher literal: `null`/`true`/`false`, numbers as Python prints them, strings in
double quotes with `\\"` and `\\\\` escaped, which FalkorDB reads back the same. What JSON would
write differently — a map (Cypher keys are bare or backticked, never quoted) or an escaped control
character (FalkorDB does not decode `\\n`, `\\uXXXX`) — is noticed in the text and written value by
value instead, as the client does; a false alarm (a string holding `{` or `\\n`) only costs speed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from vedana.errors import CypherError

_JSON_ONLY_ESCAPE = re.compile(r"\\[bfnrtu]")


def params_header(params: dict[str, Any]) -> str:
    """`CYPHER a=... b=... ` (with the trailing space), to put in front of the query text."""
    parts = [f"{name}={literal(value)}" for name, value in params.items()]
    return "CYPHER " + " ".join(parts) + " "


def literal(value: Any) -> str:
    """`value` as a Cypher literal FalkorDB reads back as the same value."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):  # tuples, bytes, NaN: the careful writer says what it can
        return _literal(value)
    if "{" in text or ("\\" in text and _JSON_ONLY_ESCAPE.search(text)):
        return _literal(value)
    return text


def _literal(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ",".join(map(_literal, value)) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_key(k)}:{_literal(v)}" for k, v in value.items()) + "}"
    return str(value)


def _key(key: Any) -> str:
    text = key.decode() if isinstance(key, bytes) else str(key)
    if not text or "`" in text:
        raise CypherError(f"cannot send {text!r} as a map key to FalkorDB (empty or holding a backtick)")
    return f"`{text}`"
