"""A document on a Grist server, read through its CSV export (`/download/csv?tableId=…`).

The export holds display text (`grist_export.py`: what each column type shows and loses). Text,
Choice, ChoiceList, Bool, and Int and Date in their default formats are read from it; the rest
(Ref/RefList, formula columns, DateTime, Numeric, Any, custom formats) come as stored values
from `/sql` (or `/records` where `/sql` is refused), fetched for those columns only and matched
to the export's rows by row id: the export lists a table's rows in row id order, and one plain
text column fetched beside them checks that the two line up. Only when neither endpoint answers
is the shown text parsed, and what that loses is said once per column in the sync report.

The download is streamed row by row; if the connection drops mid-table it is requested again
and the rows already read are skipped.
"""

from __future__ import annotations

import http.client
import io
import itertools
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import urllib3

from vedana.errors import GristError
from vedana.retry import resume
from vedana.sources.base import Column, RawTable, is_helper_column
from vedana.sources.csv_rows import csv_records
from vedana.sources.findings import TableFindings
from vedana.sources.grist_api import GristApiSource, decode_api_record, decoded_rows
from vedana.sources.grist_export import ExportColumn
from vedana.sources.grist_http import TRANSIENT_ERRORS, GristClient
from vedana.sources.grist_meta import TableMeta

# A body cut off mid-stream surfaces from urllib3/http.client, not as a requests error.
DOWNLOAD_ERRORS = (
    *TRANSIENT_ERRORS,
    urllib3.exceptions.HTTPError,
    http.client.HTTPException,
    ConnectionError,
)

Rows = Iterator[tuple[int, dict[str, Any]]]


