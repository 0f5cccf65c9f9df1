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
