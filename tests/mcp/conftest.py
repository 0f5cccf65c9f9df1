"""Fixtures for the MCP tests: the agent tests' small knowledge base, staged and indexed with
real embeddings, and the environment a desktop assistant would launch `vedana mcp` with."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from standins.fake_llm import FakeLLM
from support.agent_kb import data_model, put_into_staging
from vedana.config import Settings
from vedana.datamodel import DataModel
from vedana.stores.graph import GraphStore


@pytest.fixture(scope="session")
def local_embedder(settings: Settings):  # -> vedana.embeddings.Embedder
    from vedana.embeddings import get_embedder

    return get_embedder(settings)


@pytest.fixture
def mcp_kb(graph: GraphStore, pg_engine, settings: Settings, local_embedder) -> DataModel:
    from vedana.etl.index import index

    dm = data_model()
    put_into_staging(pg_engine, dm)
    index(settings, full=True, engine=pg_engine, graph=graph, embedder=local_embedder)
    return dm


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


@pytest.fixture
def server_env() -> dict[str, str]:
    """The session's VEDANA_HOME, no provider keys, no remote services."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    for name in ("DB_CONN_URI", "MEMGRAPH_URI", "VEDANA_LLM_API_BASE", "MODEL", "VEDANA_MCP_TOKEN"):
        env.pop(name, None)
    return env
