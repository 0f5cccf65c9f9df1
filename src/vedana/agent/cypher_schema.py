"""The schema the agent's Cypher is checked against (`vedana.cypher.schema`): the data model's
labels, relationship types, properties and ends, and the labels and types the graph reports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vedana.cypher.schema import GraphSchema, LinkEnds

if TYPE_CHECKING:
    from vedana.config import Settings
    from vedana.datamodel import DataModel
    from vedana.stores.graph import GraphStore

NODE_ID = "id"  # every node carries its id as a property besides its attributes


def graph_schema(dm: DataModel, graph: GraphStore | None = None) -> GraphSchema | None:
    """The checked schema, or None when there is nothing to check against (no data model and a
    graph that cannot list its names): then every query runs unchecked."""
    ends: dict[str, tuple[LinkEnds, ...]] = {}
    for link in dm.links:
        ends[link.sentence] = (
            *ends.get(link.sentence, ()),
            LinkEnds(link.anchor1, link.anchor2, link.has_direction),
        )
    names = graph.names() if graph is not None else None
    if not dm.anchors and names is None:
        return None
    more_labels, more_types = frozenset[str](), frozenset[str]()
    if graph is not None and names is not None:
        # Engines list a label or type once it has existed; beyond the data model's, keep those in use.
        held = graph.counts(
            names[0] - {a.noun for a in dm.anchors}, names[1] - {lk.sentence for lk in dm.links}
        )
        more_labels, more_types = frozenset(held["nodes"]), frozenset(held["edges"])
    return GraphSchema(
        node_properties={a.noun: frozenset({NODE_ID, *(at.name for at in a.attributes)}) for a in dm.anchors},
        edge_properties={lk.sentence: frozenset(at.name for at in lk.attributes) for lk in dm.links},
        ends=ends,
        more_labels=more_labels,
        more_types=more_types,
    )


def synced_graph_schema(settings: Settings, graph: GraphStore) -> GraphSchema | None:
    """The schema of the data model last synced and of `graph` (before any sync: the graph's
    names alone). Raises `VedanaError` when Postgres cannot be reached."""
    from vedana.stores.postgres import get_engine
    from vedana.stores.staging import load_data_model

    with get_engine(settings).connect() as conn:
        dm = load_data_model(conn, required=False)
    return graph_schema(dm, graph)
