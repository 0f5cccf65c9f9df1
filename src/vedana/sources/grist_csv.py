"""A document on a Grist server, read through its CSV export (`/download/csv?tableId=…`).

The export holds display values (a Ref shows the target's visible column, a RefList those
values joined with ", ", an error `#NameError`); column types and visible columns come from the
columns API of the same server. The download is streamed row by row; if the connection drops
mid-table it is requested again and the rows already read are skipped.
"""

from __future__ import annotations

import http.client
import io
from collections.abc import Iterator
from typing import Any

import urllib3

from vedana.errors import GristError
from vedana.retry import resume
from vedana.sources.base import Column, RawTable
from vedana.sources.cells import from_text
from vedana.sources.csv_rows import csv_records
from vedana.sources.findings import TableFindings
from vedana.sources.grist_api import GristApiSource
from vedana.sources.grist_http import TRANSIENT_ERRORS, GristClient

# A body cut off mid-stream surfaces from urllib3/http.client, not as a requests error.
DOWNLOAD_ERRORS = (
    *TRANSIENT_ERRORS,
    urllib3.exceptions.HTTPError,
    http.client.HTTPException,
    ConnectionError,
)


class GristCsvSource(GristApiSource):
    kind = "grist-csv"

    def __init__(self, client: GristClient) -> None:
        super().__init__(client, rows_via="records")

    def describe(self) -> str:
        return f"Grist document {self.client.doc_id} on {self.client.server} (CSV export)"

    def table(self, name: str) -> RawTable | None:
        if name not in self.table_names():
            return None
        meta = self.meta(name)
        # The export leaves hidden columns out and may head columns by label.
        visible = {cid: col for cid, col in meta.columns.items() if not cid.startswith("gristHelper_")}

        def rows() -> Iterator[tuple[int, dict[str, Any]]]:
            done = 0
            findings = self.findings.start(f"{name} (Grist CSV export)", "line")

            def rest() -> Iterator[tuple[int, dict[str, Any]]]:
                nonlocal done
                for line_no, cells in self._download(name, visible, meta.labels, findings, skip=done):
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

        return RawTable(name=name, columns=visible, _rows=rows)

    def _download(
        self,
        name: str,
        columns: dict[str, Column],
        labels: dict[str, str],
        findings: TableFindings,
        *,
        skip: int,
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        resp = self.client.call("download/csv", params={"tableId": name}, stream=True)
        try:
            stream = io.BufferedReader(_ChunkStream(resp.iter_content(chunk_size=64 * 1024)))
            text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")
            header, records = csv_records(text, findings, skip=skip)
            ids = [h if h in columns else labels.get(h, h) for h in header]
            untyped = Column(id="")
            for line_no, row in records:
                yield (
                    line_no,
                    {
                        cid: from_text(value, columns.get(cid, untyped))
                        for cid, value in zip(ids, row, strict=False)
                        if cid
                    },
                )
        finally:
            resp.close()


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
