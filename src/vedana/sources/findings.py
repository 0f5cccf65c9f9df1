"""What a source had to repair or skip while reading: NUL characters and malformed CSV rows.

Postgres text cannot hold a NUL character, so every source removes them from text cells as it
reads and counts them here, per table and column, with the first row that had one. CSV readers
skip rows whose shape is broken (a field count unlike the header's, an unterminated quote) and
list them here by line. The sync report, `sync --strict` and `vedana check`'s lint read these.

Checking is kept off the hot path: sources test a whole row (or page, or table) for a NUL at
once and only then look cell by cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vedana.sources.base import Ref

NUL = "\x00"
_LISTED_ROWS = 10  # malformed rows named in a message; the rest are counted


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def strip_nul(value: Any) -> tuple[Any, int]:
    """`value` without NUL characters, and how many were removed: text, text inside lists
    (ChoiceList, Grist's `["L", …]`) and a reference's display values; other values are
    returned as they are."""
    if value.__class__ is str:
        count = value.count(NUL)
        return (value.replace(NUL, ""), count) if count else (value, 0)
    if value.__class__ is Ref and value.labels:  # display values of a reference
        count = sum(label.count(NUL) for label in value.labels)
        if count:
            labels = tuple(label.replace(NUL, "") for label in value.labels)
            return Ref(value.row_ids, labels, value.many), count
        return value, 0
    if isinstance(value, list):
        total = 0
        items = []
        for item in value:
            clean, count = strip_nul(item)
            items.append(clean)
            total += count
        return (items, total) if total else (value, 0)
    return value, 0


@dataclass
class NulColumn:
    """NUL characters removed from one column of one table."""

    column: str
    first_row: int
    first_chars: int
    chars: int = 0
    cells: int = 0


@dataclass
class TableFindings:
    """One read of one table (a file, a Grist table). `unit` names its rows: `line` for CSV
    (the physical line where the record starts), `row` for Grist's row ids."""

    where: str
    unit: str
    nul: dict[str, NulColumn] = field(default_factory=dict)
    malformed: dict[int, str] = field(default_factory=dict)  # line → why

    def removed_nul(self, column: str, row: int, chars: int) -> None:
        found = self.nul.get(column)
        if found is None:
            found = self.nul[column] = NulColumn(column, row, chars)
        found.chars += chars
        found.cells += 1

    def strip_cells(self, cells: dict[str, Any], row: int) -> dict[str, int]:
        """Remove NUL characters from a row's cells in place; returns how many per column."""
        removed = {}
        for column, value in cells.items():
            clean, count = strip_nul(value)
            if count:
                cells[column] = clean  # replacing a value while iterating is safe; adding is not
                removed[column] = count
                self.removed_nul(column, row, count)
        return removed

    def stripped(self, cells: dict[str, Any], row: int) -> dict[str, Any]:
        """`cells` with NUL characters removed (in place), for use in an expression."""
        self.strip_cells(cells, row)
        return cells

    def strip_columns(self, cells: dict[str, Any], columns: list[str], row: int) -> None:
        """Remove NUL characters from these columns of a row's cells, in place."""
        for column in columns:
            clean, count = strip_nul(cells.get(column))
            if count:
                cells[column] = clean
                self.removed_nul(column, row, count)

    def malformed_row(self, line: int, why: str) -> None:
        self.malformed[line] = why

    def nul_message(self, column: NulColumn) -> str:
        return (
            f"{self.where} {self.unit} {column.first_row}, column {column.column}: "
            f"{_plural(column.first_chars, 'NUL character')} removed ({_plural(column.cells, 'cell')} in all)"
        )

    def malformed_message(self) -> str:
        lines = sorted(self.malformed.items())
        listed = ", ".join(f"{self.unit} {line} ({why})" for line, why in lines[:_LISTED_ROWS])
        more = f", and {len(lines) - _LISTED_ROWS} more" if len(lines) > _LISTED_ROWS else ""
        return f"skipped {_plural(len(lines), 'malformed row')}: {self.where} {listed}{more}"

    def messages(self) -> list[str]:
        out = [self.nul_message(c) for c in self.nul.values()]
        if self.malformed:
            out.append(self.malformed_message())
        return out

    def __bool__(self) -> bool:
        return bool(self.nul or self.malformed)


@dataclass
class SourceFindings:
    """Every table one source read, by where it came from. A table read again starts afresh,
    so reading twice never counts twice."""

    tables: dict[str, TableFindings] = field(default_factory=dict)

    def start(self, where: str, unit: str) -> TableFindings:
        found = self.tables[where] = TableFindings(where, unit)
        return found

    def nul_columns(self) -> list[tuple[TableFindings, NulColumn]]:
        return [(t, c) for t in self.tables.values() for c in t.nul.values()]

    def malformed_tables(self) -> list[TableFindings]:
        return [t for t in self.tables.values() if t.malformed]

    def messages(self) -> list[str]:
        return [m for t in self.tables.values() for m in t.messages()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "nul_characters": [
                {
                    "table": t.where,
                    "column": c.column,
                    "unit": t.unit,
                    "first": c.first_row,
                    "characters": c.chars,
                    "cells": c.cells,
                }
                for t, c in self.nul_columns()
            ],
            "malformed_rows": [
                {
                    "table": t.where,
                    "count": len(t.malformed),
                    "unit": t.unit,
                    "rows": [{"at": line, "why": why} for line, why in sorted(t.malformed.items())],
                }
                for t in self.malformed_tables()
            ],
        }

    def __bool__(self) -> bool:
        return any(self.tables.values())


def findings_of(*sources: Any) -> SourceFindings:
    """The findings of these sources together (sources built elsewhere may have none)."""
    merged = SourceFindings()
    for source in sources:
        found = getattr(source, "findings", None)
        if isinstance(found, SourceFindings):
            merged.tables.update({k: v for k, v in found.tables.items() if v})
    return merged
