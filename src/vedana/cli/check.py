"""`vedana check`: connectivity, data-model lint, consistency and a smoke question, for CI."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from vedana.cli import options

if TYPE_CHECKING:
    from vedana.problems import CheckReport

SECTION_NAMES = ("connectivity", "lint", "consistency", "smoke")


def check(
    data_model: options.DataModelSource = None,
    data: options.DataSource = None,
    csv: options.CsvExport = False,
    llm: Annotated[
        bool, typer.Option("--llm", help="Also call the language model(s) once (costs a request).")
    ] = False,
    ask: Annotated[
        str | None,
        typer.Option("--ask", help="Smoke test: ask the agent this question.", show_default=False),
    ] = None,
    expect: Annotated[
        str | None,
        typer.Option(
            "--expect", help="Fail unless the answer contains this text (any case).", show_default=False
        ),
    ] = None,
    eval_sample: Annotated[
        int | None,
        typer.Option(
            "--eval-sample",
            min=1,
            help="Smoke test: ask N golden questions, judged as `vedana eval` does (not stored).",
            show_default=False,
        ),
    ] = None,
    golden: Annotated[
        str | None,
        typer.Option(
            "--golden",
            help="With --eval-sample: the golden set [default: GRIST_TEST_SET_DOC_ID].",
            show_default=False,
        ),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Fail on warnings too.")] = False,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help="Run only this section (repeatable): connectivity, lint, consistency, smoke.",
            show_default=False,
        ),
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the problems.")] = False,
) -> None:
    """Check that the knowledge base is reachable, well described and consistent.

    Sections: connectivity (Grist when configured, Postgres + pgvector, the graph,
    the embedding model; the LLM with --llm), data-model lint (needs --data-model
    and --data, or the Grist document ids), consistency (staging vs graph vs vectors,
    the embedding model in use), smoke (--ask/--expect, or --eval-sample N golden
    questions). Exit code 1 when any error
    is found (or any warning, with --strict); each problem has a stable code such as
    lint.undescribed-column.

    Examples:

        vedana check

        vedana check --data-model ./model --data ./data --strict

        vedana check --only consistency --json

        vedana check --ask "Who likes quokkas?" --expect "Ada Okafor"

        vedana check --eval-sample 3 --golden samples/people/golden.csv
    """
    from vedana.cli.output import print_json
    from vedana.config import get_settings
    from vedana.ops.check import check as run_check

    for name in only or ():
        if name not in SECTION_NAMES:
            raise typer.BadParameter(f"use one of {', '.join(SECTION_NAMES)}", param_hint="--only")
    if expect is not None and ask is None:
        raise typer.BadParameter('needs a question: --ask "question" --expect "text"', param_hint="--expect")
    if eval_sample is not None and ask is not None:
        raise typer.BadParameter("use --ask or --eval-sample, not both", param_hint="--eval-sample")
    # A golden sample replaces the one-question smoke section; the other sections run as usual.
    sample = eval_sample is not None and (not only or "smoke" in only)
    if sample:
        only = [name for name in (only or SECTION_NAMES) if name != "smoke"]
    report = run_check(
        get_settings(),
        data_model=data_model,
        data=data,
        csv=csv,
        llm=llm,
        ask=ask,
        expect=expect,
        strict=strict,
        only=only if sample else only or None,
    )
    if sample and eval_sample is not None:
        from vedana.eval.sample import eval_smoke

        report.sections["smoke"] = eval_smoke(get_settings(), eval_sample, golden, csv_export=csv)
        report.seconds += report.sections["smoke"].seconds
    if json_:
        print_json(report.to_dict())
    elif sys.stdout.isatty():
        _print_rich(report, quiet=quiet)
    else:
        for line in plain_lines(report, quiet=quiet):
            sys.stdout.write(line + "\n")
    if not report.ok:
        raise typer.Exit(code=1)


def _verdict(report: CheckReport) -> str:
    head = "check passed" if report.ok else "check failed"
    strict = " (strict: warnings fail)" if report.strict and report.warnings else ""
    return f"{head}: {report.errors} error(s), {report.warnings} warning(s){strict} in {report.seconds:.2f} s"


def plain_lines(report: CheckReport, *, quiet: bool = False) -> list[str]:
    """One line per section and per problem, then the verdict: grep-able CI output."""
    lines = []
    for name, section in report.sections.items():
        if not quiet:
            status = section.status()
            reason = f": {section.skipped}" if section.skipped else ""
            passed = [c for c in section.details.get("checks", []) if c["ok"]]
            ok_checks = f" ({'; '.join(c['detail'] for c in passed)})" if passed else ""
            lines.append(f"{name}: {status}{reason}{ok_checks}")
        for problem in section.problems:
            lines.append(f"  {problem.severity} {problem.code} [{problem.location()}] {problem.message}")
    lines.append(_verdict(report))
    return lines


def _print_rich(report: CheckReport, *, quiet: bool) -> None:
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from vedana.cli.output import stdout_console

    console = stdout_console()
    colours = {"ok": "green", "problems": "yellow", "failed": "red", "skipped": "dim"}
    if not quiet:
        for name, section in report.sections.items():
            status = section.status()
            reason = f" — {escape(section.skipped)}" if section.skipped else ""
            console.print(f"[bold]{name}[/]: [{colours[status]}]{status}[/]{reason}", markup=True)
            for item in section.details.get("checks", []):
                mark = "[green]✓[/]" if item["ok"] else "[red]✗[/]"
                detail = f"{escape(str(item['name']))}: {escape(str(item['detail']))}"
                console.print(f"  {mark} {detail}", markup=True, highlight=False)
    if report.problems:
        table = Table(header_style="bold", show_lines=False)
        for column in ("severity", "code", "where", "problem"):
            table.add_column(column, overflow="fold")
        for p in report.problems:
            colour = "red" if p.severity == "error" else "yellow"
            table.add_row(f"[{colour}]{p.severity}[/]", Text(p.code), Text(p.location()), Text(p.message))
        console.print(table)
    colour = "green" if report.ok else "red"
    console.print(Text(_verdict(report), style=colour))
