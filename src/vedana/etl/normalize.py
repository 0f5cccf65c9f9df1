"""From raw tables to nodes and edges, by the rules of DESIGN §4.

- Only `Anchor_<noun>` and `Link_<name>` tables of nouns/links in the data model are data;
  every other table is ignored (and listed in the report).
- Node id: the `<noun>_id` cell, else the `node_id` cell, else `<noun>:<row id>` when the table
  has neither column. A row of a table that has an id column but leaves it empty is skipped
  (`missing id`), as is a row with nothing in it (`blank row`). Duplicate ids: the first row
  wins; later rows are skipped (`duplicate id`) but references to them still mean that node id,
  and their foreign-key references still become edges, so no edge is lost to deduplication.
- Properties: only columns described in the data model for that anchor/link, cast by `dtype`,
  empty values omitted; Grist's own columns (`id`, `manualSort`, `gristHelper_*`) and the link
  columns never become properties. A Ref attribute holds the referenced row's display value.
  Formula errors are empty (and counted), never text.
- Foreign-key edges: a link's `anchor1_link_column_name` is a Ref/RefList column of
  `Anchor_<anchor1>` pointing at rows of `Anchor_<anchor2>`, and `anchor2_link_column_name` the
  same from the other side; either way the edge runs anchor1 → anchor2, as the link is declared.
  References resolve by row id (API, `.grist`) or by display value (CSV): the referencing
  column's visible column, then the node id, then (CSV folders) the target's first column.
- Link tables: rows with `from_node_id`, `to_node_id`, `edge_label`. The row's `edge_label`
  names the link when it is a known sentence (case-insensitive); otherwise the table's own match
  (by sentence, or by `<anchor1>_<anchor2>`) is used. Endpoints given the other way round are
  turned to the declared anchor1 → anchor2 direction.
- `has_direction` false: every edge also exists reversed, with the same properties. Edges whose
  endpoints are not loaded nodes are dropped (`dangling endpoint` / `unresolved reference`).
  Duplicate edges collapse to the first (link tables are read before foreign-key columns, so an
  edge with properties wins); that step happens in the staging write, which counts it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from vedana.datamodel import Anchor, Attribute, DataModel, Link
from vedana.datamodel.dtypes import CastError, canonical_dtype, cast_value, is_empty, number_text
from vedana.datamodel.report import BLANK_ROW
from vedana.etl.report import (
    DANGLING,
    DUPLICATE_ID,
    FORMULA_ERROR,
    MISSING_ENDPOINT,
    MISSING_ID,
    UNRESOLVED_REF,
    SyncReport,
    TypeReport,
)
from vedana.sources.base import CELL_ERROR, Column, RawTable, Ref, Source, is_helper_column
from vedana.sources.cells import split_list

ANCHOR_PREFIX = "Anchor_"
_SEP = "\x1e"  # between the fields of a row's recorded outcome (`RowRecorder`)
LINK_PREFIX = "Link_"
FROM, TO, LABEL = "from_node_id", "to_node_id", "edge_label"


# Tuples (a sync makes one per staging row and hands its fields straight to COPY), with names.
class NodeRow(NamedTuple):
    node_type: str
    node_id: str
    attributes: dict[str, Any]


class EdgeRow(NamedTuple):
    edge_label: str
    from_node_type: str
    from_node_id: str
    to_node_type: str
    to_node_id: str
    attributes: dict[str, Any]


_new_edge = tuple.__new__
_NEVER_EMPTY = frozenset({int, float, bool})  # cast values `is_empty` need not look at


class RowRecorder(Protocol):
    """Told what each source row produced, while normalising (`etl/resync.py` keeps it)."""

    def node(self, table: str, row_id: int, node_id: str | None, labels: str) -> None:
        """An anchor row: its node id (None: skipped) and display values (`label_text`)."""

    def spoil(self, table: str, row_id: int) -> None:
        """The row had more to say than its keys (a duplicate, a formula error, a failed cast)."""

    def link(self, table: str, row_id: int, sentence: str | None, outcome: str) -> None:
        """A link-table row: the link it counts for, and "<the link's place in the data
        model>␞<anchor1 end id>␞<anchor2 end id>", or "" if it made no edge or had more to say
        than that."""

    def references(
        self, table: str, row_id: int, fk: _ForeignKey, source: str, targets: list[str | None]
    ) -> None:
        """A link column's cell of an anchor row, resolved (None: unresolved)."""


