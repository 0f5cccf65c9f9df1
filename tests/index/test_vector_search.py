"""Vector search over the indexed shop: paraphrases find the right node or edge, thresholds and
limits come from the attribute or the settings, and wrong inputs are clear errors."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import Engine

from support.index_kb import shop_model
from support.staging_rows import put_data_model, tombstone_node
from vedana.errors import EmbeddingError, NotIndexed
from vedana.etl.index import index
from vedana.stores.vectors import SearchTargetError, VectorStore, search_text

pytestmark = pytest.mark.slow


@pytest.fixture
def indexed(settings, shop: Engine, graph, local_embedder) -> Engine:
    index(settings, engine=shop, graph=graph, embedder=local_embedder)
    return shop


def test_lower_case_plural_finds_the_node(settings, indexed, local_embedder) -> None:
    for query, expected in (("mountain bikes", "p1"), ("running shoes", "p3"), ("headphones", "p8")):
        hits = search_text(settings, "Product", "name", query, engine=indexed, embedder=local_embedder)
        assert hits and hits[0].node_id == expected, (query, hits)
    [best, *_] = search_text(
        settings, "Product", "name", "mountain bikes", engine=indexed, embedder=local_embedder
    )
    assert best.value == "Mountain Bike" and 0.5 < best.score <= 1.0
    # The hit carries the staging attributes, never vectors.
    assert best.attributes["description"] == "A sturdy bicycle for steep trails"
    assert set(best.to_dict()) == {
        "kind", "label", "attribute", "value", "score", "node_id", "from_node_id", "to_node_id", "attributes",
    }  # fmt: skip
    assert best.kind == "node" and best.label == "Product" and best.attribute == "name"


def test_descriptions_are_searched_by_meaning(settings, indexed, local_embedder) -> None:
    hits = search_text(
        settings, "Product", "description", "hot water for tea", engine=indexed, embedder=local_embedder
    )
    assert hits[0].node_id == "p2"


def test_edge_attributes_are_searched_in_the_edge_table(settings, indexed, local_embedder) -> None:
    hits = search_text(settings, "sold at", "note", "shop window", engine=indexed, embedder=local_embedder)
    assert hits and (hits[0].kind, hits[0].from_node_id, hits[0].to_node_id) == ("edge", "p1", "s1")
    assert hits[0].node_id is None and hits[0].attributes == {"stock": 3, "note": "front window display"}
    assert hits[0].value == "front window display" and 0.0 < hits[0].score <= 1.0
    assert (hits[0].label, hits[0].attribute) == ("sold at", "note")


def test_threshold_and_top_n(settings, indexed, local_embedder) -> None:
    def search(**kwargs):
        return search_text(
            settings,
            "Product",
            "name",
            "kitchen appliance",
            engine=indexed,
            embedder=local_embedder,
            **kwargs,
        )

    everything = search(threshold=-1.0, top_n=100)
    assert len(everything) == 8  # every product name, best first
    assert [h.score for h in everything] == sorted((h.score for h in everything), reverse=True)
    assert len(search(threshold=-1.0, top_n=3)) == 3
    cut = everything[2].score
    assert [h.node_id for h in search(threshold=cut, top_n=100)] == [h.node_id for h in everything[:3]]
    assert search(threshold=0.99, top_n=100) == []


def test_attribute_and_settings_defaults_apply(settings, indexed, local_embedder) -> None:
    dm = shop_model()
    attrs = tuple(
        replace(a, embed_top_n=2, embed_threshold=-1.0) if a.name == "name" else a
        for a in dm.anchors[0].attributes
    )
    dm.anchors[0] = replace(dm.anchors[0], attributes=attrs)
    put_data_model(indexed, dm)
    assert (
        len(search_text(settings, "Product", "name", "gadget", engine=indexed, embedder=local_embedder)) == 2
    )
    # Explicit arguments win over the attribute's values.
    assert (
        len(
            search_text(
                settings, "Product", "name", "gadget", top_n=5, engine=indexed, embedder=local_embedder
            )
        )
        == 5
    )
    # Without attribute values: the settings' EMBEDDINGS_TOP_N and EMBEDDINGS_THRESHOLD.
    loose = settings.model_copy(update={"embeddings_top_n": 4, "embeddings_threshold": -1.0})
    assert (
        len(search_text(loose, "Product", "description", "gadget", engine=indexed, embedder=local_embedder))
        == 4
    )


def test_tombstoned_rows_are_not_returned_before_the_next_index(settings, indexed, local_embedder) -> None:
    with indexed.begin() as conn:
        tombstone_node(conn, "Product", "p1")
    hits = search_text(
        settings, "Product", "name", "mountain bikes", threshold=-1.0, engine=indexed, embedder=local_embedder
    )
    assert "p1" not in {h.node_id for h in hits}


def test_unknown_or_unembeddable_targets_list_the_choices(settings, indexed, local_embedder) -> None:
    with pytest.raises(SearchTargetError, match=r"unknown label 'Gadget'.*Product\.name"):
        search_text(settings, "Gadget", "name", "x", engine=indexed, embedder=local_embedder)
    with pytest.raises(SearchTargetError, match="'city' is not embeddable in 'Store'"):
        search_text(settings, "Store", "city", "x", engine=indexed, embedder=local_embedder)
    with pytest.raises(SearchTargetError, match="'colour' is not an attribute of 'Product'"):
        search_text(settings, "Product", "colour", "x", engine=indexed, embedder=local_embedder)


def test_vector_of_the_wrong_dimension_is_a_clear_error(indexed) -> None:
    with pytest.raises(EmbeddingError, match="has 10 dimensions but the index holds all-MiniLM-L6-v2 \\(384"):
        VectorStore(indexed).search("node", "Product", "name", [0.1] * 10, threshold=0.0, top_n=3)


def test_search_before_any_index_says_so(settings, shop, local_embedder) -> None:
    with pytest.raises(NotIndexed, match="vedana index"):
        search_text(settings, "Product", "name", "bike", engine=shop, embedder=local_embedder)


def test_a_search_after_the_first_of_its_kind_is_one_statement_and_no_transaction(
    settings, indexed, local_embedder, tmp_path
) -> None:
    from vedana.stores.vectors import Retriever

    with Retriever(settings, indexed, local_embedder) as retriever:
        # The first search of each kind sets the session up and prepares its statement.
        first = retriever.search("node", "Product", "name", "mountain bikes", 0.3, 5)
        retriever.search("edge", "sold at", "note", "front window", 0.3, 5)
        raw = retriever.store._conn.connection.driver_connection
        # What the client sends, as libpq traces it: one Sync a round trip.
        trace = tmp_path / "libpq.trace"
        with trace.open("w") as out:
            raw.pgconn.trace(out.fileno())
            try:
                later = [
                    retriever.search("node", "Product", "name", q, 0.3, 5) for q in ("mountain bikes", "tea")
                ]
                edge = retriever.search("edge", "sold at", "note", "shop window", 0.3, 5)
            finally:
                raw.pgconn.untrace()
        # The held connection is in autocommit: no BEGIN/COMMIT round trips around the query.
        assert raw.autocommit and raw.info.transaction_status.name == "IDLE"
        # Both statements are prepared, and every run of them was planned for its own label
        # and LIMIT (a generic plan knows neither). Left to itself, Postgres runs a generic plan
        # from the sixth run on here.
        for q in ("bike", "shoes", "cup", "lamp", "headphones"):
            retriever.search("node", "Product", "name", q, 0.3, 5)
        prepared = raw.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
            ("%ORDER BY distance LIMIT%",),
        ).fetchall()
        assert sorted(prepared) == [(0, 2), (0, 8)], prepared
    # Back in the pool, the connection plans others' prepared statements as Postgres would.
    mode = raw.execute("SHOW plan_cache_mode").fetchone()
    raw.rollback()  # the pool's connection is out of autocommit again
    assert mode == ("auto",)
    assert later[0] == first and first[0].node_id == "p1" and later[1][0].node_id == "p2"
    assert edge[0].from_node_id == "p1"
    sent = [line.split("\t") for line in trace.read_text().splitlines()]
    frontend = [fields[3] for fields in sent if len(fields) > 3 and fields[1] == "F"]
    assert frontend.count("Sync") == 3, frontend  # three searches, three round trips
    # The prepared statement bound and run, nothing parsed or sent beside it (no SET/BEGIN/COMMIT).
    assert frontend.count("Bind") == frontend.count("Execute") == 3, frontend
    assert set(frontend) <= {"Bind", "Describe", "Execute", "Sync"}, frontend
