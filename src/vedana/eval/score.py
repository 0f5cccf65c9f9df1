"""Scoring an answer against the golden one.

Exact, no LLM: the golden answer is split into items (lists by comma, semicolon, "and" or
newline; numbers; ids), each looked for in the answer case-, whitespace- and
punctuation-insensitively, numbers compared as numbers → recall; the answer's own items that
match a golden one → precision. Whether retrieval touched what `question_context` names, from
the trace. The judge: a model's verdict with a rating and a comment, as structured output.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vedana.agent.llm import LLM

_SPLIT = re.compile(r"\s*(?:[,;\n]|\band\b|\bи\b)\s*", re.IGNORECASE)
_NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)?")
_NOT_WORD = re.compile(r"[^\w:]+")


def _normal(text: str) -> str:
    """Lower case, accents kept, punctuation and repeated blanks gone (ids like person:0042 stay)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NOT_WORD.sub(" ", folded).split())


def items(text: str) -> list[str]:
    """The items of a list-like answer: "Ada, Bo and Cy" → ["ada", "bo", "cy"]."""
    found = [_normal(part) for part in _SPLIT.split(text or "")]
    return list(dict.fromkeys(item for item in found if item))


def _as_number(item: str) -> float | None:
    match = _NUMBER.fullmatch(item.replace(" ", ""))
    return float(match.group().replace(",", ".")) if match else None


def _numbers_in(text: str) -> set[float]:
    return {float(n.replace(",", ".")) for n in _NUMBER.findall(text)}


def _found(item: str, answer_normal: str, answer_numbers: set[float]) -> bool:
    number = _as_number(item)
    if number is not None:
        return number in answer_numbers
    return re.search(rf"(?<!\w){re.escape(item)}(?!\w)", answer_normal) is not None


@dataclass(frozen=True)
class ItemScore:
    recall: float
    precision: float
    golden_items: int
    found: list[str]
    missing: list[str]


def item_scores(golden: str, answer: str) -> ItemScore:
    wanted = items(golden)
    normal, numbers = _normal(answer), _numbers_in(answer)
    found = [i for i in wanted if _found(i, normal, numbers)]
    missing = [i for i in wanted if i not in found]
    recall = len(found) / len(wanted) if wanted else 1.0
    golden_normal, golden_numbers = _normal(golden), _numbers_in(golden)
    given = items(answer)
    matched = [i for i in given if _found(i, golden_normal, golden_numbers) or any(w in i for w in found)]
    precision = len(matched) / len(given) if given else 0.0
    return ItemScore(round(recall, 4), round(precision, 4), len(wanted), found, missing)


def context_touched(context: str, trace: dict[str, Any], sources: list[dict[str, Any]]) -> bool | None:
    """Did the tools reach what `question_context` names (ids or values)? None when it names nothing."""
    wanted = items(context)
    if not wanted:
        return None
    seen = json.dumps([trace.get("tool_calls", []), sources], ensure_ascii=False, default=str)
    normal = _normal(seen)
    return all(_found(i, normal, _numbers_in(seen)) for i in wanted)


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
