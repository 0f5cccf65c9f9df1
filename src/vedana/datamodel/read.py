"""Reading the Data Model document (Anchors, Anchor_attributes, Links, …) into a `DataModel`.

Blank rows (no key: noun, attribute_name, sentence, query_name, name, event) are skipped and
counted; so are rows pointing at an unknown anchor or link, and later duplicates of a key.
Only `Anchors` is required; every other table may be missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from vedana.datamodel import Anchor, Attribute, DataModel, LifecycleEvent, Link, Prompt, Query
from vedana.datamodel.dtypes import as_text, canonical_dtype, is_empty
from vedana.datamodel.names import graph_name_problem
from vedana.datamodel.report import BLANK_ROW, DataModelReport
from vedana.errors import SourceError
from vedana.sources.base import CELL_ERROR, RawTable, Ref, Source
from vedana.sources.cells import parse_bool_text

REQUIRED = "Anchors"
OPTIONAL = ("Anchor_attributes", "Links", "Link_attributes", "Queries", "Prompts", "ConversationLifecycle")


def _text(value: Any) -> str:
    if value is None or value is CELL_ERROR:
        return ""
    if isinstance(value, Ref):
        return ", ".join(value.labels)
    return as_text(value).strip()


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value)
    return bool(parse_bool_text(value)) if isinstance(value, str) else False


def _number(value: Any, kind: type) -> Any:
    if value is None or value is CELL_ERROR or isinstance(value, bool) or is_empty(value):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if kind is int:
        return int(number) if number.is_integer() else None
    return number


class _RefNames:
    """Resolves a Ref cell of the model (Anchor_attributes.anchor, Links.anchor1, …) to the
    referenced key (noun or sentence): by row id when the source has them, else by label."""

    def __init__(self) -> None:
        self.by_row: dict[int, str] = {}
        self.keys: dict[str, str] = {}  # lower-cased key → key

    def add(self, row_id: int, key: str) -> None:
        self.by_row.setdefault(row_id, key)
        self.keys.setdefault(key.lower(), key)

    def resolve(self, value: Any) -> str | None:
        if isinstance(value, Ref):
            if value.row_ids:
                return self.by_row.get(value.row_ids[0])
            labels = value.labels
        elif isinstance(value, str):
            labels = (value.strip(),)
        elif isinstance(value, int) and not isinstance(value, bool):
            return self.by_row.get(value)
        else:
            return None
        return self.keys.get(labels[0].lower()) if labels and labels[0] else None


def _find(source: Source, name: str) -> RawTable | None:
    names = {n.lower(): n for n in source.table_names()}
    actual = names.get(name.lower())
    return source.table(actual) if actual else None


def _rows(table: RawTable | None) -> Iterator[tuple[int, dict[str, Any]]]:
    if table is not None:
        yield from table.rows()


def _check_name(table: str, row_id: int, column: str, name: str) -> None:
    """A name that becomes a label, relationship type or property key must be one every engine
    takes: refused here, before anything is written, with where to fix it."""
    problem = graph_name_problem(name)
    if problem is not None:
        raise SourceError(
            f"{table} row {row_id}: {column} {name!r} cannot be a graph name ({problem}); rename it in the data model"
        )


class _ModelReader:
    """Reads the data model's tables one at a time, counting what it skips in `report`."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.report = DataModelReport()
        self.tables = {name: _find(source, name) for name in (REQUIRED, *OPTIONAL)}
        if self.tables[REQUIRED] is None:
            raise SourceError(
                f"the data model ({source.describe()}) has no `Anchors` table; "
                "point --data-model / GRIST_DATA_MODEL_DOC_ID at the Data Model document"
            )
        self.report.missing_tables = [name for name in OPTIONAL if self.tables[name] is None]
        self.skipped = self.report.skipped

    def anchors(self) -> tuple[dict[str, dict[str, Any]], _RefNames]:
        anchors: dict[str, dict[str, Any]] = {}
        refs = _RefNames()
        for row_id, c in _rows(self.tables["Anchors"]):
            noun = _text(c.get("noun"))
            if not noun:
                self.skipped[f"Anchors: {BLANK_ROW}"] += 1
                continue
            _check_name("Anchors", row_id, "noun", noun)
            refs.add(row_id, noun)
            if noun in anchors:
                self.skipped["Anchors: duplicate noun"] += 1
                continue
            anchors[noun] = {
                "noun": noun,
                "description": _text(c.get("description")),
                "id_example": _text(c.get("id_example")),
                "query": _text(c.get("query")),
                "attributes": [],
            }
        return anchors, refs

    def attributes(
        self, table: str, owner_col: str, owners: dict[str, dict[str, Any]], refs: _RefNames
    ) -> int:
        count = 0
        for row_id, c in _rows(self.tables[table]):
            name = _text(c.get("attribute_name"))
            owner = refs.resolve(c.get(owner_col))
            if not name:
                self.skipped[f"{table}: {BLANK_ROW}"] += 1
                continue
            if owner is None or owner not in owners:
                self.skipped[f"{table}: unknown {owner_col}"] += 1
                continue
            _check_name(table, row_id, "attribute_name", name)
            attrs = owners[owner]["attributes"]
            if any(a.name == name for a in attrs):
                self.skipped[f"{table}: duplicate attribute"] += 1
                continue
            attrs.append(self._attribute(table, name, c))
            count += 1
        return count

    def _attribute(self, table: str, name: str, c: dict[str, Any]) -> Attribute:
        raw_dtype = _text(c.get("dtype")).lower()
        dtype = canonical_dtype(raw_dtype)
        if dtype is None:
            self.skipped[f"{table}: unknown dtype {raw_dtype!r} read as str"] += 1
            dtype = "str"
        return Attribute(
            name=name,
            description=_text(c.get("description")),
            data_example=_text(c.get("data_example")),
            dtype=dtype,
            embeddable=_bool(c.get("embeddable")),
            query=_text(c.get("query")),
            embed_threshold=_number(c.get("embed_threshold"), float),
            embed_top_n=_number(c.get("embed_top_n"), int),
        )

    def links(
        self, anchors: dict[str, Any], anchor_refs: _RefNames
    ) -> tuple[dict[str, dict[str, Any]], _RefNames]:
        links: dict[str, dict[str, Any]] = {}
        refs = _RefNames()
        for row_id, c in _rows(self.tables["Links"]):
            sentence = _text(c.get("sentence"))
            if not sentence:
                self.skipped[f"Links: {BLANK_ROW}"] += 1
                continue
            anchor1, anchor2 = anchor_refs.resolve(c.get("anchor1")), anchor_refs.resolve(c.get("anchor2"))
            if anchor1 not in anchors or anchor2 not in anchors:
                self.skipped["Links: unknown anchor1/anchor2"] += 1
                continue
            _check_name("Links", row_id, "sentence", sentence)
            refs.add(row_id, sentence)
            if sentence in links:
                self.skipped["Links: duplicate sentence"] += 1
                continue
            links[sentence] = {
                "sentence": sentence,
                "anchor1": anchor1,
                "anchor2": anchor2,
                "description": _text(c.get("description")),
                "query": _text(c.get("query")),
                "anchor1_link_column_name": _text(c.get("anchor1_link_column_name")),
                "anchor2_link_column_name": _text(c.get("anchor2_link_column_name")),
                "has_direction": _bool(c.get("has_direction")),
                "attributes": [],
            }
        return links, refs

    def queries(self) -> list[Query]:
        queries: list[Query] = []
        for _, c in _rows(self.tables["Queries"]):
            name = _text(c.get("query_name"))
            if not name:
                self.skipped[f"Queries: {BLANK_ROW}"] += 1
                continue
            queries.append(Query(name=name, example=_text(c.get("query_example"))))
        return queries

    def keyed(self, table: str, key: str, what: str) -> dict[str, str]:
        """Prompts (name → text) and ConversationLifecycle (event → text): first row wins."""
        found: dict[str, str] = {}
        for _, c in _rows(self.tables[table]):
            name = _text(c.get(key))
            if not name:
                self.skipped[f"{table}: {BLANK_ROW}"] += 1
            elif name in found:
                self.skipped[f"{table}: duplicate {what}"] += 1
            else:
                found[name] = _text(c.get("text"))
        return found


