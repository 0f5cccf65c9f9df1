"""Which graph engine to open: the factory lives apart from the `GraphStore` interface so that
the two implementations import their base from `graph.py` and nothing imports back up."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vedana.config import Settings
    from vedana.stores.graph import GraphStore


def open_graph(settings: Settings) -> GraphStore:
    """The configured graph: Memgraph at `MEMGRAPH_URI`, else the embedded FalkorDB."""
    if settings.uses_embedded_graph:
        from vedana.stores.graph_falkordb import FalkorGraph

        return FalkorGraph.embedded(settings.home, query_memory_mb=settings.graph_query_memory_mb)
    from vedana.stores.graph_bolt import BoltGraph

    assert settings.memgraph_uri is not None
    password = settings.memgraph_pwd.get_secret_value() if settings.memgraph_pwd else None
    return BoltGraph(settings.memgraph_uri, settings.memgraph_user, password)
