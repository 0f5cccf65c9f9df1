"""What Grist's CSV export shows of each column, and how to read it back.

The export writes every cell for display, through the column's formatter (grist-core
`ValueFormatter`, chosen by type and widget options): a Ref without a shown column as
`Table[7]`, a RefList as `Table[1], Table[2]`, a formula error as `#DIV/0!` or `#NameError`, a
DateTime as `2024-03-15 10:30am` in the column's time zone, a Numeric with at most ten decimals
(or as `$1,234.50`, `12%`… by its number format), a Date by its date format. Text, Choice,
ChoiceList, Bool, and Int and Date in their default formats come back unchanged; every other
column is read from the document's stored values instead (`GristCsvSource`), and only when those
cannot be had is the shown text parsed here, with what it lost said once per column.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vedana.sources.base import CELL_ERROR, Column, Ref
from vedana.sources.cells import from_text, is_error_text, split_list

# Types whose default display is the value itself.
_PLAIN = frozenset({"Text", "Choice", "ChoiceList", "Bool"})


@dataclass(frozen=True)
class ExportColumn:
    """One column of a table as the export shows it."""

    column: Column
    has_formula: bool = False  # a formula column, or a data column with a trigger formula
    options: dict[str, Any] = field(default_factory=dict)  # widgetOptions

    @classmethod
    def from_record(cls, column: Column, fields: dict[str, Any]) -> ExportColumn:
        try:
            options = json.loads(fields.get("widgetOptions") or "{}")
        except ValueError:
            options = {}
        return cls(
            column=column,
            has_formula=bool(fields.get("isFormula")) or bool(str(fields.get("formula") or "").strip()),
            options=options if isinstance(options, dict) else {},
        )

    @property
    def faithful(self) -> bool:
        """Does the shown text carry the stored value whole?"""
        if self.has_formula:
            return False  # an error and text that looks like one read the same
        base = self.column.base_type
        if base in _PLAIN:
            return True
        if base == "Int":
            return not any(self.options.get(k) for k in ("numMode", "numSign", "decimals"))
        if base == "Date":
            return self.options.get("dateFormat") in (None, "", "YYYY-MM-DD")
        return False

    def loss(self) -> str:
        """What reading this column from its shown text loses (for the sync report)."""
        base = self.column.base_type
        if base in ("Ref", "RefList"):
            if self.column.visible_col:
                return f"references matched by their shown {self.column.visible_col!r}, not by row id"
            return "references read from their shown row ids (`Table[7]`)"
        if base == "DateTime":
            return "date-times read as shown, to the minute or second of their format"
        if base == "Numeric":
            return "numbers read as shown (at most 10 decimals, or by their number format)"
        if base == "Date":
            return f"dates read in their shown format {self.options.get('dateFormat')!r}"
        if self.has_formula:
            return "formula errors told from text only by how they look (`#DIV/0!`)"
        return "values read as shown text"

    def decode(self, text: str | None) -> Any:
        """The cell from its shown text (used for faithful columns, and for the others only when
        the stored values could not be read)."""
        if text is None or text == "":
            return from_text(text, self.column)
        if self.has_formula and is_error_text(text):
            return CELL_ERROR
        base = self.column.base_type
        if base in ("Ref", "RefList"):
            return self._ref(text)
        if base == "DateTime":
            return self._datetime(text)
        if base == "Date" and not self.faithful:
            return self._date(text)
        if base in ("Int", "Numeric") and any(self.options.get(k) for k in ("numMode", "numSign")):
            return self._number(text)
        if base in _PLAIN or base in ("Int", "Numeric", "Date"):
            value = from_text(text, self.column)
            return text if value is CELL_ERROR else value
        return text

    def _ref(self, text: str) -> Ref:
        many = self.column.base_type == "RefList"
        items = split_list(text) if many else [text.strip()]
        if not self.column.visible_col:
            # Shown as `Table[7]` (or `[7]` for a hidden table): the row id itself.
            target = re.escape(self.column.ref_table or "")
            pattern = re.compile(rf"^(?:{target})?\[(\d+)\]$")
            ids = [m.group(1) for m in (pattern.match(i) for i in items) if m]
            if ids and len(ids) == len(items):
                return Ref(row_ids=tuple(int(i) for i in ids), many=many)
        return Ref(labels=tuple(items), many=many)

    def _number(self, text: str) -> Any:
        """`1,234.5`, `$1,234.50`, `(12.5)`, `12%`: a number by an en-US number format."""
        shown = text.strip()
        negative = shown.startswith("(") and shown.endswith(")")
        digits = re.sub(r"[^\d.eE+-]", "", shown.replace(",", ""))
        try:
            value = float(digits)
        except ValueError:
            return text
        value = (-value if negative else value) / (100 if shown.endswith("%") else 1)
        return int(value) if self.column.base_type == "Int" and value.is_integer() else value

    def _date(self, text: str) -> str:
        shown = _strptime_format(self.options.get("dateFormat") or "YYYY-MM-DD", "")
        try:
            return datetime.strptime(text.strip(), shown or "").date().isoformat()
        except ValueError:
            return from_text(text, self.column)

    def _datetime(self, text: str) -> str:
        shown = _strptime_format(
            self.options.get("dateFormat") or "YYYY-MM-DD",
            "h:mma" if self.options.get("timeFormat") is None else self.options["timeFormat"],
        )
        if shown is None:
            return text
        try:
            local = datetime.strptime(text.strip(), shown)
        except ValueError:
            return text
        zone = _zone(self.column.type.partition(":")[2])
        return local.replace(tzinfo=zone).astimezone(ZoneInfo("UTC")).isoformat()


# moment.js tokens Grist offers for dates and times → strptime's.
_TOKENS = [
    ("YYYY", "%Y"), ("MMMM", "%B"), ("MMM", "%b"), ("MM", "%m"), ("DD", "%d"), ("Do", ""),
    ("HH", "%H"), ("hh", "%I"), ("h", "%I"), ("mm", "%M"), ("ss", "%S"), ("SSS", "%f"),
    ("A", "%p"), ("a", "%p"), ("M", "%m"), ("D", "%d"), ("YY", "%y"),
]  # fmt: skip


def _strptime_format(date_format: str, time_format: str) -> str | None:
    out = ""
    rest = f"{date_format} {time_format}".strip()
    while rest:
        token = next((t for t in _TOKENS if rest.startswith(t[0])), None)
        if token is not None:
            if not token[1]:
                return None
            out += token[1]
            rest = rest[len(token[0]) :]
        elif rest[0].isalpha():
            return None  # a token this reader does not know (day names, time zone…)
        else:
            out += rest[0].replace("%", "%%")
            rest = rest[1:]
    return out


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")
