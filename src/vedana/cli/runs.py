"""`vedana runs`: recent runs from the run log, and what the knowledge base holds now."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

KINDS = ("sync", "index", "run")


def runs(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many recent runs to show.")] = 10,
    kind: Annotated[
        str | None,
        typer.Option("--kind", help="Only runs of this kind: sync, index or run.", show_default=False),
    ] = None,
    json_: Annotated[
        bool, typer.Option("--json", help="Print runs and knowledge-base status as JSON.")
    ] = False,
) -> None:
    """Show recent runs and what the knowledge base holds now.

    Runs: sync, index and run, newest first, with status (ok, unchanged, failed, busy,
    running, or interrupted for a run whose process was killed), duration, counts and
    error. Knowledge base: counts per type in staging,
    the graph and the vectors, the last successful sync/index/run, and the embedding
    model the vectors were made with.

    Examples:

        vedana runs

        vedana runs --kind run --limit 50

        vedana runs --json | jq '.knowledge_base.up_to_date'
    """
    from vedana.cli.output import print_json
    from vedana.config import get_settings
    from vedana.ops.status import status

    if kind is not None and kind not in KINDS:
        raise typer.BadParameter(f"use one of {', '.join(KINDS)}", param_hint="--kind")
    result = status(get_settings(), limit=limit, kind=kind)
    if json_:
        print_json(result)
    elif sys.stdout.isatty():
        _print_rich(result)
    else:
        for line in plain_lines(result):
            sys.stdout.write(line + "\n")


UNCHANGED = "source unchanged since the last sync, nothing read"


def _staging_text(sync: dict[str, Any]) -> str:
    if sync.get("unchanged_early"):  # "0 nodes, 0 edges" would read as an empty knowledge base
        return UNCHANGED
    nodes, edges = sync.get("nodes") or {}, sync.get("edges") or {}
    return (
        f"staging {nodes.get('loaded', 0)} nodes, {edges.get('loaded', 0)} edges "
        f"(written {nodes.get('written', 0) + edges.get('written', 0)}, "
        f"deleted {nodes.get('deleted', 0) + edges.get('deleted', 0)})"
    )


def _index_text(index: dict[str, Any]) -> str:
    return (
        f"graph +{index.get('nodes_upserted', 0) + index.get('edges_upserted', 0)} "
        f"-{index.get('nodes_deleted', 0) + index.get('edges_deleted', 0)}; "
        f"vectors +{index.get('values_written', 0)} -{index.get('values_deleted', 0)}"
    )


def _counts_text(row: dict[str, Any]) -> str:
    counts = row["counts"] or {}
    if row["kind"] == "run":
        sync, index = counts.get("sync") or {}, counts.get("index") or {}
        if not sync and not index:
            return ""
        return f"{_staging_text(sync)}; {_index_text(index)}"
    if row["kind"] == "sync" and counts:
        if counts.get("unchanged_early"):
            return UNCHANGED
        nodes, edges = counts.get("nodes") or {}, counts.get("edges") or {}
        return f"{nodes.get('loaded', 0)} nodes, {edges.get('loaded', 0)} edges"
    if row["kind"] == "index" and counts:
        return _index_text(counts)
    return ""


def _when(row: dict[str, Any] | None) -> str:
    if not row:
        return "never"
    stamp = (row["finished_at"] or row["started_at"] or "")[:19].replace("T", " ")
    return f"{stamp} (#{row['id']}, {row['status']})"


def _per_type(kb: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(kind, name, staging, graph, vectors) rows, one per node type and edge label."""
    graph = kb["graph"] if "error" not in kb["graph"] else {"nodes": {}, "edges": {}}
    out = []
    for kind in ("nodes", "edges"):
        names = sorted({*kb["staging"][kind], *graph.get(kind, {})})
        for name in names:
            vectors = {k: v for k, v in kb["vectors"].get(kind, {}).items() if k.rsplit(".", 1)[0] == name}
            out.append(
                (
                    kind[:-1],
                    name,
                    str(kb["staging"][kind].get(name, 0)),
                    str(graph.get(kind, {}).get(name, 0)) if "error" not in kb["graph"] else "?",
                    ", ".join(f"{k.rsplit('.', 1)[1]} {v}" for k, v in sorted(vectors.items())),
                )
            )
    return out


