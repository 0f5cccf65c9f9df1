"""A token budget on tool results: a result longer than `VEDANA_TOOL_RESULT_MAX_TOKENS` keeps its
first rows (or hits), cut at a row boundary, with a note telling the model how to narrow its
request. Tokens are estimated, not counted: a tokenizer per provider is not worth loading."""

from __future__ import annotations

import json
from typing import Any

BYTES_PER_TOKEN = 4  # English JSON runs about 4 characters a token; other scripts fewer bytes a token
ROWS_KEYS = ("rows", "hits")  # where the cypher tool's and the search tools' results keep their rows

NARROW = {
    "rows": "Narrow the query: add LIMIT, RETURN fewer or shorter columns (properties instead of whole "
    "nodes), filter with WHERE, or aggregate with count()/collect().",
    "hits": "Narrow the search: without expand, with where, or with fewer texts; or ask Cypher for only "
    "the properties you need.",
}


def estimated_tokens(text: str) -> int:
    """About 4 UTF-8 bytes a token: close for English JSON, generous for Cyrillic or CJK text."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


def fit_result(text: str, max_tokens: int) -> tuple[str, int | None]:
    """`text` as it is when it fits `max_tokens`; else the same JSON with as many of its first
    rows as fit, `truncated` and a note, and how many rows were kept. Text that is not a
    result with rows (an error, say) is cut at the budget."""
    if estimated_tokens(text) <= max_tokens:
        return text, None
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    key = next((k for k in ROWS_KEYS if isinstance(payload, dict) and isinstance(payload.get(k), list)), None)
    if payload is None or key is None:
        return text[: max_tokens * BYTES_PER_TOKEN // 2] + " … (cut: too long to read)", None
    rows: list[Any] = payload[key]
    capped = bool(payload.get("truncated"))

    def render(n: int) -> str:
        what = "rows" if key == "rows" else "hits"
        note = (
            f"only the first {n} of the {len(rows)} {what} returned fit in the tool-result budget "
            f"(about {max_tokens} tokens){'; more exist beyond those' if capped else ''}. {NARROW[key]}"
        )
        counted = {"row_count": n} if "row_count" in payload else {}
        return _dumps({**payload, key: rows[:n], **counted, "truncated": True, "note": note})

    low, high = 0, len(rows) - 1  # the most rows that fit lie in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if estimated_tokens(render(middle)) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return render(low), low
