"""Fixtures for index tests: the shop knowledge base in staging, the real local embedder (loaded
once per session) and counting wrappers around it and the graph."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from support.index_kb import CountingEmbedder, CountingGraph, load_shop
from vedana.embeddings import Embedder
from vedana.stores.graph import GraphStore


@pytest.fixture
def shop(pg_engine: Engine) -> Engine:
    """A blank index and the shop knowledge base in staging."""
    return load_shop(pg_engine)


@pytest.fixture(scope="session")
def local_embedder(settings) -> Embedder:
    """The real bundled all-MiniLM-L6-v2 (the model loads once per process)."""
    from vedana.embeddings import get_embedder

    return get_embedder(settings)


@pytest.fixture
def embedder(local_embedder: Embedder) -> CountingEmbedder:
    return CountingEmbedder(local_embedder)


@pytest.fixture
def counting_graph(graph: GraphStore) -> CountingGraph:
    return CountingGraph(graph)
