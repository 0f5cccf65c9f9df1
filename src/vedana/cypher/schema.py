"""A query's names checked against the graph's schema before it runs.

Cypher reads an unknown label, relationship type or property as "nothing matches", so a query
with a misspelt name returns no rows and no error, and a model answers "none" with confidence.
Here every name a query writes (`vedana.cypher.mentions`) is looked up: a label or type the data
model and the graph both lack, a property the labels (or types) of its variable do not have,
a typed relationship drawn against its direction or between the wrong labels, each becomes one
clause of a refusal naming the closest real names. What cannot be told is let through: a
variable of unknown kind, a label only the graph knows (its properties are not described).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from vedana.cypher.mentions import Hop, NodeRef, PropertyUse, read_mentions
from vedana.errors import CypherSchemaMismatch

MAX_PROBLEMS = 5  # named in one refusal; the model fixes these, the next round shows the rest
MAX_LISTED = 12  # real names listed when none is close to the one written
SIMILAR, NEARLY = 0.6, 0.15  # difflib ratios: similar enough to suggest; nearly as similar as the best


@dataclass(frozen=True)
class LinkEnds:
    """A relationship type's ends in the data model; undirected links are stored both ways."""

    source: str
    target: str
    directed: bool


@dataclass(frozen=True)
class GraphSchema:
    """The data model's labels and types with their properties and ends, plus the labels and
    types the graph itself reports (whose properties are unknown, so never checked)."""

    node_properties: Mapping[str, frozenset[str]]
    edge_properties: Mapping[str, frozenset[str]]
    ends: Mapping[str, tuple[LinkEnds, ...]] = field(default_factory=dict)
    more_labels: frozenset[str] = frozenset()
    more_types: frozenset[str] = frozenset()

    @property
    def labels(self) -> frozenset[str]:
        return frozenset(self.node_properties) | self.more_labels

    @property
    def types(self) -> frozenset[str]:
        return frozenset(self.edge_properties) | self.more_types


