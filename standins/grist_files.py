"""Grist documents for tests: one spec, rendered the ways a Grist server stores and serves it.

A `Doc` is a list of `Table`s whose cells are plain Python values by column type: Text `str`,
Numeric `float`, Int `int`, Bool `bool`, Date `datetime.date`, DateTime `datetime.datetime` (UTC
when naive), Ref a row id (0/None = empty), RefList/ChoiceList a list, a failed formula
`CellError("NameError")`. From it:

- `build_grist_file(doc, path)` writes a `.grist` file (SQLite + `_grist_Tables`,
  `_grist_Tables_column`, `manualSort`, `gristHelper_Display*` columns) as Grist stores it;
- `api_records(...)`, `csv_text(...)` render the REST `/records` answer and the CSV export
  (used by `standins.fake_grist`);
- `write_csv_folder(doc, folder)` writes the CSV export of every table into a folder.

Built from what the real server answers (see DESIGN §4), not by importing anything from vedana.
"""

from __future__ import annotations

import csv
import io
import json
import marshal
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class CellError:
    """A formula cell that failed, e.g. `CellError("NameError")`."""

    name: str = "NameError"


@dataclass
class Col:
    id: str
    type: str = "Text"
    formula: str = ""  # set → a formula column (its values still come from the rows)
    visible: str = ""  # Ref/RefList: the target column Grist shows (adds a display helper)
    label: str | None = None  # the CSV export heads the column with its label
    # widgetOptions the export formats by: dateFormat, timeFormat, numMode ("decimal")
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def is_formula(self) -> bool:
        return bool(self.formula)

    @property
    def target(self) -> str | None:
        kind, _, target = self.type.partition(":")
        return target if kind in ("Ref", "RefList") else None


@dataclass
class Table:
    id: str
    columns: list[Col]
    rows: list[dict[str, Any]] = field(default_factory=list)
    row_ids: list[int] | None = None  # default 1..n

    def ids(self) -> list[int]:
        return self.row_ids if self.row_ids is not None else list(range(1, len(self.rows) + 1))

    def records(self) -> list[tuple[int, dict[str, Any]]]:
        return list(zip(self.ids(), self.rows, strict=True))

    def col(self, col_id: str) -> Col:
        return next(c for c in self.columns if c.id == col_id)


@dataclass
class Doc:
    doc_id: str
    tables: list[Table]
    # "errors": a failed cell is `null` in `fields` plus an entry in the record's `errors`
    # (what grist-core 1.7 answers); "E": the cell itself is `["E", "NameError"]`.
    error_style: str = "errors"

    def table(self, table_id: str) -> Table | None:
        return next((t for t in self.tables if t.id == table_id), None)

    def content_key(self) -> str:
        """Changes whenever any table's content changes (the fake's /states hash)."""
        return json.dumps(
            [(t.id, [c.__dict__ for c in t.columns], t.records()) for t in self.tables],
            default=repr,
            sort_keys=True,
        )

    def display(self, table: Table, col: Col, value: Any) -> list[str]:
        """Display labels of a Ref/RefList cell (the target's visible column)."""
        ids = value if isinstance(value, list) else [value] if value else []
        target = self.table(col.target or "")
        if target is None:
            return [f"{col.target}[{i}]" for i in ids]
        by_id = dict(target.records())
        out = []
        for row_id in ids:
            row = by_id.get(row_id)
            if not col.visible:
                out.append(f"{target.id}[{row_id}]")
            elif row is not None:
                out.append(text_of(row.get(col.visible), target.col(col.visible)))
        return out


# --- values in each representation ---------------------------------------------------------


def epoch(value: date | datetime) -> float:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    return float((value - date(1970, 1, 1)).days * 86400)


