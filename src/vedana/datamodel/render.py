"""Render a data model (or a filtered slice of it) for a language model.

Two shapes: `render_text` is what the agent reads in its system prompt (node labels, relationship
types, properties with types and examples, which properties are searchable by meaning);
`render_catalog` is a compact JSON listing for the filter step, with playbook queries numbered
from 1 so the filter can pick them by id. `render_playbook` renders the selected queries.
"""

from __future__ import annotations

import json
from typing import Any

from vedana.datamodel.model import Anchor, Attribute, DataModel, Link, Query
from vedana.datamodel.schema import example_value


def literal(value: Any) -> str:
    """A value as Cypher writes it: strings quoted, numbers and booleans bare (34, true), lists bracketed."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value)


def _attribute_line(attribute: Attribute) -> str:
    details = [attribute.dtype or "str"]
    if attribute.embeddable:
        details.append("searchable by meaning")
    line = f"{attribute.name} ({', '.join(details)})"
    if attribute.description:
        line += f": {attribute.description}"
    if attribute.data_example:
        line += f" e.g. {literal(example_value(attribute))}"
    if attribute.query:
        line += f" | how to query: {attribute.query}"
    return line


def _anchor_block(anchor: Anchor) -> list[str]:
    head = f"- (:{anchor.noun})"
    if anchor.description:
        head += f" {anchor.description}"
    if anchor.id_example:
        head += f" [id e.g. {anchor.id_example!r}]"
    lines = [head]
    if anchor.query:
        lines.append(f"  how to query: {anchor.query}")
    lines.extend(f"  .{_attribute_line(a)}" for a in anchor.attributes)
    return lines


def _link_block(link: Link) -> list[str]:
    arrow = "->" if link.has_direction else "-"
    head = f"- (:{link.anchor1})-[:{link.sentence}]{arrow}(:{link.anchor2})"
    if not link.has_direction:
        head += " (undirected: stored in both directions)"
    if link.description:
        head += f" {link.description}"
    lines = [head]
    if link.query:
        lines.append(f"  how to query: {link.query}")
    lines.extend(f"  .{_attribute_line(a)}" for a in link.attributes)
    return lines


def render_text(dm: DataModel) -> str:
    """Node labels and relationship types with their properties, one compact line each.

    Every node also has the property `id` (its key); it is stated once instead of per label."""
    lines = ["Node labels (every node has the key property `id`):"]
    for anchor in dm.anchors:
        lines.extend(_anchor_block(anchor))
    if not dm.anchors:
        lines.append("- (none)")
    lines.append("")
    lines.append("Relationship types:")
    for link in dm.links:
        lines.extend(_link_block(link))
    if not dm.links:
        lines.append("- (none)")
    return "\n".join(lines)


def render_playbook(queries: list[tuple[int, Query]]) -> str:
    """Numbered playbook entries; numbers are the ids the filter step selects by."""
    if not queries:
        return "(no playbook entries)"
    return "\n\n".join(f"{number}. {q.name}\n{q.example}".rstrip() for number, q in queries)


def numbered_queries(dm: DataModel) -> list[tuple[int, Query]]:
    return list(enumerate(dm.queries, start=1))


def _attributes_catalog(attributes: tuple[Attribute, ...]) -> list[dict[str, Any]]:
    out = []
    for a in attributes:
        entry: dict[str, Any] = {"name": a.name}
        if a.description:
            entry["description"] = a.description
        out.append(entry)
    return out


def catalog(dm: DataModel) -> dict[str, Any]:
    """The data model as a small dict for the filter: names, descriptions, numbered queries."""
    anchors = []
    for anchor in dm.anchors:
        entry: dict[str, Any] = {"noun": anchor.noun}
        if anchor.description:
            entry["description"] = anchor.description
        entry["attributes"] = _attributes_catalog(anchor.attributes)
        anchors.append(entry)
    links = []
    for link in dm.links:
        item: dict[str, Any] = {"sentence": link.sentence, "from": link.anchor1, "to": link.anchor2}
        if link.description:
            item["description"] = link.description
        item["attributes"] = _attributes_catalog(link.attributes)
        links.append(item)
    queries = [{"id": number, "name": q.name} for number, q in numbered_queries(dm)]
    return {"anchors": anchors, "links": links, "queries": queries}


def render_catalog(dm: DataModel) -> str:
    return json.dumps(catalog(dm), ensure_ascii=False, separators=(",", ":"))
