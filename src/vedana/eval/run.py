"""One evaluation run: every selected golden question asked through the same agent as
`vedana ask`, several at once, each scored and stored the moment it is known.

Questions run in daemon threads, at most `concurrency` at a time: a question that outlives its
timeout is recorded as an error and its thread abandoned, and Ctrl-C returns at once instead
of waiting for answers in flight. Ctrl-C marks the run interrupted (what finished is stored);
`--resume RUN` asks only what is missing, with the run's own models and selection."""

from __future__ import annotations

import hashlib
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vedana.eval.answer import Scoring, answer_question, error_result
from vedana.eval.golden import GoldenQuestion, read_golden, select
from vedana.eval.score import JUDGE_TEMPLATE

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.config import Settings
    from vedana.datamodel import DataModel
    from vedana.stores.graph import GraphStore

JUDGE_PROMPT_NAME = "eval_judge_prompt"
OnResult = Callable[[dict[str, Any]], None]
OnStart = Callable[[int, int, int], None]  # run id, questions to ask, questions already answered
POLL_S = 0.2  # how often the runner looks at the clock for questions past their timeout


@dataclass
class EvalOptions:
    golden: str | None = None  # None: GRIST_TEST_SET_DOC_ID
    csv_export: bool = False
    scenarios: list[str] = field(default_factory=list)
    limit: int | None = None
    question: str | None = None
    concurrency: int = 2
    timeout_s: float = 300.0  # one question, agent and judge
    judge: bool = True
    judge_model: str | None = None  # None: JUDGE_MODEL, else MODEL
    min_recall: float = 1.0  # the pass rule without a judge
    use_filter: bool | None = None  # None: ENABLE_DM_FILTERING

    def selection(self, golden_spec: str | None) -> dict[str, Any]:
        """What `--resume` needs to select the same questions again."""
        return {"golden_spec": golden_spec, "scenarios": self.scenarios, "limit": self.limit,
                "question": self.question, "judge": self.judge, "min_recall": self.min_recall,
                "csv_export": self.csv_export}  # fmt: skip


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def judge_template(dm: DataModel) -> str:
    """The judge prompt: the data model's `eval_judge_prompt` row, else the built-in one."""
    override = (dm.prompt(JUDGE_PROMPT_NAME) or "").strip()
    return override or JUDGE_TEMPLATE


def judge_model_of(settings: Settings, options: EvalOptions) -> str | None:
    if not options.judge:
        return None
    return options.judge_model or settings.judge_model or settings.model


def knowledge_base_counts(engine: Engine, graph: GraphStore, dm: DataModel) -> dict[str, Any]:
    """Staging rows, graph nodes/relationships of the data model's types, and vectors."""
    from vedana.stores.staging import staging_counts
    from vedana.stores.vectors import vector_counts

    with engine.connect() as conn:
        staging, vectors = staging_counts(conn), vector_counts(conn)
    in_graph = graph.counts([a.noun for a in dm.anchors], [link.sentence for link in dm.links])
    return {
        "staging": staging,
        "graph": {"nodes": sum(in_graph["nodes"].values()), "edges": sum(in_graph["edges"].values())},
        "vectors": {"nodes": vectors.get("node", 0), "edges": vectors.get("edge", 0)},
    }


def run_config(
    settings: Settings, dm: DataModel, options: EvalOptions, engine: Engine, graph: GraphStore
) -> dict[str, Any]:
    """What a comparison needs to say why two runs differ."""
    from vedana import __version__

    use_filter = settings.enable_dm_filtering if options.use_filter is None else options.use_filter
    return {
        "model": settings.model,
        "filter": use_filter,
        "filter_model": settings.effective_filter_model if use_filter else None,
        "judge_model": judge_model_of(settings, options),
        "data_model_hash": _digest({**dm.to_dict(), "prompts": None}),
        "prompts_hash": _digest(sorted((p.name, p.text) for p in dm.prompts if p.name != JUDGE_PROMPT_NAME)),
        "judge_prompt_hash": _digest(judge_template(dm)) if options.judge else None,
        "max_rounds": settings.agent_max_rounds,
        "embeddings_model": settings.embeddings_model,
        **knowledge_base_counts(engine, graph, dm),
        "vedana": __version__,
    }


def ask_all(
    settings: Settings,
    questions: list[GoldenQuestion],
    scoring: Scoring,
    *,
    engine: Engine,
    graph: GraphStore | None = None,
    concurrency: int = 2,
) -> Iterator[dict[str, Any]]:
    """Each question's result as it finishes, `concurrency` questions at a time. A question past
    `scoring.timeout_s` yields a timeout error; its thread is abandoned and its late answer dropped."""
    finished: queue.Queue[tuple[int, dict[str, Any]]] = queue.Queue()
    waiting = list(questions)
    running: dict[int, tuple[GoldenQuestion, float, float]] = {}  # position -> (question, start, deadline)

    def work(q: GoldenQuestion, started: float) -> None:
        try:
            result = answer_question(settings, q, scoring, engine=engine, graph=graph)
        except BaseException as exc:  # answer_question records errors; this is a last resort
            result = error_result(q, f"{type(exc).__name__}: {exc}", time.monotonic() - started)
        finished.put((q.position, result))

    while waiting or running:
        while waiting and len(running) < max(1, concurrency):
            q = waiting.pop(0)
            started = time.monotonic()
            running[q.position] = (q, started, started + scoring.timeout_s)
            threading.Thread(target=work, args=(q, started), name=f"eval-q{q.position}", daemon=True).start()
        try:
            position, result = finished.get(timeout=POLL_S)
        except queue.Empty:
            pass
        else:
            if running.pop(position, None) is not None:  # else: it had already timed out
                yield result
        now = time.monotonic()
        for position, (q, started, deadline) in list(running.items()):
            if now >= deadline:
                del running[position]
                yield error_result(q, f"no answer within {scoring.timeout_s:g} s (--timeout)", now - started)


