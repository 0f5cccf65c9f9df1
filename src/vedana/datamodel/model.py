"""Plain dataclasses for the data model, as synced from the Data Model document.

Pure data: no I/O here. `vedana.etl` builds these from Grist, `vedana.stores.staging` saves and
loads them, the agent renders them into prompt text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Attribute:
    """A described column of an anchor (node) or link (edge) table."""

    name: str
    description: str = ""
    data_example: str = ""
    dtype: str = "str"
    embeddable: bool = False
    query: str = ""
    embed_threshold: float | None = None
    embed_top_n: int | None = None


@dataclass(frozen=True)
class Anchor:
    """A node type; `noun` is the graph label and the suffix of its `Anchor_<noun>` table."""

    noun: str
    description: str = ""
    id_example: str = ""
    query: str = ""
    attributes: tuple[Attribute, ...] = ()

    def attribute(self, name: str) -> Attribute | None:
        return next((a for a in self.attributes if a.name == name), None)


@dataclass(frozen=True)
class Link:
    """An edge type between two anchors; `sentence` is the relationship type."""

    sentence: str
    anchor1: str
    anchor2: str
    description: str = ""
    query: str = ""
    anchor1_link_column_name: str = ""
    anchor2_link_column_name: str = ""
    has_direction: bool = False
    attributes: tuple[Attribute, ...] = ()

    def attribute(self, name: str) -> Attribute | None:
        return next((a for a in self.attributes if a.name == name), None)


@dataclass(frozen=True)
class Query:
    """A playbook entry: a named example of how to answer a kind of question."""

    name: str
    example: str


@dataclass(frozen=True)
class Prompt:
    """An override of a built-in prompt template with the same name."""

    name: str
    text: str


@dataclass(frozen=True)
class LifecycleEvent:
    event: str
    text: str


@dataclass
class DataModel:
    anchors: list[Anchor] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)
    prompts: list[Prompt] = field(default_factory=list)
    lifecycle: list[LifecycleEvent] = field(default_factory=list)

    def anchor(self, noun: str) -> Anchor | None:
        return next((a for a in self.anchors if a.noun == noun), None)

    def link(self, sentence: str) -> Link | None:
        return next((lk for lk in self.links if lk.sentence == sentence), None)

    def prompt(self, name: str) -> str | None:
        return next((p.text for p in self.prompts if p.name == name), None)

    def embeddable(self) -> list[tuple[str, str, str]]:
        """(kind, label, attribute) for every embeddable attribute; kind is "node" or "edge"."""
        out = [("node", a.noun, at.name) for a in self.anchors for at in a.attributes if at.embeddable]
        out += [("edge", lk.sentence, at.name) for lk in self.links for at in lk.attributes if at.embeddable]
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataModel:
        def attrs(items: list[dict[str, Any]]) -> tuple[Attribute, ...]:
            return tuple(Attribute(**a) for a in items)

        return cls(
            anchors=[
                Anchor(**{**a, "attributes": attrs(a.get("attributes", []))}) for a in data.get("anchors", [])
            ],
            links=[
                Link(**{**lk, "attributes": attrs(lk.get("attributes", []))}) for lk in data.get("links", [])
            ],
            queries=[Query(**q) for q in data.get("queries", [])],
            prompts=[Prompt(**p) for p in data.get("prompts", [])],
            lifecycle=[LifecycleEvent(**e) for e in data.get("lifecycle", [])],
        )
