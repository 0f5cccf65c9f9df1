"""Grist column metadata (`_grist_Tables_column`, or the `/columns` API that serves it) → `Column`.

Both give per column: `colRef` (its row id in `_grist_Tables_column`), `type`, `isFormula`,
`visibleCol` (the colRef, in the target table, of the column a Ref shows) and `displayCol`
(the colRef of the hidden `gristHelper_Display*` formula column holding that shown value).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from vedana.sources.base import Column


@dataclass(frozen=True)
class TableMeta:
    columns: dict[str, Column]
    # Ref column id → id of its display helper column in the same table.
    display_helpers: dict[str, str]
    # Column label → id, for CSV headers (an export's header holds labels).
    labels: dict[str, str]


def build_meta(records: Iterable[dict[str, Any]], colref_to_id: Callable[[int], str | None]) -> TableMeta:
    """`records` are `{"id": colId, "fields": {...}}` in column order."""
    records = list(records)
    local = {int(r["fields"].get("colRef") or 0): r["id"] for r in records}
    columns: dict[str, Column] = {}
    helpers: dict[str, str] = {}
    labels: dict[str, str] = {}
    for record in records:
        col_id, fields = record["id"], record["fields"]
        visible_ref = int(fields.get("visibleCol") or 0)
        columns[col_id] = Column(
            id=col_id,
            type=str(fields.get("type") or ""),
            is_formula=bool(fields.get("isFormula")),
            visible_col=(colref_to_id(visible_ref) or "") if visible_ref else "",
        )
        display_ref = int(fields.get("displayCol") or 0)
        if display_ref and display_ref in local:
            helpers[col_id] = local[display_ref]
        label = fields.get("label")
        if isinstance(label, str) and label:
            labels[label] = col_id
    return TableMeta(columns=columns, display_helpers=helpers, labels=labels)
