"""`vedana index`: bring the graph and the vector tables in line with staging."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from vedana.etl.index import IndexReport


def index(
    full: Annotated[
        bool, typer.Option("--full", help="Rebuild the graph and the vectors from staging from scratch.")
    ] = False,
    plan: Annotated[
        bool,
        typer.Option("--plan", help="Show what would change (rows, texts to embed, tokens); change nothing."),
    ] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress and no summary; errors only.")
    ] = False,
) -> None:
    """Embed changed values into pgvector and load changed nodes and edges into the graph.

    Incremental: only staging rows changed since the last index are handled, texts already
    embedded are never sent to the model again, and deleted rows disappear. Run it after
    `vedana sync` (or use `vedana run`).

    Examples:

        vedana index

        vedana index --plan

        vedana index --full --json
    """
    from vedana.cli.output import info, print_json, progress, show_progress
    from vedana.config import get_settings
    from vedana.etl.index import index as run_index

    def notice(message: str) -> None:
        if not quiet:
            info(f"note: {message}")

    with progress(show_progress(json_, quiet)) as bars:

        def on_progress(stage: str, done: int, total: int | None) -> None:
            bars(_numbered(stage), done, total)

        report = run_index(get_settings(), full=full, plan=plan, on_progress=on_progress, on_notice=notice)
    if json_:
        print_json(report.to_dict())
    elif not quiet:
        _print_summary(report)


def _numbered(stage: str) -> str:
    """ "graph nodes" -> "1/4 graph nodes": the phases in the order they run."""
    from vedana.etl.embed_values import EMBED_STAGE, WRITE_STAGE
    from vedana.etl.graph_load import EDGE_STAGE, NODE_STAGE

    order = [NODE_STAGE, EDGE_STAGE, EMBED_STAGE, WRITE_STAGE]
    return f"{order.index(stage) + 1}/{len(order)} {stage}" if stage in order else stage


def _print_summary(report: IndexReport) -> None:
    if sys.stdout.isatty() and (report.plan or report.changed):
        from vedana.cli.output import stdout_console

        stdout_console().print(_summary_table(report))
    else:
        sys.stdout.write(summary_line(report) + "\n")


def summary_line(report: IndexReport) -> str:
    """One line for logs and cron mail."""
    head = "index plan" if report.plan else "index"
    if not report.plan and not report.changed:
        return f"{head}: nothing to do (staging version {report.version}, {report.total_seconds:.2f} s)"
    texts = (
        f"{report.texts_embedded} texts to embed (~{report.tokens_estimated} tokens)"
        if report.plan
        else f"{report.texts_embedded} texts embedded"
    )
    return (
        f"{head}: nodes +{report.nodes_upserted} -{report.nodes_deleted}, "
        f"edges +{report.edges_upserted} -{report.edges_deleted}; {texts}, "
        f"values written {report.values_written} (reused {report.values_reused}), "
        f"deleted {report.values_deleted}; {report.total_seconds:.2f} s"
    )


def _summary_table(report: IndexReport) -> Any:
    from rich.table import Table

    title = "index plan (nothing changed)" if report.plan else "index"
    table = Table(title=title, title_justify="left", show_header=True, header_style="bold")
    table.add_column("")
    table.add_column("upserted / written", justify="right")
    table.add_column("deleted", justify="right")
    table.add_column("time", justify="right")
    table.add_column("rate", justify="right")
    seconds = report.phase_seconds
    graph_time = f"{seconds['graph']:.2f} s" if "graph" in seconds else ""
    table.add_row("graph nodes", str(report.nodes_upserted), str(report.nodes_deleted), graph_time, "")
    rate = f"{report.rows_per_s:,.0f} rows/s" if report.rows_per_s else ""
    table.add_row("graph edges", str(report.edges_upserted), str(report.edges_deleted), "", rate)
    embedded = f"{report.texts_embedded}" + (f" (~{report.tokens_estimated} tokens)" if report.plan else "")
    embed_time = f"{seconds['embed']:.2f} s" if "embed" in seconds else ""
    text_rate = f"{report.texts_per_s:,.1f} texts/s" if report.texts_per_s else ""
    table.add_row("texts embedded", embedded, "", embed_time, text_rate)
    vector_time = f"{seconds['vectors']:.2f} s" if "vectors" in seconds else ""
    table.add_row(
        f"vector values (reused {report.values_reused})",
        str(report.values_written),
        str(report.values_deleted),
        vector_time,
        "",
    )
    table.caption = (
        f"{report.model} ({report.dim} dimensions) · staging version {report.version} · "
        f"{report.total_seconds:.2f} s"
    )
    return table