def _state_text(kb: dict[str, Any]) -> str:
    if not kb["synced"]:
        return kb["empty_home"] or "empty, nothing synced yet: run `vedana sync`"
    state = "up to date" if kb["up_to_date"] else "index behind staging: run `vedana index`"
    return f"staging version {kb['staging']['version']}, {state}"


def _model_text(kb: dict[str, Any]) -> str:
    in_use, configured = kb["embeddings"]["in_use"], kb["embeddings"]["configured"]
    if in_use is None:
        return f"none yet (configured: {configured['model']})"
    text = f"{in_use['model']} ({in_use['dim']} dimensions)"
    if in_use["model"] != configured["model"]:
        text += f"; configured {configured['model']}: the next index re-embeds everything"
    return text


def plain_lines(result: dict[str, Any]) -> list[str]:
    """The report as plain text lines (logs, pipes)."""
    lines = []
    for row in result["runs"]:
        seconds = f"{row['seconds']:.2f}s" if row["seconds"] is not None else "-"
        start = (row["started_at"] or "")[:19].replace("T", " ")
        detail = row["error"] if row["error"] else _counts_text(row)
        lines.append(f"#{row['id']} {start} {row['kind']:<5} {row['status']:<9} {seconds:>8}  {detail}")
    if not result["runs"]:
        lines.append("no runs yet")
    kb = result["knowledge_base"]
    lines.append("")
    lines.append(f"knowledge base: {_state_text(kb)}")
    for kind, name, staging, graph, vectors in _per_type(kb):
        lines.append(f"  {kind} {name}: staging {staging}, graph {graph}, vectors {vectors or '-'}")
    if "error" in kb["graph"]:
        lines.append(f"  graph unavailable: {kb['graph']['error']}")
    lines.append(f"last sync: {_when(kb['last_sync'])}")
    lines.append(f"last index: {_when(kb['last_index'])}")
    lines.append(f"last run: {_when(kb['last_run'])}")
    lines.append(f"embedding model: {_model_text(kb)}")
    if kb["run_lock"]["held"]:
        holder = kb["run_lock"]["holder"] or {}
        lines.append(f"a run is in progress (pid {holder.get('pid')}, since {holder.get('started_at')})")
    return lines


def _print_rich(result: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from vedana.cli.output import stdout_console

    console = stdout_console()
    table = Table(title="recent runs", title_justify="left", header_style="bold")
    for column in ("#", "started", "kind", "status", "time", "counts / error"):
        table.add_column(column, justify="right" if column in ("#", "time") else "left")
    colours = {
        "ok": "green",
        "unchanged": "green",
        "failed": "red",
        "interrupted": "red",
        "busy": "yellow",
        "running": "cyan",
    }
    for row in result["runs"]:
        seconds = f"{row['seconds']:.2f} s" if row["seconds"] is not None else ""
        status = f"[{colours.get(row['status'], 'white')}]{row['status']}[/]"
        detail = row["error"] if row["error"] else _counts_text(row)
        start = (row["started_at"] or "")[:19].replace("T", " ")
        table.add_row(str(row["id"]), start, row["kind"], status, seconds, Text(detail))  # data, never markup
    console.print(table)

    kb = result["knowledge_base"]
    holdings = Table(title="knowledge base", title_justify="left", header_style="bold")
    for column in ("", "type", "staging", "graph", "vectors"):
        holdings.add_column(column, justify="right" if column in ("staging", "graph") else "left")
    for row in _per_type(kb):
        holdings.add_row(*(Text(value) for value in row))
    console.print(holdings)
    up_to_date = kb["synced"] and kb["up_to_date"]
    console.print(Text(_state_text(kb), style="" if up_to_date else "yellow"), highlight=False)
    for label, key in (("last sync", "last_sync"), ("last index", "last_index"), ("last run", "last_run")):
        console.print(Text(f"{label}: {_when(kb[key])}"), highlight=False)
    console.print(Text(f"embedding model: {_model_text(kb)}"), highlight=False)
    if "error" in kb["graph"]:
        console.print(f"[yellow]graph unavailable:[/] {escape(kb['graph']['error'])}", markup=True)
