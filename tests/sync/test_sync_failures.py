"""A failed sync leaves staging untouched and the next run succeeds; transient HTTP errors are
retried; 401/403/404 end in one clear line without the API key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import Engine

from standins.fake_grist import FakeGrist
from standins.grist_files import Doc
from support.sync_kb import (
    API_KEY,
    DATA_DOC_ID,
    EXPECTED_EDGES,
    EXPECTED_NODES,
    MODEL_DOC_ID,
    live_edges,
    live_nodes,
    staging_rows,
)
from vedana.config import Settings
from vedana.errors import GristAuthError, GristError, GristNotFound, SourceError
from vedana.etl.sync import sync
from vedana.sources.grist_api import GristApiSource
from vedana.sources.grist_csv import GristCsvSource
from vedana.sources.grist_http import GristClient
from vedana.stores.run_log import recent_runs


def quick_client(fake: FakeGrist, doc_id: str, key: str | None = API_KEY, retries: int = 3) -> GristClient:
    """A client with millisecond backoff, so retry tests do not sleep for seconds."""
    return GristClient(fake.url, doc_id, key, retries=retries, backoff_s=0.001, max_backoff_s=0.01)


def quick_sources(fake: FakeGrist, *, page_size: int = 2, retries: int = 3) -> dict[str, GristApiSource]:
    return {
        "data_model": GristApiSource(quick_client(fake, MODEL_DOC_ID, retries=retries), rows_via="records"),
        "data": GristApiSource(quick_client(fake, DATA_DOC_ID, retries=retries), page_size=page_size),
    }


def test_paged_reads_give_the_same_result(settings: Settings, fake: FakeGrist, pg_engine: Engine) -> None:
    sync(settings, **quick_sources(fake, page_size=2))

    assert live_nodes(pg_engine) == EXPECTED_NODES
    assert live_edges(pg_engine) == EXPECTED_EDGES
    # Anchor_person has 6 rows: pages of 2 → 3 full pages and an empty one; plus COUNT(*).
    sql_requests = fake.paths("POST /api/docs/clubDataDoc001/sql")
    # 10 tables are planned (one COUNT each); Anchor_person's 6 rows take 4 pages of 2.
    assert len(sql_requests) > 10 + 4


def test_transient_errors_are_retried(settings: Settings, fake: FakeGrist, pg_engine: Engine) -> None:
    fake.fail("/sql", status=503, times=2, skip=3)  # two 503s in the middle of the reads
    fake.fail("/tables/Anchor_city/columns", drop=True, times=1)  # a dropped connection
    fake.fail("/records", status=502, times=1)

    report = sync(settings, **quick_sources(fake))

    assert report.changed
    assert live_nodes(pg_engine) == EXPECTED_NODES and live_edges(pg_engine) == EXPECTED_EDGES
    assert all(f.times == 0 for f in fake.failures)  # every failure was hit, and got past


def test_csv_download_cut_off_midway_is_resumed(
    api_settings: Settings, fake: FakeGrist, pg_engine: Engine
) -> None:
    fake.fail("download/csv?tableId=Anchor_person", cut_body=True, times=1)
    client = quick_client(fake, DATA_DOC_ID)

    sync(api_settings, csv=True, data=GristCsvSource(client))

    assert fake.failures[0].times == 0
    assert live_nodes(pg_engine) == EXPECTED_NODES and live_edges(pg_engine) == EXPECTED_EDGES


@pytest.mark.parametrize(
    "failure",
    [
        {"match": "/sql", "status": 500, "times": 100, "skip": 6},  # 5xx outlasting the retries
        {"match": "/sql", "drop": True, "times": 100, "skip": 6},  # the network goes away
        {"match": "/tables/Link_interest_city/columns", "status": 404, "times": 1},  # a table vanishes
    ],
)
def test_failure_midway_leaves_previous_state(
    settings: Settings, fake: FakeGrist, data: Doc, pg_engine: Engine, failure: dict
) -> None:
    sync(settings, **quick_sources(fake))
    before = staging_rows(pg_engine)
    data.table("Anchor_city").rows[0]["city_name"] = "Lisboa"  # a change the failed run would write
    data.table("Anchor_person").rows.pop(0)
    fake.fail(**failure)

    with pytest.raises(GristError):
        # --full: every page is downloaded again (a plain re-sync would fetch only the two
        # changed rows), so the failure comes after several pages have arrived.
        sync(settings, **quick_sources(fake, retries=2), full=True)

    assert staging_rows(pg_engine) == before  # nothing half-written
    last = recent_runs(pg_engine, limit=1, kind="sync")[0]
    assert last["status"] == "failed" and last["error"]

    fake.failures.clear()
    report = sync(settings, **quick_sources(fake))
    assert report.nodes["city"].updated == 1
    assert live_nodes(pg_engine)[("city", "c1")] == {"city_name": "Lisboa"}
    assert recent_runs(pg_engine, limit=1, kind="sync")[0]["status"] == "ok"


def test_bad_key_is_one_clear_error_without_the_key(settings: Settings, fake: FakeGrist) -> None:
    wrong = "wrong-key-5b8e2d41c7"
    with pytest.raises(GristAuthError) as caught:
        sync(settings, **{k: GristApiSource(quick_client(fake, d, key=wrong)) for k, d in _docs()})
    message = str(caught.value)
    assert "invalid API key" in message and "GRIST_API_KEY" in message
    assert wrong not in message and API_KEY not in message and "\n" not in message
    assert len(fake.paths("/states")) == 1  # 401 is not retried


def test_no_key_means_no_access(settings: Settings, fake: FakeGrist) -> None:
    with pytest.raises(GristAuthError, match="No view access"):
        sync(settings, **{k: GristApiSource(quick_client(fake, d, key=None)) for k, d in _docs()})
    assert len(fake.paths()) == 1


def test_unknown_document_and_table(settings: Settings, fake: FakeGrist) -> None:
    with pytest.raises(GristNotFound, match=r"not found .*document not found.*check the document id"):
        sync(settings, data_model=GristApiSource(quick_client(fake, "NoSuchDoc123")), data_model_only=True)
    assert len(fake.paths("NoSuchDoc123")) == 1

    client = quick_client(fake, DATA_DOC_ID)
    with pytest.raises(GristNotFound, match='Table not found "Nope"'):
        client.column_records("Nope")


def test_missing_anchors_table_is_a_source_error(settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "Links.csv").write_text("sentence,anchor1,anchor2\n")
    with pytest.raises(SourceError, match="no `Anchors` table"):
        sync(settings, data_model=tmp_path, data_model_only=True)
    (tmp_path / "Anchors.csv").write_text("noun,description\n,\n")
    with pytest.raises(SourceError, match="describes no anchors"):
        sync(settings, data_model=tmp_path, data_model_only=True)


def test_wrong_data_document_does_not_wipe_staging(
    settings: Settings, pg_engine: Engine, folders: tuple[Path, Path]
) -> None:
    """Pointing --data at a document without any anchor table is refused, not synced as
    "every node deleted"."""
    sync(settings, data_model=folders[0], data=folders[1])
    before = staging_rows(pg_engine)
    with pytest.raises(SourceError, match="no Anchor_<noun> table for any anchor"):
        sync(settings, data_model=folders[0], data=folders[0])  # the model folder, by mistake
    assert staging_rows(pg_engine) == before


def test_cli_prints_one_line_and_hides_the_key(settings: Settings, fake: FakeGrist, tmp_path: Path) -> None:
    """The real console script: exit 1, one `error:` line on stderr, the key nowhere."""
    wrong = "wrong-key-for-cli-3c9d"
    env = {
        **os.environ,
        "VEDANA_HOME": str(settings.home),
        "GRIST_SERVER_URL": fake.url,
        "GRIST_API_KEY": wrong,
        "GRIST_DATA_MODEL_DOC_ID": MODEL_DOC_ID,
        "GRIST_DATA_DOC_ID": DATA_DOC_ID,
    }
    env.pop("VEDANA_DEBUG", None)
    env.pop("DB_CONN_URI", None)
    done = subprocess.run(
        [sys.executable, "-m", "vedana", "sync"],
        env=env,
        cwd=tmp_path,  # no stray .env
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ")
    assert "rejected the API key" in done.stderr
    assert wrong not in done.stderr + done.stdout


def _docs() -> list[tuple[str, str]]:
    return [("data_model", MODEL_DOC_ID), ("data", DATA_DOC_ID)]


def test_secret_str_key_from_settings_is_used(settings: Settings, fake: FakeGrist, pg_engine: Engine) -> None:
    """The configured path (no sources passed in) builds clients from GRIST_* settings."""
    configured = settings.model_copy(
        update={
            "grist_server_url": fake.url,
            "grist_api_key": SecretStr(API_KEY),
            "grist_data_model_doc_id": MODEL_DOC_ID,
            "grist_data_doc_id": DATA_DOC_ID,
        }
    )
    report = sync(configured)
    assert report.sources["data"] == f"Grist document {DATA_DOC_ID} on {fake.url}"
    assert live_nodes(pg_engine) == EXPECTED_NODES
