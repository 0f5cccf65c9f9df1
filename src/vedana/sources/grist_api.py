"""A document on a Grist server, read over the REST API.

Column types come from `/tables/{t}/columns?hidden=true`. Rows come either from `/records`
(one request per table; used for the small Data Model tables) or from `/sql`, paged by row id
(`WHERE id > ? ORDER BY id LIMIT n`), which keeps memory bounded however large a table is and
stays correct when rows are added or removed between pages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal
from urllib.parse import quote

from vedana.sources.base import CELL_ERROR, RawTable, Ref
from vedana.sources.cells import from_api, from_sqlite, unbuffer
from vedana.sources.findings import SourceFindings, TableFindings
from vedana.sources.grist_changes import DocChanges, read_changes
from vedana.sources.grist_file import quote_ident
from vedana.sources.grist_http import GristClient
from vedana.sources.grist_meta import TableMeta, build_meta

DEFAULT_PAGE_SIZE = 5000
# Kept with a raw record whose NUL characters were removed: {column: how many}. Not a possible
# Grist column id, so never read as a cell; lets a sync reading the kept copy report them.
NUL_REMOVED = "vedana:nul"
# SQLite's default limit on bound parameters is 999 (older builds) or 32766.
_IDS_PER_QUERY = 900


class GristApiSource:
    kind = "grist-api"

    def __init__(
        self,
        client: GristClient,
        *,
        rows_via: Literal["sql", "records"] = "sql",
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> None:
        self.client = client
        self.rows_via = rows_via
        self.page_size = page_size
        self._table_ids: list[str] | None = None
        self._column_records: dict[str, list[dict[str, Any]]] = {}
        self.rows_fetched = 0  # data rows downloaded, for the sync report (and its tests)
        self.findings = SourceFindings()

    def describe(self) -> str:
        return f"Grist document {self.client.doc_id} on {self.client.server}"

    def table_names(self) -> list[str]:
        if self._table_ids is None:
            self._table_ids = self.client.table_ids()
        return list(self._table_ids)

    def _columns_of(self, table: str) -> list[dict[str, Any]]:
        if table not in self._column_records:
            self._column_records[table] = self.client.column_records(table)
        return self._column_records[table]

    def _column_id(self, table: str, colref: int) -> str | None:
        if table not in self.table_names():
            return None
        return next(
            (r["id"] for r in self._columns_of(table) if int(r["fields"].get("colRef") or 0) == colref),
            None,
        )

    def meta(self, name: str) -> TableMeta:
        records = self._columns_of(name)

        def resolve(colref: int) -> str | None:
            # visibleCol is a colRef in the *target* table: ask that table's columns.
            target = _ref_target_of(records, colref)
            return self._column_id(target, colref) if target else None

        return build_meta(records, resolve)

    def table(self, name: str) -> RawTable | None:
        if name not in self.table_names():
            return None
        meta = self.meta(name)
        if self.rows_via == "records":
            return RawTable(name=name, columns=meta.columns, _rows=lambda: self._records(name, meta))
        count = self.client.sql(f"SELECT COUNT(*) AS n FROM {quote_ident(name)}")
        total = int(count[0].get("n", 0)) if count else None
        return RawTable(
            name=name, columns=meta.columns, _rows=lambda: self._sql_pages(name, meta), row_count=total
        )

    def _records(self, name: str, meta: TableMeta) -> Iterator[tuple[int, dict[str, Any]]]:
        body = self.client.get_json(f"tables/{quote(name, safe='')}/records", {"hidden": "true"})
        findings = self.findings.start(name, "row")
        for record in body.get("records", []):
            cells = decode_api_record(record, meta)
            # The Data Model's tables are small: every record is looked at.
            findings.strip_cells(cells, int(record["id"]))
            yield int(record["id"]), cells

    def _sql_pages(self, name: str, meta: TableMeta) -> Iterator[tuple[int, dict[str, Any]]]:
        # raw_records counts the NULs of text cells as it removes them; decoded_rows those in lists.
        findings = self.findings.start(name, "row")
        yield from decoded_rows(self.raw_records(name, findings=findings), meta, findings, kept=False)

    # --- raw records, for a sync that keeps a copy of the document (`etl/grist_mirror.py`) ----

    def raw_records(
        self, name: str, columns: list[str] | None = None, *, findings: TableFindings | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every row of the table as `/sql` sends it (only `id` and `columns`, if given), paged
        by row id, NUL characters removed from its text (and counted in `findings`)."""
        last_id = 0
        if findings is None:
            findings = self.findings.start(name, "row")
        selected = ", ".join(quote_ident(c) for c in ["id", *columns]) if columns is not None else "*"
        query = f"SELECT {selected} FROM {quote_ident(name)} WHERE id > ? ORDER BY id LIMIT ?"
        while True:
            page, nul = self.client.sql_page(query, [last_id, self.page_size])
            self.rows_fetched += len(page)
            if nul:
                _strip_page(page, findings)
            yield from page
            if len(page) < self.page_size:
                return
            last_id = int(page[-1]["id"])

    def raw_records_by_id(self, name: str, ids: Iterable[int]) -> Iterator[dict[str, Any]]:
        """The rows with these ids (those that still exist), as `/sql` sends them."""
        wanted = sorted(ids)
        findings = self.findings.start(name, "row")
        for start in range(0, len(wanted), _IDS_PER_QUERY):
            chunk = wanted[start : start + _IDS_PER_QUERY]
            marks = ", ".join("?" * len(chunk))
            page, nul = self.client.sql_page(
                f"SELECT * FROM {quote_ident(name)} WHERE id IN ({marks}) ORDER BY id", chunk
            )
            self.rows_fetched += len(page)
            if nul:
                _strip_page(page, findings)
            yield from page

    def table_of_records(
        self, name: str, records: Callable[[], Iterable[dict[str, Any]]], row_count: int | None = None
    ) -> RawTable:
        """The table with its columns from the server and its rows from `records` (raw, as
        `/sql` sends them): how a sync reads its kept copy."""
        meta = self.meta(name)

        def rows() -> Iterator[tuple[int, dict[str, Any]]]:
            return decoded_rows(records(), meta, self.findings.start(name, "row"), kept=True)

        return RawTable(name=name, columns=meta.columns, _rows=rows, row_count=row_count)

    def changes_since(self, state: str) -> DocChanges | str:
        """The rows changed since `state`, or why they cannot be known (the server's history
        does not reach back that far, or the document's shape changed)."""
        if state not in self.client.state_hashes():
            return "the document's history does not reach back to the last sync"
        return read_changes(self.client.compare(state))

    def state(self) -> str | None:
        return self.client.latest_action_hash()

    def close(self) -> None:
        self.client.close()