def read_data_model(source: Source) -> tuple[DataModel, DataModelReport]:
    reader = _ModelReader(source)
    anchors, anchor_refs = reader.anchors()
    n_anchor_attrs = reader.attributes("Anchor_attributes", "anchor", anchors, anchor_refs)
    links, link_refs = reader.links(anchors, anchor_refs)
    n_link_attrs = reader.attributes("Link_attributes", "link", links, link_refs)
    queries = reader.queries()
    prompts = reader.keyed("Prompts", "name", "name")
    lifecycle = reader.keyed("ConversationLifecycle", "event", "event")
    if not anchors:
        raise SourceError(
            f"the data model ({source.describe()}) describes no anchors (its `Anchors` table has no "
            "noun); fill it in, or point --data-model at the Data Model document"
        )
    dm = DataModel(
        anchors=[Anchor(**{**a, "attributes": tuple(a["attributes"])}) for a in anchors.values()],
        links=[Link(**{**lk, "attributes": tuple(lk["attributes"])}) for lk in links.values()],
        queries=queries,
        # Staging keys these by name and gives them back in that order; sorted here too, so a re-read
        # of an unchanged document compares equal to the stored model.
        prompts=[Prompt(name=n, text=prompts[n]) for n in sorted(prompts)],
        lifecycle=[LifecycleEvent(event=e, text=lifecycle[e]) for e in sorted(lifecycle)],
    )
    reader.report.counts = {
        "anchors": len(dm.anchors),
        "anchor_attributes": n_anchor_attrs,
        "links": len(dm.links),
        "link_attributes": n_link_attrs,
        "queries": len(queries),
        "prompts": len(prompts),
        "lifecycle_events": len(lifecycle),
    }
    return dm, reader.report