class GristCsvSource(GristApiSource):
    kind = "grist-csv"

    def __init__(self, client: GristClient) -> None:
        super().__init__(client, rows_via="records")
        # What the export could not carry, once per column (sync adds these to its report).
        self.notes: list[str] = []
        self._noted: set[str] = set()

    def describe(self) -> str:
        return f"Grist document {self.client.doc_id} on {self.client.server} (CSV export)"

    def table(self, name: str) -> RawTable | None:
        if name not in self.table_names():
            return None
        meta = self.meta(name)
        # The export leaves hidden columns out and may head columns by label.
        visible = {cid: col for cid, col in meta.columns.items() if not cid.startswith("gristHelper_")}
        shown = {
            r["id"]: ExportColumn.from_record(visible[r["id"]], r["fields"])
            for r in self._columns_of(name)
            if r["id"] in visible and not is_helper_column(r["id"])
        }
        stored = [cid for cid, col in shown.items() if not col.faithful]
        # A plain text column read both ways: its values must agree row by row.
        check = next((c for c, col in shown.items() if col.faithful and col.column.base_type == "Text"), None)

        def rows() -> Rows:
            findings = self.findings.start(f"{name} (Grist CSV export)", "line")
            values = self._stored_values(name, meta, stored, check)
            if values is None:
                self._note(name, [shown[c] for c in stored])
                yield from self._shown_rows(name, shown, meta.labels, findings)
                return
            for line_no, cells in self._shown_rows(name, shown, meta.labels, findings):
                row_id, stored_cells = next(values, (0, {}))
                if not row_id or not _agree(cells.get(check or ""), stored_cells.pop(check or "", None)):
                    raise self._moved(name, line_no)
                cells.update(stored_cells)
                yield row_id, cells
            if next(values, None) is not None:
                raise self._moved(name, None)

        return RawTable(name=name, columns=visible, _rows=rows)

    # --- the stored values of the columns the export does not carry --------------------------

    def _stored_values(self, name: str, meta: TableMeta, wanted: list[str], check: str | None) -> Rows | None:
        """Row ids (always) and the stored values of `wanted` (plus `check`), in row id order;
        None when the server answers neither `/sql` nor `/records`."""
        columns = [*wanted, *([check] if check else [])]
        sub = TableMeta(
            columns={c: meta.columns[c] for c in columns},
            display_helpers={c: h for c, h in meta.display_helpers.items() if c in wanted},
            labels={},
        )
        findings = self.findings.start(name, "row")  # NULs in the stored values, by row id
        pages = self.raw_records(name, [*columns, *sub.display_helpers.values()], findings=findings)
        try:
            first = next(pages, None)  # /sql answers now, or refuses
        except GristError as exc:
            if not _refused(exc):
                raise
        else:
            records = pages if first is None else itertools.chain([first], pages)
            return decoded_rows(records, sub, findings, kept=False)
        try:
            body = self.client.get_json(f"tables/{quote(name, safe='')}/records", {"hidden": "true"})
        except GristError as exc:
            if not _refused(exc):
                raise
            return None
        answered = sorted(body.get("records", []), key=lambda r: int(r["id"]))
        self.rows_fetched += len(answered)
        return ((int(r["id"]), findings.stripped(decode_api_record(r, sub), int(r["id"]))) for r in answered)

    def _note(self, name: str, columns: list[ExportColumn]) -> None:
        if name not in self._noted:
            self._noted.add(name)
            self.notes.append(
                f"{name}: Grist refused /sql and /records, so its rows are numbered by their line in "
                "the CSV export, not by row id (row-id references and `<noun>:<row>` node ids hold "
                "only while no row was deleted)"
            )
        for col in columns:
            key = f"{name}.{col.column.id}"
            if key not in self._noted:
                self._noted.add(key)
                self.notes.append(
                    f"{key} ({col.column.type}): read from the CSV export as shown: {col.loss()}"
                )

    def _moved(self, name: str, line_no: int | None) -> GristError:
        where = f"at line {line_no + 1}" if line_no is not None else "at its end"
        return GristError(
            f"the CSV export of {name!r} and its stored values from {self.client.server} disagree "
            f"{where}: the document changed while it was read; sync again"
        )

    # --- the export ---------------------------------------------------------------------------

    def _shown_rows(
        self, name: str, shown: dict[str, ExportColumn], labels: dict[str, str], findings: TableFindings
    ) -> Rows:
        done = 0

        def rest() -> Rows:
            nonlocal done
            for line_no, cells in self._download(name, shown, labels, findings, skip=done):
                done = line_no
                yield line_no, cells

        try:
            yield from resume(
                rest,
                self.client.policy,
                retry_on=lambda exc: isinstance(exc, DOWNLOAD_ERRORS),
                what=f"Grist CSV export of {name}",
            )
        except DOWNLOAD_ERRORS as exc:
            raise GristError(
                f"the CSV export of {name!r} from {self.client.server} kept breaking off "
                f"({type(exc).__name__}); try again later"
            ) from None

    def _download(
        self,
        name: str,
        shown: dict[str, ExportColumn],
        labels: dict[str, str],
        findings: TableFindings,
        *,
        skip: int,
    ) -> Rows:
        # `header=colId` heads the columns by id (older servers ignore it and use labels).
        resp = self.client.call("download/csv", params={"tableId": name, "header": "colId"}, stream=True)
        try:
            stream = io.BufferedReader(_ChunkStream(resp.iter_content(chunk_size=64 * 1024)))
            text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")
            header, records = csv_records(text, findings, skip=skip)
            ids = [h if h in shown else labels.get(h, h) for h in header]
            untyped = ExportColumn(Column(id=""))
            for line_no, row in records:
                yield (
                    line_no,
                    {
                        cid: shown.get(cid, untyped).decode(value)
                        for cid, value in zip(ids, row, strict=False)
                        if cid
                    },
                )
        finally:
            resp.close()


def _refused(exc: GristError) -> bool:
    """Grist answered, and said no (no full read access for /sql, an endpoint it lacks)."""
    return exc.status is not None and 400 <= exc.status < 500 and exc.status != 401


def _agree(shown: Any, stored: Any) -> bool:
    """The check column's export text against its stored value (text columns store "" empty)."""
    if stored is not None and not isinstance(stored, str):
        return True  # not plain text: the export shows it otherwise; nothing to compare
    # A row whose cells are all blank reaches here as no cells at all (`csv_records`).
    return (shown or "").strip() == (stored or "").strip()


class _ChunkStream(io.RawIOBase):
    """A readable stream over `Response.iter_content`, which decodes gzip and turns a body cut
    off mid-way into a requests error."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = chunk
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size
