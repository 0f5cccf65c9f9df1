"""The examples `vedana search --help` gives on the demo's data (samples/people) find something
when run as shown: an example that prints nothing teaches nothing."""

from __future__ import annotations

import shlex
from pathlib import Path

from typer.testing import CliRunner

from vedana.cli.app import app
from vedana.config import reset_settings

PEOPLE_LABELS = {"person", "interest", "city", "PERSON_has_INTEREST", "PERSON_lives_in_CITY"}


def _examples() -> list[list[str]]:
    shown = CliRunner().invoke(app, ["search", "--help"], env={"COLUMNS": "400"}).stdout
    lines = [line.strip() for line in shown.splitlines() if line.strip().startswith("vedana search ")]
    return [shlex.split(line)[1:] for line in lines]


def test_the_help_examples_on_the_demos_data_find_hits(people_sample: Path) -> None:
    on_people = [args for args in _examples() if args[1] in PEOPLE_LABELS]
    assert any("--where" in args for args in on_people)  # the example users asked about is among them
    reset_settings()
    for args in on_people:
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        assert result.stdout.strip(), f"`vedana {shlex.join(args)}` finds nothing: {result.stderr}"
