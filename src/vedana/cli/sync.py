"""`vedana sync`: the data model and the data from Grist into Postgres staging."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from vedana.cli import options

if TYPE_CHECKING:
    from vedana.etl.report import SyncReport, TypeReport


def sync(
    data_model: options.DataModelSource = None,
    data: options.DataSource = None,
    csv: options.CsvExport = False,
    data_model_only: Annotated[
        bool,
        typer.Option(
            "--data-model-only", help="Refresh only the data model (prompts, playbook, descriptions)."
        ),
    ] = False,
    full: Annotated[
        bool,
        typer.Option("--full", help="Read and compare everything, even if the documents did not change."),
    ] = False,
    strict: options.Strict = False,
    allow_deletions: options.AllowDeletions = False,
    json_: options.Json = False,
    quiet: options.Quiet = False,
) -> None:
    """Pull the data model and the data from Grist into Postgres staging, incrementally.

    Only `Anchor_<noun>` and `Link_<name>` tables described in the data model are read. Rows
    are compared with what is stored: only new and changed rows are written and rows gone from
    the source are marked deleted, so `vedana index` handles exactly the change. One
    transaction: a failure leaves the previous state intact. A run on unchanged documents
    stops early (Grist's latest action hash, or a digest of the files, is compared with the
    last sync's); `--full` reads everything anyway. A sync that would delete every row of a type
    because its table or id column went missing (a renamed table), or more than
    VEDANA_MAX_DELETE_SHARE of a type's rows, fails and writes nothing unless `--allow-deletions`.

    Examples:

        vedana sync

        vedana sync --data-model samples/people/model --data samples/people/data

        vedana sync --data-model model.grist --data data.grist --json

        vedana sync --csv

        vedana sync --data-model-only

        vedana sync --strict

        vedana sync --allow-deletions
    """
    from vedana.cli.output import print_json, progress, show_progress
    from vedana.config import get_settings
    from vedana.etl.sync import sync as run_sync

    with progress(show_progress(json_, quiet)) as on_progress:
        report = run_sync(
            get_settings(),
            data_model=data_model,
            data=data,
            csv=csv,
            data_model_only=data_model_only,
            on_progress=on_progress,
            full=full,
            strict=strict,
            allow_deletions=allow_deletions,
        )
    if json_:
        print_json(report.to_dict())
    elif not quiet:
        _print_summary(report)


def _print_summary(report: SyncReport) -> None:
    if sys.stdout.isatty():
        from vedana.cli.output import stdout_console

        console = stdout_console()
        if report.nodes or report.edges:
            console.print(_summary_table(report))
        if report.grist_fetch:
            console.print(f"Grist: {report.grist_fetch.describe()}", markup=False, highlight=False)
        for warning in report.warnings:
            console.print(f"warning: {warning}", markup=False, highlight=False)
        for line in path_lines(report):
            console.print(line, markup=False, highlight=False)
        console.print(summary_line(report))
    else:
        lines = [_type_line(r) for r in (*report.nodes.values(), *report.edges.values())]
        lines += [f"ignored table: {name}" for name in report.ignored_tables]
        lines += [f"note: {note}" for note in report.notes]
        lines += [f"warning: {warning}" for warning in report.warnings]
        if report.grist_fetch:
            lines.append(f"Grist: {report.grist_fetch.describe()}")
        lines += path_lines(report)
        sys.stdout.write("\n".join([*lines, summary_line(report)]) + "\n")


def path_lines(report: SyncReport) -> list[str]:
    """Which rows were normalised: per table when only changed ones were, else why all were
    (nothing to say on a first sync)."""
    paths = report.paths
    if any(p.startswith("incremental") for p in paths.values()):
        return [f"rows {table}: {path}" for table, path in paths.items()]
    reasons = sorted(set(paths.values()))
    return [f"rows: {r} (every row normalised)" for r in reasons if r != "full: first sync"]


def _skipped_text(stats: TypeReport) -> str:
    parts = [f"{reason} {n}" for reason, n in sorted(stats.skipped.items())]
    parts += [f"{what} {n}" for what, n in sorted(stats.cells.items())]
    return ", ".join(parts)


def _type_line(stats: TypeReport) -> str:
    skipped = sum(stats.skipped.values())
    line = (
        f"{stats.kind} {stats.name}: read {stats.read}, written {stats.written} "
        f"({stats.new} new, {stats.updated} updated), unchanged {stats.unchanged}, "
        f"deleted {stats.deleted}, skipped {skipped}"
    )
    details = _skipped_text(stats)
    return f"{line} ({details})" if details else line


def _summary_table(report: SyncReport):  # -> rich.table.Table
    from rich.table import Table

    table = Table(title="vedana sync", title_justify="left")
    table.add_column("", no_wrap=True)
    table.add_column("type", no_wrap=True)
    for header in ("read", "written", "unchanged", "deleted", "skipped"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("why skipped / notes", overflow="fold")
    for i, stats in enumerate((*report.nodes.values(), *report.edges.values())):
        if i == len(report.nodes) and report.nodes:
            table.add_section()
        table.add_row(
            stats.kind,
            stats.name,
            str(stats.read),
            str(stats.written),
            str(stats.unchanged),
            str(stats.deleted),
            str(sum(stats.skipped.values())),
            _skipped_text(stats),
        )
    return table


def summary_line(report: SyncReport) -> str:
    """One line for logs and cron mail."""
    if report.unchanged_early:
        return f"sync: documents unchanged since the last sync; nothing to do ({report.seconds:.2f} s)"
    totals = report.to_dict()["totals"]
    dm = "data model changed" if report.data_model.changed else "data model unchanged"
    if report.data_model_only:
        return f"sync (data model only): {dm}; {report.seconds:.2f} s"
    nodes, edges = totals["nodes"], totals["edges"]
    rate = report.to_dict()["rows_per_s"]
    return (
        f"sync: {nodes['loaded']} nodes, {edges['loaded']} edges; written {nodes['written']} + "
        f"{edges['written']}, deleted {nodes['deleted']} + {edges['deleted']}; {dm}; "
        f"{report.rows_read} rows read in {report.seconds:.2f} s" + (f" ({rate:,.0f} rows/s)" if rate else "")
    )
