"""The golden set `vedana eval` tests use, and the stand-in's agent and judge for it.

`cypher_agent` plays a careful model by rule: for each question it sends one Cypher query
through the real agent's `cypher` tool, then answers with what the rows said, so the tool
calls, the graph and the scores are all real; a question can be made to come back wrong, be
refused by the provider, be rate-limited a few times, or hang."""

from __future__ import annotations

import json
import threading
from collections.abc import Collection
from typing import Any

from standins.fake_llm import answer, delayed, http_error, structured, tool_calls
from standins.grist_files import Col, Doc, Table

# (question, golden answer, context, scenario), about the agent tests' knowledge base (agent_kb)
GOLDEN = [
    ("Who likes quokkas?", "Ada Okafor, Chen Wei and Dana Novak", "a1", "list"),
    ("How old is Bruno Silva?", "61", "p2", "lookup"),
    ("How many people like quokkas?", "3", "a1", "count"),
    ("Which animal does Bruno Silva like?", "axolotl", "p2; a2", "lookup"),
    ("How many animals are there?", "3", "", "count"),
]
QUERIES = {
    "Who likes quokkas?": "MATCH (p:Person)-[:LIKES]->(:Animal {id: 'a1'}) RETURN p.name AS name ORDER BY name",
    "How old is Bruno Silva?": "MATCH (p:Person {id: 'p2'}) RETURN p.age AS age",
    "How many people like quokkas?": "MATCH (p:Person)-[:LIKES]->(:Animal {id: 'a1'}) RETURN count(p) AS n",
    "Which animal does Bruno Silva like?": "MATCH (:Person {id: 'p2'})-[:LIKES]->(a:Animal) RETURN a.name AS name",
    "How many animals are there?": "MATCH (a:Animal) RETURN count(a) AS n",
}
WRONG = {"Which animal does Bruno Silva like?": "He likes the capybara (wrong)."}
REFUSED = {"How many animals are there?"}
# Without tools, what a model says for each (None: the provider errors)
ANSWERS = {
    "Who likes quokkas?": "Ada Okafor (p1), Chen Wei (p3) and Dana Novak (p4) like quokkas.",
    "How old is Bruno Silva?": "Bruno Silva is 61 years old.",
    "How many people like quokkas?": "Three people: 3.",
    "Which animal does Bruno Silva like?": "He likes the capybara (wrong).",
    "How many animals are there?": None,
}
COLUMNS = ["gds_question", "gds_answer", "question_context", "question_comment", "question_scenario", "owner"]


def golden_rows() -> list[dict[str, Any]]:
    return [dict(zip(COLUMNS, [q, a, c, "", s, "qa team"], strict=True)) for q, a, c, s in GOLDEN]


def golden_doc(doc_id: str = "goldenDoc0001") -> Doc:
    return Doc(doc_id, [Table("Gds", [Col(c) for c in COLUMNS], golden_rows())])


def last_user(body: dict[str, Any]) -> str:
    return [m.get("content") or "" for m in body["messages"] if m["role"] == "user"][-1]


def first_user(body: dict[str, Any]) -> str:
    return next(m.get("content") or "" for m in body["messages"] if m["role"] == "user")


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def from_rows(result: dict[str, Any]) -> str:
    """An answer built from a Cypher result: its values, rows joined by commas, citations kept."""
    rows = result.get("rows") or []
    if not rows:
        return "I found nothing."
    return ", ".join(
        " ".join(str(row[c]) for c in result["columns"]) + (f" {row['cite']}" if row.get("cite") else "")
        for row in rows
    )


def cypher_agent(
    queries: dict[str, str] | None = None,
    *,
    wrong: dict[str, str] | None = None,
    refused: Collection[str] | None = None,
    rate_limited: dict[str, int] | None = None,
    slow: dict[str, float] | None = None,
    asked: list[str] | None = None,
) -> Any:
    """The agent by rule: one Cypher query per question (`queries`), then an answer from its rows,
    except `wrong` answers; `refused` questions fail at the provider; a `rate_limited` question
    gets that many 429s first; a `slow` one answers only after that many seconds."""
    table = QUERIES if queries is None else queries
    wrong = WRONG if wrong is None else wrong
    refused = REFUSED if refused is None else refused
    limits = dict(rate_limited or {})
    lock = threading.Lock()

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        question = first_user(body)
        results = tool_results(body)
        with lock:
            if asked is not None and not results:
                asked.append(question)
            if limits.get(question, 0) > 0:
                limits[question] -= 1
                return http_error(429, "rate limit reached; slow down")
        if question in refused:
            return http_error(400, "the provider refused this one")
        if not results:
            out = tool_calls(("cypher", {"query": table[question]}))
        else:
            out = answer(wrong.get(question) or from_rows(results[-1]))
        delay = (slow or {}).get(question)
        return delayed(delay, out) if delay else out

    return reply


def agent_stand_in(answers: dict[str, str | None] | None = None, asked: list[str] | None = None) -> Any:
    """An agent that answers straight from `answers` without tools (None: the provider errors)."""
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
