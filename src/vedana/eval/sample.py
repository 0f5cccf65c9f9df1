"""`vedana check --eval-sample N`: a few golden questions as the check's smoke section.

Asked and judged exactly as `vedana eval` does (same agent, same pass rule) but not stored: a
smoke test in CI should not fill the run list. The sample takes the scenarios in turn, so a
small N still touches every group."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from vedana.eval.answer import Scoring
from vedana.eval.golden import GoldenQuestion, read_golden
from vedana.problems import SectionResult, error

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.config import Settings

SAMPLE_CONCURRENCY = 2
SAMPLE_TIMEOUT_S = 180.0


def spread(questions: list[GoldenQuestion], n: int) -> list[GoldenQuestion]:
    """The first `n` questions taking each scenario in turn (first question of each, then second…)."""
    groups: dict[str, list[GoldenQuestion]] = {}
    for q in questions:
        groups.setdefault(q.scenario, []).append(q)
    picked: list[GoldenQuestion] = []
    depth = 0
    while len(picked) < n and any(len(g) > depth for g in groups.values()):
        picked += [g[depth] for g in groups.values() if len(g) > depth][: n - len(picked)]
        depth += 1
    return sorted(picked, key=lambda q: q.position)


def eval_smoke(
    settings: Settings,
    n: int,
    golden: str | None = None,
    *,
    csv_export: bool = False,
    engine: Engine | None = None,
) -> SectionResult:
    """The smoke section: an error for every sampled question that fails or errors."""
    from vedana.eval.run import EvalOptions, ask_all, judge_model_of, judge_template
    from vedana.stores.graph_factory import open_graph
    from vedana.stores.staging import load_data_model

    started = time.monotonic()
    questions, where = read_golden(golden, settings, csv_export=csv_export)
    sample = spread(questions, n)
    section = SectionResult("smoke", details={"golden": golden or where, "sample": len(sample)})
    if engine is None:
        from vedana.stores.postgres import get_engine

        engine = get_engine(settings)
    with engine.connect() as conn:
        dm = load_data_model(conn)
    scoring = Scoring(judge_model=judge_model_of(settings, EvalOptions()), judge_prompt=judge_template(dm),
                      timeout_s=SAMPLE_TIMEOUT_S)  # fmt: skip
    passed = 0
    with open_graph(settings) as graph:
        for result in ask_all(
            settings, sample, scoring, engine=engine, graph=graph, concurrency=SAMPLE_CONCURRENCY
        ):
            passed += bool(result["passed"])
            if result["passed"]:
                continue
            judge = (result["scores"] or {}).get("judge") or {}
            why = (
                result["error"]
                or judge.get("comment")
                or f"missing {', '.join(result['scores'].get('missing_items') or [])}"
            )
            code = "smoke.eval-error" if result["error"] else "smoke.eval-failed"
            section.problems.append(
                error(
                    code,
                    f"golden question #{result['position']} did not pass: {why}",
                    question=result["question"],
                )
            )
    section.details["passed"] = passed
    section.seconds = time.monotonic() - started
    return section
