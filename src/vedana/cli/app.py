"""The `vedana` Typer app: registers every command and maps errors to one line + exit code."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup, TyperOption

from vedana import __version__
from vedana.cli import ask, chat, check, cypher, index, mcp, model, run, runs, search, services, sync, threads
from vedana.cli import eval as eval_cmd
from vedana.errors import NotSynced, VedanaError


def _plain_flags(params: list[Any]) -> list[Any]:
    """Flags take no value: Typer's rich help would show a bool flag as `--json <bool>`."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_bool_flag and param.metavar is None:
            param.metavar = ""
    return params


def _plain_flags_of(command: Any, ctx: Any) -> None:
    _plain_flags([*command.params, command.get_help_option(ctx)])
    for sub in getattr(command, "commands", {}).values():
        _plain_flags_of(sub, ctx)


class VedanaGroup(TyperGroup):
    """The root command: its commands' help shows flags without a value type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_flags(super().get_params(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _plain_flags_of(command, ctx)
        return command


app = typer.Typer(
    name="vedana",
    cls=VedanaGroup,
    help="Build a knowledge base from Grist and ask it questions.\n\n"
    'Typical use: `vedana sync` → `vedana index` → `vedana ask "question"`.\n\n'
    "Examples:\n\n"
    "    vedana sync --data-model samples/people/model --data samples/people/data\n\n"
    "    vedana index\n\n"
    '    vedana ask "Who is interested in koalas?"\n\n'
    "    vedana --home /srv/kb --debug services status",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"vedana {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    home: Annotated[
        Path | None,
        typer.Option("--home", help="State dir of the embedded services (VEDANA_HOME).", show_default=False),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    from vedana.cli.output import configure_logging, install_redacting_streams
    from vedana.config import export_dotenv, override_settings

    install_redacting_streams()

    export_dotenv()
    if debug:
        os.environ["VEDANA_DEBUG"] = "1"
    override_settings(vedana_home=home, debug=debug or None)
    configure_logging(debug=debug)


app.command("sync")(sync.sync)
app.command("index")(index.index)
app.command("run")(run.run)
app.command("ask")(ask.ask)
app.command("check")(check.check)
app.command("cypher")(cypher.cypher)
app.command("search")(search.search)
app.command("runs")(runs.runs)
app.command("model")(model.model)
app.command("mcp")(mcp.mcp)
app.add_typer(eval_cmd.app, name="eval")
app.command("chat")(chat.chat)
app.add_typer(threads.app, name="threads")
app.add_typer(services.app, name="services")


def _empty_home_message() -> str | None:
    """Nothing synced here: when the demo's home beside this one has a knowledge base, say so."""
    from vedana.config import get_settings
    from vedana.ops.status import empty_home_message

    return empty_home_message(get_settings())


def _debug_enabled() -> bool:
    return os.environ.get("VEDANA_DEBUG", "").lower() in {"1", "true", "yes"} or "--debug" in sys.argv


def main() -> None:
    """Console-script entry point: user errors print one red line; bugs show a traceback only
    with --debug. Either way the exit code is the error's (1, or 2 for configuration errors)."""
    try:
        _run()
    finally:
        _prepare_exit()


def _prepare_exit() -> None:
    """Flush, close pooled connections, then freeze the heap so the interpreter's last garbage
    collection skips it: over litellm's and pydantic's objects it kept the process 1-2.5 s."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing left to flush into
            stream.flush()
    postgres = sys.modules.get("vedana.stores.postgres")
    if postgres is not None:
        postgres.dispose_engines()
    gc.freeze()


def _run() -> None:
    try:
        app()
    except VedanaError as exc:
        from vedana.cli.output import print_error

        if _debug_enabled():
            _print_traceback()
        else:
            hint = _empty_home_message() if isinstance(exc, NotSynced) else None
            print_error(hint or str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("VEDANA_RAISE_ERRORS"):
            raise
        if _debug_enabled():
            _print_traceback()
            sys.exit(1)
        from vedana.cli.output import print_error

        print_error(f"unexpected error: {type(exc).__name__}: {exc} (run with --debug for the traceback)")
        sys.exit(1)


def _print_traceback() -> None:
    """The current exception's traceback on stderr, secrets masked: drivers put URLs and
    credentials in their messages, and --debug output gets pasted into bug reports."""
    import traceback

    from vedana.redaction import redact

    sys.stderr.write(redact(traceback.format_exc()))
    sys.stderr.flush()
