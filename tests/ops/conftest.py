"""Fixtures for the operations tests: a blank knowledge base on the session's embedded services,
settings with the hash embedder, the editable CSV knowledge base, and a scripted LLM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ops_kb import HASH_MODEL, KB
from sqlalchemy import Engine, func, select

from standins.fake_llm import FakeLLM
from vedana.config import Settings, reset_settings
from vedana.stores import tables as t
from vedana.stores import vectors
from vedana.stores.graph import GraphStore

_STAGING = (
    t.nodes,
    t.edges,
    t.dm_anchor_attributes,
    t.dm_link_attributes,
    t.dm_anchors,
    t.dm_links,
    t.dm_queries,
    t.dm_prompts,
    t.dm_conversation_lifecycle,
    t.vedana_state,
)


@pytest.fixture
def ops_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The environment the in-process CLI reads: the hash embedder, embedded services only."""
    for name in (
        "DB_CONN_URI",
        "MEMGRAPH_URI",
        "GRIST_SERVER_URL",
        "GRIST_API_KEY",
        "GRIST_DATA_MODEL_DOC_ID",
        "GRIST_DATA_DOC_ID",
        "GRIST_TEST_SET_DOC_ID",
        "EMBEDDINGS_DIM",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EMBEDDINGS_MODEL", HASH_MODEL)
    reset_settings()
    yield
    reset_settings()


@pytest.fixture
def ops_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"embeddings_model": HASH_MODEL})


@pytest.fixture
def blank_kb(pg_engine: Engine, graph: GraphStore) -> Engine:
    """Nothing synced, nothing indexed: empty staging, state, vector tables and graph."""
    with pg_engine.begin() as conn:
        for table in _STAGING:
            conn.execute(table.delete())
        conn.exec_driver_sql(
            f"DROP TABLE IF EXISTS {vectors.NODE_TABLE}, {vectors.EDGE_TABLE}, {vectors.CACHE_TABLE}"
        )
    return pg_engine


@pytest.fixture
def first_run_id(pg_engine: Engine) -> int:
    """Run-log rows of this test have ids above this one."""
    with pg_engine.connect() as conn:
        return int(conn.execute(select(func.coalesce(func.max(t.runs.c.id), 0))).scalar_one())


@pytest.fixture
def kb() -> KB:
    return KB()


@pytest.fixture
def kb_dirs(kb: KB, tmp_path: Path) -> tuple[Path, Path]:
    """The base knowledge base written as CSV folders: (model, data)."""
    return kb.write(tmp_path / "kb")


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm
