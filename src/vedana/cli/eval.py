"""`vedana eval`: ask a golden set through the agent, score the answers, store and compare runs."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from sqlalchemy import Engine

app = typer.Typer(invoke_without_command=True, no_args_is_help=False, rich_markup_mode="markdown")


@app.callback()
def eval_(
    ctx: typer.Context,
    golden: Annotated[
        str | None,
        typer.Option("--golden", "-g", help="Golden set: a CSV file, a folder of CSV files, a .grist file or a Grist "
                     "document id (table Gds) [default: GRIST_TEST_SET_DOC_ID].", show_default=False),
    ] = None,
    csv_export: Annotated[bool, typer.Option("--csv", help="Read a Grist document through its CSV export.")] = False,
    scenario: Annotated[
        list[str] | None, typer.Option("--scenario", "-s", help="Only this question_scenario (repeatable).", show_default=False)
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Only the first N questions.", show_default=False)] = None,
    question: Annotated[str | None, typer.Option("--question", "-q", help="Only questions containing this text.", show_default=False)] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, max=8, help="Questions asked at once (each holds a database connection "
                                                  "while it searches; the pool has 15).")] = 2,
    timeout: Annotated[float, typer.Option("--timeout", min=1.0, help="Seconds one question may take (agent and judge); "
                                           "later it is recorded as an error.")] = 300.0,
    no_judge: Annotated[bool, typer.Option("--no-judge", help="Score without the judge model (pass = item recall ≥ --min-recall).")] = False,
    judge_model: Annotated[str | None, typer.Option("--judge-model", help="litellm model of the judge (JUDGE_MODEL, else MODEL).", show_default=False)] = None,
    min_recall: Annotated[float, typer.Option("--min-recall", min=0.0, max=1.0, help="With --no-judge: the item recall a pass needs.")] = 1.0,
    model: Annotated[str | None, typer.Option("--model", "-m", help="litellm model for the agent (MODEL).", show_default=False)] = None,
    no_filter: Annotated[bool, typer.Option("--no-filter", help="Skip the data-model filter step.")] = False,
    compare: Annotated[int | None, typer.Option("--compare", help="Put this run beside run RUN.", show_default=False)] = None,
    compare_last: Annotated[bool, typer.Option("--compare-last", help="Put this run beside the previous one (on the same golden set if any).")] = False,
    fail_under: Annotated[float | None, typer.Option("--fail-under", min=0.0, max=1.0, help="Exit 1 when the pass rate is below this (for CI).", show_default=False)] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write a report: FILE.md or FILE.html (self-contained).", show_default=False)] = None,
    resume: Annotated[int | None, typer.Option("--resume", help="Finish interrupted run RUN, asking only what it lacks, with its own models and selection.", show_default=False)] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the run (summary, failures, results, comparison) as JSON.")] = False,
) -> None:  # fmt: skip
    """Measure answer quality: ask every golden question through the same agent as `vedana ask`,
    score each answer (items of the golden answer found, retrieval context touched, and a judge
    model's verdict), store the run, and print a summary by scenario with the failures.
    Exit code 1 with `--fail-under` when the pass rate is below it, 130 on Ctrl-C (the answers
    so far are kept: `--resume RUN`).

    Examples:

        vedana eval --golden samples/people/golden.csv

    In CI, exit 1 when fewer than 90 % of the questions pass, and keep a report:

        vedana eval --golden samples/people/golden.csv --fail-under 0.9 --report eval.html

    Two models on the same questions, then side by side (pass-rate delta, flipped questions):

        vedana eval -g golden.csv --model openai/gpt-4.1-mini

        vedana eval -g golden.csv --model openai/gpt-4.1 --compare-last

    A subset without a judge, a run stopped with Ctrl-C, past runs:

        vedana eval --scenario count --limit 5 --no-judge --json

        vedana eval --resume 12

        vedana eval list; vedana eval show 12 --compare 11 --report run12.md
    """
    if ctx.invoked_subcommand is not None:
        return
    from vedana.config import get_settings, override_settings
    from vedana.eval.run import EvalOptions, run_eval
    from vedana.stores.postgres import get_engine

    # Options that choose what a run asks and how it is scored: a resumed run keeps its own.
    shaping = {"--golden": golden is not None, "--csv": csv_export, "--scenario": bool(scenario),
               "--limit": limit is not None, "--question": question is not None, "--no-judge": no_judge,
               "--judge-model": judge_model is not None, "--min-recall": min_recall != 1.0,
               "--model": model is not None, "--no-filter": no_filter}  # fmt: skip
    if resume is not None:
        given = [name for name, used in shaping.items() if used]
        if given:
            raise typer.BadParameter(
                f"a resumed run keeps its own settings; drop {', '.join(given)}", param_hint="--resume"
            )
    if compare is not None and compare_last:
        raise typer.BadParameter("use --compare RUN or --compare-last, not both", param_hint="--compare")
    override_settings(model=model)
    settings = get_settings()
    options = EvalOptions(
        golden=golden, csv_export=csv_export, scenarios=list(scenario or []), limit=limit, question=question,
        concurrency=concurrency, timeout_s=timeout, judge=not no_judge, judge_model=judge_model,
        min_recall=min_recall, use_filter=False if no_filter else None,
    )  # fmt: skip
    engine = get_engine(settings)
    if compare is not None:
        from vedana.stores import eval_runs

        eval_runs.load_run(engine, compare)  # an unknown run is said before any question is asked
    progress = _Progress(quiet=json_)
    try:
        run_id = run_eval(settings, options, resume=resume, engine=engine, on_start=progress.start,
                          on_result=progress.add)  # fmt: skip
    except KeyboardInterrupt:
        progress.close()
        if progress.run_id is not None:
            sys.stderr.write(f"\ninterrupted: {progress.done} answer(s) kept in run {progress.run_id}; "
                             f"finish it with `vedana eval --resume {progress.run_id}`\n")  # fmt: skip
        raise typer.Exit(130) from None
    progress.close()
    rate = _show(engine, run_id, compare=compare, compare_last=compare_last, report=report, json_=json_)
    if fail_under is not None and (rate is None or rate < fail_under):
        sys.stderr.write(
            f"pass rate {0 if rate is None else rate:.2f} is below --fail-under {fail_under:.2f}\n"
        )
        raise typer.Exit(1)


def _show(
    engine: Engine, run_id: int, *, compare: int | None = None, compare_last: bool = False,
    report: Path | None = None, json_: bool = False,
) -> float | None:  # fmt: skip
    """Print the run (and its comparison), write its report; its pass rate."""
    from vedana.eval.report import html_report, markdown_report, text_summary
    from vedana.eval.summary import compare as compare_runs
    from vedana.eval.summary import summarize
    from vedana.stores import eval_runs

    run = eval_runs.load_run(engine, run_id)
    summary = summarize(run)
    against = compare
    if compare_last:
        against = eval_runs.latest_run_id(engine, before=run_id, golden=run["golden"])
        if against is None:
            sys.stderr.write("no earlier run to compare with\n")
    comparison = compare_runs(run, eval_runs.load_run(engine, against)) if against is not None else None
    if report is not None:
        html = report.suffix.lower() in (".html", ".htm")
        text = html_report(summary, comparison) if html else markdown_report(summary, comparison)
        report.write_text(text, encoding="utf-8")
    if json_:
        from vedana.cli.output import print_json

        print_json({**summary, "comparison": comparison})
    else:
        sys.stdout.write(text_summary(summary, comparison))
    if report is not None:
        sys.stderr.write(f"report: {report}\n")
    rate: float | None = summary["totals"]["pass_rate"]
    return rate


@app.command("list")
def eval_list(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many runs.")] = 20,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Past evaluation runs, newest first: id, started, status, pass rate, model, golden set.

    Examples:

        vedana eval list

        vedana eval list --json | jq '.[0].id'
    """
    from vedana.cli.output import print_json
    from vedana.config import get_settings
    from vedana.stores import eval_runs
    from vedana.stores.postgres import get_engine

    runs = eval_runs.list_runs(get_engine(get_settings()), limit=limit)
    if json_:
        print_json(runs)
        return
    if not runs:
        sys.stdout.write("no evaluation runs yet; start one with `vedana eval --golden FILE`\n")
    for r in runs:
        rate = f"{r['passed'] / r['questions']:.0%}" if r["questions"] else "-"
        sys.stdout.write(f"{r['id']:>4}  {r['started_at']:%Y-%m-%d %H:%M}  {r['status']:<11}  {rate:>5} of "
                         f"{r['questions'] or 0:<3}  {r['config'].get('model', '')}  {r['golden']}\n")  # fmt: skip


@app.command("show")
def eval_show(
    run: Annotated[int, typer.Argument(help="The run's id (see `vedana eval list`).")],
    compare: Annotated[int | None, typer.Option("--compare", help="Put it beside run RUN.", show_default=False)] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write a report: FILE.md or FILE.html.", show_default=False)] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:  # fmt: skip
    """One evaluation run: its summary by scenario and its failed questions with the judge's comment.

    Examples:

        vedana eval show 12

        vedana eval show 13 --compare 12 --report diff.html

        vedana eval show 12 --json
    """
    from vedana.config import get_settings
    from vedana.stores.postgres import get_engine

    _show(get_engine(get_settings()), run, compare=compare, report=report, json_=json_)


class _Progress:
    """done/total, passed so far, cost so far, ETA: a bar on a terminal, plain lines otherwise."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet, self.done, self.passed, self.cost, self.total = quiet, 0, 0, 0.0, 0
        self.run_id: int | None = None
        self.started = time.monotonic()
        self._bar: Any = None
        self._task: Any = None

    def start(self, run_id: int, total: int, already: int) -> None:
        self.run_id, self.total, self.started = run_id, total, time.monotonic()
        if self.quiet:
            return
        if sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            from vedana.cli.output import stderr_console

            self._bar = Progress(TextColumn(f"eval run {run_id}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[status]}"), TimeRemainingColumn(), console=stderr_console(),
                                 transient=True)  # fmt: skip
            self._bar.start()
            self._task = self._bar.add_task("eval", total=total, status="")
        else:
            kept = f" ({already} already answered)" if already else ""
            sys.stderr.write(f"eval run {run_id}: {total} question(s) to ask{kept}\n")

    def add(self, result: dict[str, Any]) -> None:
        from vedana.redaction import redact

        self.done += 1
        self.passed += 1 if result["passed"] else 0
        self.cost += (result["scores"] or {}).get("cost_usd") or 0.0
        elapsed = time.monotonic() - self.started
        eta = elapsed / self.done * (self.total - self.done)
        status = f"{self.passed} passed · ${self.cost:.4f}"
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, status=status)
            return
        verdict = "ERROR" if result["error"] else ("pass " if result["passed"] else "FAIL ")
        sys.stderr.write(redact(f"[{self.done}/{self.total}] {verdict} #{result['position']} {result['question'][:70]}"
                                f"  ({status} · ETA {eta:.0f} s)\n"))  # fmt: skip
        sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
