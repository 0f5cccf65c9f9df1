"""`index()` on the real embedded Postgres + FalkorDB with the real local model: end state equals
staging, only changes are applied, and interrupted runs are repaired."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import Engine

from support.index_kb import (
    EXPECTED_EDGE_VALUES,
    EXPECTED_NODE_VALUES,
    PRODUCTS,
    CountingEmbedder,
    CountingGraph,
    product_attributes,
    shop_model,
)
from support.staging_rows import live_counts, put_data_model, put_edge, put_node, tombstone_node
from vedana.etl.index import GRAPH_VERSION_KEY, index
from vedana.stores import vectors as vs
from vedana.stores.graph import GraphStore
from vedana.stores.run_log import recent_runs
from vedana.stores.staging import get_state

pytestmark = pytest.mark.slow


def vector_rows(engine: Engine) -> dict[tuple[Any, ...], tuple[str, str]]:
    """Every embedding row: key -> (value, embedding as text), to compare end states exactly."""
    with engine.connect() as conn:
        nodes = conn.exec_driver_sql(
            f"SELECT 'node', node_type, node_id, attribute_name, attribute_value, embedding::text FROM {vs.NODE_TABLE}"
        ).all()
        edges = conn.exec_driver_sql(
            f"SELECT 'edge', edge_label, from_node_id || '>' || to_node_id, attribute_name, attribute_value, "
            f"embedding::text FROM {vs.EDGE_TABLE}"
        ).all()
    return {tuple(r[:4]): (r[4], r[5]) for r in [*nodes, *edges]}


def graph_state(graph: GraphStore) -> tuple[list[Any], list[Any]]:
    nodes = graph.query(
        "MATCH (n) RETURN labels(n)[0] AS label, properties(n) AS props ORDER BY label, n.id"
    ).rows
    edges = graph.query(
        "MATCH (a)-[r]->(b) RETURN type(r) AS type, a.id AS src, b.id AS dst, properties(r) AS props "
        "ORDER BY type, src, dst"
    ).rows
    return nodes, edges


def run(settings, engine: Engine, graph: GraphStore, embedder, **kwargs: Any):
    return index(settings, engine=engine, graph=graph, embedder=embedder, **kwargs)


def test_index_makes_graph_and_vectors_equal_to_staging(settings, shop, counting_graph, embedder) -> None:
    report = run(settings, shop, counting_graph, embedder)

    assert counting_graph.counts() == live_counts(shop)
    rows = vector_rows(shop)
    assert sum(1 for k in rows if k[0] == "node") == EXPECTED_NODE_VALUES
    assert sum(1 for k in rows if k[0] == "edge") == EXPECTED_EDGE_VALUES
    # Identifiers, numbers, empty and missing values are not embedded.
    assert {k[3] for k in rows if k[0] == "node"} == {"name", "description"}
    assert ("node", "Product", "p6", "description") not in rows
    assert report.texts_embedded == len(embedder.texts) == len(set(embedder.texts))
    assert report.values_written == EXPECTED_NODE_VALUES + EXPECTED_EDGE_VALUES
    assert (report.nodes_upserted, report.edges_upserted) == (10, 4)
    # Node properties are the staging attributes plus `id`; edges carry theirs.
    [bike] = counting_graph.query("MATCH (p:Product {id: 'p1'}) RETURN properties(p) AS props").rows
    assert bike["props"] == {**product_attributes("p1"), "id": "p1"}
    [edge] = counting_graph.query(
        "MATCH (:Product {id: 'p1'})-[r:`sold at`]->(s:Store) RETURN r.note AS note, s.id AS s"
    ).rows
    assert edge == {"note": "front window display", "s": "s1"}
    [logged] = recent_runs(shop, limit=1, kind="index")
    assert logged["status"] == "ok" and logged["counts"]["texts_embedded"] == report.texts_embedded


def test_second_run_does_no_embedding_and_no_graph_writes(settings, shop, counting_graph, embedder) -> None:
    run(settings, shop, counting_graph, embedder)
    before = vector_rows(shop)
    calls, writes = embedder.calls, counting_graph.write_calls

    report = run(settings, shop, counting_graph, embedder)

    assert (embedder.calls, counting_graph.write_calls) == (calls, writes)
    assert not report.changed and report.graph_rows == 0 and report.texts_embedded == 0
    assert vector_rows(shop) == before
    assert recent_runs(shop, limit=1, kind="index")[0]["status"] == "unchanged"


def test_edited_value_is_reembedded_exactly_once(settings, shop, counting_graph, embedder) -> None:
    run(settings, shop, counting_graph, embedder)
    before = vector_rows(shop)
    embedder.texts.clear()
    writes = counting_graph.rows_written

    with shop.begin() as conn:
        put_node(conn, "Product", "p2", {**product_attributes("p2"), "description": "Heats water for tea"})
    report = run(settings, shop, counting_graph, embedder)

    assert embedder.texts == ["Heats water for tea"]
    assert (report.texts_embedded, report.values_written, report.values_reused) == (1, 1, 0)
    assert counting_graph.rows_written - writes == 1  # just that node
    after = vector_rows(shop)
    key = ("node", "Product", "p2", "description")
    assert after[key][0] == "Heats water for tea" and after[key][1] != before[key][1]
    assert {k: v for k, v in after.items() if k != key} == {k: v for k, v in before.items() if k != key}
    [desc] = counting_graph.query("MATCH (p:Product {id: 'p2'}) RETURN p.description AS d").rows
    assert desc["d"] == "Heats water for tea"

    # Changing it back costs no embedding at all: the old text is still cached.
    with shop.begin() as conn:
        put_node(conn, "Product", "p2", product_attributes("p2"))
    report = run(settings, shop, counting_graph, embedder)
    assert embedder.texts == ["Heats water for tea"]
    assert (report.texts_embedded, report.values_reused) == (0, 1)
    assert vector_rows(shop) == before


def test_same_new_text_in_many_rows_is_embedded_once(settings, shop, counting_graph, embedder) -> None:
    run(settings, shop, counting_graph, embedder)
    embedder.texts.clear()
    with shop.begin() as conn:
        for pid in ("p6", "p7"):
            put_node(
                conn, "Product", pid, {**product_attributes(pid), "description": "Handy for the home office"}
            )
    report = run(settings, shop, counting_graph, embedder)
    assert embedder.texts == ["Handy for the home office"]
    assert (report.texts_embedded, report.values_written) == (1, 2)


def test_removed_attribute_leaves_graph_and_vectors(settings, shop, counting_graph, embedder) -> None:
    run(settings, shop, counting_graph, embedder)
    with shop.begin() as conn:
        attrs = product_attributes("p1")
        del attrs["description"], attrs["category"]
        put_node(conn, "Product", "p1", attrs)
    report = run(settings, shop, counting_graph, embedder)
    assert report.values_deleted == 1 and report.texts_embedded == 0
    assert ("node", "Product", "p1", "description") not in vector_rows(shop)
    [props] = counting_graph.query("MATCH (p:Product {id: 'p1'}) RETURN keys(p) AS k").rows
    assert sorted(props["k"]) == ["id", "name", "price", "product_id"]


def test_deleted_rows_disappear_from_graph_and_vectors(settings, shop, counting_graph, embedder) -> None:
    run(settings, shop, counting_graph, embedder)
    with shop.begin() as conn:
        tombstone_node(conn, "Product", "p1")  # also tombstones its `sold at` edge
        put_edge(
            conn, "sold at", "Product", "p3", "Store", "s2", {"stock": 3, "note": "back shelf"}, deleted=True
        )

    report = run(settings, shop, counting_graph, embedder)

    assert (report.nodes_deleted, report.edges_deleted) == (1, 2)
    assert counting_graph.counts() == live_counts(shop)
    assert counting_graph.query("MATCH (p {id: 'p1'}) RETURN p").rows == []
    keys = vector_rows(shop)
    assert not [k for k in keys if k[2] == "p1" or k[2].startswith("p1>") or k[2] == "p3>s2"]
    assert report.values_deleted == 2 + 2  # p1's name and description, two edge notes
    assert report.texts_embedded == 0


def test_full_rebuild_gives_the_same_end_state_without_embedding(
    settings, shop, counting_graph, embedder
) -> None:
    run(settings, shop, counting_graph, embedder)
    with shop.begin() as conn:
        tombstone_node(conn, "Product", "p4")
        put_node(conn, "Store", "s3", {"name": "Harbour Kiosk"})
    run(settings, shop, counting_graph, embedder)
    graph_before, vectors_before = graph_state(counting_graph), vector_rows(shop)
    texts = len(embedder.texts)

    report = run(settings, shop, counting_graph, embedder, full=True)

    assert report.graph_rebuilt and report.vectors_rebuilt
    assert graph_state(counting_graph) == graph_before
    assert vector_rows(shop) == vectors_before
    assert len(embedder.texts) == texts  # every vector came from the cache
    assert report.values_reused == report.values_written == len(vectors_before)


def test_plan_reports_work_and_changes_nothing(settings, shop, counting_graph, embedder) -> None:
    plan = run(settings, shop, counting_graph, embedder, plan=True)

    assert plan.plan and (plan.nodes_upserted, plan.edges_upserted) == (10, 4)
    assert plan.texts_embedded == EXPECTED_NODE_VALUES + EXPECTED_EDGE_VALUES
    assert plan.tokens_estimated > 0
    assert embedder.calls == 0 and counting_graph.write_calls == 0
    assert counting_graph.counts() == {"nodes": {}, "edges": {}}
    with shop.connect() as conn:
        assert vs.recorded_model(conn) is None and get_state(conn, GRAPH_VERSION_KEY) is None

    report = run(settings, shop, counting_graph, embedder)
    assert (report.texts_embedded, report.nodes_upserted) == (plan.texts_embedded, plan.nodes_upserted)

    with shop.begin() as conn:
        put_node(conn, "Product", "p2", {**product_attributes("p2"), "description": "Heats water for tea"})
    plan = run(settings, shop, counting_graph, embedder, plan=True)
    assert (plan.nodes_upserted, plan.texts_embedded, plan.values_written) == (1, 1, 1)


class FailingEmbedder(CountingEmbedder):
    """Embeds the first `ok_calls` batches, then fails like a crash would."""

    def __init__(self, inner, ok_calls: int) -> None:
        super().__init__(inner)
        self.ok_calls = ok_calls
        self.batch_size = 4  # several batches for the small knowledge base

    def embed(self, texts):
        if self.calls >= self.ok_calls:
            raise KeyboardInterrupt("simulated kill halfway through embedding")
        return super().embed(texts)


def test_interrupted_run_is_repaired_by_the_next(settings, shop, graph, local_embedder) -> None:
    crashing_graph = CountingGraph(graph)
    crashing_graph.fail_after = 1
    with pytest.raises(KeyboardInterrupt):
        run(settings, shop, crashing_graph, CountingEmbedder(local_embedder), graph_batch_size=3)
    with shop.connect() as conn:
        assert get_state(conn, GRAPH_VERSION_KEY) is None
    assert recent_runs(shop, limit=1, kind="index")[0]["status"] == "failed"

    # Graph done, embedding killed after two batches: those stay cached, nothing else moves on.
    failing = FailingEmbedder(local_embedder, ok_calls=2)
    with pytest.raises(KeyboardInterrupt):
        run(settings, shop, CountingGraph(graph), failing)
    assert len(failing.texts) == 8
    with shop.connect() as conn:
        assert get_state(conn, "index.vectors.version") is None
        # The graph's snapshot ran beside the embedding: the graph is recorded as done all the same.
        assert get_state(conn, GRAPH_VERSION_KEY) is not None
    assert vector_rows(shop) == {}

    embedder = CountingEmbedder(local_embedder)
    report = run(settings, shop, CountingGraph(graph), embedder)
    assert graph.counts() == live_counts(shop)
    assert len(vector_rows(shop)) == EXPECTED_NODE_VALUES + EXPECTED_EDGE_VALUES
    assert report.texts_embedded == len(embedder.texts) == EXPECTED_NODE_VALUES + EXPECTED_EDGE_VALUES - 8
    assert not set(embedder.texts) & set(failing.texts)


def test_full_rebuild_killed_after_clearing_the_graph_is_repaired(
    settings, shop, graph, local_embedder
) -> None:
    run(settings, shop, CountingGraph(graph), local_embedder)
    crashing = CountingGraph(graph)
    crashing.fail_after = 1
    with pytest.raises(KeyboardInterrupt):
        run(settings, shop, crashing, local_embedder, full=True, graph_batch_size=2)
    assert graph.counts() != live_counts(shop)  # cleared, then only one batch written

    notices: list[str] = []
    report = run(settings, shop, CountingGraph(graph), local_embedder, on_notice=notices.append)
    assert report.graph_rebuilt and not notices  # known to be unfinished, not discovered by the check
    assert graph.counts() == live_counts(shop)


def test_lost_graph_is_rebuilt_on_the_next_run(settings, shop, counting_graph, embedder) -> None:
    run(settings, shop, counting_graph, embedder)
    counting_graph.query("MATCH (n) DETACH DELETE n")  # e.g. the graph server lost its data
    notices: list[str] = []
    report = run(settings, shop, counting_graph, embedder, on_notice=notices.append)
    assert report.graph_rebuilt and notices and "rebuilding the graph" in notices[0]
    assert counting_graph.counts() == live_counts(shop)


def test_data_model_change_adds_and_removes_embedded_attributes(
    settings, shop, counting_graph, embedder
) -> None:
    run(settings, shop, counting_graph, embedder)
    embedder.texts.clear()
    dm = shop_model()
    embeddable = {"name", "category"}  # description no longer, category now
    attributes = tuple(replace(a, embeddable=a.name in embeddable) for a in dm.anchors[0].attributes)
    dm.anchors[0] = replace(dm.anchors[0], attributes=attributes)
    put_data_model(shop, dm)

    report = run(settings, shop, counting_graph, embedder)

    assert embedder.texts == ["misc"]  # category, the same text in every product
    keys = vector_rows(shop)
    assert not [k for k in keys if k[3] == "description"]
    assert sum(1 for k in keys if k[3] == "category") == len(PRODUCTS)
    assert report.values_deleted == sum(1 for _, d in PRODUCTS.values() if d)
    assert report.graph_rows == 0


# Another application's data on the same graph server (a shared Memgraph): never vedana's to count or delete.
FOREIGN = "CREATE (:Invoice {id: 'i1'})-[:BILLS]->(:Customer {id: 'c1'}), (:Invoice {id: 'i2'})"
FOREIGN_COUNTS = {"nodes": {"Invoice": 2, "Customer": 1}, "edges": {"BILLS": 1}}


def with_foreign(counts: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {kind: {**counts[kind], **FOREIGN_COUNTS[kind]} for kind in counts}


def test_other_data_on_a_shared_graph_survives_every_rebuild(
    settings, shop, counting_graph, embedder
) -> None:
    counting_graph.query(FOREIGN)

    first = run(settings, shop, counting_graph, embedder)  # a first index clears before loading
    assert first.graph_rebuilt
    assert counting_graph.counts() == with_foreign(live_counts(shop))

    writes = counting_graph.write_calls
    again = run(settings, shop, counting_graph, embedder)  # foreign nodes are no reason to rebuild
    assert not again.graph_rebuilt and counting_graph.write_calls == writes

    counting_graph.query("MATCH (p:Product {id: 'p1'}) DETACH DELETE p")  # vedana's graph lost a node
    notices: list[str] = []
    repaired = run(settings, shop, counting_graph, embedder, on_notice=notices.append)
    assert repaired.graph_rebuilt and "rebuilding the graph" in notices[0] and "Product" in notices[0]
    assert counting_graph.counts() == with_foreign(live_counts(shop))

    assert run(settings, shop, counting_graph, embedder, full=True).graph_rebuilt
    assert counting_graph.counts() == with_foreign(live_counts(shop))
    assert counting_graph.query(
        "MATCH (:Invoice {id: 'i1'})-[:BILLS]->(c:Customer) RETURN c.id AS c"
    ).rows == [{"c": "c1"}]


class SnapshotCheckingGraph(CountingGraph):
    """Checks, when the index waits for the graph's snapshot, that the vectors are already
    written (the snapshot ran beside them) and the graph watermark is not yet set."""

    def __init__(self, inner: GraphStore, engine: Engine) -> None:
        super().__init__(inner)
        self.shop = engine
        self.seen: list[tuple[Any, int]] = []

    def persist_begin(self):  # type: ignore[no-untyped-def]
        wait = self.inner.persist_begin()

        def check() -> None:
            with self.shop.connect() as conn:
                self.seen.append((get_state(conn, GRAPH_VERSION_KEY), len(vector_rows(self.shop))))
            wait()

        return check


def test_graph_watermark_is_set_only_after_the_snapshot_written_beside_the_vectors(
    settings, shop, graph, embedder
) -> None:
    checking = SnapshotCheckingGraph(graph, shop)
    run(settings, shop, checking, embedder)
    assert checking.seen == [(None, EXPECTED_NODE_VALUES + EXPECTED_EDGE_VALUES)]
    with shop.connect() as conn:
        assert get_state(conn, GRAPH_VERSION_KEY) is not None
