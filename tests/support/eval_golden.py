"""The golden set `vedana eval` tests use, and the stand-in's agent and judge for it."""

from __future__ import annotations

from typing import Any

from support.fake_llm import answer, http_error, structured
from support.grist_files import Col, Doc, Table

# (question, golden answer, context, scenario); what the stand-in agent says for each
GOLDEN = [
    ("Who likes quokkas?", "Ada Okafor, Chen Wei and Dana Novak", "a1", "list"),
    ("How old is Bruno Silva?", "61", "p2", "lookup"),
    ("How many people like quokkas?", "3", "a1", "count"),
    ("Which animal does Bruno Silva like?", "axolotl", "p2; a2", "lookup"),
    ("How many animals are there?", "3", "", "count"),
]
ANSWERS = {
    "Who likes quokkas?": "Ada Okafor (p1), Chen Wei (p3) and Dana Novak (p4) like quokkas.",
    "How old is Bruno Silva?": "Bruno Silva is 61 years old.",
    "How many people like quokkas?": "Three people: 3.",
    "Which animal does Bruno Silva like?": "He likes the capybara (wrong).",  # fails
    "How many animals are there?": None,  # the provider errors on this one
}
COLUMNS = ["gds_question", "gds_answer", "question_context", "question_comment", "question_scenario", "owner"]


def golden_rows() -> list[dict[str, Any]]:
    return [dict(zip(COLUMNS, [q, a, c, "", s, "qa team"], strict=True)) for q, a, c, s in GOLDEN]


def golden_doc(doc_id: str = "goldenDoc0001") -> Doc:
    return Doc(doc_id, [Table("Gds", [Col(c) for c in COLUMNS], golden_rows())])


def last_user(body: dict[str, Any]) -> str:
    return [m.get("content") or "" for m in body["messages"] if m["role"] == "user"][-1]


def agent_stand_in(answers: dict[str, str | None] | None = None, asked: list[str] | None = None) -> Any:
    table = ANSWERS if answers is None else answers

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        question = last_user(body)
        if asked is not None:
            asked.append(question)
        text = table.get(question)
        return http_error(400, "the provider refused this one") if text is None else answer(text)

    return reply


def judge_stand_in(body: dict[str, Any]) -> dict[str, Any]:
    """A judge that fails an answer admitting it is wrong, and passes the rest."""
    prompt = last_user(body)
    given = prompt.rsplit("The assistant's answer:", 1)[-1].split("\n\nPass it when", 1)[0]
    wrong = "wrong" in given.lower()
    return structured({"verdict": "fail" if wrong else "pass", "rating": 2 if wrong else 9,
                       "comment": "names the capybara, not the axolotl" if wrong else "all facts right"})  # fmt: skip
