"""One golden question: asked through the same agent as `vedana ask`, scored (items, context,
tools, cost, latency) and judged. Whatever goes wrong is recorded in the result, never raised:
one broken question must not end a run. A provider's rate limit is waited out and retried."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vedana.eval.golden import GoldenQuestion
from vedana.eval.score import context_touched, item_scores, judge_answer
from vedana.redaction import redact

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.config import Settings
    from vedana.stores.graph import GraphStore

# A rate-limited question is asked again after a pause, so several at once slow down instead
# of failing; litellm has already retried a couple of times within seconds.
RATE_LIMIT_ATTEMPTS = 4
RATE_LIMIT_BACKOFF_S = 2.0
RATE_LIMIT_MAX_BACKOFF_S = 30.0


@dataclass
class Scoring:
    """How a run scores: with a judge model and its prompt, or by item recall alone."""

    judge_model: str | None  # None: no judge; pass = item recall >= min_recall
    judge_prompt: str = ""
    min_recall: float = 1.0
    use_filter: bool | None = None  # None: ENABLE_DM_FILTERING
    timeout_s: float = 300.0  # the whole question, retries included


def _rate_limited(exc: BaseException) -> bool:
    from vedana.errors import LLMError

    return isinstance(exc, LLMError) and type(exc.__cause__).__name__ == "RateLimitError"


def _patiently(operation: Any, what: str, deadline_s: float) -> Any:
    from vedana import retry

    policy = retry.RetryPolicy(
        attempts=RATE_LIMIT_ATTEMPTS, backoff_s=RATE_LIMIT_BACKOFF_S, max_backoff_s=RATE_LIMIT_MAX_BACKOFF_S,
        timeout_s=deadline_s, deadline_s=deadline_s,
    )  # fmt: skip
    return retry.call(lambda _timeout: operation(), policy, retry_on=_rate_limited, what=what)


def base_result(q: GoldenQuestion) -> dict[str, Any]:
    golden = {"context": q.context, "comment": q.comment, "metadata": q.metadata}
    return {
        "position": q.position,
        "question": q.question,
        "scenario": q.scenario,
        "golden_answer": q.answer,
        "answer": None,
        "passed": False,
        "error": None,
        "scores": {"golden": {k: v for k, v in golden.items() if v}},
        "trace": None,
    }


def error_result(q: GoldenQuestion, error: str, latency_s: float) -> dict[str, Any]:
    result = base_result(q)
    result["error"] = redact(error)
    result["scores"]["latency_s"] = round(latency_s, 3)
    return result


def _usage_scores(trace: dict[str, Any]) -> dict[str, Any]:
    usage = trace.get("usage") or {}
    costs = [u.get("cost_usd") for u in usage.values()]
    calls = trace.get("tool_calls") or []
    return {
        "tool_calls": len(calls),
        "tools": [c["name"] for c in calls],
        "cypher_errors": sum(1 for c in calls if c["name"] == "cypher" and c.get("error")),
        "llm_calls": len(trace.get("llm_calls") or []),
        "tokens": sum(
            (u.get("prompt_tokens") or 0) + (u.get("completion_tokens") or 0) for u in usage.values()
        ),
        "cost_usd": None if any(c is None for c in costs) else round(sum(c or 0.0 for c in costs), 8),
    }


def answer_question(
    settings: Settings,
    q: GoldenQuestion,
    scoring: Scoring,
    *,
    engine: Engine,
    graph: GraphStore | None = None,
) -> dict[str, Any]:
    """Ask, score and judge one question; the result as stored (texts redacted)."""
    from vedana.agent import ask
    from vedana.agent.trace import redacted

    started = time.perf_counter()
    try:
        asked = _patiently(
            lambda: ask(settings, q.question, use_filter=scoring.use_filter, engine=engine, graph=graph),
            f"question {q.position}",
            scoring.timeout_s,
        )
    except Exception as exc:  # a provider error, a bad query, anything: recorded, the run goes on
        from vedana.errors import VedanaError

        text = str(exc) if isinstance(exc, VedanaError) else f"{type(exc).__name__}: {exc}"
        return error_result(q, text, time.perf_counter() - started)
    data = asked.to_dict()
    trace, answer = data["trace"], data["answer"]
    exact = item_scores(q.answer, answer)
    result = base_result(q)
    result["scores"].update(
        recall=exact.recall,
        precision=exact.precision,
        found_items=exact.found,
        missing_items=exact.missing,
        context_touched=context_touched(q.context, trace, data.get("sources", [])),
        **_usage_scores(trace),
    )
    result["answer"] = answer
    result["trace"] = {**trace, "sources": data.get("sources", [])}
    if scoring.judge_model is None:
        result["passed"] = exact.recall >= scoring.min_recall
    else:
        _judge(settings, q, scoring, answer, result)
    result["scores"]["latency_s"] = round(time.perf_counter() - started, 3)
    return redacted(result)  # a model may echo a secret; stored runs never hold one


def _judge(
    settings: Settings, q: GoldenQuestion, scoring: Scoring, answer: str, result: dict[str, Any]
) -> None:
    from vedana.agent.llm import LLM
    from vedana.errors import VedanaError

    assert scoring.judge_model is not None
    llm = LLM(settings)
    values: dict[str, object] = {"question": q.question, "golden_answer": q.answer, "context": q.context or "(not given)",
              "answer": answer}  # fmt: skip
    scores = result["scores"]
    try:
        verdict = _patiently(
            lambda: judge_answer(llm, scoring.judge_model or "", scoring.judge_prompt, values),
            f"judging question {q.position}",
            scoring.timeout_s,
        )
    except VedanaError as exc:
        result["error"] = redact(f"judge: {exc}")
        return
    finally:
        judge_costs = [c.cost_usd for c in llm.calls if c.error is None]
        if scores.get("cost_usd") is not None and judge_costs and None not in judge_costs:
            scores["cost_usd"] = round(scores["cost_usd"] + sum(c or 0.0 for c in judge_costs), 8)
        elif judge_costs:
            scores["cost_usd"] = None
        scores["tokens"] = scores.get("tokens", 0) + sum(
            (c.prompt_tokens or 0) + (c.completion_tokens or 0) for c in llm.calls
        )
    scores["judge"] = verdict
    result["passed"] = verdict["verdict"] == "pass"
