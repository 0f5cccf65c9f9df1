"""Fixtures for sync tests: blank staging per test, the club documents, a fake Grist serving
them, and settings pointing at it; a generated people knowledge base to copy and edit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from bench.generate import generate
from standins.fake_grist import FakeGrist
from standins.grist_files import Doc, write_csv_folder
from support.sync_kb import API_KEY, blank_staging, club_data, club_model, grist_settings
from vedana.config import Settings


@pytest.fixture(scope="session")
def settings(settings: Settings) -> Settings:
    """The session's settings, with no share of a type too large to delete: these tests edit and
    delete freely; the deletion guard's own tests (`test_deletion_guard.py`) set its limits."""
    return settings.model_copy(update={"max_delete_share": 1.0})


@pytest.fixture(scope="session")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """400 rows of the bench's `people` shape as a CSV folder (seed 7), read only: tests copy it
    before they edit it."""
    out = tmp_path_factory.mktemp("people") / "kb"
    generate("people", 400, 7, out, "csv")
    return out


@pytest.fixture(autouse=True)
def blank(pg_engine: Engine) -> Engine:
    """Every sync test starts from an empty staging."""
    blank_staging(pg_engine)
    return pg_engine


@pytest.fixture
def model() -> Doc:
    return club_model()


@pytest.fixture
def data() -> Doc:
    return club_data()


@pytest.fixture
def fake(model: Doc, data: Doc) -> Iterator[FakeGrist]:
    with FakeGrist(model, data, api_key=API_KEY) as server:
        yield server


@pytest.fixture
def api_settings(settings: Settings, fake: FakeGrist) -> Settings:
    return grist_settings(settings, fake.url)


@pytest.fixture
def folders(tmp_path: Path, model: Doc, data: Doc) -> tuple[Path, Path]:
    """The two documents as CSV folders (the CSV export of every table)."""
    return write_csv_folder(model, tmp_path / "model"), write_csv_folder(data, tmp_path / "data")