def label_text(cells: dict[str, Any], label_cols: list[str]) -> str:
    """An anchor row's display values (what references may name it by), in one text: with its
    node id and row id, what the row adds to the maps references resolve through."""
    return "\x1f".join(_id_text(cells.get(c)) or "" for c in label_cols)


@dataclass
class TablePlan:
    anchors: list[tuple[Anchor, RawTable]] = field(default_factory=list)
    links: list[tuple[RawTable, list[Link]]] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # nouns without a table


def plan_tables(dm: DataModel, source: Source) -> TablePlan:
    """Which tables of the data document are node tables, link tables, or ignored; opens the
    data tables (their columns) without reading rows."""
    plan = TablePlan()
    nouns = {a.noun.lower(): a for a in dm.anchors}
    taken: set[str] = set()
    names = source.table_names()
    # Exact-case table names first, so `Anchor_person` beats `Anchor_Person` for noun `person`.
    for name in sorted(names, key=lambda n: not any(n == ANCHOR_PREFIX + a.noun for a in dm.anchors)):
        if not name.startswith(ANCHOR_PREFIX):
            continue
        anchor = nouns.get(name[len(ANCHOR_PREFIX) :].lower())
        if anchor is None or anchor.noun in taken:
            plan.ignored.append(name)
            continue
        table = source.table(name)
        if table is not None:
            taken.add(anchor.noun)
            plan.anchors.append((anchor, table))
    for name in names:
        if name.startswith(ANCHOR_PREFIX):
            continue
        if not name.startswith(LINK_PREFIX):
            plan.ignored.append(name)
            continue
        suffix = name[len(LINK_PREFIX) :].lower()
        candidates = [lk for lk in dm.links if lk.sentence.lower() == suffix] or [
            lk for lk in dm.links if f"{lk.anchor1}_{lk.anchor2}".lower() == suffix
        ]
        table = source.table(name)
        if table is None:
            continue
        if not candidates and (table.column(FROM) is None or table.column(TO) is None):
            plan.ignored.append(name)
            continue
        plan.links.append((table, candidates))
    plan.missing = [a.noun for a in dm.anchors if a.noun not in taken]
    order = {name: i for i, name in enumerate(names)}
    plan.anchors.sort(key=lambda pair: order[pair[1].name])
    plan.ignored.sort(key=lambda n: order.get(n, 0))
    return plan


@dataclass(frozen=True)
class _ForeignKey:
    link: Link
    column: str
    own: str  # noun of the table holding the column
    target: str  # noun of the referenced table
    own_is_anchor1: bool
    visible_col: str


@dataclass(frozen=True, slots=True)
class _AttrColumn:
    """A described attribute and the table column holding it."""

    name: str
    column: Column
    dtype: str  # canonical; unknown dtypes were read as "str" by the data model reader


class _Endpoint(NamedTuple):  # two per link-table row: a tuple is made 3x faster than a dataclass
    noun: str | None  # known when the cell was a reference to an anchor table
    node_id: str | None


def _blank(cells: dict[str, Any]) -> bool:
    return all(_cell_empty(v) for k, v in cells.items() if not is_helper_column(k))


def _cell_empty(value: Any) -> bool:
    if value is CELL_ERROR or value is None:
        return True
    if isinstance(value, Ref):
        return not value
    return is_empty(value)


def _id_text(value: Any) -> str | None:
    """A cell used as a node id or display label, as text (None when empty)."""
    if value.__class__ is str:  # most cells, first
        return value.strip() or None
    if value is None or value is CELL_ERROR or isinstance(value, bool | list):
        return None
    if isinstance(value, Ref):
        return value.labels[0] if value.labels else None
    text = number_text(value) if isinstance(value, int | float) else str(value).strip()
    return text or None


