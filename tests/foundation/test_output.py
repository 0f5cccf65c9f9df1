"""Error and warning lines on a terminal: the message is printed as written, never read as
rich markup (Cypher lists and error texts are full of brackets), and secrets are masked."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from vedana.cli.output import print_error, print_warning


@pytest.mark.parametrize("show", [print_error, print_warning])
def test_messages_with_brackets_print_verbatim_on_a_terminal(
    show, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("GRIST_API_KEY", "grist-key-in-a-message")
    show("bad query: RETURN [1, 2] AS x [/] [bold]y[/bold] key grist-key-in-a-message")
    err = capsys.readouterr().err
    assert "RETURN [1, 2] AS x [/] [bold]y[/bold] key ***" in err
    assert "grist-key-in-a-message" not in err


# Data as it comes from the graph, Grist or the model: Cypher patterns and list literals that
# rich would read as markup tags ("[r:KNOWS]" vanished, "[/]" crashed the printer).
BRACKETS = "MATCH (a)-[r:KNOWS]->(b) RETURN [x IN a.tags | x][0..2], '[link]', '[/]'"


def _screen(monkeypatch: pytest.MonkeyPatch, name: str) -> Any:
    import io

    from rich.console import Console

    from vedana.cli import output

    screen = io.StringIO()
    monkeypatch.setattr(output, name, lambda: Console(file=screen, width=400, color_system=None))
    return screen


def test_cypher_result_cells_on_a_terminal_are_data(monkeypatch: pytest.MonkeyPatch) -> None:
    from vedana.cli import cypher

    screen = _screen(monkeypatch, "stdout_console")
    cypher._print_table(["[q]"], [{"[q]": BRACKETS}])
    assert BRACKETS in screen.getvalue() and "[q]" in screen.getvalue()


def test_the_ask_trace_on_a_terminal_shows_the_cypher_as_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from vedana.cli import ask

    trace = {
        "filter": {"enabled": True, "kept": {"anchors": 1}, "total": {"anchors": 2}, "fallback": False,
                   "model": "m", "elapsed_s": 0.1, "reasoning": "needs [r:KNOWS]"},
        "tool_calls": [
            {"index": 0, "round": 1, "name": "cypher", "arguments": {"query": BRACKETS}, "rows": 2,
             "elapsed_s": 0.01},
            {"index": 1, "round": 1, "name": "cypher", "arguments": {"query": "RETURN 1"},
             "error": "bad input '[/]'", "elapsed_s": 0.01},
        ],
        "usage": {"openai/[m]": {"calls": 1, "prompt_tokens": 1, "completion_tokens": 1, "cost_usd": None}},
        "timings": {"total_s": 1.0, "llm_s": 0.5, "outside_llm_s": 0.5},
        "rounds": 1, "finalized": False, "no_answer": False,
    }  # fmt: skip
    screen = _screen(monkeypatch, "stderr_console")
    ask._print_rich_trace(trace)
    text = screen.getvalue()
    assert BRACKETS in text and "needs [r:KNOWS]" in text
    assert "error: bad input '[/]'" in text and "openai/[m]" in text
