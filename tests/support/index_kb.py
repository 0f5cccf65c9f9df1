"""A small shop knowledge base for index tests, and counting wrappers around a real embedder and
a real graph (injected by argument, never patched in)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import Engine

from support.staging_rows import put_data_model, put_edge, put_node, reset_staging
from vedana.datamodel import Anchor, Attribute, DataModel, Link
from vedana.embeddings import Embedder
from vedana.stores.graph import GraphStore, QueryResult

PRODUCTS = {
    "p1": ("Mountain Bike", "A sturdy bicycle for steep trails"),
    "p2": ("Electric Kettle", "Boils a litre of water in two minutes"),
    "p3": ("Running Shoe", "Light trainers for road running"),
    "p4": ("Leather Wallet", "Slim wallet with six card slots"),
    "p5": ("Coffee Grinder", "Burr grinder for espresso beans"),
    "p6": ("Yoga Mat", ""),  # empty text: never embedded
    "p7": ("Desk Lamp", None),  # missing attribute
    "p8": ("Wireless Headphone", "Noise cancelling over-ear headphones"),
}
STORES = {"s1": "Riverside Outlet", "s2": "Central Market"}
SOLD_AT = [
    ("p1", "s1", "front window display"),
    ("p2", "s1", ""),
    ("p3", "s2", "back shelf"),
    ("p5", "s2", None),
]


def shop_model() -> DataModel:
    text = {"dtype": "str", "embeddable": True}
    return DataModel(
        anchors=[
            Anchor(
                noun="Product",
                description="Things the shop sells",
                attributes=(
                    Attribute(name="name", **text),
                    Attribute(name="description", **text),
                    Attribute(name="product_id", **text),  # an identifier: never embedded
                    Attribute(name="price", dtype="float", embeddable=True),  # a number: never embedded
                    Attribute(name="category", dtype="str"),
                ),
            ),
            Anchor(
                noun="Store", attributes=(Attribute(name="name", **text), Attribute(name="city", dtype="str"))
            ),
        ],
        links=[
            Link(
                sentence="sold at",
                anchor1="Product",
                anchor2="Store",
                has_direction=True,
                attributes=(Attribute(name="note", **text), Attribute(name="stock", dtype="int")),
            )
        ],
    )


def product_attributes(pid: str) -> dict[str, Any]:
    name, description = PRODUCTS[pid]
    attrs: dict[str, Any] = {"name": name, "product_id": pid.upper(), "price": 10.5, "category": "misc"}
    if description is not None:
        attrs["description"] = description
    return attrs


# Text values that the index must embed: non-empty strings of embeddable text attributes.
EXPECTED_NODE_VALUES = len(PRODUCTS) + sum(1 for _, d in PRODUCTS.values() if d) + len(STORES)
EXPECTED_EDGE_VALUES = sum(1 for *_, note in SOLD_AT if note)


def load_shop(pg_engine: Engine) -> Engine:
    """Reset staging and the index, then put the shop knowledge base into staging."""
    reset_staging(pg_engine)
    put_data_model(pg_engine, shop_model())
    with pg_engine.begin() as conn:
        for pid in PRODUCTS:
            put_node(conn, "Product", pid, product_attributes(pid))
        for sid, name in STORES.items():
            put_node(conn, "Store", sid, {"name": name, "city": "Springfield"})
        for pid, sid, note in SOLD_AT:
            put_edge(
                conn,
                "sold at",
                "Product",
                pid,
                "Store",
                sid,
                {"stock": 3, **({"note": note} if note is not None else {})},
            )
    return pg_engine


class CountingEmbedder:
    """Wraps a real embedder and records every text it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model = inner.model
        self.dim = inner.dim
        self.calls = 0
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.texts.extend(texts)
        return self.inner.embed(texts)


class CountingGraph(GraphStore):
    """Wraps a real GraphStore and counts the write batches sent through it."""

    def __init__(self, inner: GraphStore) -> None:
        self.inner = inner
        self.engine = inner.engine
        self.write_calls = 0
        self.rows_written = 0
        self.fail_after: int | None = None  # raise on this write call, to simulate a crash

    def query(self, cypher: str, params: dict[str, Any] | None = None, **kwargs: Any) -> QueryResult:
        return self.inner.query(cypher, params, **kwargs)

    def write_batches(self, cypher: str, rows: Iterable[Any], batch_size: int = 1000) -> int:
        if self.fail_after is not None and self.write_calls >= self.fail_after:
            raise KeyboardInterrupt("simulated kill halfway through the graph load")
        self.write_calls += 1
        rows = list(rows)
        self.rows_written += len(rows)
        return self.inner.write_batches(cypher, rows, batch_size)

    def ensure_index(self, label: str, prop: str = "id") -> None:
        self.inner.ensure_index(label, prop)

    def clear(self, labels: Iterable[str]) -> None:
        self.inner.clear(labels)

    def close(self) -> None:  # the session fixture owns the real graph
        pass


def scratch_graphs(*graphs: Any) -> Iterator[tuple[Any, ...]]:
    """FalkorDB graphs beside the session's for a test to build into: empty when yielded,
    deleted and closed after (a fixture yields from this)."""
    for graph in graphs:
        graph._db.connection.delete(graph.graph_name)
    yield graphs
    for graph in graphs:
        graph._db.connection.delete(graph.graph_name)
        graph.close()
