"""Fixtures for the agent tests: a scripted OpenAI-compatible model and a small knowledge base."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from standins.fake_llm import FakeLLM
from support.agent_kb import data_model, load_graph, save
from vedana.config import Settings
from vedana.datamodel import DataModel
from vedana.stores.graph import GraphStore


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


@pytest.fixture
def agent_settings(settings: Settings, fake_llm: FakeLLM) -> Settings:
    """Settings that send the agent and the filter to the scripted model, reached through litellm."""
    return settings.model_copy(
        update={
            "model": fake_llm.model("agent"),
            "filter_model": fake_llm.model("filter"),
            "llm_api_base": fake_llm.api_base,
            "enable_dm_filtering": True,
            "agent_max_rounds": 5,
        }
    )


@pytest.fixture(scope="session")
def local_embedder(settings: Settings):  # -> vedana.embeddings.Embedder
    """The bundled all-MiniLM-L6-v2, loaded once for the session."""
    from vedana.embeddings import get_embedder

    return get_embedder(settings)


@pytest.fixture
def indexed_kb(graph: GraphStore, pg_engine, settings: Settings, local_embedder) -> DataModel:
    """The hand-built knowledge base put into staging and indexed by `vedana index`: graph and
    real embeddings."""
    from support.agent_kb import put_into_staging
    from vedana.etl.index import index

    dm = data_model()
    put_into_staging(pg_engine, dm)
    index(settings, full=True, engine=pg_engine, graph=graph, embedder=local_embedder)
    return dm


SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.fixture
def people_sample(graph: GraphStore, pg_engine, settings: Settings, local_embedder) -> Path:
    """samples/people synced by `vedana sync` and indexed by `vedana index` (graph + vectors)."""
    from vedana.etl.index import index
    from vedana.etl.sync import sync

    folder = SAMPLES / "people"
    # full: other fixtures put their own rows into staging behind sync's back, so "the files did
    # not change since the last sync" would leave theirs in place.
    sync(settings, data_model=folder / "model", data=folder / "data", full=True)
    index(settings, full=True, engine=pg_engine, graph=graph, embedder=local_embedder)
    return folder


@pytest.fixture
def kb(graph: GraphStore, pg_engine) -> DataModel:
    """The hand-built knowledge base, saved as the synced data model and loaded into the graph."""
    dm = data_model()
    save(pg_engine, dm)
    load_graph(graph)
    return dm
