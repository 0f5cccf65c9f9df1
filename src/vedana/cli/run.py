"""`vedana run`: sync then index under one lock, for cron and systemd timers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from vedana.cli import options

if TYPE_CHECKING:
    from vedana.etl.index import IndexReport
    from vedana.etl.sync import SyncReport
    from vedana.ops.run import RunReport


def run(
    data_model: options.DataModelSource = None,
    data: options.DataSource = None,
    csv: options.CsvExport = False,
    full: Annotated[
        bool,
        typer.Option(
            "--full", help="Compare every source row and rebuild the graph and the vectors from staging."
        ),
    ] = False,
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            min=0.0,
            help="Seconds to wait for a run already in progress; then exit 75 without writing.",
        ),
    ] = 10.0,
    strict: options.Strict = False,
    allow_deletions: options.AllowDeletions = False,
    json_: Annotated[bool, typer.Option("--json", help="Print the run report as JSON.")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print nothing unless something fails.")
    ] = False,
) -> None:
    """Sync, then index: bring the knowledge base up to date in one go. Made for cron.

    Only one run writes at a time: a second one waits up to --wait seconds, then exits
    with code 75 and changes nothing. Exit code 0 means up to date (whether or not
    anything changed), 1 a failure, 2 a configuration error. Every run is recorded in
    the run log (`vedana runs`). Off a terminal it prints one line per phase.

    Examples:

        vedana run --data-model ./model --data ./data

        vedana run --quiet --wait 30

        */5 * * * *  cd /srv/kb && .venv/bin/vedana run --quiet
    """
    from vedana.cli.output import info, print_json, progress, show_progress
    from vedana.config import get_settings
    from vedana.ops.run import run as run_all

    def notice(message: str) -> None:
        if not quiet and not json_:
            info(f"note: {message}")

    def phase_done(name: str, report: Any) -> None:
        if not quiet and not json_:
            _write_line(sync_line(report) if name == "sync" else index_line(report))
            for warning in report.warnings if name == "sync" else ():
                info(f"warning: {warning}")

    with progress(show_progress(json_, quiet)) as on_progress:
        report = run_all(
            get_settings(),
            data_model=data_model,
            data=data,
            csv=csv,
            full=full,
            strict=strict,
            allow_deletions=allow_deletions,
            wait=wait,
            on_progress=on_progress,
            on_notice=notice,
            on_phase=phase_done,
        )
    if json_:
        print_json(report.to_dict())
    elif not quiet:
        _write_line(run_line(report))


def _write_line(line: str) -> None:
    import sys

    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def sync_line(report: SyncReport) -> str:
    """One line for logs: what the sync changed in staging."""
    data = report.to_dict()
    nodes, edges = data["totals"]["nodes"], data["totals"]["edges"]
    seconds = f"{data['seconds']:.2f} s"
    if data["unchanged_early"]:
        return f"sync: up to date (the sources did not change since the last sync; {seconds})"
    if not data["changed"]:
        return f"sync: up to date ({nodes['loaded']:,} nodes, {edges['loaded']:,} edges; {seconds})"
    model = "data model changed; " if data["data_model"]["changed"] else ""
    parts = []
    for name, totals, per_type in (("nodes", nodes, data["nodes"]), ("edges", edges, data["edges"])):
        new = sum(t["new"] for t in per_type.values())
        updated = sum(t["updated"] for t in per_type.values())
        parts.append(
            f"{name} {totals['loaded']:,} (+{new:,} new, {updated:,} updated, -{totals['deleted']:,} deleted)"
        )
    return f"sync: {model}{'; '.join(parts)}; {seconds}"


def index_line(report: IndexReport) -> str:
    """One line for logs: what the index changed in the graph and the vectors."""
    seconds = f"{report.total_seconds:.2f} s"
    if not report.changed:
        return f"index: up to date (staging version {report.version}; {seconds})"
    rebuilt = " (from scratch)" if report.graph_rebuilt or report.vectors_rebuilt else ""
    return (
        f"index{rebuilt}: graph nodes +{report.nodes_upserted:,} -{report.nodes_deleted:,}, "
        f"edges +{report.edges_upserted:,} -{report.edges_deleted:,}; "
        f"vectors +{report.values_written:,} -{report.values_deleted:,} "
        f"({report.texts_embedded:,} texts embedded with {report.model}); {seconds}"
    )


def run_line(report: RunReport) -> str:
    waited = f", waited {report.lock_wait_s:.1f} s for the lock" if report.lock_wait_s >= 0.5 else ""
    return f"run {report.run_id}: {report.status} in {report.seconds:.2f} s{waited} (started {report.started_at})"
