"""`vedana chat`: a conversation on a terminal (or over a pipe) with the knowledge base.

On a terminal: prompt_toolkit reads each question (line editing, history kept under
VEDANA_HOME); the answer runs in a worker thread so Ctrl-C cancels it without leaving, and a
cancelled answer is not stored. Off a terminal: one question per stdin line, the answers on
stdout, so it can be piped.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from vedana.agent.trace import AskResult
    from vedana.config import Settings

HELP = """commands:
  /trace        the last answer's trace, as `vedana ask` shows it
  /new          start a new thread
  /threads      recent threads
  /model NAME   answer with another litellm model from now on
  /quit         leave (or Ctrl-D); Ctrl-C cancels an answer in progress"""


@dataclass
class ChatSession:
    """The state of one `vedana chat`: the thread, the model in use, the last answer."""

    settings: Settings
    thread: str
    use_filter: bool | None
    last: AskResult | None = None
    asked: int = 0
    failed: int = 0  # answers that ended in an error (a cancelled one is not a failure)

    def submit(self, question: str, on_step: Callable[[str], None] | None = None) -> Future[AskResult]:
        """Answer in a daemon thread: a cancelled answer is abandoned (its result is never
        stored), and leaving the chat does not wait for it as it would for an executor's worker.
        `on_step` hears the agent's steps (from that thread)."""
        from vedana.agent import ask
        from vedana.ops.conversation import thread_history

        history = thread_history(self.settings, self.thread)
        future: Future[AskResult] = Future()

        def work() -> None:
            try:
                result = ask(
                    self.settings, question, use_filter=self.use_filter, history=history, on_step=on_step
                )
                future.set_result(result)
            except BaseException as exc:  # handed to the waiting thread, which reports it
                future.set_exception(exc)

        threading.Thread(target=work, name="answer", daemon=True).start()
        return future

    def record(self, result: AskResult) -> bool:
        """Store the turn; True when it started the thread."""
        from vedana.ops.conversation import NEW, record_turn

        started = self.thread == NEW
        self.thread = record_turn(self.settings, self.thread, result)
        self.last = result
        return started


def chat(
    thread: Annotated[
        str | None,
        typer.Option(
            "--thread", "-t", help="Continue a stored thread instead of starting one.", show_default=False
        ),
    ] = None,
    no_filter: Annotated[
        bool, typer.Option("--no-filter", help="Skip the data-model filter step (ENABLE_DM_FILTERING=false).")
    ] = False,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="litellm model for the agent (MODEL).", show_default=False),
    ] = None,
) -> None:
    """Talk with the knowledge base: each answer sees the thread's recent history
    (PIPELINE_HISTORY_LENGTH messages), and every turn is stored with its trace.

    Starts with the data model's ConversationLifecycle `/start` message. Commands: /trace, /new,
    /threads, /model NAME, /help, /quit. Ctrl-C cancels the answer in progress, Ctrl-D leaves.
    Off a terminal it reads one question per line from stdin and prints the answers.

    Examples:

        vedana chat

        vedana chat --thread 3f9c2a7b1d04

        printf 'Who likes quokkas?\\nAnd which of them live in Lisbon?\\n' | vedana chat
    """
    from vedana.agent.llm import check_models
    from vedana.config import get_settings, override_settings
    from vedana.ops.conversation import NEW, start_message
    from vedana.ops.conversation import thread_history as check_thread

    override_settings(model=model)
    settings = get_settings()
    session = ChatSession(settings, (thread or NEW).strip(), False if no_filter else None)
    check_models(settings, session.use_filter)  # no usable model: say so before the greeting
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    if session.thread != NEW:
        check_thread(settings, session.thread)  # an unknown id fails here, before the first question
        _say(f"continuing thread {session.thread}", interactive)
    else:
        _show(start_message(settings), interactive)
    if interactive:
        _terminal_loop(session)
    else:
        _pipe_loop(session)


# -- the two loops ---------------------------------------------------------------------------


def _terminal_loop(session: ChatSession) -> None:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    session.settings.home.mkdir(parents=True, exist_ok=True)
    prompt: PromptSession[str] = PromptSession(
        history=FileHistory(str(session.settings.home / "chat_history"))
    )
    while True:
        try:
            line = prompt.prompt("you> ")
        except KeyboardInterrupt:  # at the prompt: drop the line, stay
            continue
        except EOFError:
            return
        if not _handle(session, line.strip(), interactive=True):
            return


