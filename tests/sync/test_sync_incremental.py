"""Incremental sync: a re-run writes nothing, edits/additions/deletions are each detected with a
version bump, an unchanged Grist document stops the run at `/states`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from standins.fake_grist import FakeGrist
from standins.grist_files import Doc, write_csv_folder
from support.sync_kb import EXPECTED_EDGES, EXPECTED_NODES, live_nodes, staging_rows
from vedana.config import Settings
from vedana.etl.sync import sync
from vedana.stores import tables as t
from vedana.stores.run_log import recent_runs
from vedana.stores.staging import load_data_model


def versions(engine: Engine) -> dict[tuple[str, str], tuple[int, bool]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(t.nodes.c.node_type, t.nodes.c.node_id, t.nodes.c.version, t.nodes.c.deleted)
        )
        return {(r.node_type, r.node_id): (r.version, r.deleted) for r in rows}


def edge_versions(engine: Engine) -> dict[tuple[str, str, str], tuple[int, bool]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                t.edges.c.edge_label,
                t.edges.c.from_node_id,
                t.edges.c.to_node_id,
                t.edges.c.version,
                t.edges.c.deleted,
            )
        )
        return {(r.edge_label, r.from_node_id, r.to_node_id): (r.version, r.deleted) for r in rows}


def test_second_run_writes_nothing(settings: Settings, pg_engine: Engine, folders: tuple[Path, Path]) -> None:
    first = sync(settings, data_model=folders[0], data=folders[1])
    assert first.changed
    before = staging_rows(pg_engine)

    again = sync(settings, data_model=folders[0], data=folders[1], full=True)  # read and compare all

    assert staging_rows(pg_engine) == before  # same versions, timestamps, everything
    assert not again.changed and not again.data_model.changed
    totals = again.to_dict()["totals"]
    assert (totals["nodes"]["written"], totals["nodes"]["deleted"]) == (0, 0)
    assert (totals["edges"]["written"], totals["edges"]["deleted"]) == (0, 0)
    assert totals["nodes"]["unchanged"] == len(EXPECTED_NODES)


def test_unchanged_files_stop_early(
    settings: Settings, pg_engine: Engine, folders: tuple[Path, Path], model: Doc, data: Doc, tmp_path: Path
) -> None:
    from standins.grist_files import build_grist_file

    files = build_grist_file(model, tmp_path / "m.grist"), build_grist_file(data, tmp_path / "d.grist")
    for model_source, data_source in (folders, files):
        sync(settings, data_model=model_source, data=data_source)
        before = staging_rows(pg_engine)
        again = sync(settings, data_model=model_source, data=data_source)
        assert again.unchanged_early and not again.changed
        assert staging_rows(pg_engine) == before

    # One edited file in the folder: read again, and the edit lands.
    sync(settings, data_model=folders[0], data=folders[1])
    city = folders[1] / "Anchor_city.csv"
    city.write_text(city.read_text().replace("Lisbon", "Lisboa"))
    report = sync(settings, data_model=folders[0], data=folders[1])
    assert not report.unchanged_early and report.nodes["city"].updated == 1


def test_an_edited_folder_stores_the_state_its_reading_took(
    settings: Settings,
    pg_engine: Engine,
    folders: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A folder whose files were touched since its last sync is read at once: its content digest
    comes from that reading (`CsvFolderSource.state_as_read`), never from a later one. A file
    saved again after it was read leaves the next sync something to read, not "unchanged"; a
    file touched with the same bytes is compared and stops the sync after it early."""
    from vedana.etl.sync import STATE_KEY
    from vedana.sources.base import files_digest
    from vedana.sources.csv_folder import CsvFolderSource
    from vedana.stores.staging import get_state

    def stored() -> dict[str, str]:
        with pg_engine.connect() as conn:
            return get_state(conn, STATE_KEY)

    model, data = folders
    sync(settings, data_model=model, data=data)
    files = sorted(data.glob("*.csv"))
    city = data / "Anchor_city.csv"
    city.write_text(city.read_text().replace("Lisbon", "Lisboa"))
    taken: list[str] = []
    real = CsvFolderSource.state_as_read

    def saved_again_after_reading(source: CsvFolderSource) -> str | None:
        taken.append(files_digest(files))  # the files as read
        city.write_text(city.read_text().replace("Lisboa", "Lisbonne"))
        return real(source)

    monkeypatch.setattr(CsvFolderSource, "state_as_read", saved_again_after_reading)
    report = sync(settings, data_model=model, data=data)
    assert report.nodes["city"].updated == 1
    assert stored()["data"] == f"CSV folder {data}@{taken[0]}"  # not the file saved since
    monkeypatch.undo()

    again = sync(settings, data_model=model, data=data)
    assert not again.unchanged_early and again.nodes["city"].updated == 1
    assert stored()["data"] == f"CSV folder {data}@{files_digest(files)}"

    os.utime(city)  # touched, same bytes: compared row by row, nothing written
    touched = sync(settings, data_model=model, data=data)
    assert not touched.unchanged_early and not touched.changed
    assert sync(settings, data_model=model, data=data).unchanged_early


