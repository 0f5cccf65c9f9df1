"""The sources of an answer: every node the tools returned, numbered so the model can cite it.

The registry gives each node (label, id) one marker `[n]` the first time a tool returns it: a
vector hit, a node in a neighbourhood, a whole node in a Cypher row, or an id column of a Cypher
row whose variable's label the query names (`RETURN p.id AS id` with `(p:person)`). The tool
results carry the markers (`"cite": "[3]"`), the prompt asks the model to put them after what
they support, and after the answer the registry says which were cited and which markers in the
answer name no source (flagged in the trace, never shown as sources).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

_MARKER = re.compile(r"\[(\d{1,4})\]")
_LABELLED_VAR = re.compile(r"\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*`?([A-Za-z_][A-Za-z0-9_]*)`?")
_ID_COLUMN = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\.id\b(?:\s+AS\s+`?([A-Za-z_][A-Za-z0-9_]*)`?)?", re.I)


@dataclass
class Source:
    marker: int
    label: str
    node_id: str
    shown: str | None = None  # a value the tool showed for it (the hit's text, a name)
    cited: bool = False
    row: dict[str, Any] | None = None  # where its row lives (see vedana.sources.locate)

    def to_dict(self) -> dict[str, Any]:
        return {
            "marker": f"[{self.marker}]",
            "kind": "node",
            "label": self.label,
            "id": self.node_id,
            "shown": self.shown,
            "cited": self.cited,
            "row": self.row,
        }


@dataclass
class SourceRegistry:
    """Thread-safe: the tool calls of one round run side by side."""

    sources: dict[tuple[str, str], Source] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def node(self, label: str, node_id: Any, shown: Any = None) -> str:
        """The marker of node (label, id), registering it on first sight."""
        key = (str(label), str(node_id))
        with self._lock:
            found = self.sources.get(key)
            if found is None:
                found = self.sources[key] = Source(len(self.sources) + 1, key[0], key[1])
            if found.shown is None and shown not in (None, ""):
                found.shown = str(shown)
        return f"[{found.marker}]"

    # -- annotating tool results ------------------------------------------------------------------

    def cite_hits(self, label: str, hits: list[dict[str, Any]]) -> None:
        """Vector hits of `label` (and their neighbourhoods) get a `cite` marker each."""
        for hit in hits:
            if hit.get("node_id") is not None:
                hit["cite"] = self.node(label, hit["node_id"], hit.get("value"))
            for group in hit.get("links", []):
                self._cite_linked(group)

    def _cite_linked(self, group: dict[str, Any]) -> None:
        for node in group.get("nodes", []):
            node["cite"] = self.node(node["label"], node["node_id"], _name_like(node.get("attributes")))
            for inner in node.get("links", []):
                self._cite_linked(inner)

    def cite_rows(self, query: str, columns: list[str], rows: list[dict[str, Any]]) -> None:
        """Each Cypher row gets `cite` with the markers of the nodes it shows."""
        labels = dict(_LABELLED_VAR.findall(query))  # variable -> label
        id_columns: dict[str, str] = {}  # column -> label
        for var, alias in _ID_COLUMN.findall(query):
            if var in labels:
                id_columns[alias or f"{var}.id"] = labels[var]
        for row in rows:
            markers = []
            for column, value in row.items():
                if (
                    isinstance(value, dict)
                    and "labels" in value
                    and isinstance(value.get("properties"), dict)
                ):
                    props = value["properties"]
                    if props.get("id") is not None and value["labels"]:
                        markers.append(self.node(value["labels"][0], props["id"], _name_like(props)))
                elif column in id_columns and isinstance(value, str | int) and value != "":
                    markers.append(self.node(id_columns[column], value, _name_like(row, skip=column)))
            if markers:
                row["cite"] = "".join(dict.fromkeys(markers))

    # -- after the answer -----------------------------------------------------------------------

    def settle(self, answer: str) -> list[str]:
        """Mark the sources the answer cites; the markers in it that name no source."""
        unknown: list[str] = []
        by_marker = {s.marker: s for s in self.sources.values()}
        for match in _MARKER.finditer(answer):
            source = by_marker.get(int(match.group(1)))
            if source is None:
                if match.group(0) not in unknown:
                    unknown.append(match.group(0))
            else:
                source.cited = True
        return unknown

    def listed(self) -> list[Source]:
        return sorted(self.sources.values(), key=lambda s: s.marker)


def _name_like(values: Any, skip: str | None = None) -> str | None:
    """A value worth showing next to a marker: the first text property that looks like a name."""
    if not isinstance(values, dict):
        return None
    for key, value in values.items():
        if key != skip and key != "cite" and isinstance(value, str) and "name" in key.lower():
            return value
    return None
