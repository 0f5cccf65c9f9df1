"""Scoring an answer against the golden one.

Exact, no LLM: the golden answer is split into items (lists by comma, semicolon, "and" or
newline; numbers; ids), each looked for in the answer case-, accent-, whitespace- and
punctuation-insensitively, numbers compared as numbers (1,422 = 1422.0; "twelve" = 12) →
recall; the answer's own items that carry a golden one → precision. Whether retrieval touched
what `question_context` names, from the trace. The judge: a model's verdict with a rating and a
comment, as structured output.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vedana.agent.llm import LLM

# A comma between two digits belongs to a number (1,422), not to a list.
_SPLIT = re.compile(r"\s*(?:;|\n|(?<!\d),|,(?!\d)|\band\b|\bи\b)\s*", re.IGNORECASE)
# Not part of an id (person:0042) or of a longer number; thousands separators before decimals.
_NUMBER = re.compile(r"(?<![\w:.,])-?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?)(?![\w:]|[.,]\d)")
_NOT_WORD = re.compile(r"[^\w:]+")
_EDGE_PUNCTUATION = " \t.,;:!?\"'()[]{}«»“”‘’"
# Small counts are often written out ("twelve people"); compared as numbers too.
_NUMBER_WORDS = {
    word: float(n)
    for n, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}


def _normal(text: str) -> str:
    """Case, accents, punctuation and repeated blanks gone (ids like person:0042 stay whole)."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(_NOT_WORD.sub(" ", plain).split())


def _number(text: str) -> float | None:
    """The value of an item that is only a number ("1,422", "3.5", "12."), else None."""
    raw = text.strip(_EDGE_PUNCTUATION)
    match = _NUMBER.fullmatch(raw)
    if match is None:
        return _NUMBER_WORDS.get(_normal(raw))
    return _to_float(match.group())


def _to_float(token: str) -> float:
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", token):
        return float(token.replace(",", ""))
    return float(token.replace(",", "."))


def _numbers_in(text: str) -> set[float]:
    found = {_to_float(n) for n in _NUMBER.findall(text)}
    found.update(_NUMBER_WORDS[w] for w in _normal(text).split() if w in _NUMBER_WORDS)
    return found


@dataclass(frozen=True)
class Item:
    text: str  # normalised
    number: float | None  # set when the item is a number
    shown: str  # as written, for reports

    def found_in(self, normal: str, numbers: set[float]) -> bool:
        if self.number is not None:
            return self.number in numbers
        return re.search(rf"(?<!\w){re.escape(self.text)}(?!\w)", normal) is not None


def items(text: str) -> list[Item]:
    """The items of a list-like answer: "Ada, Bo and Cy" → ada, bo, cy; "1,422" stays one number."""
    found: dict[str, Item] = {}
    for part in _SPLIT.split(text or ""):
        normal = _normal(part)
        if normal and normal not in found:
            found[normal] = Item(normal, _number(part), part.strip(_EDGE_PUNCTUATION))
    return list(found.values())


@dataclass(frozen=True)
class ItemScore:
    recall: float
    precision: float
    golden_items: int
    found: list[str]
    missing: list[str]


def item_scores(golden: str, answer: str) -> ItemScore:
    """Recall: golden items found in the answer. Precision: the answer's items that carry a
    golden item (a name, a number) or appear in the golden answer; 0 for an empty answer."""
    wanted = items(golden)
    normal, numbers = _normal(answer), _numbers_in(answer)
    found = [i for i in wanted if i.found_in(normal, numbers)]
    recall = len(found) / len(wanted) if wanted else 1.0
    golden_normal, golden_numbers = _normal(golden), _numbers_in(golden)
    given = items(answer)
    matched = [
        g
        for g in given
        if g.found_in(golden_normal, golden_numbers)
        or any(w.found_in(g.text, _numbers_in(g.text)) for w in found)
    ]
    precision = len(matched) / len(given) if given else 0.0
    return ItemScore(
        recall=round(recall, 4),
        precision=round(precision, 4),
        golden_items=len(wanted),
        found=[i.shown for i in found],
        missing=[i.shown for i in wanted if i not in found],
    )


def context_touched(context: str, trace: dict[str, Any], sources: list[dict[str, Any]]) -> bool | None:
    """Did the tools reach what `question_context` names (ids or values)? None when it names
    nothing. Looked for in the tool calls (queries, hits) and in every node they returned."""
    wanted = items(context)
    if not wanted:
        return None
    seen = json.dumps([trace.get("tool_calls", []), sources], ensure_ascii=False, default=str)
    normal, numbers = _normal(seen), _numbers_in(seen)
    return all(i.found_in(normal, numbers) for i in wanted)


JUDGE_TEMPLATE = """You grade an assistant's answer to a question about a knowledge base against the expected answer.

Question:
{{question}}

Expected answer (the facts that must be there):
{{golden_answer}}

What the retrieval should have found:
{{context}}

The assistant's answer:
{{answer}}

Pass it when it states every expected fact correctly (wording, order and extra harmless detail do
not matter); fail it when a fact is missing, wrong or contradicted, or when it refuses although the
expected answer exists. Rate 0-10 how well it answers. Comment in one or two sentences on what is
right or wrong."""

JUDGE_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "verdict": {"type": "string", "enum": ["pass", "fail"]},
                "rating": {"type": "integer", "minimum": 0, "maximum": 10},
                "comment": {"type": "string"},
            },
            "required": ["verdict", "rating", "comment"],
            "additionalProperties": False,
        },
    },
}


def judge_answer(llm: LLM, model: str, template: str, values: dict[str, object]) -> dict[str, Any]:
    """The judge's `{verdict, rating, comment}`; a one-line `EvalError` when its reply is not that."""
    from vedana.agent.templates import fill
    from vedana.errors import LLMError

    prompt = fill(template, dict(values))
    response = llm.complete(
        model, [{"role": "user", "content": prompt}], purpose="judge", response_format=JUDGE_FORMAT
    )
    content = response.choices[0].message.content or ""
    try:
        data = json.loads(content)
        verdict = str(data["verdict"]).lower()
        if verdict not in ("pass", "fail"):
            raise ValueError(verdict)
        return {
            "verdict": verdict,
            "rating": max(0, min(10, int(data["rating"]))),
            "comment": str(data.get("comment", "")),
        }
    except (ValueError, KeyError, TypeError) as exc:
        raise LLMError(
            f"the judge {model} did not answer with a verdict ({type(exc).__name__}: {content[:80]!r})"
        ) from None
