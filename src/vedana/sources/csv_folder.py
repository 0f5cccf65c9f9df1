"""A local folder of CSV files, one per table, named like the tables (`Anchors.csv`,
`Anchor_person.csv`, `Link_person_has_interest.csv`, …), shaped like Grist's CSV export.

There are no column types: every cell is text, the data model's `dtype` casts it, and link
columns are known from the data model (`anchor1_link_column_name`, …). A Ref/RefList cell holds
the referenced row's display value; in a folder that is the target's node id (comma-separated
for a RefList); when a value is not a node id, the target's first column is tried.
"""

from __future__ import annotations

import codecs
import csv
import os
import zlib
from array import array
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path
from typing import Any

from vedana.errors import SourceError
from vedana.sources.base import Column, RawTable, RowDigests, files_digest, line_digest
from vedana.sources.cells import from_text
from vedana.sources.csv_rows import csv_header, csv_records
from vedana.sources.findings import SourceFindings


class CsvFolderSource:
    kind = "csv-folder"

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise SourceError(f"no such folder: {self.folder}; check the path")
        self._files = {p.stem: p for p in sorted(self.folder.glob("*.csv")) if p.is_file()}
        self.findings = SourceFindings()
        self._pool: ThreadPoolExecutor | None = None
        self._digesting: dict[Path, Future[RowDigests | None]] = {}

    def prefetch_digests(self) -> None:
        """Start checksumming every file's lines in a thread of its own, for the re-sync about to
        ask (`RawTable.digests`): meanwhile the sync talks to Postgres (the data model, the rows
        kept from the last sync), so its waits on the server overlap the hashing (the GIL lets
        only those overlap: the hashing holds it a call at a time)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vedana-digests")
            self._digesting = {p: self._pool.submit(line_digests, p) for p in self._files.values()}

    def _digests_of(self, path: Path) -> RowDigests | None:
        # Each prefetched result serves one asker (a caller may change the arrays); later ones
        # hash again, as does an asker of a file still queued (rather than wait for the others).
        started = self._digesting.pop(path, None)
        try:
            if started is None or started.cancel():
                return line_digests(path)
            return started.result()
        except OSError as exc:
            raise SourceError(f"{path} could not be read ({exc.strerror}); check the folder") from None

    def describe(self) -> str:
        return f"CSV folder {self.folder}"

    def table_names(self) -> list[str]:
        return list(self._files)

    def table(self, name: str) -> RawTable | None:
        path = self._files.get(name)
        if path is None:
            return None
        try:
            with path.open(encoding="utf-8-sig", newline="") as handle:
                header = csv_header(handle)
        except UnicodeDecodeError:
            raise SourceError(f"{path} is not UTF-8 text; save it as UTF-8 CSV") from None
        columns = {h: Column(id=h) for h in header if h}
        unnamed = "" in header  # a column without a name: never part of a row

        def rows() -> Iterator[tuple[int, dict[str, Any]]]:
            findings = self.findings.start(str(path), "line")
            try:
                with path.open(encoding="utf-8-sig", newline="") as handle:
                    _, records = csv_records(handle, findings)
                    for number, row in records:
                        # `from_text` of an untyped cell is the text itself, None when empty, or
                        # a formula error ("#…"): zip the row straight into a dict (the last of a
                        # repeated column wins, as in the general way), and call it only for rows
                        # with a cell that may be an error.
                        if "\n#" in "\n" + "\n".join(row):
                            yield (
                                number,
                                {h: from_text(v, columns[h]) for h, v in zip(header, row, strict=False) if h},
                            )
                            continue
                        cells: dict[str, Any] = dict(zip(header, row, strict=False))
                        if unnamed:
                            cells.pop("", None)
                        if "" in row:
                            for h, v in cells.items():
                                if not v:
                                    cells[h] = None
                        yield number, cells
            except UnicodeDecodeError:
                raise SourceError(f"{path} is not UTF-8 text; save it as UTF-8 CSV") from None

        width = len(header)
        positions = {h: i for i, h in enumerate(header) if h}

        def fields(text: str) -> list[str]:
            """One record's fields, read as `csv_records` reads them (only for files whose lines
            are their records, `line_digests`); a malformed one goes to the findings, as the
            whole file's reading would list it, and reads as a blank row."""
            try:
                row = next(csv.reader([text.rstrip("\r\n")], strict=True), [])
                why = "" if not row or len(row) == width else f"{len(row)} fields, header has {width}"
            except csv.Error as exc:
                row, why = [], str(exc)
            if why:
                found = self.findings.tables.get(str(path)) or self.findings.start(str(path), "line")
                found.malformed_row(0, why)
                return []
            return [] if all(not cell.strip() for cell in row) else row

        def decode(text: str) -> dict[str, Any]:
            return {h: from_text(v, columns[h]) for h, v in zip(header, fields(text), strict=False) if h}

        def decode_columns(text: str, names: list[str]) -> dict[str, Any]:
            row = fields(text)
            return {n: from_text(row[positions[n]], columns[n]) for n in names if n in positions and row}

        return RawTable(
            name=name,
            columns=columns,
            _rows=rows,
            decode=decode,
            decode_columns=decode_columns,
            _digests=lambda: self._digests_of(path),
        )

    def state(self) -> str | None:
        return files_digest(self._files.values())

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool, self._digesting = None, {}


