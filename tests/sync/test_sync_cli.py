"""`vedana sync` through Typer's CliRunner: exit codes, the summary, `--json`, `--quiet`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from support.sync_kb import EXPECTED_EDGES, EXPECTED_NODES
from vedana.cli.app import app
from vedana.config import reset_settings
from vedana.errors import ConfigError


def invoke(*args: str):
    reset_settings()  # pick up VEDANA_HOME afresh, as a new process would
    return CliRunner().invoke(app, ["sync", *args])


def test_json_report(folders: tuple[Path, Path]) -> None:
    result = invoke("--data-model", str(folders[0]), "--data", str(folders[1]), "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["changed"] is True
    assert report["totals"]["nodes"]["loaded"] == len(EXPECTED_NODES)
    assert report["totals"]["edges"]["loaded"] == len(EXPECTED_EDGES)
    assert report["nodes"]["person"]["skipped"] == {"blank row": 1, "duplicate id": 1, "missing id": 1}
    assert report["sources"]["data"] == f"CSV folder {folders[1]}"

    again = json.loads(invoke("--data-model", str(folders[0]), "--data", str(folders[1]), "--json").stdout)
    assert (again["changed"], again["unchanged_early"]) == (False, True)

    full = json.loads(
        invoke("--data-model", str(folders[0]), "--data", str(folders[1]), "--json", "--full").stdout
    )
    assert (full["changed"], full["unchanged_early"]) == (False, False)
    assert full["totals"]["nodes"]["unchanged"] == len(EXPECTED_NODES)
    assert full["totals"]["edges"]["written"] == 0


def test_plain_summary_when_not_a_tty(folders: tuple[Path, Path]) -> None:
    result = invoke("--data-model", str(folders[0]), "--data", str(folders[1]))

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(
        "node person: read 6, written 3 (3 new, 0 updated), unchanged 0, deleted 0, skipped 3"
    )
    assert "duplicate id 1" in lines[0] and "formula error read as empty 1" in lines[0]
    assert "ignored table: Teams" in lines
    assert lines[-1].startswith(f"sync: {len(EXPECTED_NODES)} nodes, {len(EXPECTED_EDGES)} edges;")


def test_unchanged_summary_line(folders: tuple[Path, Path]) -> None:
    invoke("--data-model", str(folders[0]), "--data", str(folders[1]), "--quiet")
    result = invoke("--data-model", str(folders[0]), "--data", str(folders[1]))
    assert result.exit_code == 0
    assert result.stdout.startswith("sync: documents unchanged since the last sync; nothing to do")


def test_quiet_prints_nothing(folders: tuple[Path, Path]) -> None:
    result = invoke("--data-model", str(folders[0]), "--data", str(folders[1]), "--quiet")
    assert result.exit_code == 0
    assert result.stdout == ""


def test_data_model_only(folders: tuple[Path, Path]) -> None:
    result = invoke("--data-model", str(folders[0]), "--data-model-only")
    assert result.exit_code == 0, result.output
    assert (
        result.stdout.strip()
        == "sync (data model only): data model changed; " + result.stdout.split("; ")[-1].strip()
    )


def test_bad_path_and_missing_configuration(tmp_path: Path, monkeypatch) -> None:
    for name in ("GRIST_SERVER_URL", "GRIST_DATA_MODEL_DOC_ID", "GRIST_DATA_DOC_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no .env
    result = invoke("--data-model", str(tmp_path / "nowhere" / "model.csv"))
    assert result.exit_code == 1
    assert "neither a folder of CSV files nor a .grist file" in str(result.exception)

    result = invoke()  # no flags, no GRIST_* settings
    assert isinstance(result.exception, ConfigError)
    assert result.exception.exit_code == 2  # what `vedana` (app.main) exits with
    assert "GRIST_DATA_MODEL_DOC_ID" in str(result.exception)


def test_data_model_changed_only_when_it_did(model, data, tmp_path: Path) -> None:
    """Prompts out of name order (as a user types them) read twice: the second sync says unchanged."""
    from standins.grist_files import write_csv_folder

    prompts = model.table("Prompts").rows
    prompts[:] = [{"name": "zeta", "text": "Z"}, *prompts, {"name": "alpha", "text": "A"}]
    model_dir, data_dir = write_csv_folder(model, tmp_path / "m1"), write_csv_folder(data, tmp_path / "d")

    first = invoke("--data-model", str(model_dir), "--data", str(data_dir), "--full")
    again = invoke("--data-model", str(model_dir), "--data", str(data_dir), "--full")
    assert "data model changed" in first.stdout, first.output
    assert "data model unchanged" in again.stdout, again.output

    prompts.append({"name": "beta", "text": "B"})
    edited = invoke("--data-model", str(write_csv_folder(model, tmp_path / "m2")), "--data", str(data_dir))
    assert "data model changed" in edited.stdout, edited.output


def test_attribute_without_a_column_is_noted(model, data, tmp_path: Path) -> None:
    """An attribute described in the data model that its table lacks is said once in the report."""
    from standins.grist_files import write_csv_folder

    model.table("Anchor_attributes").rows.append(
        {"anchor": 1, "attribute_name": "person_email", "dtype": "str"}
    )
    model.table("Link_attributes").rows.append({"link": 1, "attribute_name": "level", "dtype": "str"})
    model_dir, data_dir = write_csv_folder(model, tmp_path / "m"), write_csv_folder(data, tmp_path / "d")

    result = invoke("--data-model", str(model_dir), "--data", str(data_dir))

    assert result.exit_code == 0, result.output
    notes = [line for line in result.stdout.splitlines() if "has no column" in line]
    assert notes == [
        "note: Anchor_person has no column person_email (attribute of person in Anchor_attributes), so no "
        "node gets it; add the column or delete the attribute",
        "note: Link_person_has_interest has no column level (attribute of link PERSON_has_INTEREST in "
        "Link_attributes), so no edge gets it; add the column or delete the attribute",
    ]