def test_api_rerun_stops_at_states(api_settings: Settings, fake: FakeGrist, pg_engine: Engine) -> None:
    sync(api_settings)
    before = staging_rows(pg_engine)
    fake.requests.clear()

    again = sync(api_settings)

    assert again.unchanged_early and not again.changed
    assert sorted(r.split("?")[0] for r in fake.requests) == [
        "GET /api/docs/clubDataDoc001/states",
        "GET /api/docs/clubModelDoc01/states",
    ]
    assert staging_rows(pg_engine) == before
    assert recent_runs(pg_engine, limit=1, kind="sync")[0]["status"] == "unchanged"


def test_changed_document_is_read_again(
    api_settings: Settings, fake: FakeGrist, data: Doc, pg_engine: Engine
) -> None:
    sync(api_settings)
    data.table("Anchor_city").rows[0]["city_name"] = "Lisboa"
    fake.requests.clear()

    report = sync(api_settings)

    assert not report.unchanged_early
    assert any("/sql" in r for r in fake.requests)
    assert live_nodes(pg_engine)[("city", "c1")] == {"city_name": "Lisboa"}
    assert (report.nodes["city"].updated, report.nodes["city"].unchanged) == (1, 1)


def test_edit_add_delete_are_detected(
    settings: Settings, pg_engine: Engine, model: Doc, data: Doc, tmp_path: Path
) -> None:
    model_dir = write_csv_folder(model, tmp_path / "model")
    sync(settings, data_model=model_dir, data=write_csv_folder(data, tmp_path / "v1"))
    v1, e1 = versions(pg_engine), edge_versions(pg_engine)

    people = data.table("Anchor_person").rows
    people[1]["person_name"] = "Bo Edited"  # edit p2
    people.append({"person_id": "p4", "person_name": "Dee", "person_city": 1})  # add p4 (+ an edge)
    data.table("Anchor_interest").rows.pop()  # delete interest:2 (its edges dangle now)
    report = sync(settings, data_model=model_dir, data=write_csv_folder(data, tmp_path / "v2"))
    v2, e2 = versions(pg_engine), edge_versions(pg_engine)

    high = max(v for v, _ in [*v1.values(), *e1.values()])
    assert v2[("person", "p2")][0] > high and not v2[("person", "p2")][1]
    assert v2[("person", "p4")][0] > high and not v2[("person", "p4")][1]
    assert v2[("interest", "interest:2")][0] > high and v2[("interest", "interest:2")][1]  # tombstone
    untouched = set(v1) - {("person", "p2"), ("interest", "interest:2")}
    assert all(v2[key] == v1[key] for key in untouched)
    assert live_nodes(pg_engine)[("person", "p2")]["person_name"] == "Bo Edited"

    gone = {k for k in EXPECTED_EDGES if "interest:2" in k}
    assert gone and all(e2[k][1] and e2[k][0] > high for k in gone)
    assert e2[("PERSON_lives_in_CITY", "p4", "c1")][0] > high
    assert all(e2[k] == e1[k] for k in set(e1) - gone)

    person, interest = report.nodes["person"], report.nodes["interest"]
    assert (person.new, person.updated, person.deleted, person.unchanged) == (1, 1, 0, 2)
    assert (interest.new, interest.updated, interest.deleted, interest.unchanged) == (0, 0, 1, 1)
    assert report.edges["PERSON_has_INTEREST"].deleted == 2
    assert report.edges["INTEREST_featured_in_CITY"].deleted == 1
    assert report.version == max(v for v, _ in [*v2.values(), *e2.values()])


