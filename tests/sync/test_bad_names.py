"""A name that cannot be a graph label, relationship type or property key is refused at sync,
naming the table and row, and never wedges index: once the source is fixed, sync and index
recover by themselves (also from a bad name an older sync left in staging)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from support.staging_rows import put_node
from vedana.cli.app import app
from vedana.config import Settings, reset_settings
from vedana.errors import SourceError

PEOPLE = Path(__file__).resolve().parents[2] / "samples" / "people"


def _vedana(*args: str):  # -> typer.testing.Result
    reset_settings()
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    copy = tmp_path / "people"
    shutil.copytree(PEOPLE, copy)
    return copy


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.mark.parametrize(
    ("table", "old", "new", "message"),
    [
        ("Anchors.csv", "\ncity,", "\nci`ty,", "Anchors row 3: noun 'ci`ty' cannot be a graph name (it holds a backtick)"),
        ("Anchor_attributes.csv", "city,city_country,", "city,city`country,",
         "attribute_name 'city`country' cannot be a graph name (it holds a backtick)"),
        ("Links.csv", ",PERSON_lives_in_CITY,", ",PERSON_lives`in_CITY,",
         "Links row 2: sentence 'PERSON_lives`in_CITY' cannot be a graph name"),
        ("Link_attributes.csv", ",skill_level,", ",skill\x01level,", "it holds a control character (U+0001)"),
    ],
)  # fmt: skip
def test_a_bad_name_is_refused_at_sync_and_index_recovers_once_fixed(
    sample: Path, settings: Settings, table: str, old: str, new: str, message: str
) -> None:
    model, data = sample / "model", sample / "data"
    assert _vedana("sync", "--data-model", str(model), "--data", str(data), "--full").exit_code == 0
    assert _vedana("index").exit_code == 0

    original = (model / table).read_text(encoding="utf-8")
    _replace(model / table, old, new)
    refused = _vedana("sync", "--data-model", str(model), "--data", str(data), "--full")
    assert refused.exit_code == 1
    assert isinstance(refused.exception, SourceError)
    assert message in str(refused.exception) and "rename it in the data model" in str(refused.exception)
    assert _vedana("index").exit_code == 0  # the previous good state is untouched and readable

    (model / table).write_text(original, encoding="utf-8")
    assert _vedana("sync", "--data-model", str(model), "--data", str(data), "--full").exit_code == 0
    assert _vedana("index", "--full").exit_code == 0


def test_a_bad_type_an_older_sync_left_in_staging_does_not_wedge_index(
    sample: Path, settings: Settings, pg_engine: Engine
) -> None:
    model, data = sample / "model", sample / "data"
    assert _vedana("sync", "--data-model", str(model), "--data", str(data), "--full").exit_code == 0
    with pg_engine.begin() as conn:  # what a sync before this rule could leave behind
        put_node(conn, "bad`type", "x1", {"name": "x"}, deleted=True)
    for args in (("index",), ("index", "--full")):
        result = _vedana(*args)
        assert result.exit_code == 0, result.output
