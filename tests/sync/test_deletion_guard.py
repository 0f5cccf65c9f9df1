"""A sync never empties a type because its table or id column went missing, nor deletes more than
VEDANA_MAX_DELETE_SHARE of a type's rows: it fails with one line, staging as it was, unless
`--allow-deletions`. A data model that stops naming a type deletes it without the flag."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from standins.fake_grist import FakeGrist
from standins.grist_files import CellError, Doc, build_grist_file, write_csv_folder
from support.sync_kb import EXPECTED_EDGES, EXPECTED_NODES, live_edges, live_nodes, staging_rows
from vedana.config import Settings
from vedana.errors import DeletionRefused
from vedana.etl.report import SyncReport
from vedana.etl.sync import sync
from vedana.stores.run_log import recent_runs

SOURCES = ["csv folder", ".grist", "api", "csv export"]
# The guard as shipped (tests/sync/conftest.py lifts the share limit for the other sync tests).
DEFAULT_LIMITS = {k: Settings.model_fields[k].default for k in ("max_delete_share", "max_delete_floor")}
Sync = Callable[..., SyncReport]


@pytest.fixture(params=SOURCES)
def sync_from(
    request: pytest.FixtureRequest,
    settings: Settings,
    api_settings: Settings,
    model: Doc,
    data: Doc,
    fake: FakeGrist,
    tmp_path: Path,
) -> Sync:
    """A sync of the club documents as they are now, from one kind of source."""
    kind = request.param

    def run(**options: Any) -> SyncReport:
        limits = {k: options.pop(k, DEFAULT_LIMITS[k]) for k in DEFAULT_LIMITS}
        if kind in ("api", "csv export"):
            fake.put(model)
            fake.put(data)
            return sync(api_settings.model_copy(update=limits), csv=kind == "csv export", **options)
        where = tmp_path / uuid.uuid4().hex[:8]
        if kind == "csv folder":
            paths = write_csv_folder(model, where / "model"), write_csv_folder(data, where / "data")
        else:
            where.mkdir()
            paths = (
                build_grist_file(model, where / "model.grist"),
                build_grist_file(data, where / "data.grist"),
            )
        return sync(settings.model_copy(update=limits), data_model=paths[0], data=paths[1], **options)

    return run


def rename_table(doc: Doc, old: str, new: str) -> None:
    table = doc.table(old)
    assert table is not None
    table.id = new
    for other in doc.tables:
        for col in other.columns:
            if col.target == old:
                col.type = col.type.replace(f":{old}", f":{new}")


def rename_column(doc: Doc, table_id: str, old: str, new: str) -> None:
    table = doc.table(table_id)
    assert table is not None
    table.col(old).id = new
    for row in table.rows:
        if old in row:
            row[new] = row.pop(old)
    for other in doc.tables:  # as Grist does, references shown by the column follow it
        for col in other.columns:
            if col.target == table_id and col.visible == old:
                col.visible = new


def drop_anchor(model: Doc, noun: str) -> None:
    """The anchor's row left blank (row ids kept): its attributes and links then name no anchor."""
    anchors = model.table("Anchors")
    assert anchors is not None
    anchors.rows = [{"Raw": CellError()} if row.get("noun") == noun else row for row in anchors.rows]


INTEREST_EDGES = {"PERSON_has_INTEREST", "INTEREST_featured_in_CITY"}


def test_renamed_anchor_table_fails_and_keeps_everything(
    sync_from: Sync, data: Doc, pg_engine: Engine
) -> None:
    sync_from()
    before = staging_rows(pg_engine)
    rename_table(data, "Anchor_interest", "Interests")

    with pytest.raises(DeletionRefused) as refused:
        sync_from()

    assert str(refused.value) == (
        "table Anchor_interest of anchor interest is missing from the data document: this sync would "
        "delete all 2 interest nodes, all 2 INTEREST_featured_in_CITY edges and all 4 PERSON_has_INTEREST "
        "edges; rename it back, remove the anchor from the data model, or run with --allow-deletions"
    )
    assert staging_rows(pg_engine) == before
    failed = recent_runs(pg_engine, limit=1, kind="sync")[0]
    assert failed["status"] == "failed" and "Anchor_interest" in failed["error"]

    report = sync_from(allow_deletions=True)

    assert report.nodes["interest"].deleted == 2
    assert {k for k in live_nodes(pg_engine)} == {k for k in EXPECTED_NODES if k[0] != "interest"}
    assert {k[0] for k in live_edges(pg_engine)} == {k[0] for k in EXPECTED_EDGES} - INTEREST_EDGES
    assert report.deletions_allowed[0].startswith("--allow-deletions: all 2 interest nodes deleted (table ")
    assert report.deletions_allowed == [n for n in report.notes if n.startswith("--allow-deletions")]
    logged = recent_runs(pg_engine, limit=1, kind="sync")[0]
    assert logged["status"] == "ok" and logged["counts"]["deletions_allowed"] == report.deletions_allowed


