"""Cron, simulated: `vedana run` on a copy of samples/people, the CSVs edited between runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ops_kb import read_csv, write_csv
from sqlalchemy import Engine
from typer.testing import CliRunner

from support.staging_rows import live_counts
from vedana.cli.app import app
from vedana.stores.graph import GraphStore
from vedana.stores.vectors import NODE_TABLE

PEOPLE = Path(__file__).resolve().parents[2] / "samples" / "people"
RENAMED = ("person:0001", "Leon Castell", "Zelda Quixote-Edited")
DELETED = "person:0002"
ADDED = ["person:0301", "Brand Newperson", "30", "2024-01-01", "lisbon", "false"]


def vedana_run(folder: Path) -> dict[str, Any]:
    result = CliRunner().invoke(
        app, ["run", "--data-model", str(folder / "model"), "--data", str(folder / "data"), "--json"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def edit_people(folder: Path) -> int:
    """Rename one person, delete another, add a third; returns how many link-table rows name
    the deleted person (their edges must go too)."""
    path = folder / "data" / "Anchor_person.csv"
    rows = read_csv(path)
    header = rows[0]
    pid, name = header.index("person_id"), header.index("person_name")
    edited = [rows[0]]
    for row in rows[1:]:
        if row[pid] == DELETED:
            continue
        if row[pid] == RENAMED[0]:
            assert row[name] == RENAMED[1]
            row[name] = RENAMED[2]
        edited.append(row)
    edited.append(ADDED)
    write_csv(path, edited)
    links = read_csv(folder / "data" / "Link_person_has_interest.csv")
    return sum(DELETED in (row[0], row[1]) for row in links[1:])


def person_names(engine: Engine) -> dict[str, str]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            f"SELECT node_id, attribute_value FROM {NODE_TABLE} "
            "WHERE node_type = 'person' AND attribute_name = 'person_name'"
        ).all()
    return dict(rows)


def test_cron_applies_exactly_the_edits_then_reports_up_to_date(
    ops_env: None, blank_kb: Engine, graph: GraphStore, tmp_path: Path
) -> None:
    folder = tmp_path / "people"
    shutil.copytree(PEOPLE, folder)
    expected = json.loads((PEOPLE / "expected.json").read_text())

    first = vedana_run(folder)

    assert first["status"] == "updated"
    full = {"nodes": expected["nodes"], "edges": expected["edges"]}
    assert live_counts(blank_kb) == full
    assert graph.counts() == full
    names = person_names(blank_kb)
    assert len(names) == expected["embeddable_values"]["person.person_name"]

    interests_of_deleted = edit_people(folder)
    assert interests_of_deleted == 2  # the sample as committed: person:0002 has two interests
    second = vedana_run(folder)

    assert second["status"] == "updated"
    sync = second["sync"]["nodes"]["person"]
    assert (sync["new"], sync["updated"], sync["deleted"]) == (1, 1, 1)
    index = second["index"]
    # Nodes: the renamed and the added person written, the deleted one removed; edges: the new
    # person's city, and the deleted person's city and interests (both directions).
    assert (index["nodes_upserted"], index["nodes_deleted"]) == (2, 1)
    assert (index["edges_upserted"], index["edges_deleted"]) == (1, 1 + 2 * interests_of_deleted)
    assert (index["texts_embedded"], index["values_written"], index["values_deleted"]) == (2, 2, 1)

    after = {
        "nodes": expected["nodes"],  # one person fewer, one more
        "edges": {
            "PERSON_has_INTEREST": expected["edges"]["PERSON_has_INTEREST"] - 2 * interests_of_deleted,
            "PERSON_lives_in_CITY": expected["edges"]["PERSON_lives_in_CITY"],
        },
    }
    assert live_counts(blank_kb) == after
    assert graph.counts() == after
    names_after = person_names(blank_kb)
    assert names_after[RENAMED[0]] == RENAMED[2]
    assert DELETED not in names_after
    assert names_after[ADDED[0]] == ADDED[1]
    assert {k: v for k, v in names_after.items() if k not in (RENAMED[0], ADDED[0])} == {
        k: v for k, v in names.items() if k not in (RENAMED[0], DELETED)
    }
    in_graph = graph.query(
        "MATCH (p:person) WHERE p.id IN $ids RETURN p.id AS id, p.person_name AS name ORDER BY id",
        {"ids": [RENAMED[0], DELETED, ADDED[0]]},
    ).rows
    assert in_graph == [{"id": RENAMED[0], "name": RENAMED[2]}, {"id": ADDED[0], "name": ADDED[1]}]
    home = graph.query(
        "MATCH (:person {id: $id})-[:PERSON_lives_in_CITY]->(c:city) RETURN c.id AS city", {"id": ADDED[0]}
    ).rows
    assert home == [{"city": "lisbon"}]

    third = vedana_run(folder)

    assert third["status"] == "up to date"
    assert third["index"]["graph_rows"] == 0 and third["index"]["values_written"] == 0
    assert live_counts(blank_kb) == after
