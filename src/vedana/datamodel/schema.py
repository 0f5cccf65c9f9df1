"""The data model as JSON Schema: one schema per node type and per link, describing a node or
an edge exactly as staging and the graph hold it, so a tool (or a test) can validate data.

A node is `{"id": <node id>, <attribute>: <value>, ...}`; an edge is `{"from_type", "from_id",
"to_type", "to_id", <attribute>: <value>, ...}` (an undirected link is stored both ways, so
either end may come first). Attributes are optional (an empty cell is left out) and no other
property is allowed: sync drops undescribed columns.
"""

from __future__ import annotations

from typing import Any

from vedana.datamodel.dtypes import CastError, canonical_dtype, cast_value
from vedana.datamodel.model import Anchor, Attribute, DataModel, Link

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_SCALARS: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "date": {"type": "string", "format": "date"},
    "datetime": {"type": "string", "format": "date-time"},
    "list": {"type": "array", "items": {"type": ["string", "number", "integer", "boolean"]}},
}


def example_value(attribute: Attribute) -> Any:
    """The attribute's data example typed as sync types its values ("34" → 34 for an int, "true"
    → True for a bool); as written when the dtype is blank or unknown, or the example does not fit."""
    dtype = canonical_dtype(attribute.dtype)
    if not dtype or not attribute.data_example:
        return attribute.data_example
    try:
        return cast_value(attribute.data_example, dtype)
    except CastError:
        return attribute.data_example


def attribute_schema(attribute: Attribute) -> dict[str, Any]:
    """An attribute's value: typed by its dtype; a blank dtype keeps the source's type, so any
    JSON scalar or list of scalars."""
    dtype = canonical_dtype(attribute.dtype) or ""
    schema = dict(_SCALARS.get(dtype, {"type": ["string", "number", "integer", "boolean", "array"]}))
    if attribute.description:
        schema["description"] = attribute.description
    if attribute.data_example:
        schema["examples"] = [example_value(attribute)]
    return schema


def node_schema(anchor: Anchor) -> dict[str, Any]:
    properties: dict[str, Any] = {"id": {"type": "string", "minLength": 1, "description": "The node id."}}
    if anchor.id_example:
        properties["id"]["examples"] = [anchor.id_example]
    properties.update({a.name: attribute_schema(a) for a in anchor.attributes})
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": f"vedana://schema/node/{anchor.noun}",
        "title": anchor.noun,
        "description": anchor.description,
        "type": "object",
        "properties": properties,
        "required": ["id"],
        "additionalProperties": False,
    }


def edge_schema(link: Link) -> dict[str, Any]:
    ends = [link.anchor1] if link.has_direction else sorted({link.anchor1, link.anchor2})
    other = [link.anchor2] if link.has_direction else ends
    properties: dict[str, Any] = {
        "from_type": {"enum": ends},
        "from_id": {"type": "string", "minLength": 1},
        "to_type": {"enum": other},
        "to_id": {"type": "string", "minLength": 1},
    }
    properties.update({a.name: attribute_schema(a) for a in link.attributes})
    direction = "directed" if link.has_direction else "undirected: stored in both directions"
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": f"vedana://schema/edge/{link.sentence}",
        "title": link.sentence,
        "description": f"{link.anchor1} → {link.anchor2} ({direction}). {link.description}".strip(),
        "type": "object",
        "properties": properties,
        "required": ["from_type", "from_id", "to_type", "to_id"],
        "additionalProperties": False,
    }


def json_schemas(dm: DataModel) -> dict[str, dict[str, dict[str, Any]]]:
    """`{"nodes": {noun: schema}, "edges": {sentence: schema}}`."""
    return {
        "nodes": {a.noun: node_schema(a) for a in dm.anchors},
        "edges": {lk.sentence: edge_schema(lk) for lk in dm.links},
    }
