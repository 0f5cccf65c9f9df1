"""Where a node's row lives in the data source it was synced from: the CSV file and line, the
`.grist` file's table and row id, or the Grist document's table and row id with a link that
opens that row.

Sync records which data source it read (`where_from`); an answer's sources are located after
the answer, one look-up per node type (a file read, one SQLite query, one Grist `/sql` call),
never per node. A node id is found as sync finds it: the `<noun>_id` column, else `node_id`,
else `<noun>:<row id>` (the row id itself).
"""

from __future__ import annotations

import csv
import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# Where sync keeps `where_from(<the data source>)` (in `vedana_state`).
STATE_KEY = "sync.data_source"

# How many ids one /sql look-up names (Grist caps the statement's parameters).
SQL_BATCH = 500


def where_from(source: Any) -> dict[str, str] | None:
    """A JSON-ready description of a data source that `locate_nodes` can read rows back from;
    None for a source that cannot be located (e.g. one built by a test)."""
    kind = getattr(source, "kind", "")
    if kind == "csv-folder":
        return {"kind": kind, "path": str(Path(source.folder).resolve())}
    if kind == "grist-file":
        return {"kind": kind, "path": str(Path(source.path).resolve())}
    client = getattr(source, "client", None)
    if client is not None and getattr(client, "doc_id", None):
        return {"kind": "grist", "server": str(client.server).rstrip("/"), "doc": str(client.doc_id)}
    return None


def _table_name(noun: str, names: Iterable[str]) -> str | None:
    wanted = f"anchor_{noun}".casefold()
    return next((n for n in names if n.casefold() == wanted), None)


def _id_of(noun: str, row: dict[str, Any], row_id: int) -> str:
    for column in (f"{noun}_id", "node_id"):
        value = row.get(column)
        if value not in (None, ""):
            return str(value).strip()
    return f"{noun}:{row_id}"


def locate_nodes(
    where: dict[str, str], noun: str, ids: set[str], client: Any = None
) -> dict[str, dict[str, Any]]:
    """`{node id: locator}` for the ids of type `noun` found in the source; ids not found are left
    out. `client`: a Grist client for the document (only for `kind == "grist"`)."""
    if not ids:
        return {}
    if where["kind"] == "csv-folder":
        return _in_csv_folder(Path(where["path"]), noun, ids)
    if where["kind"] == "grist-file":
        return _in_grist_file(Path(where["path"]), noun, ids)
    if where["kind"] == "grist" and client is not None:
        return _in_grist(where, client, noun, ids)
    return {}


def _in_csv_folder(folder: Path, noun: str, ids: set[str]) -> dict[str, dict[str, Any]]:
    files = {p.stem: p for p in folder.glob("*.csv")}
    name = _table_name(noun, files)
    if name is None:
        return {}
    found: dict[str, dict[str, Any]] = {}
    with files[name].open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        for number, row in enumerate(reader, start=1):
            node_id = _id_of(noun, row, number)
            if node_id in ids and node_id not in found:  # the first row wins, as in sync
                found[node_id] = {"file": str(files[name]), "table": name, "line": reader.line_num}
    return found


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _in_grist_file(path: Path, noun: str, ids: set[str]) -> dict[str, dict[str, Any]]:
    with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as db:
        tables = [r[0] for r in db.execute("SELECT tableId FROM _grist_Tables")]
        name = _table_name(noun, tables)
        if name is None:
            return {}
        columns = {r[1] for r in db.execute(f"PRAGMA table_info({_quote(name)})")}
        wanted = [c for c in (f"{noun}_id", "node_id") if c in columns]
        select = ", ".join(["id", *map(_quote, wanted)])
        found: dict[str, dict[str, Any]] = {}
        for row in db.execute(f"SELECT {select} FROM {_quote(name)} ORDER BY id"):
            node_id = _id_of(noun, dict(zip(wanted, row[1:], strict=True)), row[0])
            if node_id in ids and node_id not in found:
                found[node_id] = {"file": str(path), "table": name, "row_id": int(row[0])}
    return found


def _in_grist(where: dict[str, str], client: Any, noun: str, ids: set[str]) -> dict[str, dict[str, Any]]:
    name = _table_name(noun, client.table_ids())
    if name is None:
        return {}
    columns = {c["id"] for c in client.column_records(name)}
    wanted = [c for c in (f"{noun}_id", "node_id") if c in columns]
    anchor = _row_anchor(client, name)
    base = f"{where['server']}/doc/{where['doc']}"
    found: dict[str, dict[str, Any]] = {}
    row_ids = {int(m.group(1)) for i in ids if (m := re.fullmatch(rf"{re.escape(noun)}:(\d+)", i))}
    for batch in _batches(sorted(ids), SQL_BATCH):
        conditions = [f"{_quote(c)} IN ({', '.join('?' * len(batch))})" for c in wanted]
        args: list[Any] = [v for _ in wanted for v in batch]
        if row_ids:
            conditions.append(f"id IN ({', '.join('?' * len(row_ids))})")
            args += sorted(row_ids)
        if not conditions:
            break
        select = ", ".join(["id", *map(_quote, wanted)])
        rows = client.sql(
            f"SELECT {select} FROM {_quote(name)} WHERE {' OR '.join(conditions)} ORDER BY id", args
        )
        for row in rows:
            node_id = _id_of(noun, row, int(row["id"]))
            if node_id in ids and node_id not in found:
                locator: dict[str, Any] = {"document": where["doc"], "table": name, "row_id": int(row["id"])}
                locator["url"] = f"{base}/p/{anchor[0]}#a1.s{anchor[1]}.r{row['id']}" if anchor else base
                found[node_id] = locator
    return found


def _row_anchor(client: Any, table: str) -> tuple[int, int] | None:
    """(page, section) of the table's own view, for Grist's `#a1.s<section>.r<row>` links."""
    try:
        rows = client.sql(
            "SELECT t.primaryViewId AS page, s.id AS section FROM _grist_Tables t "
            "JOIN _grist_Views_section s ON s.tableRef = t.id AND s.parentId = t.primaryViewId "
            "WHERE t.tableId = ? ORDER BY s.id LIMIT 1",
            [table],
        )
    except Exception:  # an older server, or no access to metadata: the link opens the document
        return None
    return (int(rows[0]["page"]), int(rows[0]["section"])) if rows else None


def _batches(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
