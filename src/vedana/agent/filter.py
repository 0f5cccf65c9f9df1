"""The data-model filter: the filter model picks the part of the data model a question needs.

It answers with structured output (reasoning, anchor nouns, link sentences, attribute names,
playbook query ids). Names it invents are ignored and reported; a link is kept only when both
of its ends are kept; a kept anchor or link for which no attribute was picked keeps all of its
attributes (a type without properties would only mislead the agent). Any failure — provider
error, invalid JSON, a selection that keeps no anchor — means the full data model, marked as a
fallback in the trace.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError

from vedana.agent.trace import FilterTrace
from vedana.datamodel import Attribute, DataModel, Query
from vedana.datamodel.render import numbered_queries, render_catalog
from vedana.errors import VedanaError

if TYPE_CHECKING:
    from vedana.agent.llm import LLM
    from vedana.agent.templates import Templates


class FilterSelection(BaseModel):
    reasoning: str = ""
    anchor_nouns: list[str] = Field(default_factory=list)
    link_sentences: list[str] = Field(default_factory=list)
    anchor_attribute_names: list[str] = Field(default_factory=list)
    link_attribute_names: list[str] = Field(default_factory=list)
    query_ids: list[int] = Field(default_factory=list)


def _string_list(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


# Written out (not generated) because strict structured output wants every field required
# and no additional properties.
SELECTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string", "description": "Why these parts are needed, briefly."},
        "anchor_nouns": _string_list("Node types (anchor nouns) needed."),
        "link_sentences": _string_list("Relationship types (link sentences) needed."),
        "anchor_attribute_names": _string_list("Anchor attributes needed: name or Noun.name."),
        "link_attribute_names": _string_list("Link attributes needed: name or sentence.name."),
        "query_ids": {"type": "array", "items": {"type": "integer"}, "description": "Playbook query ids."},
    },
    "required": [
        "reasoning",
        "anchor_nouns",
        "link_sentences",
        "anchor_attribute_names",
        "link_attribute_names",
        "query_ids",
    ],
    "additionalProperties": False,
}

RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "data_model_selection", "schema": SELECTION_SCHEMA, "strict": True},
}


@dataclass
class FilterResult:
    data_model: DataModel  # what the agent sees
    playbook: list[tuple[int, Query]]  # selected queries with their catalog ids
    trace: FilterTrace


def counts(dm: DataModel) -> dict[str, int]:
    return {
        "anchors": len(dm.anchors),
        "links": len(dm.links),
        "anchor_attributes": sum(len(a.attributes) for a in dm.anchors),
        "link_attributes": sum(len(lk.attributes) for lk in dm.links),
        "queries": len(dm.queries),
    }


def _lookup(names: list[str], known: list[str]) -> tuple[list[str], list[str]]:
    """(canonical names found, names not found); exact match first, then ignoring case."""
    by_fold = {k.casefold(): k for k in known}
    found: list[str] = []
    missing: list[str] = []
    for raw in names:
        name = str(raw).strip()
        match = name if name in known else by_fold.get(name.casefold())
        if match is None:
            missing.append(name)
        elif match not in found:
            found.append(match)
    return found, missing


def _pick_attributes(
    owners: list[tuple[str, tuple[Attribute, ...]]],
    all_owners: list[tuple[str, tuple[Attribute, ...]]],
    names: list[str],
) -> tuple[dict[str, tuple[Attribute, ...]], list[str]]:
    """Attributes picked per kept owner, and the names that match no attribute anywhere.

    A name is `attr` (any kept owner's attribute of that name) or `Owner.attr`."""
    wanted: dict[str, set[str]] = {}  # owner fold -> attribute folds; "" owner = any owner
    invented: list[str] = []
    known_plain = {a.name.casefold() for _, attrs in all_owners for a in attrs}
    known_qualified = {f"{o}.{a.name}".casefold() for o, attrs in all_owners for a in attrs}
    for raw in names:
        name = str(raw).strip()
        folded = name.casefold()
        if folded in known_qualified:
            owner, _, attr = folded.rpartition(".")
            wanted.setdefault(owner, set()).add(attr)
        elif folded in known_plain:
            wanted.setdefault("", set()).add(folded)
        else:
            invented.append(name)
    picked: dict[str, tuple[Attribute, ...]] = {}
    for owner, attrs in owners:
        chosen = wanted.get(owner.casefold(), set()) | wanted.get("", set())
        kept = tuple(a for a in attrs if a.name.casefold() in chosen)
        picked[owner] = kept or attrs  # nothing picked for a kept type: keep all of its attributes
    return picked, invented


def apply_selection(
    dm: DataModel, selection: FilterSelection
) -> tuple[DataModel, list[tuple[int, Query]], FilterTrace]:
    """The slice of `dm` the selection keeps (see the module doc for the rules)."""
    nouns, bad_nouns = _lookup(selection.anchor_nouns, [a.noun for a in dm.anchors])
    sentences, bad_sentences = _lookup(selection.link_sentences, [lk.sentence for lk in dm.links])
    kept_nouns = set(nouns)
    links = [lk for lk in dm.links if lk.sentence in sentences]
    dropped_links = [
        lk.sentence for lk in links if not (lk.anchor1 in kept_nouns and lk.anchor2 in kept_nouns)
    ]
    links = [lk for lk in links if lk.sentence not in dropped_links]
    anchors = [a for a in dm.anchors if a.noun in kept_nouns]

    anchor_attrs, bad_anchor_attrs = _pick_attributes(
        [(a.noun, a.attributes) for a in anchors],
        [(a.noun, a.attributes) for a in dm.anchors],
        selection.anchor_attribute_names,
    )
    link_attrs, bad_link_attrs = _pick_attributes(
        [(lk.sentence, lk.attributes) for lk in links],
        [(lk.sentence, lk.attributes) for lk in dm.links],
        selection.link_attribute_names,
    )
    numbered = numbered_queries(dm)
    valid_ids = {number for number, _ in numbered}
    query_ids = list(dict.fromkeys(selection.query_ids))
    playbook = [(number, q) for number, q in numbered if number in query_ids]

    sliced = DataModel(
        anchors=[replace(a, attributes=anchor_attrs[a.noun]) for a in anchors],
        links=[replace(lk, attributes=link_attrs[lk.sentence]) for lk in links],
        queries=[q for _, q in playbook],
        prompts=dm.prompts,
        lifecycle=dm.lifecycle,
    )
    invented: dict[str, list[Any]] = {
        "anchor_nouns": bad_nouns,
        "link_sentences": bad_sentences,
        "anchor_attribute_names": bad_anchor_attrs,
        "link_attribute_names": bad_link_attrs,
        "query_ids": [i for i in query_ids if i not in valid_ids],
    }
    trace = FilterTrace(
        enabled=True,
        reasoning=selection.reasoning,
        selected=_selected(sliced, playbook),
        kept=counts(sliced),
        total=counts(dm),
        ignored={k: v for k, v in invented.items() if v},
        dropped_links=dropped_links,
    )
    return sliced, playbook, trace


def _selected(dm: DataModel, playbook: list[tuple[int, Query]]) -> dict[str, list[Any]]:
    return {
        "anchors": [a.noun for a in dm.anchors],
        "links": [lk.sentence for lk in dm.links],
        "anchor_attributes": [f"{a.noun}.{at.name}" for a in dm.anchors for at in a.attributes],
        "link_attributes": [f"{lk.sentence}.{at.name}" for lk in dm.links for at in lk.attributes],
        "queries": [number for number, _ in playbook],
    }


def full_model(
    dm: DataModel, *, enabled: bool, model: str | None = None, error: str | None = None
) -> FilterResult:
    """No filtering: everything, and the whole playbook."""
    playbook = numbered_queries(dm)
    trace = FilterTrace(
        enabled=enabled,
        model=model,
        fallback=error is not None,
        error=error,
        selected=_selected(dm, playbook),
        kept=counts(dm),
        total=counts(dm),
    )
    return FilterResult(dm, playbook, trace)


def parse_selection(content: str | None) -> FilterSelection:
    """The model's structured output; tolerates a ```json fence around it."""
    text = (content or "").strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    return FilterSelection.model_validate(json.loads(text))


def filter_data_model(
    llm: LLM, model: str, dm: DataModel, question: str, templates: Templates
) -> FilterResult:
    """Ask `model` which part of `dm` the question needs; never raises for a filter failure."""
    started = time.perf_counter()
    prompt = templates.render("filter", data_model_json=render_catalog(dm), question=question)
    try:
        response = llm.complete(
            model,
            [{"role": "user", "content": prompt}],
            purpose="filter",
            response_format=RESPONSE_FORMAT,
        )
        selection = parse_selection(response.choices[0].message.content)
        sliced, playbook, trace = apply_selection(dm, selection)
        if not sliced.anchors:
            raise ValueError("the selection kept no node type")
    except (VedanaError, ValueError, ValidationError, LookupError, AttributeError, TypeError) as exc:
        result = full_model(dm, enabled=True, model=model, error=_reason(exc))
        result.trace.elapsed_s = round(time.perf_counter() - started, 4)
        return result
    trace.model = model
    trace.elapsed_s = round(time.perf_counter() - started, 4)
    return FilterResult(sliced, playbook, trace)


def _reason(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"the filter's answer is not valid JSON ({exc.msg} at char {exc.pos})"
    if isinstance(exc, ValidationError):
        return f"the filter's answer does not match the schema ({exc.error_count()} errors)"
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
