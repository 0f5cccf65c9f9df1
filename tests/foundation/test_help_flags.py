"""Every command's --help shows a flag as a flag (`--json   Print …`), never as if it took a
value (`--json <bool>`), while options that take one keep their type."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer
from typer.testing import CliRunner

from vedana.cli.app import app


def _paths(command: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _paths(sub, (*path, name))


COMMANDS = list(_paths(typer.main.get_command(app)))


def test_every_command_is_covered() -> None:
    assert ("search",) in COMMANDS and ("threads", "show") in COMMANDS and ("services", "status") in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "vedana")
def test_help_shows_flags_without_a_value(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.stdout
    help_line = next(line for line in result.stdout.splitlines() if "--help" in line and "-h" in line)
    assert "Show this message and exit." in help_line


def test_options_that_take_a_value_keep_their_type() -> None:
    result = CliRunner().invoke(app, ["search", "--help"], env={"COLUMNS": "100"})
    lines = result.stdout.splitlines()
    assert any("--top-n" in line and "<int range>" in line for line in lines)
    json_line = next(line for line in lines if "│ --json" in line)
    assert "Print" in json_line and "<" not in json_line
