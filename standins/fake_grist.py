"""A small Grist server for tests: stdlib HTTP in a thread on 127.0.0.1, answering like
grist-core does (the shapes in DESIGN §4): tables, columns (incl. `hidden=true`), records
(`["L", …]` lists, errors as `null` + `errors` or as `["E", …]`), `/sql` (GET `q=` or POST
`{"sql", "args"}`, run on the document's real SQLite form, blobs as `{"type": "Buffer"}`),
the CSV export (display text as grist-core formats it: `Table[7]`, `#DIV/0!`, `2024-03-15
10:30am`; headed by label, or by id with `header=colId`), `/states` with a history of the
document's contents and `/compare` between two of them (Grist's action summary: rows
added/updated/removed per table, tables and columns added or removed, column metadata changes),
and the real error bodies for 401/403/404.

`rows_served` counts the data rows `/sql` answered with, per table: what a sync downloaded.

Failures can be injected per request path: an HTTP status, a dropped connection, or a body cut
off halfway; `after(path, action)` changes the document between two requests. Every request is logged in `requests` as "METHOD path?query".
"""

from __future__ import annotations

import copy
import hashlib
import json
import socket
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from standins.grist_files import Doc, api_records, build_sqlite, csv_text
from standins.loopback import LoopbackServer


@dataclass
class Failure:
    match: str  # a substring of "path?query"
    status: int | None = 500  # answer with this status…
    drop: bool = False  # …or close the connection without an answer
    cut_body: bool = False  # …or send half the body, then close
    times: int = 1  # how many matching requests fail (then they pass again)
    skip: int = 0  # let this many matching requests through first


class FakeGrist:
    def __init__(self, *docs: Doc, api_key: str | None = "test-api-key-0123456789") -> None:
        self.docs = {d.doc_id: d for d in docs}
        self.api_key = api_key
        self.requests: list[str] = []
        self.rows_served: Counter[str] = Counter()
        # Per document, its states oldest first: (hash, a snapshot of the content then).
        self.history: dict[str, list[tuple[str, Doc]]] = {}
        self.failures: list[Failure] = []
        # (substring of "path?query", action): run once after serving the first matching request.
        self.hooks: list[tuple[str, Callable[[], None]]] = []
        self._sqlite: dict[str, tuple[str, sqlite3.Connection]] = {}
        self._lock = threading.Lock()
        self._http = LoopbackServer(_handler(self))
        self._http.start()

    @property
    def url(self) -> str:
        return self._http.url

    def put(self, doc: Doc) -> None:
        with self._lock:
            self.docs[doc.doc_id] = doc

    def forget_history(self, doc_id: str) -> None:
        """Keep only the latest state, as a server that truncated its action history would."""
        with self._lock:
            self.history[doc_id] = self.history.get(doc_id, [])[-1:]

    def states(self, doc: Doc) -> list[str]:
        """The document's state hashes, newest first; a new state whenever the content changed."""
        key = doc.content_key()
        digest = hashlib.sha256(key.encode()).hexdigest()
        with self._lock:
            history = self.history.setdefault(doc.doc_id, [])
            if not history or history[-1][0] != digest:
                history.append((digest, copy.deepcopy(doc)))
            return [h for h, _ in reversed(history)] + ["0" * 64]

    def snapshot(self, doc_id: str, state: str) -> Doc | None:
        with self._lock:
            return next((d for h, d in self.history.get(doc_id, []) if h == state), None)

    def fail(self, match: str, **kwargs: Any) -> Failure:
        failure = Failure(match, **kwargs)
        with self._lock:
            self.failures.append(failure)
        return failure

    def after(self, match: str, action: Callable[[], None]) -> None:
        """Run `action` once, right after the first request matching `match` was answered (an
        edit landing between two reads of a sync)."""
        with self._lock:
            self.hooks.append((match, action))

    def _run_hooks(self, target: str) -> None:
        with self._lock:
            due = [hook for hook in self.hooks if hook[0] in target]
            self.hooks = [hook for hook in self.hooks if hook not in due]
        for _, action in due:
            action()

    def paths(self, contains: str = "") -> list[str]:
        return [r for r in self.requests if contains in r]

    def close(self) -> None:
        self._http.stop()
        for _, conn in self._sqlite.values():
            conn.close()

    def __enter__(self) -> FakeGrist:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- state shared with the handler -----------------------------------------------------

    def _take_failure(self, target: str) -> Failure | None:
        with self._lock:
            for failure in self.failures:
                if failure.match in target and failure.times > 0:
                    if failure.skip > 0:
                        failure.skip -= 1
                        return None
                    failure.times -= 1
                    return failure
        return None

    def sqlite(self, doc: Doc) -> sqlite3.Connection:
        """The document as SQLite (what Grist runs `/sql` on), rebuilt when its content changes."""
        key = doc.content_key()
        with self._lock:
            cached = self._sqlite.get(doc.doc_id)
            if cached and cached[0] == key:
                return cached[1]
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            build_sqlite(doc, conn)
            self._sqlite[doc.doc_id] = (key, conn)
            return conn


