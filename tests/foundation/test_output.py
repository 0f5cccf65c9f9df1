"""Error and warning lines on a terminal: the message is printed as written, never read as
rich markup (Cypher lists and error texts are full of brackets), and secrets are masked."""

from __future__ import annotations

import sys

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
