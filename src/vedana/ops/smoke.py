"""Smoke: ask the agent one question and require a word or phrase in its answer."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from vedana.errors import VedanaError
from vedana.problems import SectionResult, error

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.config import Settings
    from vedana.embeddings import Embedder
    from vedana.stores.graph import GraphStore

ANSWER_EXCERPT = 500


def smoke(
    settings: Settings,
    question: str,
    expect: str | None,
    *,
    engine: Engine | None = None,
    graph: GraphStore | None = None,
    embedder: Embedder | None = None,
) -> SectionResult:
    """Fails when the agent errors, finds nothing, or (with `expect`) answers without that text
    (compared case-insensitively)."""
    from vedana.agent import ask

    started = time.monotonic()
    section = SectionResult("smoke", details={"question": question, "expect": expect})
    where = {"question": question}
    try:
        result = ask(settings, question, engine=engine, graph=graph, embedder=embedder)
    except VedanaError as exc:
        section.problems.append(error("smoke.failed", f"the agent failed: {exc}", **where))
        section.seconds = time.monotonic() - started
        return section
    answer = result.answer
    section.details.update(
        answer=answer[:ANSWER_EXCERPT],
        no_answer=result.trace.no_answer,
        tool_calls=len(result.trace.tool_calls),
        llm_calls=len(result.trace.llm_calls),
    )
    if result.trace.no_answer:
        section.problems.append(
            error(
                "smoke.no-answer",
                "the agent found no answer; check that the data is synced and indexed "
                "(`vedana run`) and that the question matches the data model",
                **where,
            )
        )
    elif expect is not None and expect.casefold() not in answer.casefold():
        section.problems.append(
            error(
                "smoke.unexpected-answer",
                f"the answer does not contain {expect!r}: {' '.join(answer.split())[:200]!r}; "
                "check the data, the prompts or the expected text",
                **where,
            )
        )
    section.seconds = time.monotonic() - started
    return section
