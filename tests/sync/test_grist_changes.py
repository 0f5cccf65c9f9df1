"""A sync from the Grist API downloads only the rows Grist says changed since the last sync
(its action history: `/states` + `/compare`), and falls back to reading everything when the
history does not reach back or the document's shape changed. Either way staging ends up exactly
as a sync reading everything would leave it."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from standins.fake_grist import FakeGrist
from standins.grist_files import Col, Doc
from support.sync_kb import DATA_DOC_ID, live_edges, live_nodes, staging_rows
from vedana.cli.app import app
from vedana.config import Settings, reset_settings
from vedana.etl.sync import sync


def sync_cli(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> dict:
    """`vedana sync --json` configured for the fake Grist, as a user would run it."""
    assert settings.grist_api_key is not None
    monkeypatch.setenv("GRIST_SERVER_URL", str(settings.grist_server_url))
    monkeypatch.setenv("GRIST_API_KEY", settings.grist_api_key.get_secret_value())
    monkeypatch.setenv("GRIST_DATA_MODEL_DOC_ID", str(settings.grist_data_model_doc_id))
    monkeypatch.setenv("GRIST_DATA_DOC_ID", str(settings.grist_data_doc_id))
    reset_settings()
    result = CliRunner().invoke(app, ["sync", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def everything_again(settings: Settings, engine: Engine) -> None:
    """A sync reading every row finds nothing to change: the incremental one left the same."""
    again = sync(settings, full=True)
    assert again.grist_fetch is not None and again.grist_fetch.path == "full"
    assert not again.changed, again.to_dict()


def test_a_small_edit_downloads_only_the_changed_rows(
    api_settings: Settings, fake: FakeGrist, data: Doc, pg_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = sync_cli(api_settings, monkeypatch)
    assert first["grist_fetch"]["path"] == "full"
    total = sum(fake.rows_served.values())
    assert total == first["grist_fetch"]["rows_fetched"] > 10

    fake.rows_served.clear()
    people = data.table("Anchor_person")
    assert people is not None
    people.rows[1] = {**people.rows[1], "person_name": "Bo Jr."}  # an edit (row 2)
    people.row_ids = [i for i in people.ids() if i != 5]
    people.rows.pop(4)  # a deletion (row 5, the blank one)
    cities = data.table("Anchor_city")
    assert cities is not None
    cities.row_ids = [*cities.ids(), 12]
    cities.rows.append({"node_id": "c99", "city_name": "Nowhere"})  # an addition

    report = sync_cli(api_settings, monkeypatch)

    assert report["grist_fetch"] == {
        "path": "changes",
        "reason": "3 row change(s)",
        "rows_fetched": 2,
        "tables_changed": 2,
    }
    assert dict(fake.rows_served) == {"Anchor_person": 1, "Anchor_city": 1}  # not the document
    nodes = live_nodes(pg_engine)
    assert nodes[("city", "c99")] == {"city_name": "Nowhere"}
    assert nodes[("person", "p2")]["person_name"] == "Bo Jr."
    assert report["totals"]["nodes"]["written"] == 2
    everything_again(api_settings, pg_engine)


def test_an_unchanged_document_fetches_nothing(api_settings: Settings, fake: FakeGrist) -> None:
    sync(api_settings)
    fake.rows_served.clear()
    again = sync(api_settings)
    assert again.unchanged_early and sum(fake.rows_served.values()) == 0


def test_history_that_does_not_reach_back_reads_everything(
    api_settings: Settings, fake: FakeGrist, data: Doc, pg_engine: Engine
) -> None:
    sync(api_settings)
    people = data.table("Anchor_person")
    assert people is not None
    people.rows[0] = {**people.rows[0], "person_name": "Renamed"}
    fake.states(data)  # the edit becomes a state…
    fake.forget_history(DATA_DOC_ID)  # …and the server forgets the one the last sync saw

    report = sync(api_settings)

    assert report.grist_fetch is not None and report.grist_fetch.path == "full"
    assert "history does not reach back" in report.grist_fetch.reason
    assert any(v.get("person_name") == "Renamed" for v in live_nodes(pg_engine).values())
    everything_again(api_settings, pg_engine)


@pytest.mark.parametrize("change", ["column added", "column type", "table removed"])
def test_a_changed_shape_reads_everything(
    api_settings: Settings, fake: FakeGrist, data: Doc, pg_engine: Engine, change: str
) -> None:
    sync(api_settings)
    fake.rows_served.clear()
    if change == "column added":
        table = data.table("Anchor_city")
        assert table is not None
        table.columns.append(Col("city_motto"))
    elif change == "column type":
        table = data.table("Anchor_person")
        assert table is not None
        next(c for c in table.columns if c.id == "person_name").type = "Any"
    else:
        data.tables = [t for t in data.tables if t.id != "Link_misc"]

    report = sync(api_settings)

    assert report.grist_fetch is not None and report.grist_fetch.path == "full"
    assert sum(fake.rows_served.values()) == report.grist_fetch.rows_fetched > 10
    everything_again(api_settings, pg_engine)


def test_references_to_a_changed_row_follow_it(
    api_settings: Settings, fake: FakeGrist, data: Doc, pg_engine: Engine
) -> None:
    """A referenced row's new id changes the edges of rows that did not change themselves: the
    normaliser still sees every row (from the kept copy), so those edges follow."""
    sync(api_settings)
    cities = data.table("Anchor_city")
    assert cities is not None
    old_id = cities.rows[0]["node_id"]
    cities.rows[0] = {**cities.rows[0], "node_id": "c-renamed"}
    before = {k for k in live_edges(pg_engine) if old_id in (k[1], k[2])}
    assert before  # somebody lives in that city

    sync(api_settings)

    edges = live_edges(pg_engine)
    assert not {k for k in edges if old_id in (k[1], k[2])}
    assert {k for k in edges if "c-renamed" in (k[1], k[2])}
    everything_again(api_settings, pg_engine)


def test_a_failed_sync_keeps_a_correct_copy(
    api_settings: Settings, fake: FakeGrist, data: Doc, pg_engine: Engine
) -> None:
    """The kept copy is committed before staging is written: a sync failing after it leaves staging
    as it was, and the next one still gets there."""
    sync(api_settings)
    before = staging_rows(pg_engine)
    cities = data.table("Anchor_city")
    assert cities is not None
    cities.rows[0] = {**cities.rows[0], "city_name": "Changed"}
    fake.fail("/tables/Anchor_person/columns", status=404, times=1)  # read during the staging write

    with pytest.raises(Exception, match="not found"):
        sync(api_settings)
    assert staging_rows(pg_engine) == before

    report = sync(api_settings)
    assert report.nodes["city"].updated == 1
    everything_again(api_settings, pg_engine)
