"""The README stays true: every command is documented there and has help text."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.main import get_command

from vedana.cli.app import app

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _commands() -> list[tuple[str, object]]:
    root = get_command(app)
    found: list[tuple[str, object]] = []
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        found.append((name, command))
        for sub_name, sub in getattr(command, "commands", {}).items():
            found.append((f"{name} {sub_name}", sub))
    return found


@pytest.mark.parametrize(("name", "command"), _commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_command_is_in_the_readme_with_help_and_examples(name: str, command: object) -> None:
    assert f"vedana {name}" in README, f"`vedana {name}` is not documented in README.md"
    text = getattr(command, "help", None) or ""
    assert text.strip(), f"`vedana {name}` has no help text"
    assert "Examples:" in text and f"vedana {name}" in text.split("Examples:", 1)[1], (
        f"`vedana {name} --help` shows no example of itself"
    )


def test_the_root_help_has_examples() -> None:
    text = get_command(app).help or ""
    assert "Examples:" in text and "vedana sync" in text.split("Examples:", 1)[1]


def test_the_readme_opens_with_the_two_commands_ci_runs() -> None:
    head = README[: README.index("## ")]
    assert "make demo" in head and "make test" in head
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert "make test" in ci