def closest(name: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """The real names a misspelt `name` most likely meant: the same name in another case; else
    the most similar (case ignored), those nearly as similar as the best; else those that
    contain it or that it contains (`name` → `person_name`)."""
    pool = sorted(set(candidates))
    folded = name.casefold()
    same = [c for c in pool if c.casefold() == folded]
    if same:
        return same[:limit]
    scored = sorted(
        ((difflib.SequenceMatcher(None, folded, c.casefold()).ratio(), c) for c in pool),
        key=lambda sc: -sc[0],
    )
    best = scored[0][0] if scored else 0.0
    near = [c for score, c in scored if score >= max(SIMILAR, best - NEARLY)]
    if near:
        return near[:limit]
    return [c for c in pool if len(folded) >= 3 and (folded in c.casefold() or c.casefold() in folded)][
        :limit
    ]


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _hint(name: str, candidates: Iterable[str], what: str) -> str:
    pool = sorted(set(candidates))
    near = closest(name, pool)
    if near:
        return f"did you mean {' or '.join(f'`{n}`' for n in near)}?"
    shown = _quoted(pool[:MAX_LISTED]) + (", …" if len(pool) > MAX_LISTED else "")
    return f"{what} {shown}" if pool else "there are none"


def schema_problems(query: str, schema: GraphSchema) -> list[str]:
    """Each thing `query` names that the schema does not have, as one clause with the closest
    real names; empty when everything checked is known (or the query cannot be read)."""
    mentions = read_mentions(query)
    if mentions is None:
        return []
    found = [
        f"unknown label `{n.text}` ({_hint(n.text, schema.labels, 'the labels are')})"
        for n in mentions.labels
        if n.text not in schema.labels
    ]
    found += [
        f"unknown relationship type `{n.text}` ({_hint(n.text, schema.types, 'the types are')})"
        for n in mentions.types
        if n.text not in schema.types
    ]
    _infer_labels(mentions.hops, schema)
    found += [p for p in (_property_problem(use, schema) for use in mentions.properties) if p]
    found += [p for p in (_hop_problem(hop, schema, query) for hop in mentions.hops) if p]
    return list(dict.fromkeys(found))


def ensure_known_names(query: str, schema: GraphSchema) -> None:
    """Raise `CypherSchemaMismatch` (one line, the closest real names) when `query` names what
    the schema does not have."""
    problems = schema_problems(query, schema)
    if problems:
        more = f"; and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
        raise CypherSchemaMismatch(f"refused before running: {'; '.join(problems[:MAX_PROBLEMS])}{more}")


# -- properties -----------------------------------------------------------------------------------


def _single_link(hop: Hop, schema: GraphSchema) -> LinkEnds | None:
    """The data model's ends of a one-type, one-step relationship pattern, else None."""
    if hop.variable_length or len(hop.types) != 1:
        return None
    ends = schema.ends.get(hop.types[0], ())
    return ends[0] if len(ends) == 1 else None


def _infer_labels(hops: list[Hop], schema: GraphSchema) -> None:
    """A node written without a label takes the labels its typed relationship allows (both
    ends' where the direction does not tell), so `(p:person)-[:LIVES_IN]->(c)` checks `c.name`."""
    for hop in hops:
        ends = _single_link(hop, schema)
        if ends is None or hop.left is None or hop.right is None:
            continue
        if ends.directed and hop.arrow:
            source, target = (hop.left, hop.right) if hop.arrow == "->" else (hop.right, hop.left)
            guesses = [(source, {ends.source}), (target, {ends.target})]
        else:
            guesses = [(hop.left, {ends.source, ends.target}), (hop.right, {ends.source, ends.target})]
        for ref, labels in guesses:
            if ref.var.kind == "node" and not ref.var.names:
                ref.var.inferred |= labels


def _property_problem(use: PropertyUse, schema: GraphSchema) -> str | None:
    var = use.var
    table = schema.node_properties if var.kind == "node" else schema.edge_properties
    names = sorted(var.names or var.inferred)
    if not names or any(n not in table for n in names):
        return None  # a variable of unknown labels, or one only the graph knows: not checked
    allowed = frozenset().union(*(table[n] for n in names))
    if use.key in allowed:
        return None
    owner = " or ".join(f"`{n}`" for n in names)
    kind = "nodes" if var.kind == "node" else "relationships"
    hint = _hint(use.key, allowed, "their properties are") if allowed else "they have no properties"
    return f"{owner} {kind} have no property `{use.key}` ({hint})"


# -- directions ------------------------------------------------------------------------------------


def _written_labels(ref: NodeRef, schema: GraphSchema) -> frozenset[str] | None:
    """The labels a node pattern's variable is written with, or None when they are not all the
    data model's (then the end is not judged)."""
    labels = frozenset(ref.labels) | frozenset(ref.var.names)
    if not labels or not labels <= frozenset(schema.node_properties):
        return None
    return labels


def _fits(side: frozenset[str] | None, label: str) -> bool:
    return side is None or label in side


def _hop_problem(hop: Hop, schema: GraphSchema, query: str) -> str | None:
    ends = _single_link(hop, schema)
    if ends is None or hop.left is None or hop.right is None:
        return None
    left, right = _written_labels(hop.left, schema), _written_labels(hop.right, schema)
    forward = _fits(left, ends.source) and _fits(right, ends.target)
    backward = _fits(left, ends.target) and _fits(right, ends.source)
    if not ends.directed or not hop.arrow:
        ok, turned = forward or backward, False
    else:
        ok, turned = (forward, backward) if hop.arrow == "->" else (backward, forward)
    if ok:
        return None
    written = " ".join(query[hop.left.start : hop.right.end].split())
    runs = f"`{hop.types[0]}` runs from `{ends.source}` to `{ends.target}`"
    if turned:
        return f"{runs}, against the arrow in `{written}` (write `{_turned(hop, query)}`)"
    return f"{runs}, so it cannot link the nodes of `{written}`"


def _turned(hop: Hop, query: str) -> str:
    """The hop with its arrow the other way round, its nodes and brackets as written."""
    assert hop.left is not None and hop.right is not None
    left = " ".join(query[hop.left.start : hop.left.end].split())
    right = " ".join(query[hop.right.start : hop.right.end].split())
    rel = " ".join(query[hop.start : hop.end].split())
    return f"{left}<-{rel}-{right}" if hop.arrow == "->" else f"{left}-{rel}->{right}"
