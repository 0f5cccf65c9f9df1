"""End to end on a sample CSV folder: `sync` into staging, `index` into the graph and pgvector with
the real local model; the counts match the sample's expected figures and search finds values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.index_kb import CountingEmbedder
from support.staging_rows import reset_staging
from vedana.etl.index import index
from vedana.etl.sync import sync
from vedana.stores import vectors as vs

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "regulations"


def test_regulations_sample_synced_and_indexed(settings, pg_engine, graph, local_embedder) -> None:
    expected = json.loads((SAMPLE / "expected.json").read_text())
    reset_staging(pg_engine)
    sync(settings, data_model=SAMPLE / "model", data=SAMPLE / "data")
    embedder = CountingEmbedder(local_embedder)

    report = index(settings, engine=pg_engine, graph=graph, embedder=embedder)

    assert graph.counts() == {"nodes": expected["nodes"], "edges": expected["edges"]}
    with pg_engine.connect() as conn:
        per_target = dict(
            conn.exec_driver_sql(
                f"SELECT node_type || '.' || attribute_name, count(*) FROM {vs.NODE_TABLE} GROUP BY 1 "
                f"UNION ALL SELECT edge_label || '.' || attribute_name, count(*) FROM {vs.EDGE_TABLE} GROUP BY 1"
            ).all()
        )
    assert per_target == expected["embeddable_values"]
    # Each distinct text went to the model once, however many rows hold it.
    assert len(embedder.texts) == len(set(embedder.texts)) == report.texts_embedded
    assert report.texts_embedded <= sum(expected["embeddable_distinct_texts"].values())
    assert report.values_written == sum(expected["embeddable_values"].values())

    hits = vs.search_text(
        settings,
        "regulation",
        "regulation_title",
        "logging fridge temperatures",
        engine=pg_engine,
        embedder=local_embedder,
    )
    assert hits[0].node_id == "reg:CS-01"

    again = index(settings, engine=pg_engine, graph=graph, embedder=embedder)
    assert not again.changed and len(embedder.texts) == report.texts_embedded