def _pipe_loop(session: ChatSession) -> None:
    """One question per line; exit code 1 when any answer failed, so a script can tell."""
    for raw in sys.stdin:
        if not _handle(session, raw.strip(), interactive=False):
            break
    if session.failed:
        _say(f"{session.failed} of {session.asked} questions got no answer", interactive=False)
        raise typer.Exit(1)


def _handle(session: ChatSession, line: str, *, interactive: bool) -> bool:
    """One input line; False to leave."""
    if not line:
        return True
    if line.startswith("/"):
        return _command(session, line, interactive)
    _answer(session, line, interactive)
    return True


def _answer(session: ChatSession, question: str, interactive: bool) -> None:
    from vedana.cli.output import activity
    from vedana.errors import VedanaError
    from vedana.redaction import redact

    session.asked += 1
    try:
        with activity(interactive and sys.stderr.isatty()) as on_step:
            result = _wait(session.submit(question, on_step))
    except KeyboardInterrupt:
        _say("(answer cancelled; the thread is unchanged)", interactive)
        return
    except VedanaError as exc:  # a provider error keeps the conversation going
        session.failed += 1
        _say(f"error: {exc}", interactive)
        return
    started = session.record(result)
    if started:
        _say(f"thread: {session.thread}", interactive)
    _show(redact(result.answer).strip(), interactive)
    if interactive:
        _say(_footer(result), interactive)


def _wait(future: Future[AskResult]) -> AskResult:
    # A timeout in the wait lets the main thread see SIGINT promptly (Ctrl-C → KeyboardInterrupt).
    while True:
        try:
            return future.result(timeout=0.2)
        except TimeoutError:
            continue


def _footer(result: AskResult) -> str:
    trace = result.trace
    cost = trace.to_dict()["usage"]
    dollars = [u["cost_usd"] for u in cost.values()]
    money = "cost unknown" if any(d is None for d in dollars) else f"${sum(dollars):.4f}"
    calls = len(trace.tool_calls)
    return f"({calls} tool call{'' if calls == 1 else 's'} · {trace.total_s:.1f} s · {money} · /trace for details)"


def _command(session: ChatSession, line: str, interactive: bool) -> bool:
    from vedana.config import get_settings
    from vedana.ops.conversation import NEW, start_message, threads_list

    name, _, arg = line.partition(" ")
    name, arg = name.lower(), arg.strip()
    if name in ("/quit", "/exit"):
        return False
    if name == "/help":
        _show(HELP, interactive)
    elif name == "/trace":
        _print_trace(session.last, interactive)
    elif name == "/new":
        session.thread, session.last = NEW, None
        _show(start_message(session.settings), interactive)
    elif name == "/threads":
        rows = threads_list(get_settings(), limit=10)
        _show("\n".join(_thread_line(r) for r in rows) or "no threads yet", interactive)
    elif name == "/model":
        if not arg:
            _say(f"model: {session.settings.model}", interactive)
        else:
            _switch_model(session, arg, interactive)
    else:
        _say(f"unknown command {name}; /help lists them", interactive)
    return True


def _switch_model(session: ChatSession, model: str, interactive: bool) -> None:
    """Answer with `model` from now on, unless it cannot be called (then say why, keep the old one)."""
    from vedana.agent.llm import LLM
    from vedana.errors import LLMError

    try:
        LLM(session.settings).check(model)
    except LLMError as exc:
        _say(f"error: {exc}; still answering with {session.settings.model}", interactive)
        return
    session.settings = session.settings.model_copy(update={"model": model})
    _say(f"model: {model}", interactive)


def _thread_line(row: dict[str, Any]) -> str:
    marker = row["last_question"] or ""
    return f"{row['id']}  {row['messages']:>3} messages  {' '.join(marker.split())[:60]}"


def _print_trace(result: AskResult | None, interactive: bool) -> None:
    from vedana.cli.ask import _print_rich_trace, plain_trace
    from vedana.redaction import redact

    if result is None:
        _say("no answer yet in this thread", interactive)
        return
    trace = result.to_dict()["trace"]
    if interactive and sys.stderr.isatty():
        _print_rich_trace(trace)
    else:
        sys.stderr.write(redact(plain_trace(trace)) + "\n")
        sys.stderr.flush()


# -- output: answers and the start message on stdout, notes on stderr -------------------------


def _show(text: str, interactive: bool) -> None:
    sys.stdout.write(text.rstrip() + "\n" + ("\n" if interactive else ""))
    sys.stdout.flush()


def _say(text: str, interactive: bool) -> None:
    if interactive:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    else:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
