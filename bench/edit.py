"""The benchmark's "1 % change": edit a fraction of the rows of a generated CSV folder in place and
say exactly what a sync and an index of the result must do.

Each data table gets every `1/fraction`-th row edited in one column the data model describes:
the first embeddable text attribute when the table has one (its new text is unique, so it must
be embedded once, never served from the cache), otherwise the first int attribute (+1), so the
graph changes but no embedding does. A row whose text is empty (the people shape notes only some
links) gets the int edit instead, so the share of rows edited stays the same. A table with no
attribute to edit (a bare link table) is left alone. Keys and references are never touched, so no node or edge appears or disappears.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.generate import (
    PEOPLE_ANCHORS,
    PEOPLE_LINKS,
    REGULATIONS_ANCHORS,
    REGULATIONS_LINKS,
    AnchorSpec,
    AttrSpec,
    LinkSpec,
)
from vedana.errors import ConfigError

SPECS: dict[str, tuple[list[AnchorSpec], list[LinkSpec]]] = {
    "people": (PEOPLE_ANCHORS, PEOPLE_LINKS),
    "regulations": (REGULATIONS_ANCHORS, REGULATIONS_LINKS),
}


@dataclass(frozen=True)
class EditTarget:
    """Which column of which table gets edited, and what an edited row means downstream."""

    table: str
    column: str
    embeddable: bool  # the column is embedded: each edited row is one new text
    kind: str  # "node" or "edge"
    copies: int  # staging rows per source row: 2 for an undirected link, else 1
    fallback: str = ""  # an int column edited instead where an embeddable cell is empty


@dataclass
class EditSummary:
    """What was edited, and what sync and index must therefore report."""

    fraction: float
    rows_total: int = 0
    rows_edited: dict[str, int] = field(default_factory=dict)  # table -> rows
    nodes_changed: int = 0  # staging node rows a sync must rewrite
    edges_changed: int = 0  # staging edge rows (undirected links count twice)
    texts_changed: int = 0  # distinct new texts: what the index must send to the model
    values_changed: int = 0  # embedding rows to rewrite (an undirected link's text is stored twice)

    @property
    def edited(self) -> int:
        return sum(self.rows_edited.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "fraction": self.fraction,
            "rows_total": self.rows_total,
            "rows_edited": self.edited,
            "rows_edited_by_table": self.rows_edited,
            "expected": {
                "nodes_changed": self.nodes_changed,
                "edges_changed": self.edges_changed,
                "texts_to_embed": self.texts_changed,
                "values_to_write": self.values_changed,
            },
        }


def _pick(attributes: tuple[AttrSpec, ...], owner_id: str) -> tuple[str, bool, str] | None:
    """(column, embeddable, fallback int column) to edit: an embeddable text first, else an int;
    never the id."""
    usable = [a for a in attributes if a.name != owner_id]
    ints = [a.name for a in usable if a.dtype == "int"]
    for a in usable:
        if a.embeddable and a.dtype == "str":
            return a.name, True, ints[0] if ints else ""
    return (ints[0], False, "") if ints else None


def edit_targets(shape: str) -> list[EditTarget]:
    if shape not in SPECS:
        raise ConfigError(f"unknown shape {shape!r}; choose one of {', '.join(SPECS)}")
    anchors, links = SPECS[shape]
    targets = []
    for anchor in anchors:
        picked = _pick(anchor.attributes, f"{anchor.noun}_id")
        if picked:
            column, embeddable, fallback = picked
            targets.append(EditTarget(f"Anchor_{anchor.noun}", column, embeddable, "node", 1, fallback))
    for link in links:
        if link.anchor1_link_column:  # a foreign-key link has no table of its own
            continue
        picked = _pick(link.attributes, "")
        if picked:
            column, embeddable, fallback = picked
            copies = 1 if link.has_direction else 2
            targets.append(
                EditTarget(f"Link_{link.sentence.lower()}", column, embeddable, "edge", copies, fallback)
            )
    return targets


def edit_csv_folder(data: Path, shape: str, fraction: float = 0.01) -> EditSummary:
    """Edit `fraction` of the rows of each editable table in the CSV folder `data`, in place."""
    if not 0 < fraction <= 1:
        raise ConfigError("the edit fraction must be in (0, 1]; e.g. 0.01 for 1 %")
    step = max(1, round(1 / fraction))
    summary = EditSummary(fraction=fraction)
    rows = {path.stem: _data_rows(path) for path in sorted(data.glob("*.csv"))}
    summary.rows_total = sum(rows.values())
    for target in edit_targets(shape):
        path = data / f"{target.table}.csv"
        if not path.exists():
            continue
        # Every step-th row from the middle of the first step; a table shorter than a step
        # still gets its middle row edited, so tiny runs exercise every kind of change.
        first = min(step // 2, (rows[target.table] + 1) // 2) or 1
        edited, texts = _edit_file(path, target, step, first)
        summary.rows_edited[target.table] = edited
        if target.kind == "node":
            summary.nodes_changed += edited
        else:
            summary.edges_changed += edited * target.copies
        summary.texts_changed += texts
        summary.values_changed += texts * target.copies
    return summary


def _data_rows(path: Path) -> int:
    with path.open(encoding="utf-8", newline="") as f:
        return max(sum(1 for _ in csv.reader(f)) - 1, 0)


def _edit_file(path: Path, target: EditTarget, step: int, first: int) -> tuple[int, int]:
    """Rewrite `path` with `target.column` changed in data rows first, first + step, …;
    (rows edited, of those the ones whose embeddable text changed)."""
    tmp = path.with_suffix(".csv.tmp")
    edited = texts = 0
    with path.open(encoding="utf-8", newline="") as src, tmp.open("w", encoding="utf-8", newline="") as dst:
        reader = csv.reader(src)
        writer = csv.writer(dst, lineterminator="\n")
        header = next(reader)
        writer.writerow(header)
        column = header.index(target.column)
        fallback = header.index(target.fallback) if target.fallback else None
        for row_no, row in enumerate(reader, start=1):
            if row_no >= first and (row_no - first) % step == 0:
                if row[column] != "":
                    row[column] = _changed(row[column], row_no, target.embeddable)
                    edited += 1
                    texts += target.embeddable
                elif fallback is not None and row[fallback] != "":
                    row[fallback] = _changed(row[fallback], row_no, False)
                    edited += 1
            writer.writerow(row)
    os.replace(tmp, path)
    return edited, texts


def _changed(value: str, row_no: int, embeddable: bool) -> str:
    if embeddable:
        return f"{value} (revised {row_no})"  # unique per row: no cache entry can serve it
    return str(int(value) + 1)


# ---------------------------------------------------------------------------------------------
# rows appended: the other everyday change
# ---------------------------------------------------------------------------------------------


@dataclass
class AppendSummary:
    """Rows added at the end of each table, and the staging rows a sync must therefore add."""

    fraction: float
    rows_appended: dict[str, int] = field(default_factory=dict)  # table -> rows
    nodes_added: int = 0
    edges_added: int = 0  # staging edge rows (an undirected link counts twice)

    @property
    def appended(self) -> int:
        return sum(self.rows_appended.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "fraction": self.fraction,
            "rows_appended": self.appended,
            "rows_appended_by_table": self.rows_appended,
            "expected": {"nodes_added": self.nodes_added, "edges_added": self.edges_added},
        }


def append_csv_folder(data: Path, shape: str, fraction: float = 0.01, tag: str = "a") -> AppendSummary:
    """Append `fraction` of each data table's rows at its end: copies of every `1/fraction`-th
    anchor row under a new id (`<id>~<tag><n>`, so `tag` keeps rounds apart), and of link rows with
    their first end moved to one of the new ids of its anchor (a new pair: no edge repeats one
    already there). References and ids stay resolvable, so the sync must add exactly these rows."""
    if not 0 < fraction <= 1:
        raise ConfigError("the append fraction must be in (0, 1]; e.g. 0.01 for 1 %")
    if shape not in SPECS:
        raise ConfigError(f"unknown shape {shape!r}; choose one of {', '.join(SPECS)}")
    anchors, links = SPECS[shape]
    step = max(1, round(1 / fraction))
    summary = AppendSummary(fraction=fraction)
    new_ids: dict[str, list[str]] = {}
    for anchor in anchors:
        path = data / f"Anchor_{anchor.noun}.csv"
        if not path.exists():
            continue
        id_column = f"{anchor.noun}_id"
        header, copies = _every(path, step)
        at = header.index(id_column)
        for n, row in enumerate(copies, 1):
            row[at] = f"{row[at]}~{tag}{n}"
        new_ids[anchor.noun] = [row[at] for row in copies]
        _append(path, copies)
        summary.rows_appended[path.stem] = len(copies)
        summary.nodes_added += len(copies)
        for link in links:  # a link column of the copied rows: one edge each where it names a node
            if link.anchor1 == anchor.noun and link.anchor1_link_column in header:
                ref = header.index(link.anchor1_link_column)
                made = sum(1 for row in copies if row[ref].strip())
                summary.edges_added += made * (1 if link.has_direction else 2)
    for link in links:
        path = data / f"Link_{link.sentence.lower()}.csv"
        if link.anchor1_link_column or not path.exists() or not new_ids.get(link.anchor1):
            continue
        header, picked = _every(path, step)
        src, dst = header.index("from_node_id"), header.index("to_node_id")
        owners, pairs, copies = new_ids[link.anchor1], set(), []
        for n, row in enumerate(picked):
            pair = (owners[n % len(owners)], row[dst])
            if pair not in pairs:  # the same new pair twice would be a duplicate edge
                pairs.add(pair)
                copies.append([*row[:src], pair[0], *row[src + 1 :]])
        _append(path, copies)
        summary.rows_appended[path.stem] = len(copies)
        summary.edges_added += len(copies) * (1 if link.has_direction else 2)
    return summary


def _every(path: Path, step: int) -> tuple[list[str], list[list[str]]]:
    """The header and every `step`-th data row from the middle of the first step (the first row
    when there are fewer), read as a stream."""
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        picked, first = [], None
        for i, row in enumerate(reader):
            first = first or row
            if i % step == step // 2:
                picked.append(row)
    return header, picked or ([first] if first else [])


def _append(path: Path, rows: list[list[str]]) -> None:
    with path.open("rb") as f:  # a file that does not end its last line gets a line break first
        ends = f.seek(0, os.SEEK_END) == 0 or (f.seek(-1, os.SEEK_END) >= 0 and f.read(1) == b"\n")
    with path.open("a", encoding="utf-8", newline="") as f:
        if not ends:
            f.write("\n")
        csv.writer(f, lineterminator="\n").writerows(rows)
