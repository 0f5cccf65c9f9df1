"""A `.grist` backup file: SQLite with the user tables plus Grist's `_grist_*` metadata.

Column types come from `_grist_Tables_column`; rows are read with a cursor, so memory stays
flat whatever the table size.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vedana.errors import SourceError
from vedana.sources.base import RawTable, files_digest
from vedana.sources.cells import from_sqlite
from vedana.sources.findings import SourceFindings
from vedana.sources.grist_meta import TableMeta, build_meta


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class GristFileSource:
    kind = "grist-file"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise SourceError(f"no such .grist file: {self.path}; check the path")
        try:
            self._db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
            self._tables = self._read_tables()
            self._colrefs = self._read_colrefs()
            self.findings = SourceFindings()
        except sqlite3.DatabaseError as exc:
            raise SourceError(
                f"{self.path} is not a readable .grist file ({exc}); export it again from Grist"
            ) from None

    def describe(self) -> str:
        return f".grist file {self.path}"

    def _read_tables(self) -> dict[str, int]:
        rows = self._db.execute(
            "SELECT id, tableId FROM _grist_Tables WHERE COALESCE(summarySourceTable, 0) = 0 ORDER BY id"
        ).fetchall()
        return {table_id: ref for ref, table_id in rows}

    def _read_colrefs(self) -> dict[int, str]:
        return dict(self._db.execute("SELECT id, colId FROM _grist_Tables_column").fetchall())

    def table_names(self) -> list[str]:
        return list(self._tables)

    def _meta(self, table_ref: int) -> TableMeta:
        cursor = self._db.execute(
            "SELECT * FROM _grist_Tables_column WHERE parentId = ? ORDER BY parentPos, id", (table_ref,)
        )
        names = [d[0] for d in cursor.description]
        records = []
        for row in cursor:
            fields = dict(zip(names, row, strict=True))
            records.append({"id": fields["colId"], "fields": {**fields, "colRef": fields["id"]}})
        return build_meta(records, self._colrefs.get)

    def table(self, name: str) -> RawTable | None:
        table_ref = self._tables.get(name)
        if table_ref is None:
            return None
        meta = self._meta(table_ref)
        count = self._db.execute(f"SELECT COUNT(*) FROM {quote_ident(name)}").fetchone()[0]

        def rows() -> Iterator[tuple[int, dict[str, Any]]]:
            cursor = self._db.execute(f"SELECT * FROM {quote_ident(name)} ORDER BY id")
            position = {d[0]: i for i, d in enumerate(cursor.description)}
            # Per column: where its value and its display helper's value sit in a row tuple.
            plan = [
                (col_id, position[col_id], column, position.get(meta.display_helpers.get(col_id, "")))
                for col_id, column in meta.columns.items()
                if col_id in position
            ]
            id_at = position["id"]
            findings = self.findings.start(name, "row")
            # One scan in SQLite says which columns may hold a NUL; only those are looked at.
            flagged = set(self._nul_columns(name, list(position)))
            # A reference shows its display helper's value: look at it when the helper has a NUL.
            nul = [c for c in meta.columns if c in flagged or meta.display_helpers.get(c, "") in flagged]
            for raw in cursor:
                cells = {
                    col_id: from_sqlite(raw[at], column, None if helper_at is None else raw[helper_at])
                    for col_id, at, column, helper_at in plan
                }
                if nul:
                    findings.strip_columns(cells, nul, int(raw[id_at]))
                yield int(raw[id_at]), cells

        return RawTable(name=name, columns=meta.columns, _rows=rows, row_count=count)

    def _nul_columns(self, table: str, columns: list[str]) -> list[str]:
        """The columns whose cells may hold a NUL character: text with one, or with one escaped
        (`\\u0000` in the JSON of a ChoiceList or RefList), and marshalled values (formula lists),
        whose strings cannot be seen from SQL. One scan in SQLite."""
        if not columns:
            return []
        tests = ", ".join(
            f"max(typeof({c}) = 'blob' OR (typeof({c}) = 'text' AND "
            f"(instr(CAST({c} AS BLOB), x'00') > 0 OR instr({c}, '\\u0000') > 0)))"
            for c in map(quote_ident, columns)
        )
        flags = self._db.execute(f"SELECT {tests} FROM {quote_ident(table)}").fetchone()
        return [c for c, flag in zip(columns, flags or (), strict=False) if flag]

    def state(self) -> str | None:
        # A write-ahead log next to the file holds changes not yet merged into it.
        wal = self.path.with_name(self.path.name + "-wal")
        return files_digest([self.path, *([wal] if wal.exists() else [])])

    def close(self) -> None:
        self._db.close()
