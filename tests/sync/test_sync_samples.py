"""Both samples in `samples/` sync to the counts their `expected.json` states, and a re-run is a no-op."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from vedana.config import Settings
from vedana.etl.sync import sync
from vedana.stores import tables as t

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def live_counts(engine: Engine, table, column) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(select(column, func.count()).where(~table.c.deleted).group_by(column))
        return dict(rows.all())


@pytest.mark.parametrize("name", ["people", "regulations"])
def test_sample_counts(name: str, settings: Settings, pg_engine: Engine) -> None:
    folder = SAMPLES / name
    expected = json.loads((folder / "expected.json").read_text())

    report = sync(settings, data_model=folder / "model", data=folder / "data")

    assert live_counts(pg_engine, t.nodes, t.nodes.c.node_type) == expected["nodes"]
    assert live_counts(pg_engine, t.edges, t.edges.c.edge_label) == expected["edges"]
    dropped = expected["dropped"]
    assert {
        k: v.skipped["duplicate id"] for k, v in report.nodes.items() if v.skipped["duplicate id"]
    } == dropped["duplicate_node_ids"]
    assert {
        k: v.skipped["dangling endpoint"] for k, v in report.edges.items() if v.skipped["dangling endpoint"]
    } == (dropped["dangling_edges"])
    assert {
        k: v.skipped["duplicate edge"] for k, v in report.edges.items() if v.skipped["duplicate edge"]
    } == dropped["duplicate_edges_collapsed"]
    assert [f"{n}.csv" for n in report.ignored_tables] == dropped["ignored_tables"]
    dropped_columns = {
        table: stats.dropped_columns
        for stats in (*report.nodes.values(), *report.edges.values())
        for table in stats.tables
        if stats.dropped_columns and "." not in table  # "Anchor_x.col" names a link column
    }
    assert dropped_columns == dropped["undescribed_columns"]

    again = sync(settings, data_model=folder / "model", data=folder / "data")
    assert not again.changed
