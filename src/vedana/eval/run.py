"""One evaluation run: every selected golden question asked through the same agent as
`vedana ask`, several at once, each scored (items, context, judge) and stored the moment it is
known. A failing question is recorded as an error; Ctrl-C stops submitting, keeps what finished
and marks the run interrupted, and `--resume RUN` asks only what is missing."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vedana.eval.golden import GoldenQuestion, read_golden, select
from vedana.eval.score import JUDGE_TEMPLATE, context_touched, item_scores, judge_answer
from vedana.redaction import redact

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.config import Settings
    from vedana.datamodel import DataModel

JUDGE_PROMPT_NAME = "eval_judge_prompt"
OnResult = Callable[[dict[str, Any]], None]


@dataclass
class EvalOptions:
    golden: str | None = None  # None: GRIST_TEST_SET_DOC_ID
    csv_export: bool = False
    scenarios: list[str] = field(default_factory=list)
    limit: int | None = None
    question: str | None = None
    concurrency: int = 2
    judge: bool = True
    judge_model: str | None = None  # None: JUDGE_MODEL, else MODEL
    min_recall: float = 1.0  # the pass rule without a judge
    use_filter: bool | None = None

    def selection(self) -> dict[str, Any]:
        return {"scenarios": self.scenarios, "limit": self.limit, "question": self.question, "judge": self.judge,
                "min_recall": self.min_recall, "csv_export": self.csv_export}  # fmt: skip


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def judge_template(dm: DataModel) -> str:
    override = (dm.prompt(JUDGE_PROMPT_NAME) or "").strip()
    return override or JUDGE_TEMPLATE


def run_config(settings: Settings, dm: DataModel, options: EvalOptions, engine: Engine) -> dict[str, Any]:
    """What a comparison needs to say why two runs differ."""
    from vedana import __version__
    from vedana.stores.staging import staging_counts

    with engine.connect() as conn:
        counts = staging_counts(conn)
    use_filter = settings.enable_dm_filtering if options.use_filter is None else options.use_filter
    return {
        "model": settings.model,
        "filter_model": settings.effective_filter_model if use_filter else None,
        "filter": use_filter,
        "judge_model": (options.judge_model or settings.model) if options.judge else None,
        "data_model_hash": _digest({**dm.to_dict(), "prompts": None}),
        "prompts_hash": _digest(sorted((p.name, p.text) for p in dm.prompts)),
        "judge_prompt_hash": _digest(judge_template(dm)),
        "staging": counts,
        "max_rounds": settings.agent_max_rounds,
        "vedana": __version__,
    }


def _ask_one(
    settings: Settings, q: GoldenQuestion, options: EvalOptions, engine: Engine, template: str
) -> dict[str, Any]:
    """Ask, score and judge one question; an error is recorded, never raised."""
    from vedana.agent import ask
    from vedana.agent.llm import LLM
    from vedana.errors import VedanaError

    started = time.perf_counter()
    base: dict[str, Any] = {"position": q.position, "question": q.question, "scenario": q.scenario,
                            "golden_answer": q.answer}  # fmt: skip
    try:
        result = ask(settings, q.question, use_filter=options.use_filter, engine=engine).to_dict()
    except VedanaError as exc:
        return {**base, "answer": None, "passed": False, "error": redact(str(exc)),
                "scores": {"latency_s": round(time.perf_counter() - started, 3)}, "trace": None}  # fmt: skip
    except Exception as exc:  # one broken question must not end the run
        return {**base, "answer": None, "passed": False, "error": redact(f"{type(exc).__name__}: {exc}"),
                "scores": {"latency_s": round(time.perf_counter() - started, 3)}, "trace": None}  # fmt: skip
    trace, answer = result["trace"], result["answer"]
    exact = item_scores(q.answer, answer)
    usage = trace.get("usage") or {}
    costs = [u.get("cost_usd") for u in usage.values()]
    scores: dict[str, Any] = {
        "recall": exact.recall,
        "precision": exact.precision,
        "missing_items": exact.missing,
        "context_touched": context_touched(q.context, trace, result.get("sources", [])),
        "tool_calls": len(trace["tool_calls"]),
        "cypher_errors": sum(1 for c in trace["tool_calls"] if c["name"] == "cypher" and c.get("error")),
        "llm_calls": len(trace["llm_calls"]),
        "tokens": sum(
            (u.get("prompt_tokens") or 0) + (u.get("completion_tokens") or 0) for u in usage.values()
        ),
        "cost_usd": None if any(c is None for c in costs) else round(sum(c or 0.0 for c in costs), 8),
        "latency_s": round(time.perf_counter() - started, 3),
    }
    error = None
    if options.judge:
        llm = LLM(settings)
        model = options.judge_model or settings.model
        try:
            verdict = judge_answer(llm, model, template, {"question": q.question, "golden_answer": q.answer,
                                                          "context": q.context or "(not given)", "answer": answer})  # fmt: skip
            scores["judge"] = verdict
            call = llm.calls[-1]
            if scores["cost_usd"] is not None and call.cost_usd is not None:
                scores["cost_usd"] = round(scores["cost_usd"] + call.cost_usd, 8)
        except VedanaError as exc:
            error = redact(f"judge: {exc}")
        passed = bool(scores.get("judge", {}).get("verdict") == "pass")
    else:
        passed = exact.recall >= options.min_recall
    return {**base, "answer": answer, "passed": passed and error is None, "error": error, "scores": scores,
            "trace": {**trace, "sources": result.get("sources", [])}}  # fmt: skip


def run_eval(
    settings: Settings,
    options: EvalOptions,
    *,
    resume: int | None = None,
    engine: Engine | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_result: OnResult | None = None,
) -> int:
    """Run (or finish, with `resume`) an evaluation; its run id. A KeyboardInterrupt marks the run
    interrupted, after the answers already given are stored, and is raised again."""
    from vedana.stores import eval_runs
    from vedana.stores.staging import load_data_model

    if engine is None:
        from vedana.stores.postgres import get_engine

        engine = get_engine(settings)
    done: set[int] = set()
    if resume is not None:
        stored = eval_runs.load_run(engine, resume)
        selection = stored["selection"]
        options.golden, options.csv_export = stored["golden"] or None, bool(selection.get("csv_export"))
        options.scenarios, options.limit = selection.get("scenarios") or [], selection.get("limit")
        options.question, options.judge = selection.get("question"), bool(selection.get("judge", True))
        options.min_recall = float(selection.get("min_recall", 1.0))
        done = {r["position"] for r in stored["results"]}
    questions, where = read_golden(options.golden, settings, csv_export=options.csv_export)
    chosen = select(questions, scenarios=options.scenarios, limit=options.limit, question=options.question)
    with engine.connect() as conn:
        dm = load_data_model(conn)
    template = judge_template(dm)
    if resume is None:
        run_id = eval_runs.start_run(engine, options.golden or where, run_config(settings, dm, options, engine),
                                     options.selection())  # fmt: skip
    else:
        run_id = resume
    todo = [q for q in chosen if q.position not in done]
    if on_start is not None:
        on_start(run_id, len(todo))
    pool = ThreadPoolExecutor(max_workers=max(1, options.concurrency), thread_name_prefix="eval")
    pending: set[Future[dict[str, Any]]] = set()
    queue = list(todo)
    try:
        while queue or pending:
            while queue and len(pending) < max(1, options.concurrency):
                pending.add(pool.submit(_ask_one, settings, queue.pop(0), options, engine, template))
            finished, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
            for future in finished:
                result = future.result()
                eval_runs.save_result(engine, run_id, result)
                if on_result is not None:
                    on_result(result)
    except KeyboardInterrupt:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=False, cancel_futures=True)
        eval_runs.finish_run(engine, run_id, "interrupted")
        raise
    pool.shutdown(wait=True)
    eval_runs.finish_run(engine, run_id, "done")
    return run_id