_BLOCK = 1 << 22


def line_digests(path: Path) -> RowDigests | None:
    """Every line's digest straight from the file's bytes (no lone carriage return, no NUL),
    standing for its record: a sync that read the whole file found each line to be one record
    (`etl/resync.py` trusts the digests only then), and a changed line is parsed on its own, so
    a quoted field opened on it and closed on the next is found malformed. Checksums over lines
    run in C, with no per-row Python, so a re-sync of a big file costs little more than reading
    it. Read a block at a time, so memory stays flat however big the file; each line's length is
    kept, so the few lines a re-sync wants are read again by offset. None otherwise."""
    low, high, sizes = array("I"), array("I"), array("I")
    header = True
    first = 0  # byte offset of the first record: past the BOM and the header line
    open_last = False  # the last line has no line break
    with path.open("rb") as handle:
        carry = handle.read(len(codecs.BOM_UTF8))
        if carry == codecs.BOM_UTF8:
            carry, first = b"", len(codecs.BOM_UTF8)
        while True:
            block = handle.read(_BLOCK)
            data = carry + block
            if b"\x00" in data:  # NULs to remove and count: the whole reading does that
                return None
            lone = data.count(b"\r") - data.count(b"\r\n") if b"\r" in data else 0
            if lone and lone != (bool(block) and data.endswith(b"\r")):
                return None
            lines = data.split(b"\n")
            carry = lines.pop() if block else b""
            if not block and lines and lines[-1] == b"":
                lines.pop()
            if header and lines:
                first += len(lines[0]) + 1
                del lines[0]
                header = False
            low.extend(map(zlib.crc32, lines))
            high.extend(map(zlib.adler32, lines))
            sizes.extend(map(len, lines))
            if not block:
                open_last = bool(lines) and not data.endswith(b"\n")  # no line break at the end
                break
    return RowDigests(
        keys=array("q", range(1, len(low) + 1)),
        low=low,
        high=high,
        fetch=lambda positions: _records_at(path, positions, first, sizes, open_last, (low, high)),
    )


def _records_at(
    path: Path, positions: list[int], first: int, sizes: array, open_last: bool, digests: tuple[array, array]
) -> list[str]:
    """The records at these 0-based positions (ascending), as text, read again from the file
    at their offsets (its lines are its records, of these lengths, as `line_digests` found). A
    line read must still be the one checksummed: a file saved again in between fails the sync
    (which writes nothing) rather than pair one version's digest with another's text."""
    if any(a > b for a, b in pairwise(positions)):
        raise ValueError("positions must ascend")
    found: list[str] = []
    last = len(sizes) - 1
    with path.open("rb") as handle:
        at, done = first, 0  # the byte offset of line `done`
        for position in positions:
            at += sum(sizes[done:position]) + (position - done)  # each line and its line break
            done = position
            line = os.pread(handle.fileno(), sizes[position], at)
            if line_digest(line) != (digests[0][position], digests[1][position]):
                raise SourceError(f"{path} changed while the sync was reading it; run the sync again")
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                raise SourceError(f"{path} is not UTF-8 text; save it as UTF-8 CSV") from None
            found.append(text if open_last and position == last else text + "\n")
    return found
