"""The same documents through the four sources give the same nodes and edges, by every rule."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from standins.fake_grist import FakeGrist
from standins.grist_files import Doc, build_grist_file
from support.sync_kb import (
    EXPECTED_EDGES,
    EXPECTED_NODES,
    blank_staging,
    grist_settings,
    live_edges,
    live_nodes,
)
from vedana.config import Settings
from vedana.etl.sync import sync


def test_api_source_applies_every_rule(api_settings: Settings, pg_engine: Engine) -> None:
    report = sync(api_settings)

    assert live_nodes(pg_engine) == EXPECTED_NODES
    assert live_edges(pg_engine) == EXPECTED_EDGES
    person = report.nodes["person"]
    assert (person.read, person.new, dict(person.skipped)) == (
        6,
        3,
        {"blank row": 1, "missing id": 1, "duplicate id": 1},
    )
    assert person.cells == {"formula error read as empty": 1, "person_age: not a valid int": 1}
    assert person.dropped_columns == ["person_secret"]
    assert report.nodes["interest"].dropped_columns == ["interest_rank"]
    has = report.edges["PERSON_has_INTEREST"]
    assert dict(has.skipped) == {"duplicate edge": 2, "dangling endpoint": 1, "missing endpoint": 1}
    assert has.dropped_columns == ["note"]
    assert report.edges["PERSON_knows_PERSON"].skipped == {"duplicate edge": 2}
    assert report.ignored_tables == ["Teams", "Anchor_planet"]
    assert report.notes == ["Link_misc: 1 row(s) skipped: their edge_label names no link of the data model"]
    assert report.data_model.counts["anchors"] == 3
    assert report.data_model.skipped["Anchors: blank row"] == 1
    assert report.data_model.missing_tables == ["ConversationLifecycle"]
    assert report.changed and not report.unchanged_early


def test_four_sources_give_identical_staging(
    api_settings: Settings,
    settings: Settings,
    pg_engine: Engine,
    model: Doc,
    data: Doc,
    folders,
    tmp_path: Path,
) -> None:
    sync(api_settings)
    nodes, edges = live_nodes(pg_engine), live_edges(pg_engine)
    assert (nodes, edges) == (EXPECTED_NODES, EXPECTED_EDGES)

    model_file = build_grist_file(model, tmp_path / "model.grist")
    data_file = build_grist_file(data, tmp_path / "data.grist")
    runs = {
        "csv export": sync(api_settings, csv=True),
        ".grist file": sync(settings, data_model=model_file, data=data_file),
        "csv folder": sync(settings, data_model=folders[0], data=folders[1]),
    }
    for name, report in runs.items():
        # Nothing differs from what the API source wrote: not a row, not the data model.
        assert not report.changed, name
        assert not report.unchanged_early, name
        assert report.to_dict()["totals"]["nodes"]["unchanged"] == len(EXPECTED_NODES), name
        assert report.to_dict()["totals"]["edges"]["unchanged"] == len(EXPECTED_EDGES), name
        assert (live_nodes(pg_engine), live_edges(pg_engine)) == (nodes, edges), name


def test_each_source_alone_from_blank(
    settings: Settings, pg_engine: Engine, model: Doc, data: Doc, folders, tmp_path: Path, fake: FakeGrist
) -> None:
    """Each source on an empty staging yields the expected graph (not just "no change")."""
    files = (build_grist_file(model, tmp_path / "m.grist"), build_grist_file(data, tmp_path / "d.grist"))
    for name, kwargs in {
        "csv export": {"csv": True},
        ".grist file": {"data_model": files[0], "data": files[1]},
        "csv folder": {"data_model": folders[0], "data": folders[1]},
    }.items():
        blank_staging(pg_engine)
        sync(grist_settings(settings, fake.url), **kwargs)
        assert live_nodes(pg_engine) == EXPECTED_NODES, name
        assert live_edges(pg_engine) == EXPECTED_EDGES, name


def test_records_endpoint_with_error_cells(
    api_settings: Settings, fake: FakeGrist, model: Doc, data: Doc, pg_engine: Engine
) -> None:
    """Data read through `/records` instead of `/sql`, with errors sent as `["E", …]` cells
    (older servers) instead of `null` + `errors`: the same result."""
    from vedana.sources.grist_api import GristApiSource
    from vedana.sources.grist_http import GristClient

    model.error_style = data.error_style = "E"
    client = GristClient(fake.url, data.doc_id, api_settings.grist_api_key.get_secret_value())
    report = sync(api_settings, data=GristApiSource(client, rows_via="records"))

    assert live_nodes(pg_engine) == EXPECTED_NODES
    assert live_edges(pg_engine) == EXPECTED_EDGES
    assert report.nodes["person"].cells["formula error read as empty"] == 1
    assert fake.paths("/tables/Anchor_person/records?hidden=true") and not fake.paths("/sql")


def test_progress_is_reported(api_settings: Settings, fake: FakeGrist) -> None:
    calls: list[tuple[str, int, int | None]] = []
    # A server URL ending in /api/ means the same server.
    with_api = api_settings.model_copy(update={"grist_server_url": f"{fake.url}/api/"})
    sync(with_api, on_progress=lambda stage, done, total: calls.append((stage, done, total)))

    stages = [stage for stage, _, _ in calls]
    assert stages[0] == "check for changes" and stages[-1] == "write staging"
    assert {"data model", "Anchor_person", "Link_person_has_interest"} <= set(stages)
    person = [(done, total) for stage, done, total in calls if stage == "Anchor_person"]
    assert person[0] == (0, 6) and person[-1] == (6, 6)  # the row count comes from COUNT(*) via /sql
