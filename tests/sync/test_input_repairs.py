"""What a source must repair or skip, through the CLI: NUL characters in cells (every source kind)
and malformed CSV rows (CSV folder and Grist's CSV export) are counted and reported by line in
the sync report and by `vedana check`'s lint; `--strict` fails and writes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from standins.fake_grist import FakeGrist
from standins.grist_files import Doc, build_grist_file, csv_text, write_csv_folder
from support.sync_kb import API_KEY, DATA_DOC_ID, EXPECTED_NODES, MODEL_DOC_ID, live_nodes
from vedana.cli.app import app
from vedana.config import reset_settings
from vedana.errors import VedanaError

KINDS = ["csv folder", "csv export", ".grist file", "grist api"]


def invoke(*args: str) -> Any:
    reset_settings()
    return CliRunner().invoke(app, list(args))


def error_line(result: Any) -> str:
    """The one line `vedana` prints for the error (app.main maps a VedanaError to it; under
    CliRunner the error itself comes back)."""
    assert isinstance(result.exception, VedanaError), result.output
    line = str(result.exception)
    assert "\n" not in line
    return line


def with_nul(model: Doc, data: Doc) -> None:
    """NULs in two cells of one column of the data, inside a ChoiceList item (JSON text in
    SQLite and /sql, where the NUL is escaped), inside a formula's list (a marshalled blob), and
    in one cell of the data model."""
    person = data.table("Anchor_person")
    assert person is not None
    person.rows[0]["person_name"] = "A\x00da"  # row 1, line 2 of the CSV
    person.rows[1]["person_name"] = "B\x00\x00o"  # row 2
    person.rows[0]["person_tags"] = ["ch\x00ess", "go"]
    person.rows[1]["person_nickname"] = ["b\x00o"]  # a formula returning a list
    teams = data.table("Teams")
    assert teams is not None
    teams.rows[0]["team_name"] = "R\x00ed"  # what person_team's Ref shows for p1
    anchors = model.table("Anchors")
    assert anchors is not None
    anchors.rows[0]["description"] = "A member\x00 of the club."


@contextmanager
def source_args(
    kind: str, model: Doc, data: Doc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[list[str], str, str]]:
    """The CLI arguments reading the documents as `kind`, how that source names the person
    table, and the word for its rows."""
    if kind == "csv folder":
        m, d = write_csv_folder(model, tmp_path / "model"), write_csv_folder(data, tmp_path / "data")
        yield ["--data-model", str(m), "--data", str(d)], f"{d}/Anchor_person.csv", "line"
    elif kind == ".grist file":
        m = build_grist_file(model, tmp_path / "model.grist")
        d = build_grist_file(data, tmp_path / "data.grist")
        yield ["--data-model", str(m), "--data", str(d)], "Anchor_person", "row"
    else:
        with FakeGrist(model, data, api_key=API_KEY) as fake:
            for name, value in {
                "GRIST_SERVER_URL": fake.url,
                "GRIST_API_KEY": API_KEY,
                "GRIST_DATA_MODEL_DOC_ID": MODEL_DOC_ID,
                "GRIST_DATA_DOC_ID": DATA_DOC_ID,
            }.items():
                monkeypatch.setenv(name, value)
            if kind == "csv export":
                yield ["--csv"], "Anchor_person (Grist CSV export)", "line"
            else:
                yield [], "Anchor_person", "row"


@pytest.mark.parametrize("kind", KINDS)
def test_nul_characters_are_removed_counted_and_reported(
    kind: str,
    model: Doc,
    data: Doc,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pg_engine: Engine,
) -> None:
    with_nul(model, data)
    first = 2 if kind in ("csv folder", "csv export") else 1  # the header is line 1
    with source_args(kind, model, data, tmp_path, monkeypatch) as (args, where, unit):
        strict = invoke("sync", *args, "--strict")
        assert strict.exit_code == 1, strict.output
        line = error_line(strict)
        assert line.startswith("--strict: ") and "NUL character" in line and "more warning" in line
        assert live_nodes(pg_engine) == {}  # nothing written

        result = invoke("sync", *args, "--json")
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        expected = f"{where} {unit} {first}, column person_name: 1 NUL character removed (2 cells in all)"
        assert expected in report["warnings"]
        person = next(n for n in report["nul_characters"] if n["column"] == "person_name")
        assert person == {
            "table": where, "column": "person_name", "unit": unit, "first": first, "characters": 3, "cells": 2
        }  # fmt: skip
        described = [n for n in report["nul_characters"] if n["column"] == "description"]
        assert len(described) == 1 and described[0]["cells"] == 1  # the data model's cell too
        nodes = live_nodes(pg_engine)
        assert "\\u0000" not in json.dumps(list(nodes.values()))
        nickname = nodes[("person", "p2")].pop("person_nickname")
        assert nickname in ("bo", ["bo"])  # a list where the source keeps one, as ever
        expected_nodes = {k: dict(v) for k, v in EXPECTED_NODES.items()}
        del expected_nodes[("person", "p2")]["person_nickname"]
        assert nodes == expected_nodes  # "Ada", "Bo", ["chess", "go"], "Red" again
        columns = {n["column"] for n in report["nul_characters"]}
        assert {"person_name", "person_tags", "person_nickname", "description"} <= columns

        plain = invoke("sync", *args, "--full")
        assert plain.exit_code == 0, plain.output
        assert f"warning: {expected}" in plain.stdout.splitlines()

        check = invoke("check", "--only", "lint", *args, "--json")
        lint = json.loads(check.stdout)["problems"]
        nul = [p for p in lint if p["code"] == "lint.nul-character"]
        assert {p["where"]["column"] for p in nul} == columns, lint
        assert any(expected in p["message"] for p in nul)


def ragged(text: str) -> str:
    """The person table's CSV with a row short of a field, one with a field too many, and, at
    the end, a row whose quote never closes."""
    lines = text.splitlines()
    width = len(lines[0].split(","))
    lines.insert(3, ",".join(["p8", "Short"] + [""] * (width - 3)))  # line 4: one field short
    lines.insert(5, ",".join(["p9", "Long"] + [""] * width))  # line 6: too many fields
    lines.append('p7,"Unclosed' + "," * (width - 2))  # the last line
    lines.append(",".join(["p10", "Swallowed"] + [""] * (width - 2)))
    return "\n".join(lines) + "\n"


def test_malformed_csv_rows_are_skipped_and_reported(
    model: Doc, data: Doc, tmp_path: Path, pg_engine: Engine
) -> None:
    folder = write_csv_folder(data, tmp_path / "data")
    model_folder = write_csv_folder(model, tmp_path / "model")
    people = folder / "Anchor_person.csv"
    people.write_text(ragged(people.read_text(encoding="utf-8")), encoding="utf-8")
    total = len(people.read_text().splitlines())
    args = ["--data-model", str(model_folder), "--data", str(folder)]

    strict = invoke("sync", *args, "--strict")
    assert strict.exit_code == 1, strict.output
    assert error_line(strict).startswith("--strict: skipped 3 malformed rows: ")
    assert live_nodes(pg_engine) == {}
    run = invoke("run", *args, "--strict")  # `vedana run` passes it on to its sync
    assert error_line(run).startswith("--strict: skipped 3 malformed rows: ")
    assert live_nodes(pg_engine) == {}

    result = invoke("sync", *args, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    width = len(people.read_text().splitlines()[0].split(","))
    assert report["warnings"] == [
        f"skipped 3 malformed rows: {people} line 4 ({width - 1} fields, header has {width}), "
        f"line 6 ({width + 2} fields, header has {width}), "
        f"line {total - 1} (unterminated quote: it runs to the end of the file)"
    ]
    # The other rows load as before, and the skipped ones are not counted as read or skipped.
    assert set(live_nodes(pg_engine)) == set(EXPECTED_NODES)
    assert report["nodes"]["person"]["read"] == 6
    assert report["nodes"]["person"]["skipped"] == {"blank row": 1, "duplicate id": 1, "missing id": 1}

    check = invoke("check", "--only", "lint", *args, "--json")
    lint = json.loads(check.stdout)["problems"]
    assert [p["message"] for p in lint if p["code"] == "lint.malformed-row"] == [
        report["warnings"][0] + "; sync skips them: fix the rows"
    ]


def test_malformed_rows_of_the_grist_csv_export(
    model: Doc, data: Doc, monkeypatch: pytest.MonkeyPatch, pg_engine: Engine
) -> None:
    import standins.fake_grist as fake_grist

    def export(doc: Doc, table: Any, **options: Any) -> str:
        text = csv_text(doc, table, **options)
        return ragged(text) if table.id == "Anchor_person" else text

    monkeypatch.setattr(fake_grist, "csv_text", export)
    with source_args("csv export", model, data, Path(), monkeypatch) as (args, where, _):
        result = invoke("sync", *args, "--json")
    assert result.exit_code == 0, result.output
    (warning,) = json.loads(result.stdout)["warnings"]
    assert warning.startswith(f"skipped 3 malformed rows: {where} line 4 (")
    assert "(unterminated quote: it runs to the end of the file)" in warning
    assert set(live_nodes(pg_engine)) == set(EXPECTED_NODES)


def test_an_unreadable_header_is_said_not_taken_for_an_empty_table(
    model: Doc, data: Doc, tmp_path: Path
) -> None:
    folder = write_csv_folder(data, tmp_path / "data")
    interests = folder / "Anchor_interest.csv"
    interests.write_text('"interest_name,interest_rank\nchess,1\n', encoding="utf-8")
    args = ["--data-model", str(write_csv_folder(model, tmp_path / "model")), "--data", str(folder)]

    result = invoke("sync", *args, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [
        f"skipped 1 malformed row: {interests} line 1 (the header: unterminated quote: it runs to the end of the file)"
    ]