def test_missing_id_column_fails_and_keeps_everything(sync_from: Sync, data: Doc, pg_engine: Engine) -> None:
    sync_from()
    before = staging_rows(pg_engine)
    rename_column(data, "Anchor_person", "person_id", "person_key")

    with pytest.raises(DeletionRefused) as refused:
        sync_from()

    message = str(refused.value)
    assert message.startswith(
        "table Anchor_person has no column person_id or node_id, so every person node would get a new id "
        "(person:<row id>): this sync would delete all 3 person nodes, "
    )
    assert message.endswith(
        "; restore the id column (or check that this is the right data document), or run with --allow-deletions"
    )
    assert staging_rows(pg_engine) == before

    sync_from(allow_deletions=True)
    assert ("person", "p1") not in live_nodes(pg_engine) and ("person", "person:1") in live_nodes(pg_engine)


def test_a_model_without_the_anchor_deletes_its_type(sync_from: Sync, model: Doc, pg_engine: Engine) -> None:
    sync_from()
    drop_anchor(model, "interest")

    report = sync_from()

    assert report.nodes["interest"].deleted == 2 and report.deletions_allowed == []
    assert {k for k in live_nodes(pg_engine)} == {k for k in EXPECTED_NODES if k[0] != "interest"}
    assert {k[0] for k in live_edges(pg_engine)} == {k[0] for k in EXPECTED_EDGES} - INTEREST_EDGES


@pytest.mark.parametrize("sync_from", ["csv folder"], indirect=True)
def test_a_missing_link_table_fails(sync_from: Sync, data: Doc, pg_engine: Engine) -> None:
    sync_from()
    before = staging_rows(pg_engine)
    rename_table(data, "Link_interest_city", "Featured")

    with pytest.raises(
        DeletionRefused, match=r"^no table Link_INTEREST_featured_in_CITY \(nor Link_interest_city\)"
    ):
        sync_from()
    assert staging_rows(pg_engine) == before


@pytest.mark.parametrize("sync_from", ["csv folder"], indirect=True)
def test_a_missing_link_column_fails(sync_from: Sync, data: Doc, pg_engine: Engine) -> None:
    sync_from()
    rename_column(data, "Anchor_city", "city_natives", "natives")

    with pytest.raises(
        DeletionRefused, match=r"^table Anchor_city has no column city_natives named by link "
    ):
        sync_from()


@pytest.mark.parametrize("sync_from", ["csv folder", "api"], indirect=True)
def test_share_of_a_type_over_the_limit_fails(sync_from: Sync, data: Doc, pg_engine: Engine) -> None:
    sync_from()
    before = staging_rows(pg_engine)
    people = data.table("Anchor_person")
    assert people is not None
    kept = [i for i, row in enumerate(people.rows) if row.get("person_id") not in ("p1", "p2")]
    people.row_ids = [people.ids()[i] for i in kept]
    people.rows = [people.rows[i] for i in kept]

    with pytest.raises(DeletionRefused) as refused:
        sync_from(max_delete_floor=1)
    assert str(refused.value).startswith(
        "over VEDANA_MAX_DELETE_SHARE (50%) of a type's rows, and over VEDANA_MAX_DELETE_FLOOR (1) rows: "
        "this sync would delete 2 of 3 person nodes"
    )
    assert staging_rows(pg_engine) == before

    assert sync_from(max_delete_floor=1, max_delete_share=1.0).nodes["person"].deleted == 2


@pytest.mark.parametrize("sync_from", ["csv folder"], indirect=True)
def test_a_small_type_under_the_floor_may_lose_rows(sync_from: Sync, data: Doc, pg_engine: Engine) -> None:
    sync_from()
    people = data.table("Anchor_person")
    assert people is not None
    people.rows = [row if row.get("person_id") == "p3" else {} for row in people.rows]

    report = sync_from()

    assert report.nodes["person"].deleted == 2 and report.deletions_allowed == []


def _cli_sync(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VEDANA_HOME": str(settings.home)}
    for name in ("VEDANA_DEBUG", "DB_CONN_URI"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "vedana", "sync", *args],
        env=env, cwd=settings.home.parent, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_cli_says_one_line_and_exits_1(
    settings: Settings, folders: tuple[Path, Path], pg_engine: Engine
) -> None:
    args = ("--data-model", str(folders[0]), "--data", str(folders[1]))
    assert _cli_sync(settings, *args).returncode == 0
    (folders[1] / "Anchor_interest.csv").rename(folders[1] / "Interests.csv")
    before = staging_rows(pg_engine)

    refused = _cli_sync(settings, *args)

    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "error: table Anchor_interest of anchor interest is missing from the data"
    )
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert staging_rows(pg_engine) == before

    allowed = _cli_sync(settings, *args, "--allow-deletions")
    assert allowed.returncode == 0, allowed.stderr
    assert "note: --allow-deletions: all 2 interest nodes deleted" in allowed.stdout
