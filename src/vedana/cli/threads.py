"""`vedana threads`: stored conversations; `vedana threads show ID`: one, with its traces."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

# The help text is the callback's docstring (with its examples).
app = typer.Typer(invoke_without_command=True, no_args_is_help=False)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else "-"


def _clip(text: str | None, width: int = 70) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


@app.callback()
def threads(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many threads to list.")] = 20,
    json_: JsonOption = False,
) -> None:
    """Stored conversations (from `vedana chat` and `vedana ask --thread`): lists them, most
    recently active first, with id, started, messages and last question.

    Examples:

        vedana threads

        vedana threads --json | jq '.[0].id'

        vedana threads show 3f9c2a7b1d04
    """
    if ctx.invoked_subcommand is not None:
        return
    from vedana.cli.output import print_json
    from vedana.config import get_settings
    from vedana.ops.conversation import threads_list
    from vedana.redaction import redact

    rows = threads_list(get_settings(), limit=limit)
    if json_:
        print_json(rows)
        return
    if not rows:
        sys.stdout.write('no threads yet; start one with `vedana chat` or `vedana ask "…" --thread new`\n')
        return
    for row in rows:
        sys.stdout.write(
            redact(
                f"{row['id']}  started {_when(row['created_at'])}  {row['messages']:>3} messages  "
                f"{_clip(row['last_question'])}"
            )
            + "\n"
        )


@app.command("show")
def threads_show(
    thread_id: Annotated[
        str, typer.Argument(help="The thread's id (see `vedana threads`).", show_default=False)
    ],
    json_: JsonOption = False,
    no_trace: Annotated[bool, typer.Option("--no-trace", help="Only the messages, without traces.")] = False,
) -> None:
    """Print one thread: every message, and under each answer its trace as `vedana ask` shows it.

    Examples:

        vedana threads show 3f9c2a7b1d04

        vedana threads show 3f9c2a7b1d04 --json
    """
    from vedana.cli.ask import plain_trace
    from vedana.cli.output import print_json
    from vedana.config import get_settings
    from vedana.ops.conversation import threads_show as load
    from vedana.redaction import redact

    thread = load(get_settings(), thread_id.strip())
    if json_:
        print_json(thread)
        return
    out = [f"thread {thread['id']}, started {_when(thread['created_at'])}"]
    for message in thread["messages"]:
        who = "you" if message["role"] == "user" else "vedana"
        out += ["", f"[{_when(message['created_at'])}] {who}:", message["text"]]
        if message["role"] == "assistant" and message.get("trace") and not no_trace:
            out.append(plain_trace(message["trace"]).strip("\n"))
    sys.stdout.write(redact("\n".join(out)) + "\n")