def number_text(value: float | int) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def shown_number(value: float | int, options: dict[str, Any]) -> str:
    """A number as grist-core's NumericFormatter shows it by default: Intl.NumberFormat with at
    most 10 decimals and no grouping (`numMode: "decimal"` groups thousands)."""
    text = f"{value:.10f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)
    if options.get("numMode") == "decimal":
        whole, dot, frac = text.partition(".")
        text = f"{int(whole):,}" + dot + frac
    return "0" if text == "-0" else text


# moment.js tokens of Grist's date/time formats → strftime's (enough for the tests' formats).
_MOMENT = [("YYYY", "%Y"), ("MM", "%m"), ("DD", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S")]


def shown_datetime(value: date, fmt: str) -> str:
    out = fmt
    for token, code in _MOMENT:
        out = out.replace(token, value.strftime(code))
    if isinstance(value, datetime):  # `h:mma`: 12-hour clock without padding, am/pm
        out = out.replace("h", str(int(value.strftime("%I")))).replace("a", value.strftime("%p").lower())
    return out


def text_of(value: Any, col: Col) -> str:
    """A non-reference cell as the CSV export shows it (grist-core's ValueFormatter)."""
    if value is None:
        return ""
    if isinstance(value, CellError):  # RaisedException.toString
        return "#DIV/0!" if value.name == "ZeroDivisionError" else f"#{value.name}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):  # in the column's time zone, "YYYY-MM-DD h:mma" by default
        zone = ZoneInfo(col.type.partition(":")[2] or "UTC")
        local = (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(zone)
        time_format = col.options.get("timeFormat", "h:mma")
        return shown_datetime(local, f"{col.options.get('dateFormat') or 'YYYY-MM-DD'} {time_format}")
    if isinstance(value, date):
        return shown_datetime(value, col.options.get("dateFormat") or "YYYY-MM-DD")
    if isinstance(value, int | float):
        return shown_number(value, col.options)
    if isinstance(value, list):
        return _join([text_of(v, col) for v in value])
    return str(value)


def _join(items: list[str]) -> str:
    """A list cell in the export: items joined with ", ", quoted when they hold a comma or quote."""

    def quoted(item: str) -> str:
        return '"' + item.replace('"', '""') + '"' if ("," in item or '"' in item) else item

    return ", ".join(quoted(i) for i in items)


def storage_value(value: Any, col: Col) -> Any:
    """The cell as Grist stores it in SQLite."""
    base = col.type.partition(":")[0]
    if isinstance(value, CellError):
        return marshal.dumps(["E", value.name], 2)
    if base == "Ref":
        return int(value or 0)
    if value is None:
        return "" if base == "Text" and not col.is_formula else None
    if base in ("RefList", "ChoiceList"):
        return json.dumps(list(value), separators=(",", ":")) if value else None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, date):
        return epoch(value)
    if isinstance(value, list):
        return marshal.dumps(["L", *value], 2)
    return value


def api_value(value: Any, col: Col) -> Any:
    """The cell as the REST `/records` answer shows it."""
    base = col.type.partition(":")[0]
    if base == "Ref":
        return int(value or 0)
    if value is None:
        return "" if base == "Text" and not col.is_formula else None
    if base in ("RefList", "ChoiceList") or isinstance(value, list):
        return ["L", *value] if value else None
    if isinstance(value, date):
        return epoch(value)
    return value


# --- the .grist file -----------------------------------------------------------------------

_AFFINITY = {
    "Numeric": "NUMERIC", "Int": "INTEGER", "Bool": "BOOLEAN", "Date": "DATE", "DateTime": "DATETIME",
    "Ref": "INTEGER",
}  # fmt: skip


def _helper_columns(table: Table) -> list[tuple[Col, str]]:
    """(Ref column, its display helper's id) for every Ref/RefList column with a visible col."""
    out, n = [], 0
    for col in table.columns:
        if col.target and col.visible:
            n += 1
            out.append((col, "gristHelper_Display" + (str(n) if n > 1 else "")))
    return out


def build_sqlite(doc: Doc, conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE _grist_Tables (id INTEGER PRIMARY KEY, tableId TEXT DEFAULT '', primaryViewId "
        "INTEGER DEFAULT 0, summarySourceTable INTEGER DEFAULT 0, onDemand BOOLEAN DEFAULT 0, "
        "rawViewSectionRef INTEGER DEFAULT 0, recordCardViewSectionRef INTEGER DEFAULT 0)"
    )
    conn.execute(
        "CREATE TABLE _grist_Tables_column (id INTEGER PRIMARY KEY, parentId INTEGER DEFAULT 0, "
        "parentPos NUMERIC DEFAULT 1e999, colId TEXT DEFAULT '', type TEXT DEFAULT '', widgetOptions "
        "TEXT DEFAULT '', isFormula BOOLEAN DEFAULT 0, formula TEXT DEFAULT '', label TEXT DEFAULT '', "
        "description TEXT DEFAULT '', untieColIdFromLabel BOOLEAN DEFAULT 0, summarySourceCol INTEGER "
        "DEFAULT 0, displayCol INTEGER DEFAULT 0, visibleCol INTEGER DEFAULT 0, rules TEXT DEFAULT NULL, "
        "reverseCol INTEGER DEFAULT 0, recalcWhen INTEGER DEFAULT 0, recalcDeps TEXT DEFAULT NULL)"
    )
    # Each table's page (view) and its sections, numbered as Grist numbers them: the page's own
    # record section, the raw-data section, the record card (what row links `#a1.s<id>.r<row>` use).
    conn.execute(
        "CREATE TABLE _grist_Views_section (id INTEGER PRIMARY KEY, tableRef INTEGER DEFAULT 0, "
        "parentId INTEGER DEFAULT 0, parentKey TEXT DEFAULT '')"
    )
    conn.execute("CREATE TABLE _grist_DocInfo (id INTEGER PRIMARY KEY, docId TEXT DEFAULT '')")
    conn.execute("INSERT INTO _grist_DocInfo (id, docId) VALUES (1, ?)", (doc.doc_id,))

    col_refs: dict[tuple[str, str], int] = {}
    next_ref = 1
    for table in doc.tables:  # number every column first: visibleCol points into other tables
        for col_id in ["manualSort", *(c.id for c in table.columns), *(h for _, h in _helper_columns(table))]:
            col_refs[(table.id, col_id)] = next_ref
            next_ref += 1

    for table_ref, table in enumerate(doc.tables, start=1):
        conn.execute(
            "INSERT INTO _grist_Tables (id, tableId, primaryViewId, rawViewSectionRef, recordCardViewSectionRef) "
            "VALUES (?, ?, ?, ?, ?)",
            (table_ref, table.id, table_ref, 3 * table_ref - 1, 3 * table_ref),
        )
        conn.executemany(
            "INSERT INTO _grist_Views_section (id, tableRef, parentId, parentKey) VALUES (?, ?, ?, ?)",
            [(3 * table_ref - 2, table_ref, table_ref, "record"), (3 * table_ref - 1, table_ref, 0, "record"),
             (3 * table_ref, table_ref, 0, "single")],
        )  # fmt: skip
        helpers = dict((c.id, h) for c, h in _helper_columns(table))
        meta = [("manualSort", "ManualSortPos", 0, "", "", 0, 0, "")]
        for col in table.columns:
            display = col_refs[(table.id, helpers[col.id])] if col.id in helpers else 0
            visible = col_refs.get((col.target or "", col.visible), 0) if col.visible else 0
            options = json.dumps(col.options) if col.options else ""
            meta.append(
                (
                    col.id,
                    col.type,
                    int(col.is_formula),
                    col.formula,
                    col.label or col.id,
                    display,
                    visible,
                    options,
                )
            )
        for col in table.columns:
            if col.id in helpers:
                meta.append(
                    (helpers[col.id], "Any", 1, f"${col.id}.{col.visible}", helpers[col.id], 0, 0, "")
                )
        for pos, (col_id, typ, is_formula, formula, label, display, visible, options) in enumerate(
            meta, start=1
        ):
            conn.execute(
                "INSERT INTO _grist_Tables_column (id, parentId, parentPos, colId, type, isFormula, formula, "
                "label, displayCol, visibleCol, widgetOptions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    col_refs[(table.id, col_id)],
                    table_ref,
                    pos,
                    col_id,
                    typ,
                    is_formula,
                    formula,
                    label,
                    display,
                    visible,
                    options,
                ),
            )

        columns = ["id INTEGER PRIMARY KEY", "manualSort NUMERIC"]
        columns += [f'"{c.id}" {_AFFINITY.get(c.type.partition(":")[0], "TEXT")}' for c in table.columns]
        columns += [f'"{h}" BLOB' for h in helpers.values()]
        conn.execute(f'CREATE TABLE "{table.id}" ({", ".join(columns)})')
        names = ["id", "manualSort", *(c.id for c in table.columns), *helpers.values()]
        placeholders = ", ".join("?" for _ in names)
        quoted = ", ".join(f'"{n}"' for n in names)
        for row_id, row in table.records():
            values = [row_id, row_id] + [storage_value(row.get(c.id), c) for c in table.columns]
            for col in table.columns:
                if col.id in helpers:
                    labels = doc.display(table, col, row.get(col.id))
                    if col.type.startswith("RefList:"):
                        values.append(marshal.dumps(["L", *labels], 2))
                    else:
                        values.append(labels[0] if labels else "")
            conn.execute(f'INSERT INTO "{table.id}" ({quoted}) VALUES ({placeholders})', values)
    conn.commit()


def build_grist_file(doc: Doc, path: Path) -> Path:
    path = Path(path)
    if path.exists():
        path.unlink()
    conn = sqlite3.connect(path)
    try:
        build_sqlite(doc, conn)
    finally:
        conn.close()
    return path


# --- the REST answer and the CSV export ------------------------------------------------------


def api_records(doc: Doc, table: Table, *, hidden: bool) -> list[dict[str, Any]]:
    helpers = dict((c.id, h) for c, h in _helper_columns(table))
    out = []
    for row_id, row in table.records():
        fields: dict[str, Any] = {}
        errors: dict[str, str] = {}
        if hidden:
            fields["manualSort"] = row_id
        for col in table.columns:
            value = row.get(col.id)
            if isinstance(value, CellError):
                if doc.error_style == "E":
                    fields[col.id] = ["E", value.name]
                else:
                    fields[col.id] = None
                    errors[col.id] = value.name
            else:
                fields[col.id] = api_value(value, col)
            if hidden and col.id in helpers:
                labels = doc.display(table, col, value)
                fields[helpers[col.id]] = (
                    ["L", *labels] if col.type.startswith("RefList:") else (labels or [""])[0]
                )
        record: dict[str, Any] = {"id": row_id, "fields": fields}
        if errors:
            record["errors"] = errors
        out.append(record)
    return out


def csv_text(doc: Doc, table: Table, header: str = "label") -> str:
    """The table's CSV export; `header="colId"` heads the columns by id instead of label."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([c.id if header == "colId" else c.label or c.id for c in table.columns])
    for _, row in table.records():
        cells = []
        for col in table.columns:
            value = row.get(col.id)
            if col.target and not isinstance(value, CellError):
                cells.append(_join(doc.display(table, col, value)) if value else "")
            else:
                cells.append(text_of(value, col))
        writer.writerow(cells)
    return buf.getvalue()


def write_csv_folder(doc: Doc, folder: Path) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for table in doc.tables:
        (folder / f"{table.id}.csv").write_text(csv_text(doc, table), encoding="utf-8")
    return folder


# --- data model documents ----------------------------------------------------------------


@dataclass
class Attr:
    owner: str  # the anchor noun or the link sentence
    name: str
    dtype: str = ""
    embeddable: bool = False
    description: str = ""
    embed_threshold: float | None = None
    embed_top_n: int | None = None


@dataclass
class LinkSpec:
    sentence: str
    anchor1: str
    anchor2: str
    has_direction: bool = False
    anchor1_link_column_name: str = ""
    anchor2_link_column_name: str = ""
    description: str = ""


def model_doc(
    doc_id: str,
    anchors: list[str],
    attributes: list[Attr],
    links: list[LinkSpec],
    *,
    link_attributes: list[Attr] | None = None,
    queries: list[tuple[str, str]] | None = None,
    prompts: list[tuple[str, str]] | None = None,
    blank_rows: bool = True,
) -> Doc:
    """A Data Model document shaped like the reference one (Refs to Anchors/Links by row id,
    shown by noun/sentence; a trailing blank row in each table, as Grist users leave them)."""
    anchor_ids = {noun: i for i, noun in enumerate(anchors, start=1)}
    link_ids = {lk.sentence: i for i, lk in enumerate(links, start=1)}
    blank = [{}] if blank_rows else []

    def attribute_rows(items: list[Attr], ids: dict[str, int], owner_col: str) -> list[dict[str, Any]]:
        return [
            {
                owner_col: ids[a.owner],
                "attribute_name": a.name,
                "description": a.description or f"{a.name} of {a.owner}",
                "dtype": a.dtype,
                "embeddable": a.embeddable,
                "embed_threshold": a.embed_threshold,
                "embed_top_n": a.embed_top_n,
                "data_example": "",
                "query": "",
            }
            for a in items
        ] + blank

    attribute_cols = [
        Col("attribute_name"),
        Col("description"),
        Col("data_example"),
        Col("embeddable", "Bool"),
        Col("query"),
        Col("dtype"),
        Col("embed_threshold", "Numeric"),
        Col("embed_top_n", "Int"),
    ]
    return Doc(
        doc_id,
        [
            Table(
                "Anchors",
                [
                    Col("noun"),
                    Col("description"),
                    Col("id_example"),
                    Col("query"),
                    Col("Raw", "Any", formula="Raw.x"),
                ],
                [
                    {"noun": n, "description": f"a {n}", "id_example": f"{n}:1", "Raw": CellError()}
                    for n in anchors
                ]
                + [{"Raw": CellError()}] * len(blank),
            ),
            Table(
                "Anchor_attributes",
                [Col("anchor", "Ref:Anchors", visible="noun"), *attribute_cols],
                attribute_rows(attributes, anchor_ids, "anchor"),
            ),
            Table(
                "Links",
                [
                    Col("sentence"),
                    Col("description"),
                    Col("query"),
                    Col("anchor1", "Ref:Anchors", visible="noun"),
                    Col("anchor2", "Ref:Anchors", visible="noun"),
                    Col("anchor1_link_column_name"),
                    Col("anchor2_link_column_name"),
                    Col("has_direction", "Bool"),
                ],
                [
                    {
                        "sentence": lk.sentence,
                        "description": lk.description or lk.sentence,
                        "anchor1": anchor_ids[lk.anchor1],
                        "anchor2": anchor_ids[lk.anchor2],
                        "anchor1_link_column_name": lk.anchor1_link_column_name,
                        "anchor2_link_column_name": lk.anchor2_link_column_name,
                        "has_direction": lk.has_direction,
                    }
                    for lk in links
                ],
            ),
            Table(
                "Link_attributes",
                [Col("link", "Ref:Links", visible="sentence"), *attribute_cols],
                attribute_rows(link_attributes or [], link_ids, "link"),
            ),
            Table(
                "Queries",
                [Col("query_name"), Col("query_example")],
                [{"query_name": n, "query_example": e} for n, e in queries or []] + blank,
            ),
            Table("Prompts", [Col("name"), Col("text")], [{"name": n, "text": t} for n, t in prompts or []]),
        ],
    )