def _row_node_id(cells: dict[str, Any], id_cols: list[str]) -> str | None:
    """The first id column's value that is not empty (None: none has one)."""
    if not id_cols:
        return None
    node_id = _id_text(cells.get(id_cols[0]))
    if node_id is None and len(id_cols) > 1:
        node_id = next((t for t in (_id_text(cells.get(c)) for c in id_cols[1:]) if t), None)
    return node_id


def _as_ref(value: Any) -> Ref:
    """A link column's cell as a reference; CSV folders give plain text ("a, b")."""
    if isinstance(value, Ref):
        return value
    if value is None or value is CELL_ERROR or isinstance(value, bool):
        return Ref()
    if isinstance(value, list):
        return Ref(labels=tuple(t for t in (_id_text(v) for v in value) if t), many=True)
    if isinstance(value, str):
        return Ref(labels=tuple(split_list(value)), many=True)
    text = _id_text(value)
    return Ref(labels=(text,)) if text else Ref()


class Normalizer:
    """Turns the planned tables into node and edge rows, counting everything it drops in
    `report`. Memory: node ids, row id → node id, and display label → node id per anchor (what
    resolving references needs), plus the pending foreign-key references; never whole rows."""

    def __init__(self, dm: DataModel, report: SyncReport) -> None:
        self.dm = dm
        self.report = report
        self.ids: dict[str, set[str]] = {a.noun: set() for a in dm.anchors}
        self.row_ids: dict[str, dict[int, str]] = {a.noun: {} for a in dm.anchors}
        self.labels: dict[str, dict[str, dict[str, str]]] = {a.noun: {} for a in dm.anchors}
        self._label_cols: dict[str, set[str]] = {a.noun: set() for a in dm.anchors}
        self._foreign_keys: dict[str, list[_ForeignKey]] = {a.noun: [] for a in dm.anchors}
        self._pending: list[tuple[_ForeignKey, str, Ref, str, int]] = []
        # A re-sync's bookkeeping (`etl/resync.py`): what each source row produced, and a count
        # of cell-level events (formula errors, failed casts) so a row that had any is known.
        self.recorder: RowRecorder | None = None
        self.events = 0
        self.repeated_ids: dict[str, set[str]] = {a.noun: set() for a in dm.anchors}
        self._unmatched: Counter[str] = Counter()
        self._nouns = {a.noun.lower(): a.noun for a in dm.anchors}
        self._links = {lk.sentence.lower(): lk for lk in dm.links}
        # A link as a link-table row's recorded outcome names it: its place in the data model,
        # where its sentence took ~20 bytes a row (a third of what a re-sync reads back).
        self.links_in_order = list(dm.links)
        self._link_codes = {id(lk): str(i) for i, lk in enumerate(dm.links)}

    # --- set-up -----------------------------------------------------------------------------

    def prepare(self, plan: TablePlan) -> None:
        """Find the link columns and which display columns references will be resolved by."""
        for anchor, table in plan.anchors:
            for link in self.dm.links:
                sides = (
                    (link.anchor1, link.anchor1_link_column_name, link.anchor2, True),
                    (link.anchor2, link.anchor2_link_column_name, link.anchor1, False),
                )
                for own, column_name, target, own_is_anchor1 in sides:
                    if own != anchor.noun or not column_name:
                        continue
                    column = table.column(column_name)
                    if column is None:
                        self.report.notes.append(
                            f"{table.name} has no column {column_name!r} named by link {link.sentence}"
                        )
                        continue
                    fk = _ForeignKey(link, column.id, own, target, own_is_anchor1, column.visible_col)
                    self._foreign_keys[own].append(fk)
                    if column.visible_col:
                        self._label_cols[target].add(column.visible_col)
            if not any(c.type for c in table.columns.values()):
                # A CSV folder: a reference that is not a node id may be the first column's value.
                first = next((c for c in table.columns if not is_helper_column(c)), None)
                if first:
                    self._label_cols[anchor.noun].add(first)
        for table, _ in plan.links:
            for name in (FROM, TO):
                column = table.column(name)
                referenced = self._noun_of_table(column.ref_table) if column else None
                if column and referenced and column.visible_col:
                    self._label_cols[referenced].add(column.visible_col)

    def _noun_of_table(self, table_name: str | None) -> str | None:
        if not table_name or not table_name.startswith(ANCHOR_PREFIX):
            return None
        return self._nouns.get(table_name[len(ANCHOR_PREFIX) :].lower())

    # --- nodes --------------------------------------------------------------------------------

    def nodes(self, anchor: Anchor, table: RawTable, *, context_ready: bool = False) -> Iterator[NodeRow]:
        """The table's nodes. `context_ready`: the id and display maps already hold every row of
        the table (a re-sync built them from all rows and normalises only the changed ones)."""
        noun = anchor.noun
        stats = self.report.node(noun)
        stats.tables.append(table.name)
        id_cols = self.id_columns(noun, table)
        foreign_keys = self._foreign_keys[noun]
        link_cols = {fk.column for fk in foreign_keys}
        attributes = self._attribute_columns(anchor.attributes, table, exclude=link_cols)
        used = {a.column.id for a in attributes} | link_cols | set(id_cols)
        stats.dropped_columns = [c for c in table.columns if c not in used and not is_helper_column(c)]
        ids, row_ids, labels = self.ids[noun], self.row_ids[noun], self.labels[noun]
        label_cols = self.label_columns(noun, table)
        for col in label_cols:
            labels.setdefault(col, {})
        record = self.recorder
        name = table.name

        for row_id, cells in table.rows():
            stats.read += 1
            node_id = _row_node_id(cells, id_cols)
            if node_id is None:
                if _blank(cells):
                    stats.skipped[BLANK_ROW] += 1
                    if record:
                        record.node(name, row_id, None, "")
                    continue
                if id_cols:
                    stats.skipped[MISSING_ID] += 1
                    if record:
                        record.node(name, row_id, None, "")
                    continue
                node_id = f"{noun}:{row_id}"
            if record:
                record.node(name, row_id, node_id, label_text(cells, label_cols))
            if not context_ready:
                row_ids.setdefault(row_id, node_id)
                for col in label_cols:
                    label = _id_text(cells.get(col))
                    if label:
                        labels[col].setdefault(label, node_id)
            for fk in foreign_keys:
                ref = _as_ref(cells.get(fk.column))
                if ref:
                    self._pending.append((fk, node_id, ref, name, row_id))
            if context_ready:
                if node_id in self.repeated_ids[noun]:
                    stats.skipped[DUPLICATE_ID] += 1
                    if record:
                        record.spoil(name, row_id)
                    continue
            elif node_id in ids:
                stats.skipped[DUPLICATE_ID] += 1
                if record:
                    record.spoil(name, row_id)
                continue
            else:
                ids.add(node_id)
            events = self.events
            yield NodeRow(noun, node_id, self._attributes(attributes, cells, stats))
            if record and self.events != events:
                record.spoil(name, row_id)

    def id_columns(self, noun: str, table: RawTable) -> list[str]:
        return [c.id for c in (table.column(f"{noun}_id"), table.column("node_id")) if c is not None]

    def label_columns(self, noun: str, table: RawTable) -> list[str]:
        """The columns whose values references to this table may name (sorted: a stable order)."""
        return sorted(c for c in self._label_cols[noun] if c in table.columns)

    def _attribute_columns(
        self, described: tuple[Attribute, ...], table: RawTable, exclude: set[str]
    ) -> list[_AttrColumn]:
        found = []
        for attr in described:
            column = table.column(attr.name)
            if column is not None and not is_helper_column(column.id) and column.id not in exclude:
                dtype = canonical_dtype(attr.dtype)
                found.append(_AttrColumn(attr.name, column, "str" if dtype is None else dtype))
        return found

    def _attributes(
        self, columns: list[_AttrColumn], cells: dict[str, Any], stats: TypeReport
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for attr in columns:
            value = cells.get(attr.column.id)
            if value is None:
                continue
            if value is CELL_ERROR:
                stats.cells[FORMULA_ERROR] += 1
                self.events += 1
                continue
            if value.__class__ is str:  # most cells: text, often for a text attribute
                if not value.strip():
                    continue
                if attr.dtype == "str":
                    out[attr.name] = value
                    continue
            elif value.__class__ is Ref:
                value = _ref_display(value, attr.column)
            if is_empty(value):
                continue
            try:
                cast = cast_value(value, attr.dtype)
            except CastError:
                stats.cells[f"{attr.name}: not a valid {attr.dtype or 'value'}"] += 1
                self.events += 1
                continue
            if cast.__class__ in _NEVER_EMPTY or not is_empty(cast):
                out[attr.name] = cast
        return out

    # --- edges --------------------------------------------------------------------------------

    def link_table_edges(self, table: RawTable, candidates: list[Link]) -> Iterator[EdgeRow]:
        from_col, to_col, label_col = table.column(FROM), table.column(TO), table.column(LABEL)
        if from_col is None or to_col is None:
            self.report.notes.append(f"{table.name} has no {FROM}/{TO} columns; its rows were skipped")
            return
        default = candidates[0] if len(candidates) == 1 else None
        structural = {from_col.id, to_col.id, label_col.id if label_col else ""}
        per_link: dict[str, tuple[TypeReport, list[_AttrColumn]]] = {}
        by_label: dict[str, Link | None] = {}  # edge_label cell -> its link (None: unknown)
        record = self.recorder
        name = table.name
        for row_id, cells in table.rows():
            label = _id_text(cells.get(label_col.id)) if label_col else None
            if label:
                try:
                    link = by_label[label]
                except KeyError:  # a label not met before in this table
                    link = by_label[label] = self._links.get(label.lower())
                link = link or default
            else:
                link = default
            if link is None:
                self._unmatched[name] += 1
                if record:
                    record.link(name, row_id, None, "")
                continue
            known = per_link.get(link.sentence)
            if known is None:
                stats = self.report.edge(link.sentence)
                if name not in stats.tables:
                    stats.tables.append(name)
                pairs = self._attribute_columns(link.attributes, table, structural)
                used = {a.column.id for a in pairs} | structural
                stats.dropped_columns = sorted(
                    {
                        *stats.dropped_columns,
                        *(c for c in table.columns if c not in used and not is_helper_column(c)),
                    }
                )
                known = per_link[link.sentence] = (stats, pairs)
            stats, pairs = known
            stats.read += 1
            # A plain text end (a CSV folder's, the usual case) as `_endpoint` reads it, without a call.
            src, dst = cells.get(from_col.id), cells.get(to_col.id)
            if src.__class__ is str:
                src = _Endpoint(None, text) if (text := src.strip()) else None
            else:
                src = self._endpoint(src, from_col)
            if dst.__class__ is str:
                dst = _Endpoint(None, text) if (text := dst.strip()) else None
            else:
                dst = self._endpoint(dst, to_col)
            if src is None or dst is None:
                stats.skipped[BLANK_ROW if _blank(cells) else MISSING_ENDPOINT] += 1
                if record:
                    record.link(name, row_id, link.sentence, "")
                continue
            if (src.noun and src.node_id is None) or (dst.noun and dst.node_id is None):
                stats.skipped[UNRESOLVED_REF] += 1
                if record:
                    record.link(name, row_id, link.sentence, "")
                continue
            oriented = self._orient(link, src, dst)
            if oriented is None:
                stats.skipped[DANGLING] += 1
                if record:
                    record.link(name, row_id, link.sentence, "")
                continue
            events = self.events
            attributes = self._attributes(pairs, cells, stats)
            if record:
                plain = self.events == events
                record.link(
                    name,
                    row_id,
                    link.sentence,
                    f"{self._link_codes[id(link)]}{_SEP}{oriented[1]}{_SEP}{oriented[3]}" if plain else "",
                )
            yield from _both_ways(link, *oriented, attributes)

    def _endpoint(self, value: Any, column: Column) -> _Endpoint | None:
        if isinstance(value, Ref):
            if not value:
                return None
            noun = self._noun_of_table(column.ref_table)
            if noun is None:  # a reference to a non-anchor table: use what it displays
                return _Endpoint(None, value.labels[0]) if value.labels else None
            return _Endpoint(noun, self._resolve(noun, value, column.visible_col)[0])
        text = _id_text(value)
        return _Endpoint(None, text) if text else None

    def _orient(self, link: Link, src: _Endpoint, dst: _Endpoint) -> tuple[str, str, str, str] | None:
        """The ends as anchor1 → anchor2, whichever way round they were given; None when they do
        not fit (an end can be a node of a noun when it names one of its ids, and a reference
        only to a node of its own table). Once per link-table row: the checks are written out."""
        a1, a2 = link.anchor1, link.anchor2
        ids1, ids2 = self.ids.get(a1, ()), self.ids.get(a2, ())
        src_noun, src_id = src
        dst_noun, dst_id = dst
        src_fits1 = (src_noun is None or src_noun == a1) and src_id in ids1
        if src_fits1 and (dst_noun is None or dst_noun == a2) and dst_id in ids2:
            return a1, src_id or "", a2, dst_id or ""
        src_fits2 = (src_noun is None or src_noun == a2) and src_id in ids2
        if src_fits2 and (dst_noun is None or dst_noun == a1) and dst_id in ids1:
            return a1, dst_id or "", a2, src_id or ""
        return None

    def foreign_key_edges(self) -> Iterator[EdgeRow]:
        """Edges from link columns; call after every anchor table has been read."""
        pending, self._pending = self._pending, []
        record = self.recorder
        for fk, own_id, ref, table, row_id in pending:
            stats = self.report.edge(fk.link.sentence)
            source = f"{ANCHOR_PREFIX}{fk.own}.{fk.column}"
            if source not in stats.tables:
                stats.tables.append(source)
            targets = self._resolve(fk.target, ref, fk.visible_col)
            if record:
                record.references(table, row_id, fk, source, targets)
            for target_id in targets:
                stats.read += 1
                if target_id is None:
                    stats.skipped[UNRESOLVED_REF] += 1
                elif fk.own_is_anchor1:
                    yield from _both_ways(fk.link, fk.own, own_id, fk.target, target_id, {})
                else:
                    yield from _both_ways(fk.link, fk.target, target_id, fk.own, own_id, {})

    def _resolve(self, noun: str, ref: Ref, visible_col: str) -> list[str | None]:
        if ref.row_ids:
            by_row = self.row_ids.get(noun, {})
            return [by_row.get(i) for i in ref.row_ids]
        maps = self.labels.get(noun, {})
        ids = self.ids.get(noun, set())
        out: list[str | None] = []
        for label in ref.labels:
            found = maps.get(visible_col, {}).get(label) if visible_col else None
            if found is None and label in ids:
                found = label
            if found is None:
                found = next((m[label] for col, m in maps.items() if col != visible_col and label in m), None)
            out.append(found)
        return out

    def finish(self) -> None:
        for table, rows in self._unmatched.items():
            self.report.notes.append(
                f"{table}: {rows} row(s) skipped: their edge_label names no link of the data model"
            )


def _ref_display(ref: Ref, column: Column) -> Any:
    labels = list(ref.labels) or [f"{column.ref_table}[{i}]" for i in ref.row_ids]
    if ref.many:
        return labels
    return labels[0] if labels else None


def _both_ways(
    link: Link, from_type: str, from_id: str, to_type: str, to_id: str, attributes: dict[str, Any]
) -> Iterator[EdgeRow]:
    # `_new_edge` makes the named tuple without the Python-level `__new__` (one per staging edge).
    yield _new_edge(EdgeRow, (link.sentence, from_type, from_id, to_type, to_id, attributes))
    if not link.has_direction and (from_type, from_id) != (to_type, to_id):
        yield _new_edge(EdgeRow, (link.sentence, to_type, to_id, from_type, from_id, attributes))


def note_missing_attribute_columns(report: SyncReport, plan: TablePlan) -> None:
    """Say once per attribute that the data model describes but its table lacks: every node or
    edge of it would otherwise silently go without that value."""
    for anchor, table in plan.anchors:
        for attr in anchor.attributes:
            if table.column(attr.name) is None:
                report.notes.append(
                    f"{table.name} has no column {attr.name} (attribute of {anchor.noun} in "
                    "Anchor_attributes), so no node gets it; add the column or delete the attribute"
                )
    for table, links in plan.links:
        for link in links:
            for attr in link.attributes:
                if table.column(attr.name) is None:
                    report.notes.append(
                        f"{table.name} has no column {attr.name} (attribute of link {link.sentence} "
                        "in Link_attributes), so no edge gets it; add the column or delete the attribute"
                    )