def _handler(grist: FakeGrist) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # One buffered write per answer and no Nagle: otherwise every request waits ~40 ms for
        # a delayed ACK between the header and body packets.
        wbufsize = 64 * 1024
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._serve("GET")
            grist._run_hooks(self.path)

        def do_POST(self) -> None:
            self._serve("POST")
            grist._run_hooks(self.path)

        def _send(self, status: int, body: bytes, content_type: str, cut: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if cut:
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            self.wfile.write(body)

        def _json(self, status: int, payload: Any, cut: bool = False) -> None:
            body = json.dumps(payload).encode()
            self._send(status, body, "application/json; charset=utf-8", cut)

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw_body = self.rfile.read(length) if length else b""
            grist.requests.append(f"{method} {self.path}")
            failure = grist._take_failure(self.path)
            if failure and failure.drop:
                self.close_connection = True
                return
            if failure and not failure.cut_body:
                self._json(failure.status or 500, {"error": f"injected failure {failure.status}"})
                return
            cut = bool(failure and failure.cut_body)

            if grist.api_key is not None:
                auth = self.headers.get("Authorization")
                if not auth:
                    return self._json(403, {"error": "No view access"})
                if auth != f"Bearer {grist.api_key}":
                    return self._json(401, {"error": "Bad request: invalid API key"})

            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            segments = [unquote(s) for s in parts.path.strip("/").split("/")]
            if segments[:2] != ["api", "docs"] or len(segments) < 4:
                return self._json(404, {"error": "not found"})
            doc = grist.docs.get(segments[2])
            if doc is None:
                return self._json(404, {"error": "document not found"})
            rest = segments[3:]

            if rest == ["tables"]:
                tables = [
                    {"id": t.id, "fields": {"tableRef": i, "onDemand": False}}
                    for i, t in enumerate(doc.tables, 1)
                ]
                return self._json(200, {"tables": tables}, cut)
            if rest == ["states"]:
                hashes = grist.states(doc)
                states = [{"n": len(hashes) - i, "h": h} for i, h in enumerate(hashes)]
                return self._json(200, {"states": states}, cut)
            if rest == ["compare"]:
                return self._compare(doc, query.get("left", "HEAD"), query.get("right", "HEAD"), cut)
            if rest == ["sql"]:
                if method == "POST":
                    payload = json.loads(raw_body or b"{}")
                    sql, args = payload.get("sql", ""), payload.get("args", [])
                else:
                    sql, args = query.get("q", ""), []
                return self._sql(doc, sql, args, cut)
            if rest == ["download", "csv"]:
                table = doc.table(query.get("tableId", ""))
                if table is None:
                    return self._json(404, {"error": f'Table not found "{query.get("tableId", "")}"'})
                body = csv_text(doc, table, header=query.get("header", "label")).encode()
                return self._send(200, body, "text/csv; charset=utf-8", cut)
            if len(rest) == 3 and rest[0] == "tables":
                table = doc.table(rest[1])
                if table is None:
                    return self._json(404, {"error": f'Table not found "{rest[1]}"'})
                hidden = query.get("hidden") in ("true", "1")
                if rest[2] == "records":
                    return self._json(200, {"records": api_records(doc, table, hidden=hidden)}, cut)
                if rest[2] == "columns":
                    return self._json(200, {"columns": self._columns(doc, table.id, hidden)}, cut)
            return self._json(404, {"error": "not found"})

        def _columns(self, doc: Doc, table_id: str, hidden: bool) -> list[dict[str, Any]]:
            conn = grist.sqlite(doc)
            cursor = conn.execute(
                "SELECT c.* FROM _grist_Tables_column c JOIN _grist_Tables t ON c.parentId = t.id "
                "WHERE t.tableId = ? ORDER BY c.parentPos",
                (table_id,),
            )
            names = [d[0] for d in cursor.description]
            out = []
            for row in cursor.fetchall():
                fields = dict(zip(names, row, strict=True))
                col_id = fields.pop("colId")
                if not hidden and (col_id == "manualSort" or col_id.startswith("gristHelper_")):
                    continue
                fields["colRef"] = fields.pop("id")
                fields["isFormula"] = bool(fields["isFormula"])
                out.append({"id": col_id, "fields": fields})
            return out

        def _compare(self, doc: Doc, left: str, right: str, cut: bool) -> None:
            hashes = grist.states(doc)
            if right != "HEAD" or (left != "HEAD" and left not in hashes):
                # What grist-core answers for a hash it no longer has (an Error in HashUtil).
                return self._json(500, {"error": "Cannot read hash"})
            head = hashes[0]
            old = doc if left == "HEAD" else grist.snapshot(doc.doc_id, left)
            if old is None:
                return self._json(500, {"error": "Cannot read hash"})
            n = {h: len(hashes) - i for i, h in enumerate(hashes)}
            left_state = {"n": n[head if left == "HEAD" else left], "h": head if left == "HEAD" else left}
            answer = {
                "left": left_state,
                "right": {"n": n[head], "h": head},
                "parent": left_state,
                "summary": "same" if left_state["h"] == head else "right",
                "details": {
                    "leftChanges": {"tableRenames": [], "tableDeltas": {}},
                    "rightChanges": _compare_docs(old, doc),
                },
            }
            return self._json(200, answer, cut)

        def _sql(self, doc: Doc, sql: str, args: list[Any], cut: bool) -> None:
            if not sql.lstrip().lower().startswith("select"):
                return self._json(400, {"error": "Only select statements are supported"})
            conn = grist.sqlite(doc)
            try:
                with grist._lock:
                    cursor = conn.execute(sql, args)
                    names = [d[0] for d in cursor.description]
                    rows = cursor.fetchall()
            except sqlite3.Error as exc:
                return self._json(400, {"error": f"SQLITE_ERROR: {exc}"})
            records = [{"fields": {n: _buffer(v) for n, v in zip(names, row, strict=True)}} for row in rows]
            table = next((t.id for t in doc.tables if f'"{t.id}"' in sql or f" {t.id} " in sql), "?")
            if "count(" not in sql.lower():
                grist.rows_served[table] += len(records)
            return self._json(200, {"statement": sql, "records": records}, cut)

    return Handler


def _compare_docs(old: Doc, new: Doc) -> dict[str, Any]:
    """Grist's ActionSummary of the net change from `old` to `new` (ids in full, no values)."""
    old_ids, new_ids = {t.id for t in old.tables}, {t.id for t in new.tables}
    renames = [[t, None] for t in sorted(old_ids - new_ids)] + [[None, t] for t in sorted(new_ids - old_ids)]
    deltas: dict[str, Any] = {}
    changed_columns: list[int] = []
    for table in new.tables:
        before = old.table(table.id)
        if before is None:
            continue
        old_cols = {c.id: c.__dict__ for c in before.columns}
        new_cols = {c.id: c.__dict__ for c in table.columns}
        column_renames = [[c, None] for c in old_cols.keys() - new_cols.keys()]
        column_renames += [[None, c] for c in new_cols.keys() - old_cols.keys()]
        changed_columns += [
            i for i, c in enumerate(table.columns, 1) if old_cols.get(c.id, new_cols[c.id]) != new_cols[c.id]
        ]
        # Compare rows as the API shows them, display helpers included: a referenced row's new
        # display value is a (formula) update of the referencing rows, as in Grist.
        old_rows = {r["id"]: r for r in api_records(old, before, hidden=True)}
        new_rows = {r["id"]: r for r in api_records(new, table, hidden=True)}
        delta = {
            "addRows": sorted(new_rows.keys() - old_rows.keys()),
            "removeRows": sorted(old_rows.keys() - new_rows.keys()),
            "updateRows": sorted(i for i in new_rows.keys() & old_rows.keys() if new_rows[i] != old_rows[i]),
            "columnRenames": column_renames,
            "columnDeltas": {},
        }
        if any(delta[k] for k in ("addRows", "removeRows", "updateRows", "columnRenames")):
            deltas[table.id] = delta
    if changed_columns:
        deltas["_grist_Tables_column"] = {
            "addRows": [], "removeRows": [], "updateRows": changed_columns, "columnRenames": [], "columnDeltas": {},
        }  # fmt: skip
    return {"tableRenames": renames, "tableDeltas": deltas}


def _buffer(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"type": "Buffer", "data": list(value)}
    return value
