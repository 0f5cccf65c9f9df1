"""Output for the CLI: results on stdout, progress/warnings/errors on stderr, secrets masked.

rich is imported lazily; `--json` prints the same dict the library returns.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import Any

from vedana.redaction import RedactingFilter, redact

ProgressCallback = Callable[[str, int, "int | None"], None]


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def to_json(data: Any) -> str:
    return redact(json.dumps(data, indent=2, ensure_ascii=False, default=_json_default))


def print_json(data: Any) -> None:
    sys.stdout.write(to_json(data) + "\n")
    sys.stdout.flush()


class RedactingStream:
    """A text stream that masks secrets in whatever is written to it: the one gate every
    command's output passes (rich tables, plain lines, typer.echo, tracebacks), so a message
    that embeds a URL with user info cannot reach the terminal however it was printed."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, flush, buffer...
        return getattr(self._stream, name)


def install_redacting_streams() -> None:
    """Route sys.stdout and sys.stderr through `RedactingStream` (once)."""
    if not isinstance(sys.stdout, RedactingStream):
        sys.stdout = RedactingStream(sys.stdout)
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = RedactingStream(sys.stderr)


def stdout_console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def print_error(message: str) -> None:
    message = redact(message.strip().splitlines()[0] if message.strip() else message)
    if sys.stderr.isatty():
        from rich.markup import escape  # messages quote Cypher: `[r:KNOWS]` is not markup

        stderr_console().print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)
    else:
        sys.stderr.write(f"error: {message}\n")


def print_warning(message: str) -> None:
    message = redact(message)
    if sys.stderr.isatty():
        from rich.markup import escape

        stderr_console().print(f"[yellow]warning:[/] {escape(message)}", highlight=False)
    else:
        sys.stderr.write(f"warning: {message}\n")


def info(message: str) -> None:
    """A plain status line on stderr (kept out of stdout so it never mixes with results)."""
    sys.stderr.write(redact(message) + "\n")
    sys.stderr.flush()


def configure_logging(*, debug: bool = False, quiet: bool = False) -> None:
    level = logging.DEBUG if debug else (logging.ERROR if quiet else logging.WARNING)
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_vedana", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler._vedana = True  # type: ignore[attr-defined]
    handler.addFilter(RedactingFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
    # Noisy libraries stay quiet unless debugging.
    for name in ("LiteLLM", "litellm", "httpx", "neo4j", "sentence_transformers", "urllib3", "filelock"):
        logging.getLogger(name).setLevel(logging.DEBUG if debug else logging.ERROR)


def show_progress(json_: bool = False, quiet: bool = False) -> bool:
    return not json_ and not quiet and sys.stderr.isatty()


@contextmanager
def progress(enabled: bool) -> Iterator[ProgressCallback]:
    """Yields `on_progress(stage, done, total)`. On a TTY: a transient rich progress bar per
    stage with rate and ETA; otherwise a no-op (commands print one summary line instead)."""
    if not enabled:
        yield lambda stage, done, total: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bars = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=stderr_console(),
        transient=True,
    )
    tasks: dict[str, tuple[Any, float]] = {}

    def on_progress(stage: str, done: int, total: int | None) -> None:
        if stage not in tasks:
            tasks[stage] = (bars.add_task(stage, total=total, rate=""), time.monotonic())
        task_id, started = tasks[stage]
        elapsed = max(time.monotonic() - started, 1e-6)
        bars.update(task_id, completed=done, total=total, rate=f"{done / elapsed:,.0f}/s")

    with bars:
        yield on_progress


StepCallback = Callable[[str], None]


@contextmanager
def activity(enabled: bool, first: str = "reading the knowledge base") -> Iterator[StepCallback]:
    """Yields `on_step(text)`. On a terminal: a transient spinner on stderr showing the step in
    progress (any thread may report); otherwise a no-op, so pipes and --json stay clean."""
    if not enabled:
        yield lambda text: None
        return
    from rich.text import Text

    status = stderr_console().status(Text(first))  # rich's Status is transient: it leaves no line

    def on_step(text: str) -> None:
        status.update(Text(redact(" ".join(text.split()))[:200]))  # data, never markup

    with status:
        yield on_step
