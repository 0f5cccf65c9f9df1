"""A local folder of CSV files, one per table, named like the tables (`Anchors.csv`,
`Anchor_person.csv`, `Link_person_has_interest.csv`, …), shaped like Grist's CSV export.

There are no column types: every cell is text, the data model's `dtype` casts it, and link
columns are known from the data model (`anchor1_link_column_name`, …). A Ref/RefList cell holds
the referenced row's display value; in a folder that is the target's node id (comma-separated
for a RefList); when a value is not a node id, the target's first column is tried.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vedana.errors import SourceError
from vedana.sources.base import Column, RawTable, files_digest
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

        def rows() -> Iterator[tuple[int, dict[str, Any]]]:
            findings = self.findings.start(str(path), "line")
            try:
                with path.open(encoding="utf-8-sig", newline="") as handle:
                    _, records = csv_records(handle, findings)
                    for number, row in records:
                        yield (
                            number,
                            {h: from_text(v, columns[h]) for h, v in zip(header, row, strict=False) if h},
                        )
            except UnicodeDecodeError:
                raise SourceError(f"{path} is not UTF-8 text; save it as UTF-8 CSV") from None

        return RawTable(name=name, columns=columns, _rows=rows)

    def state(self) -> str | None:
        return files_digest(self._files.values())

    def close(self) -> None:
        pass
