"""What changed in a Grist document since a known state, from its own action history.

Grist keeps the document's recent states (`/states`, newest first) and can summarise the net
effect of the actions between two of them (`/compare?left=<old>&right=HEAD`): per table, the ids
of rows added, updated and removed, plus tables and columns added, removed or renamed. Row ids are
listed in full whatever `maxRows` says (that only caps the cell values it inlines, which are not
needed here: changed rows are fetched again).

A summary is only usable row by row while the document's shape stayed the same: a table or column
added, removed or renamed, or any change to the column metadata (types, formulas, display
columns), changes how every row reads, so those mean "read everything".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Metadata tables whose changes alter how rows are read.
_SHAPE_TABLES = ("_grist_Tables", "_grist_Tables_column")


@dataclass
class TableChanges:
    fetch: set[int] = field(default_factory=set)  # rows added or updated: read them again
    removed: set[int] = field(default_factory=set)


@dataclass
class DocChanges:
    head: str  # the state these changes lead to
    tables: dict[str, TableChanges] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(len(t.fetch) + len(t.removed) for t in self.tables.values())


def read_changes(comparison: dict[str, Any]) -> DocChanges | str:
    """The row changes of a `/compare` answer, or why they cannot be applied row by row."""
    details = comparison.get("details") or {}
    summary = details.get("rightChanges")
    head = (comparison.get("right") or {}).get("h")
    if not isinstance(summary, dict) or not head:
        return "the server's comparison had no details"
    if summary.get("tableRenames"):
        return "tables were added, removed or renamed"
    changes = DocChanges(head=str(head))
    for table_id, delta in (summary.get("tableDeltas") or {}).items():
        if not isinstance(delta, dict):
            return f"the server's comparison of {table_id} was not understood"
        if table_id in _SHAPE_TABLES and _touched(delta):
            return "columns changed (type, formula or display)"
        if table_id.startswith("_grist_"):
            continue  # views, sections, access rules…: not data
        if delta.get("columnRenames"):
            return f"columns of {table_id} were added, removed or renamed"
        table = changes.tables.setdefault(table_id, TableChanges())
        table.removed.update(int(i) for i in delta.get("removeRows") or ())
        table.fetch.update(int(i) for i in delta.get("addRows") or ())
        table.fetch.update(int(i) for i in delta.get("updateRows") or ())
    return changes


def _touched(delta: dict[str, Any]) -> bool:
    return bool(delta.get("updateRows") or delta.get("addRows") or delta.get("removeRows"))
