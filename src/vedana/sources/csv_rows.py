"""Reading CSV text row by row, shared by the Grist CSV export and local CSV folders."""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable, Iterator

# Long text cells (documents, prompts) exceed csv's default 128 KiB field limit.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


def csv_records(lines: Iterable[str]) -> tuple[list[str], Iterator[list[str]]]:
    """The header and an iterator over the data rows (blank lines skipped)."""
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        return [], iter(())
    if header and header[0].startswith("\ufeff"):
        header[0] = header[0][1:]
    header = [h.strip() for h in header]

    def rows() -> Iterator[list[str]]:
        for row in reader:
            if not row or all(not cell.strip() for cell in row):
                yield []  # keep line numbering stable; the caller skips blank rows
                continue
            if len(row) < len(header):
                row = row + [""] * (len(header) - len(row))
            yield row

    return header, rows()


def csv_texts(lines: Iterable[str]) -> tuple[list[str], Iterator[str]]:
    """Like `csv_records`, but each data record comes as its text in the file (a quoted field
    may span lines): a re-sync hashes the texts and parses (`record_fields`) only changed ones.
    The records are exactly those `csv.reader` finds."""
    source = iter(lines)
    first = _record_text(source)
    if first is None:
        return [], iter(())
    header = record_fields(first)
    if header and header[0].startswith("\ufeff"):
        header[0] = header[0][1:]
    header = [h.strip() for h in header]

    def texts() -> Iterator[str]:
        while (text := _record_text(source)) is not None:
            yield text

    return header, texts()


def _record_text(source: Iterator[str]) -> str | None:
    line = next(source, None)
    if line is None or '"' not in line:
        return line
    # A quote may open a field that goes on over the next lines: let the csv reader decide, fed
    # line by line (it asks for another line only while the record is unfinished).
    taken = [line]

    def feed() -> Iterator[str]:
        yield line
        for more in source:
            taken.append(more)
            yield more

    next(csv.reader(feed()), None)
    return "".join(taken)


def record_fields(text: str, width: int = 0) -> list[str]:
    """A record's fields as `csv_records` gives them: [] for a blank row, short rows padded."""
    if '"' in text:
        row = next(csv.reader(text.splitlines(keepends=True)), [])
    else:
        body = text.rstrip("\r\n")
        row = body.split(",") if body else []
    if not row or all(not cell.strip() for cell in row):
        return []
    if len(row) < width:
        row = row + [""] * (width - len(row))
    return row
