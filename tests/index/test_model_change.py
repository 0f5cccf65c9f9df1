"""Changing the embedding model: announced first, everything re-embedded, no vectors of the old
model left anywhere; a wrong-sized model answer stops the run without moving the watermark."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from support.index_kb import EXPECTED_EDGE_VALUES, EXPECTED_NODE_VALUES, CountingEmbedder
from vedana.embeddings.hashing import HashEmbedder
from vedana.errors import EmbeddingError
from vedana.etl.index import index
from vedana.stores import vectors as vs
from vedana.stores.staging import get_state

pytestmark = pytest.mark.slow


def column_dims(engine: Engine) -> set[int]:
    with engine.connect() as conn:
        return set(
            conn.exec_driver_sql(
                "SELECT atttypmod FROM pg_attribute WHERE attname = 'embedding' "
                f"AND attrelid IN ('{vs.NODE_TABLE}'::regclass, '{vs.EDGE_TABLE}'::regclass)"
            ).scalars()
        )


def stored_models(engine: Engine) -> set[tuple[str, int]]:
    with engine.connect() as conn:
        return {tuple(r) for r in conn.exec_driver_sql(f"SELECT DISTINCT model, dim FROM {vs.CACHE_TABLE}")}


def vector_dims(engine: Engine) -> set[int]:
    with engine.connect() as conn:
        return set(
            conn.exec_driver_sql(
                f"SELECT vector_dims(embedding) FROM {vs.NODE_TABLE} "
                f"UNION SELECT vector_dims(embedding) FROM {vs.EDGE_TABLE}"
            ).scalars()
        )


def test_model_change_reembeds_everything_and_keeps_no_old_vectors(
    settings, shop, graph, local_embedder
) -> None:
    index(settings, engine=shop, graph=graph, embedder=local_embedder)
    assert stored_models(shop) == {("all-MiniLM-L6-v2", 384)}

    events: list[str] = []
    new = CountingEmbedder(HashEmbedder(64))
    original_embed = new.embed
    new.embed = lambda texts: (events.append("embed"), original_embed(texts))[1]  # type: ignore[method-assign]
    report = index(settings, engine=shop, graph=graph, embedder=new, on_notice=lambda m: events.append(m))

    assert report.model_changed and report.vectors_rebuilt
    assert "from all-MiniLM-L6-v2 (384 dimensions) to hash-64 (64 dimensions)" in events[0]  # said first
    assert events[1:] and set(events[1:]) == {"embed"}
    total = EXPECTED_NODE_VALUES + EXPECTED_EDGE_VALUES
    assert report.values_written == total and report.texts_embedded == len(set(new.texts)) == len(new.texts)
    assert column_dims(shop) == {64} and vector_dims(shop) == {64}
    assert stored_models(shop) == {("hash-64", 64)}
    with shop.connect() as conn:
        assert vs.recorded_model(conn) == vs.ModelInfo("hash-64", 64)
    assert report.graph_rows == 0  # the graph did not need to change

    # Searching with the old model is refused with the way out.
    with pytest.raises(EmbeddingError, match=r"holds hash-64 .* run `vedana index`"):
        vs.search_text(settings, "Product", "name", "bike", engine=shop, embedder=local_embedder)
    hits = vs.search_text(
        settings, "Product", "name", "mountain bike", engine=shop, embedder=HashEmbedder(64)
    )
    assert hits[0].node_id == "p1"


def test_wide_models_are_indexed_as_halfvec(settings, shop, graph) -> None:
    wide = HashEmbedder(2100)  # above pgvector's 2000-dimension HNSW limit for `vector`
    index(settings, engine=shop, graph=graph, embedder=wide)
    with shop.connect() as conn:
        indexdef = conn.exec_driver_sql(
            f"SELECT indexdef FROM pg_indexes WHERE indexname = '{vs.NODE_TABLE}_hnsw'"
        ).scalar()
    assert "halfvec" in indexdef
    hits = vs.search_text(settings, "Product", "name", "leather wallet", engine=shop, embedder=wide)
    assert hits[0].node_id == "p4"


class WrongSize(CountingEmbedder):
    """Claims 384 dimensions, answers with 383: a misconfigured provider."""

    def __init__(self) -> None:
        super().__init__(HashEmbedder(383))
        self.model, self.dim = "all-MiniLM-L6-v2", 384


def test_wrong_sized_vectors_stop_the_run_cleanly(settings, shop, graph) -> None:
    with pytest.raises(EmbeddingError, match="returned 383-dimensional vectors but 384 were expected"):
        index(settings, engine=shop, graph=graph, embedder=WrongSize())
    with shop.connect() as conn:
        assert get_state(conn, "index.vectors.version") is None
    assert vector_dims(shop) == set()


class CrashOnFirstBatch(CountingEmbedder):
    def embed(self, texts):
        raise KeyboardInterrupt("simulated kill right after the tables were switched")


def test_kill_after_the_model_switch_is_repaired(settings, shop, graph, local_embedder) -> None:
    index(settings, engine=shop, graph=graph, embedder=local_embedder)
    with pytest.raises(KeyboardInterrupt):
        index(settings, engine=shop, graph=graph, embedder=CrashOnFirstBatch(HashEmbedder(64)))
    with shop.connect() as conn:
        assert vs.recorded_model(conn) == vs.ModelInfo("hash-64", 64)
        assert get_state(conn, "index.vectors.version") is None
    assert vector_dims(shop) == set()

    report = index(settings, engine=shop, graph=graph, embedder=HashEmbedder(64))
    assert report.values_written == EXPECTED_NODE_VALUES + EXPECTED_EDGE_VALUES
    assert vector_dims(shop) == {64}