def test_deleted_row_that_returns_is_new_again(
    settings: Settings, pg_engine: Engine, model: Doc, data: Doc, tmp_path: Path
) -> None:
    model_dir = write_csv_folder(model, tmp_path / "model")
    sync(settings, data_model=model_dir, data=write_csv_folder(data, tmp_path / "v1"))
    city_rows = data.table("Anchor_city").rows
    removed = city_rows.pop()
    sync(settings, data_model=model_dir, data=write_csv_folder(data, tmp_path / "v2"))
    tombstoned = versions(pg_engine)[("city", "c2")]
    assert tombstoned[1]

    city_rows.append(removed)
    report = sync(settings, data_model=model_dir, data=write_csv_folder(data, tmp_path / "v3"))

    back = versions(pg_engine)[("city", "c2")]
    assert not back[1] and back[0] > tombstoned[0]
    assert report.nodes["city"].new == 1
    assert live_nodes(pg_engine) == EXPECTED_NODES


def test_data_model_only_leaves_data_alone(
    settings: Settings, pg_engine: Engine, model: Doc, data: Doc, tmp_path: Path
) -> None:
    model_dir = write_csv_folder(model, tmp_path / "model")
    data_dir = write_csv_folder(data, tmp_path / "data")
    sync(settings, data_model=model_dir, data=data_dir)
    before = staging_rows(pg_engine)["nodes"], staging_rows(pg_engine)["edges"]

    model.table("Prompts").rows.append({"name": "greeting", "text": "Hello!"})
    data.table("Anchor_city").rows.clear()  # must not be looked at
    report = sync(settings, data_model=write_csv_folder(model, tmp_path / "model2"), data_model_only=True)

    assert report.data_model.changed and report.data_model_only
    assert not report.nodes and not report.edges and "data" not in report.sources
    assert (staging_rows(pg_engine)["nodes"], staging_rows(pg_engine)["edges"]) == before
    with pg_engine.connect() as conn:
        assert load_data_model(conn).prompt("greeting") == "Hello!"


def test_data_model_is_stored(settings: Settings, pg_engine: Engine, folders: tuple[Path, Path]) -> None:
    sync(settings, data_model=folders[0], data=folders[1])
    with pg_engine.connect() as conn:
        dm = load_data_model(conn)
    assert [a.noun for a in dm.anchors] == ["person", "interest", "city"]
    name = dm.anchor("person").attribute("person_name")
    assert (name.embeddable, name.embed_threshold, name.embed_top_n, name.dtype) == (True, 0.5, 7, "str")
    has = dm.link("PERSON_has_INTEREST")
    assert (has.anchor1, has.anchor2, has.has_direction) == ("person", "interest", False)
    assert [a.name for a in has.attributes] == ["skill", "since"]
    assert dm.link("PERSON_lives_in_CITY").anchor1_link_column_name == "person_city"
    assert [q.name for q in dm.queries] == ["Who likes <interest>?"]
    assert dm.prompt("no_answer") == "Nothing found."


def test_model_only_change_is_applied_by_the_next_full_sync(
    settings: Settings, pg_engine: Engine, model: Doc, folders: tuple[Path, Path], tmp_path: Path
) -> None:
    """A model edited by a `--data-model-only` run (a newly described column) reaches the data on
    the next plain run, even though the data document itself did not change."""
    model_dir = folders[0]
    sync(settings, data_model=model_dir, data=folders[1])
    model.table("Anchor_attributes").rows.insert(
        0, {"anchor": 2, "attribute_name": "interest_rank", "dtype": "int"}
    )
    write_csv_folder(model, model_dir)
    sync(settings, data_model=model_dir, data_model_only=True)

    report = sync(settings, data_model=model_dir, data=folders[1])

    assert not report.unchanged_early
    assert live_nodes(pg_engine)[("interest", "interest:1")] == {"interest_name": "chess", "interest_rank": 1}
    assert sync(settings, data_model=model_dir, data=folders[1]).unchanged_early
