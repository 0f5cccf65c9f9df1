"""`vedana model`: the tree, --json with the search settings in force, and --json-schema that
validates every node and edge staging holds for the samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vedana.cli.app import app
from vedana.config import Settings, reset_settings

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _invoke(*args: str):  # -> typer.testing.Result
    reset_settings()
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.mark.parametrize("sample", ["people", "regulations"])
def test_json_schema_validates_every_staged_node_and_edge(sample: str, pg_engine, settings: Settings) -> None:
    from jsonschema import Draft202012Validator, FormatChecker
    from sqlalchemy import text

    folder = SAMPLES / sample
    synced = _invoke("sync", "--data-model", str(folder / "model"), "--data", str(folder / "data"), "--full")
    assert synced.exit_code == 0, synced.output
    result = _invoke("model", "--json-schema")
    assert result.exit_code == 0, result.output
    schemas = json.loads(result.stdout)
    checkers = {
        kind: {
            name: Draft202012Validator(s, format_checker=FormatChecker()) for name, s in schemas[kind].items()
        }
        for kind in ("nodes", "edges")
    }
    with pg_engine.connect() as conn:
        nodes = conn.execute(text("SELECT node_type, node_id, attributes FROM nodes WHERE NOT deleted")).all()
        edges = conn.execute(
            text(
                "SELECT edge_label, from_node_type, from_node_id, to_node_type, to_node_id, attributes "
                "FROM edges WHERE NOT deleted"
            )
        ).all()
    assert nodes and edges
    problems = []
    for node_type, node_id, attributes in nodes:
        instance = {"id": node_id, **attributes}
        problems += [
            f"{node_type} {node_id}: {e.message}" for e in checkers["nodes"][node_type].iter_errors(instance)
        ]
    for label, ft, fid, tt, tid, attributes in edges:
        instance = {"from_type": ft, "from_id": fid, "to_type": tt, "to_id": tid, **attributes}
        problems += [
            f"{label} {fid}->{tid}: {e.message}" for e in checkers["edges"][label].iter_errors(instance)
        ]
    assert problems == []

    # The schema can fail: a value of the wrong type, an undescribed property, a missing id.
    noun, schema = next(iter(schemas["nodes"].items()))
    validator = checkers["nodes"][noun]
    typed = next(name for name, p in schema["properties"].items() if p.get("type") in ("integer", "boolean"))
    assert list(validator.iter_errors({"id": "x", typed: "not a number"}))
    assert list(validator.iter_errors({"id": "x", "no_such_attribute": 1}))
    assert list(validator.iter_errors({typed: 1}))


def test_model_shows_the_tree_and_json_with_search_settings(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one tree line per item, as on a wide terminal
    folder = SAMPLES / "people"
    assert (
        _invoke("sync", "--data-model", str(folder / "model"), "--data", str(folder / "data")).exit_code == 0
    )
    tree = _invoke("model")
    assert tree.exit_code == 0
    assert "(:person)-[:PERSON_has_INTEREST]-(:interest)" in tree.stdout
    assert "interest_name: str  searchable (threshold 0.45 from data model, top 15)" in tree.stdout
    assert "/start: Hi! Ask me who likes what" in tree.stdout

    data = json.loads(_invoke("model", "--json").stdout)
    person = next(a for a in data["anchors"] if a["noun"] == "person")
    name = next(a for a in person["attributes"] if a["name"] == "person_name")
    assert name["search"] == {"threshold": 0.5, "threshold_from": "data model", "top_n": 10}
    age = next(a for a in person["attributes"] if a["name"] == "person_age")
    assert "search" not in age  # only embeddable attributes are searched
    assert [q["id"] for q in data["queries"]] == [1, 2, 3, 4]

    prompt = _invoke("model", "--prompt").stdout
    assert (
        "- (:person)" in prompt and "searchable by meaning" in prompt and "1. Who is interested in" in prompt
    )
