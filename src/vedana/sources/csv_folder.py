"""A local folder of CSV files, one per table, named like the tables (`Anchors.csv`,
`Anchor_person.csv`, `Link_person_has_interest.csv`, …), shaped like Grist's CSV export.

There are no column types: every cell is text, the data model's `dtype` casts it, and link
columns are known from the data model (`anchor1_link_column_name`, …). A Ref/RefList cell holds
the referenced row's display value; in a folder that is the target's node id (comma-separated
for a RefList); when a value is not a node id, the target's first column is tried.
"""

from __future__ import annotations

import codecs
import zlib
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vedana.errors import SourceError
from vedana.sources.base import Column, RawTable, RowDigests, files_digest
from vedana.sources.cells import from_text
from vedana.sources.csv_rows import csv_texts, record_fields


class CsvFolderSource:
    kind = "csv-folder"

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise SourceError(f"no such folder: {self.folder}; check the path")
        self._files = {p.stem: p for p in sorted(self.folder.glob("*.csv")) if p.is_file()}

    def describe(self) -> str:
        return f"CSV folder {self.folder}"

    def table_names(self) -> list[str]:
        return list(self._files)

    def table(self, name: str) -> RawTable | None:
        path = self._files.get(name)
        if path is None:
            return None
        with path.open(encoding="utf-8-sig", newline="") as handle:
            header, _ = csv_texts(handle)
        columns = {h: Column(id=h) for h in header if h}
        width = len(header)

        def raw_rows() -> Iterator[tuple[int, str]]:
            # Records as text: a re-sync hashes them all and parses only those that changed.
            try:
                with path.open(encoding="utf-8-sig", newline="") as handle:
                    _, records = csv_texts(handle)
                    yield from enumerate(records, start=1)
            except UnicodeDecodeError:
                raise SourceError(f"{path} is not UTF-8 text; save it as UTF-8 CSV") from None

        def decode(text: str) -> dict[str, Any]:
            row = record_fields(text, width)
            return {h: from_text(v, columns[h]) for h, v in zip(header, row, strict=False) if h}

        positions = {h: i for i, h in enumerate(header) if h}

        def decode_columns(text: str, names: list[str]) -> dict[str, Any]:
            row = record_fields(text, width)
            return {
                n: from_text(row[positions[n]], columns[n])
                for n in names
                if n in positions and positions[n] < len(row)
            }

        return RawTable(
            name=name,
            columns=columns,
            _raw_rows=raw_rows,
            decode=decode,
            decode_columns=decode_columns,
            _digests=lambda: line_digests(path),
        )

    def state(self) -> str | None:
        return files_digest(self._files.values())

    def close(self) -> None:
        pass


_BLOCK = 1 << 22


def line_digests(path: Path) -> RowDigests | None:
    """Every record's digest straight from the file's bytes, when each line is one record (no
    quote anywhere, no lone carriage return): checksums over lines run in C, with no per-row
    Python, so a re-sync of a big file costs little more than reading it. Read a block at a
    time, so memory stays flat however big the file. None otherwise."""
    low, high = array("I"), array("I")
    header = True
    with path.open("rb") as handle:
        carry = handle.read(len(codecs.BOM_UTF8))
        if carry == codecs.BOM_UTF8:
            carry = b""
        while True:
            block = handle.read(_BLOCK)
            data = carry + block
            if b'"' in data or data.count(b"\r") != data.count(b"\r\n") + (
                bool(block) and data.endswith(b"\r")
            ):
                return None
            lines = data.split(b"\n")
            carry = lines.pop() if block else b""
            if not block and lines and lines[-1] == b"":
                lines.pop()
            if header and lines:
                del lines[0]
                header = False
            low.extend(map(zlib.crc32, lines))
            high.extend(map(zlib.adler32, lines))
            if not block:
                break
    return RowDigests(
        keys=array("q", range(1, len(low) + 1)),
        low=low,
        high=high,
        fetch=lambda positions: _records_at(path, positions),
    )


def _records_at(path: Path, positions: list[int]) -> list[str]:
    """The records at these 0-based positions (ascending), as text, read again from the file."""
    wanted = {p + 1: i for i, p in enumerate(positions)}  # line numbers; line 0 is the header
    found: list[str] = [""] * len(positions)
    left = len(wanted)
    with path.open("rb") as handle:
        for line_no, line in enumerate(handle):
            at = wanted.get(line_no)
            if at is None:
                continue
            try:
                found[at] = line.decode("utf-8")
            except UnicodeDecodeError:
                raise SourceError(f"{path} is not UTF-8 text; save it as UTF-8 CSV") from None
            left -= 1
            if not left:
                break
    return found