def _strip_page(page: list[dict[str, Any]], findings: TableFindings) -> None:
    """Remove NUL characters from raw records, before they are kept (jsonb refuses them too)."""
    for record in page:
        removed = findings.strip_cells(record, int(record.get("id") or 0))
        if removed:
            record[NUL_REMOVED] = removed


# Decoded values whose strings were escaped or marshalled while kept: lists, and references
# (their display values come from a helper column, JSON text for a RefList).
_MAY_HIDE_NUL = (list, Ref)


def decoded_rows(
    records: Iterable[dict[str, Any]], meta: TableMeta, findings: TableFindings, *, kept: bool
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Decoded rows. NULs removed from text before the rows were kept (`kept`) are counted from
    their mark; strings inside lists (JSON text, where a NUL is escaped, or a marshalled
    `{"type": "Buffer"}`) are seen only once decoded, and are cleaned here."""
    for record in records:
        row_id = int(record["id"])
        if kept and (removed := record.get(NUL_REMOVED)):
            for column, count in removed.items():
                findings.removed_nul(column, row_id, count)
        cells = decode_record(record, meta)
        lists = [column for column, value in cells.items() if value.__class__ in _MAY_HIDE_NUL]
        if lists:
            findings.strip_columns(cells, lists, row_id)
        yield row_id, cells


def decode_api_record(record: dict[str, Any], meta: TableMeta) -> dict[str, Any]:
    """A `/records` record's cells (a failed cell is `null` plus an entry in `errors`, or
    `["E", …]` itself)."""
    fields = record.get("fields", {})
    errors = record.get("errors") or {}
    cells: dict[str, Any] = {}
    for col_id, column in meta.columns.items():
        if col_id in errors:
            cells[col_id] = CELL_ERROR
        elif col_id in fields:
            helper = meta.display_helpers.get(col_id)
            cells[col_id] = from_api(fields[col_id], column, fields.get(helper) if helper else None)
    return cells


def decode_record(record: dict[str, Any], meta: TableMeta) -> dict[str, Any]:
    """A raw `/sql` record's cells, decoded like every source's (Refs, errors, dates…)."""
    helpers = meta.display_helpers
    return {
        col_id: from_sqlite(
            unbuffer(record.get(col_id)),
            column,
            unbuffer(record.get(helpers[col_id])) if col_id in helpers else None,
        )
        for col_id, column in meta.columns.items()
        if col_id in record
    }


def _ref_target_of(records: list[dict[str, Any]], visible_colref: int) -> str | None:
    """The table a Ref column with this visibleCol points at."""
    for record in records:
        fields = record["fields"]
        if int(fields.get("visibleCol") or 0) == visible_colref:
            kind, _, target = str(fields.get("type") or "").partition(":")
            if kind in ("Ref", "RefList") and target:
                return target
    return None
