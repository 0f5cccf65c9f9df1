"""What reading the data model found: counts per table, skipped rows, missing optional tables."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# A row with no cell filled in; counted, never an error. Also a key of the sync's skip counts.
BLANK_ROW = "blank row"


@dataclass
class DataModelReport:
    counts: dict[str, int] = field(default_factory=dict)  # anchors, links, attributes, …
    skipped: Counter[str] = field(default_factory=Counter)
    missing_tables: list[str] = field(default_factory=list)  # optional tables not in the document
    changed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.counts,
            "skipped": dict(sorted(self.skipped.items())),
            "missing_tables": self.missing_tables,
            "changed": self.changed,
        }
