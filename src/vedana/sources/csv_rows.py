"""Reading CSV text row by row, shared by the Grist CSV export and local CSV folders.

A record whose shape is broken is skipped and listed in the table's findings by the line it
starts on: a field count unlike the header's, an unterminated quote (which would otherwise
swallow the rest of the file into one field), text after a closing quote. NUL characters are
removed from the cells and counted. Records keep their numbers whether or not they are
skipped, so a row's number (a node id `<noun>:<n>` without an id column) never shifts.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable, Iterator

from vedana.sources.findings import NUL, TableFindings

# Long text cells (documents, prompts) exceed csv's default 128 KiB field limit.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))

_WHY = {
    "unexpected end of data": "unterminated quote: it runs to the end of the file",
    "',' expected after '\"'": "text after a closing quote",
}


def csv_header(lines: Iterable[str]) -> list[str]:
    """The header row's column names (NULs removed, as `csv_records` removes and counts them)."""
    header = next(csv.reader(lines), None)
    return _clean_header([h.replace(NUL, "") for h in header]) if header else []


def _clean_header(header: list[str]) -> list[str]:
    if header and header[0].startswith("\ufeff"):
        header[0] = header[0][1:]
    return [h.strip() for h in header]


def csv_records(
    lines: Iterable[str], findings: TableFindings | None = None, *, skip: int = 0
) -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    """The header and an iterator over `(record number, cells)` of the data rows, numbered from
    1; blank rows come as `[]` (the caller skips and counts them), malformed ones not at all.
    Records up to `skip` are neither yielded nor looked at (a download resumed part way)."""
    # strict: an unterminated quote raises at the end of the file instead of returning the rest
    # of the file as one field; the reader goes on with the next line after an error.
    reader = csv.reader(lines, strict=True)
    found = findings if findings is not None else TableFindings("", "line")
    try:
        header = next(reader, None)
    except csv.Error as exc:  # the whole file is unreadable: say so rather than look empty
        if not skip:
            found.malformed_row(1, f"the header: {_WHY.get(str(exc), str(exc))}")
        header = None
    if header is None:
        return [], iter(())
    if NUL in "".join(header):  # a column's name; counted once, not again on a resumed download
        names = [h.replace(NUL, "").strip() for h in header]
        _strip_nul(header, names, 1, found if not skip else TableFindings("", "line"))
    header = _clean_header(header)
    width = len(header)

    def rows() -> Iterator[tuple[int, list[str]]]:
        number = 0
        start = reader.line_num + 1  # the line the next record starts on
        while True:
            try:
                for row in reader:
                    number += 1
                    line, start = start, reader.line_num + 1
                    if number <= skip:
                        continue
                    joined = "".join(row)  # one string for the row's checks: in C, not per cell
                    if not joined.strip():  # no cell has anything but spaces
                        yield number, []  # the caller counts blank rows
                        continue
                    if len(row) != width:
                        found.malformed_row(line, f"{len(row)} fields, header has {width}")
                        continue
                    if NUL in joined:
                        _strip_nul(row, header, line, found)
                    yield number, row
                return
            except csv.Error as exc:
                number += 1
                line, start = start, reader.line_num + 1
                if number > skip:
                    found.malformed_row(line, _WHY.get(str(exc), str(exc)))

    return header, rows()


def _strip_nul(row: list[str], header: list[str], line: int, found: TableFindings) -> None:
    for i, cell in enumerate(row):
        count = cell.count(NUL)
        if count:
            row[i] = cell.replace(NUL, "")
            found.removed_nul(header[i] or f"#{i + 1}", line, count)
