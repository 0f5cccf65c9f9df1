"""`vedana services status|stop` (placeholder until the services land)."""

from __future__ import annotations

import typer

app = typer.Typer(help="The embedded Postgres and graph processes.", no_args_is_help=True)
