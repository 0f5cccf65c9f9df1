"""`vedana eval`: ask a golden set through the agent, score the answers, store and compare runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(invoke_without_command=True, no_args_is_help=False)


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
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, max=16, help="Questions asked at once.")] = 2,
    no_judge: Annotated[bool, typer.Option("--no-judge", help="Score without the judge model (pass = item recall ≥ --min-recall).")] = False,
    judge_model: Annotated[str | None, typer.Option("--judge-model", help="litellm model of the judge (JUDGE_MODEL, else MODEL).", show_default=False)] = None,
    min_recall: Annotated[float, typer.Option("--min-recall", min=0.0, max=1.0, help="With --no-judge: the item recall a pass needs.")] = 1.0,
    model: Annotated[str | None, typer.Option("--model", "-m", help="litellm model for the agent (MODEL).", show_default=False)] = None,
    no_filter: Annotated[bool, typer.Option("--no-filter", help="Skip the data-model filter step.")] = False,
    compare: Annotated[int | None, typer.Option("--compare", help="Put this run beside run RUN.", show_default=False)] = None,
    compare_last: Annotated[bool, typer.Option("--compare-last", help="Put this run beside the previous one.")] = False,
    fail_under: Annotated[float | None, typer.Option("--fail-under", min=0.0, max=1.0, help="Exit 1 when the pass rate is below this (for CI).", show_default=False)] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write a report: FILE.md or FILE.html (self-contained).", show_default=False)] = None,
    resume: Annotated[int | None, typer.Option("--resume", help="Finish interrupted run RUN, asking only what it lacks.", show_default=False)] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the run (summary, failures, comparison) as JSON.")] = False,
) -> None:  # fmt: skip
    """Measure answer quality: ask every golden question through the same agent as `vedana ask`,
    score each answer (items of the golden answer found, retrieval context touched, and a judge
    model's verdict), store the run, and print a summary by scenario with the failures.

    Examples:

        vedana eval --golden samples/people/golden.csv

        vedana eval --golden samples/people/golden.csv --fail-under 0.9          # in CI: exit 1 below 90 %

        vedana eval -g golden.csv --model openai/gpt-4.1-mini && vedana eval -g golden.csv --model openai/gpt-4.1 --compare-last

        vedana eval --scenario counts --limit 5 --no-judge --report eval.html

        vedana eval --resume 12                                                   # finish an interrupted run

        vedana eval list; vedana eval show 12
    """
    if ctx.invoked_subcommand is not None:
        return
    from vedana.config import get_settings, override_settings
    from vedana.eval.report import compare as compare_runs
    from vedana.eval.report import html_report, markdown_report, summarize
    from vedana.eval.run import EvalOptions, run_eval
    from vedana.stores import eval_runs
    from vedana.stores.postgres import get_engine

    override_settings(model=model)
    settings = get_settings()
    options = EvalOptions(
        golden=golden, csv_export=csv_export, scenarios=list(scenario or []), limit=limit, question=question,
        concurrency=concurrency, judge=not no_judge, judge_model=judge_model or settings.judge_model,
        min_recall=min_recall, use_filter=False if no_filter else None,
    )  # fmt: skip
    engine = get_engine(settings)
    progress = _Progress(quiet=json_)
    try:
        run_id = run_eval(
            settings, options, resume=resume, engine=engine, on_start=progress.start, on_result=progress.add
        )
    except KeyboardInterrupt:
        progress.close()
        sys.stderr.write(
            f"\ninterrupted: {progress.done} answer(s) kept in run {progress.run_id}; "
            f"finish it with `vedana eval --resume {progress.run_id}`\n"
        )
        raise typer.Exit(130) from None
    progress.close()
    run = eval_runs.load_run(engine, run_id)
    summary = summarize(run)
    against = (
        compare
        if compare is not None
        else (eval_runs.latest_run_id(engine, before=run_id) if compare_last else None)
    )
    if (compare is not None or compare_last) and against is None:
        sys.stderr.write("no earlier run to compare with\n")
    comparison = compare_runs(run, eval_runs.load_run(engine, against)) if against is not None else None
    if report is not None:
        text = (
            html_report(summary) if report.suffix.lower() in (".html", ".htm") else markdown_report(summary)
        )
        report.write_text(text, encoding="utf-8")
    if json_:
        from vedana.cli.output import print_json

        print_json({**summary, "comparison": comparison})
    else:
        _print_summary(summary, comparison)
    rate = summary["totals"]["pass_rate"]
    if fail_under is not None and (rate is None or rate < fail_under):
        sys.stderr.write(
            f"pass rate {0 if rate is None else rate:.2f} is below --fail-under {fail_under:.2f}\n"
        )
        raise typer.Exit(1)


@app.command("list")
def eval_list(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many runs.")] = 20,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Past evaluation runs, newest first: id, started, status, golden set, model, pass rate.

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
    for r in runs:
        rate = f"{r['passed'] / r['questions']:.0%}" if r["questions"] else "-"
        sys.stdout.write(f"{r['id']:>4}  {r['started_at']:%Y-%m-%d %H:%M}  {r['status']:<11}  {rate:>5} of "
                         f"{r['questions'] or 0:<3}  {r['config'].get('model', '')}  {r['golden']}\n")  # fmt: skip


@app.command("show")
def eval_show(
    run: Annotated[int, typer.Argument(help="The run's id (see `vedana eval list`).")],
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """One evaluation run: its summary by scenario and its failed questions with the judge's comment.

    Examples:

        vedana eval show 12

        vedana eval show 12 --json
    """
    from vedana.config import get_settings
    from vedana.eval.report import summarize
    from vedana.stores import eval_runs
    from vedana.stores.postgres import get_engine

    summary = summarize(eval_runs.load_run(get_engine(get_settings()), run))
    if json_:
        from vedana.cli.output import print_json

        print_json(summary)
    else:
        _print_summary(summary, None)


class _Progress:
    """done/total, passed so far, cost so far, ETA: a bar on a terminal, plain lines otherwise."""

    def __init__(self, *, quiet: bool) -> None:
        import time

        self.quiet, self.done, self.passed, self.cost, self.total = quiet, 0, 0, 0.0, 0
        self.run_id: int | None = None
        self.started = time.monotonic()
        self._bar: Any = None
        self._task: Any = None

    def start(self, run_id: int, total: int) -> None:
        self.run_id, self.total = run_id, total
        if self.quiet:
            return
        if sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            from vedana.cli.output import stderr_console

            self._bar = Progress(TextColumn(f"eval run {run_id}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[status]}"), TimeRemainingColumn(), console=stderr_console())  # fmt: skip
            self._bar.start()
            self._task = self._bar.add_task("eval", total=total, status="")
        else:
            sys.stderr.write(f"eval run {run_id}: {total} question(s)\n")

    def add(self, result: dict[str, Any]) -> None:
        from vedana.redaction import redact

        self.done += 1
        self.passed += 1 if result["passed"] else 0
        self.cost += (result["scores"] or {}).get("cost_usd") or 0.0
        status = f"{self.passed} passed · ${self.cost:.4f}"
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, status=status)
            return
        verdict = "ERROR" if result["error"] else ("pass " if result["passed"] else "FAIL ")
        sys.stderr.write(redact(f"[{self.done}/{self.total}] {verdict} #{result['position']} {result['question'][:70]}"
                                f"  ({status})\n"))  # fmt: skip

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _print_summary(summary: dict[str, Any], comparison: dict[str, Any] | None) -> None:
    from vedana.eval.report import _fmt
    from vedana.redaction import redact

    out = sys.stdout.write
    t = summary["totals"]
    out(f"run {summary['run']} ({summary['status']}) · golden {summary['golden']} · model {summary['config'].get('model')}"
        f" · judge {summary['config'].get('judge_model') or 'none'}\n\n")  # fmt: skip
    header = f"{'scenario':<16} {'questions':>9} {'pass':>6} {'rating':>6} {'recall':>6} {'precision':>9} {'errors':>6} {'cost $':>8} {'s/q':>6}"
    out(header + "\n")
    for name, s in [("all", t), *summary["by_scenario"].items()]:
        out(f"{name[:16]:<16} {s['questions']:>9} {_fmt(s['pass_rate']):>6} {_fmt(s['mean_rating'], 1):>6} "
            f"{_fmt(s['recall']):>6} {_fmt(s['precision']):>9} {s['errors']:>6} {_fmt(s['cost_usd'], 4):>8} "
            f"{_fmt(s['latency_s'], 1):>6}\n")  # fmt: skip
    if summary["failed"]:
        out(f"\nfailed ({len(summary['failed'])}):\n")
        for f in summary["failed"]:
            why = f["error"] or f["comment"] or f"missing: {', '.join(f['missing_items'] or [])}"
            out(
                redact(
                    f"  #{f['position']} {f['question']}\n      → {(f['answer'] or '').strip()[:160]}\n      {why}\n"
                )
            )
    if comparison is not None:
        pr = comparison["pass_rate"]
        out(f"\nvs run {comparison['against']}: pass rate {_fmt(pr['was'])} → {_fmt(pr['now'])} "
            f"({'+' if (pr['delta'] or 0) >= 0 else ''}{_fmt(pr['delta'])}), cost {_fmt(comparison['cost_usd_delta'], 4)}, "
            f"latency {_fmt(comparison['latency_s_delta'], 2)} s/q\n")  # fmt: skip
        for flip in comparison["flipped"]:
            out(f"  #{flip['position']} {flip['was']} → {flip['now']}: {flip['question']}\n")
        for key, change in comparison["config_changes"].items():
            out(f"  config {key}: {change['was']} → {change['now']}\n")