def _golden_spec(golden: str | None, settings: Settings) -> str | None:
    """The golden set as `--resume` can open it again: a path made absolute, a document id as is."""
    if golden is None:
        return settings.grist_test_set_doc_id
    path = Path(golden).expanduser()
    return str(path.resolve()) if path.exists() else golden


def _resumed(
    stored: dict[str, Any], settings: Settings, options: EvalOptions
) -> tuple[Settings, EvalOptions]:
    """The stored run's selection and models: the rest of a run is asked as its start was."""
    selection, config = stored["selection"], stored["config"]
    resumed = EvalOptions(
        golden=selection.get("golden_spec") or stored["golden"] or None,
        csv_export=bool(selection.get("csv_export")), scenarios=list(selection.get("scenarios") or []),
        limit=selection.get("limit"), question=selection.get("question"), concurrency=options.concurrency,
        timeout_s=options.timeout_s, judge=bool(selection.get("judge", True)),
        judge_model=config.get("judge_model"), min_recall=float(selection.get("min_recall", 1.0)),
        use_filter=config.get("filter"),
    )  # fmt: skip
    update: dict[str, Any] = {"model": config.get("model") or settings.model}
    if config.get("filter_model"):
        update["filter_model"] = config["filter_model"]
    return settings.model_copy(update=update), resumed


def _check_models(settings: Settings, options: EvalOptions) -> None:
    """A missing key or an unknown model fails the run before it starts, not once per question."""
    from vedana.agent.llm import LLM

    llm = LLM(settings)
    use_filter = settings.enable_dm_filtering if options.use_filter is None else options.use_filter
    for model in (settings.model, settings.effective_filter_model if use_filter else None,
                  judge_model_of(settings, options)):  # fmt: skip
        if model:
            llm.check(model)


def _chosen(settings: Settings, options: EvalOptions) -> tuple[list[GoldenQuestion], str]:
    from vedana.errors import ConfigError

    questions, where = read_golden(options.golden, settings, csv_export=options.csv_export)
    chosen = select(questions, scenarios=options.scenarios, limit=options.limit, question=options.question)
    if not chosen:
        scenarios = sorted({q.scenario for q in questions if q.scenario})
        raise ConfigError(
            f"no question of {where} matches the selection ({len(questions)} question(s); "
            f"scenarios: {', '.join(scenarios) or 'none'}); check --scenario / --question"
        )
    return chosen, where


def run_eval(
    settings: Settings,
    options: EvalOptions,
    *,
    resume: int | None = None,
    engine: Engine | None = None,
    on_start: OnStart | None = None,
    on_result: OnResult | None = None,
) -> int:
    """Run (or finish, with `resume`) an evaluation; its run id. A KeyboardInterrupt marks the run
    interrupted, after the answers already given are stored, and is raised again."""
    from vedana.stores import eval_runs
    from vedana.stores.graph_factory import open_graph
    from vedana.stores.staging import load_data_model

    if engine is None:
        from vedana.stores.postgres import get_engine

        engine = get_engine(settings)
    done: set[int] = set()
    if resume is not None:
        stored = eval_runs.load_run(engine, resume)
        settings, options = _resumed(stored, settings, options)
        done = {r["position"] for r in stored["results"]}
    spec = _golden_spec(options.golden, settings)
    chosen, where = _chosen(settings, options)
    _check_models(settings, options)
    with engine.connect() as conn:
        dm = load_data_model(conn)
    scoring = Scoring(
        judge_model=judge_model_of(settings, options), judge_prompt=judge_template(dm),
        min_recall=options.min_recall, use_filter=options.use_filter, timeout_s=options.timeout_s,
    )  # fmt: skip
    with open_graph(settings) as graph:
        if resume is None:
            config = run_config(settings, dm, options, engine, graph)
            run_id = eval_runs.start_run(engine, options.golden or where, config, options.selection(spec))
        else:
            run_id = resume
            eval_runs.finish_run(engine, run_id, "running")
        todo = [q for q in chosen if q.position not in done]
        if on_start is not None:
            on_start(run_id, len(todo), len(chosen) - len(todo))
        try:
            for result in ask_all(
                settings, todo, scoring, engine=engine, graph=graph, concurrency=options.concurrency
            ):
                eval_runs.save_result(engine, run_id, result)
                if on_result is not None:
                    on_result(result)
        except KeyboardInterrupt:
            eval_runs.finish_run(engine, run_id, "interrupted")
            raise
        eval_runs.finish_run(engine, run_id, "done")
    return run_id
