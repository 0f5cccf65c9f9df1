"""A re-sync that normalises only the source rows that changed.

Every sync remembers, per source row (table, row key), a digest of the row as read and what it
produced (`stores/sync_rows.py`): an anchor row its node id and the targets of its link columns,
a link-table row its link and oriented ends; "" when the row produced nothing or had more to say
than its keys (skipped, a duplicate, a formula error, a failed cast, an unresolved reference).

The next sync reads and hashes every row, and builds the id / display maps of every anchor table
from all its rows (the id and display columns only). It then takes the incremental path when all
of this holds, else the full one (and says why):

- the data model, the tables and their columns, and the normalising rules are the same, the last
  sync made no duplicate edge, and staging is as it left it;
- every anchor table's maps are the same as before (the same rows give the same ids and display
  values), so every reference resolves as it did and unchanged rows produce what they produced;
- every changed, added or removed row produced exactly its keys, before and after (nothing to
  count but the row itself), and no new edge repeats another row's edge;
- no table or link column starts or stops contributing to a link (the report lists those).

Then only the changed rows are normalised; staging is diffed on their old and new keys only; the
report is the last one with the changed rows' reads taken out and put back in. Its counts are what
the full path would report for the same data (tests/sync/test_resync.py checks that).
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vedana.etl.normalize import (
    _SEP,
    FROM,
    TO,
    EdgeRow,
    NodeRow,
    Normalizer,
    TablePlan,
    _blank,
    _ForeignKey,
    _id_text,
    context_text,
)
from vedana.etl.report import DUPLICATE_EDGE, SyncReport, TypeReport
from vedana.sources.base import RawTable, row_digest

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from vedana.datamodel import DataModel
    from vedana.stores.sync_rows import TableRows

_REFS = "\x1c"  # between an anchor row's link-column entries
_FIELD = "\x1f"


# --- recording what each row produced ------------------------------------------------------


@dataclass
class _Ledger:
    anchor: bool
    keys: array = field(default_factory=lambda: array("q"))
    digests: bytearray = field(default_factory=bytearray)
    outcomes: list[str] = field(default_factory=list)
    index: dict[int, int] = field(default_factory=dict)
    refs: dict[int, list[str]] = field(default_factory=dict)
    spoiled: set[int] = field(default_factory=set)
    context: Any = field(default_factory=lambda: hashlib.blake2b(digest_size=16))

    def add(self, row_id: int, digest: bytes) -> None:
        self.index[row_id] = len(self.keys)
        self.keys.append(row_id)
        self.digests += digest
        self.outcomes.append("")


class Recorder:
    """Keeps, while a sync normalises, each row's digest and outcome (`RowRecorder`)."""

    def __init__(self) -> None:
        self.tables: dict[str, _Ledger] = {}
        # sentence -> contributor (link table, or "Anchor_<noun>.<column>") -> rows / references
        self.contributors: dict[str, Counter[str]] = {}
        self.unique_keys = True

    def reading(self, table: RawTable, anchor: bool) -> RawTable:
        """`table`, with each row's digest kept as the normaliser reads it."""
        ledger = self.tables[table.name] = _Ledger(anchor)

        def rows() -> Iterator[tuple[int, dict[str, Any]]]:
            add, decode = ledger.add, table.decode_raw
            for row_id, raw in table.raw_rows():
                add(row_id, row_digest(raw))
                yield row_id, decode(raw)

        return RawTable(name=table.name, columns=table.columns, _rows=rows, row_count=table.row_count)

    def node(self, table: str, row_id: int, node_id: str | None, context: str) -> None:
        ledger = self.tables[table]
        i = ledger.index[row_id]
        if node_id is None:
            ledger.spoiled.add(i)
            return
        ledger.outcomes[i] = node_id
        ledger.context.update(context.encode("utf-8", "surrogatepass") + b"\x1e")

    def spoil(self, table: str, row_id: int) -> None:
        ledger = self.tables[table]
        ledger.spoiled.add(ledger.index[row_id])

    def link(self, table: str, row_id: int, sentence: str | None, outcome: str) -> None:
        ledger = self.tables[table]
        i = ledger.index[row_id]
        ledger.outcomes[i] = outcome
        if not outcome:
            ledger.spoiled.add(i)
        if sentence is not None:
            self.contributors.setdefault(sentence, Counter())[table] += 1

    def references(
        self, table: str, row_id: int, fk: _ForeignKey, source: str, targets: list[str | None]
    ) -> None:
        ledger = self.tables[table]
        i = ledger.index[row_id]
        self.contributors.setdefault(fk.link.sentence, Counter())[source] += 1
        if any(t is None for t in targets):
            ledger.spoiled.add(i)
            return
        ledger.refs.setdefault(i, []).append(_FIELD.join([fk.column, *targets]))  # type: ignore[list-item]

    def rows(self) -> dict[str, TableRows]:
        """Each table's rows as the store keeps them."""
        from vedana.stores.sync_rows import TableRows

        out: dict[str, TableRows] = {}
        for name, ledger in self.tables.items():
            if len(ledger.index) != len(ledger.keys):
                self.unique_keys = False
            outcomes = ledger.outcomes
            for i in ledger.spoiled:
                outcomes[i] = ""
            if ledger.anchor:
                for i, text in enumerate(outcomes):
                    if text:
                        outcomes[i] = text + _SEP + _REFS.join(ledger.refs.get(i, ()))
            out[name] = TableRows(ledger.keys, bytes(ledger.digests), outcomes)
        return out

    def contexts(self) -> dict[str, str]:
        return {name: ledger.context.hexdigest() for name, ledger in self.tables.items() if ledger.anchor}


def signature(version: int, dm: DataModel, plan: TablePlan) -> str:
    """What the normalising of every row depends on besides the rows: when it changes, every
    row is normalised again."""

    def columns(table: RawTable) -> list[Any]:
        return [(c.id, c.type, c.visible_col, c.is_formula) for c in table.columns.values()]

    shape = {
        "version": version,
        "model": dm.to_dict(),
        "anchors": [(a.noun, t.name, columns(t)) for a, t in plan.anchors],
        "links": [(t.name, columns(t), [lk.sentence for lk in links]) for t, links in plan.links],
        "ignored": plan.ignored,
    }
    text = json.dumps(shape, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def summary_of(
    report: SyncReport,
    *,
    signature: str,
    clean: bool,
    version: int | None,
    contexts: dict[str, str],
    contributors: dict[str, Counter[str]],
) -> dict[str, Any]:
    """What the next sync needs besides the rows: the report's per-type reading (to carry over),
    each anchor table's maps, who contributes to which link, and staging's version after."""

    def reading(r: TypeReport) -> dict[str, Any]:
        return {
            "tables": r.tables,
            "read": r.read,
            "skipped": dict(r.skipped),
            "cells": dict(r.cells),
            "dropped_columns": r.dropped_columns,
            "loaded": r.loaded,
        }

    return {
        "signature": signature,
        "clean": clean and not any(r.skipped.get(DUPLICATE_EDGE) for r in report.edges.values()),
        "version": version,
        "contexts": contexts,
        "contributors": {s: dict(c) for s, c in contributors.items()},
        "nodes": {k: reading(v) for k, v in report.nodes.items()},
        "edges": {k: reading(v) for k, v in report.edges.items()},
        "notes": report.notes,
    }


# --- the incremental path ------------------------------------------------------------------


class FullSync(Exception):
    """The incremental path does not apply; the message says why."""


@dataclass
class Plan:
    """What the incremental path will write: the changed rows' output and their old keys."""

    nodes: list[NodeRow] = field(default_factory=list)
    edges: list[EdgeRow] = field(default_factory=list)
    old_nodes: set[tuple[str, str]] = field(default_factory=set)
    old_edges: set[tuple[str, str, str, str, str]] = field(default_factory=set)
    rows: dict[str, TableRows] = field(default_factory=dict)
    contributors: dict[str, Counter[str]] = field(default_factory=dict)
    touched: dict[str, tuple[int, int]] = field(default_factory=dict)  # table -> (touched, rows)
    read_delta: dict[tuple[str, str], int] = field(default_factory=dict)  # (kind, type) -> +/-


@dataclass
class _Scan:
    changed: list[tuple[int, Any]]  # (row_id, raw) new or changed, in source order
    removed: list[int]  # indexes into the old rows
    stale: list[int]  # old indexes of changed rows
    keys: array
    digests: bytearray
    outcomes: list[str]
    positions: dict[int, int]  # row_id of a changed/new row -> its index in the new rows


def _scan(table: RawTable, old: TableRows | None, on_row: Any = None) -> _Scan:
    """Hash every row; keep the changed ones (raw) and the outcomes of the unchanged ones."""
    old_keys = old.keys if old is not None else array("q")
    old_digests = old.digests if old is not None else b""
    old_outcomes = old.outcomes if old is not None else []
    n_old = len(old_keys)
    lookup: dict[int, int] | None = None
    seen = bytearray(n_old)
    keys: array = array("q")
    digests = bytearray()
    outcomes: list[str] = []
    changed: list[tuple[int, Any]] = []
    stale: list[int] = []
    positions: dict[int, int] = {}
    for position, (row_id, raw) in enumerate(table.raw_rows()):
        digest = row_digest(raw)
        if on_row is not None:
            on_row(row_id, raw)
        # Rows usually keep their place: compare by position first, by key when they moved.
        if position < n_old and old_keys[position] == row_id:
            at = position
        else:
            if lookup is None:
                lookup = {k: i for i, k in enumerate(old_keys)}
            at = lookup.get(row_id, -1)
        keys.append(row_id)
        digests += digest
        if at >= 0 and not seen[at] and old_digests[at * 8 : at * 8 + 8] == digest:
            seen[at] = 1
            outcomes.append(old_outcomes[at])
            continue
        if at >= 0:
            if seen[at]:
                raise FullSync(f"{table.name} gives row {row_id} twice")
            seen[at] = 1
            stale.append(at)
        positions[row_id] = len(outcomes)
        outcomes.append("")
        changed.append((row_id, raw))
    removed = [i for i in range(n_old) if not seen[i]]
    return _Scan(changed, removed, stale, keys, digests, outcomes, positions)


def plan_incremental(
    conn: Connection,
    normalizer: Normalizer,
    plan: TablePlan,
    summary: dict[str, Any] | None,
    stored: dict[str, TableRows],
    sig: str,
) -> Plan:
    """Decide, and when the incremental path applies, normalise the changed rows; raises
    `FullSync` (why) otherwise. The normaliser's maps hold every anchor row afterwards."""
    if not summary:
        raise FullSync("no rows kept from an earlier sync of this source")
    if summary.get("signature") != sig:
        raise FullSync("the data model, the tables or their columns changed")
    if not summary.get("clean"):
        raise FullSync("the last sync found duplicate edges or repeated row keys")
    from vedana.stores.index_state import staging_version

    if staging_version(conn) != (summary.get("version") or 0):
        raise FullSync("staging changed since the last sync")
    links = [(t, c) for t, c in plan.links if t.column(FROM) is not None and t.column(TO) is not None]
    names = [t.name for _, t in plan.anchors] + [t.name for t, _ in links]
    if set(names) != set(stored):
        raise FullSync("the tables changed")

    out = Plan()
    scans: dict[str, _Scan] = {}
    contexts = summary.get("contexts", {})
    for anchor, table in plan.anchors:
        scan, context = _scan_anchor(normalizer, anchor.noun, table, stored[table.name])
        if context != contexts.get(table.name):
            raise FullSync(f"{table.name}: ids or display values changed (references may resolve anew)")
        scans[table.name] = scan
    for table, _ in links:
        scans[table.name] = _scan(table, stored[table.name])

    contributors = {s: Counter(c) for s, c in summary.get("contributors", {}).items()}
    delta: Counter[tuple[str, str]] = Counter()
    _take_out(normalizer, plan, links, scans, stored, out, contributors, delta)
    recorder = _normalise_changed(normalizer, plan, links, scans, out, contributors, delta)
    fresh = recorder.rows()
    for name, ledger in fresh.items():
        if any(not text for text in ledger.outcomes):
            raise FullSync(f"{name}: a changed row is now skipped or has cell errors")
    before = summary.get("contributors", {})
    for sentence, counts in contributors.items():
        for source, n in counts.items():
            if (n > 0) != (before.get(sentence, {}).get(source, 0) > 0):
                raise FullSync(f"{source} starts or stops contributing to {sentence}")
    _check_new_edges(conn, out)

    for name, scan in scans.items():
        outcomes, index = fresh[name].outcomes, recorder.tables[name].index
        for row_id, i in scan.positions.items():
            scan.outcomes[i] = outcomes[index[row_id]]
        out.rows[name] = _rows_of(scan)
        out.touched[name] = (len(scan.changed) + len(scan.removed), len(scan.keys))
    out.contributors = {s: Counter({k: v for k, v in c.items() if v > 0}) for s, c in contributors.items()}
    out.read_delta = dict(delta)
    return out


def _take_out(
    normalizer: Normalizer,
    plan: TablePlan,
    links: list[tuple[RawTable, list[Any]]],
    scans: dict[str, _Scan],
    stored: dict[str, TableRows],
    out: Plan,
    contributors: dict[str, Counter[str]],
    delta: Counter[tuple[str, str]],
) -> None:
    """The changed and removed rows' old keys (to diff against) and reads (to take out)."""
    fk_of = {(fk.own, fk.column): fk for fks in normalizer._foreign_keys.values() for fk in fks}
    for anchor, table in plan.anchors:
        scan, old = scans[table.name], stored[table.name]
        for i in [*scan.stale, *scan.removed]:
            text = old.outcomes[i]
            if not text:
                raise FullSync(f"{table.name}: a changed row had been skipped or had cell errors")
            node_id, _, refs = text.partition(_SEP)
            out.old_nodes.add((anchor.noun, node_id))
            delta["node", anchor.noun] -= 1
            for entry in refs.split(_REFS) if refs else ():
                column, *targets = entry.split(_FIELD)
                fk = fk_of[anchor.noun, column]
                contributors.setdefault(fk.link.sentence, Counter())[f"Anchor_{anchor.noun}.{column}"] -= 1
                delta["edge", fk.link.sentence] -= len(targets)
                for target in targets:
                    if fk.own_is_anchor1:
                        _keys(out.old_edges, fk.link, fk.own, node_id, fk.target, target)
                    else:
                        _keys(out.old_edges, fk.link, fk.target, target, fk.own, node_id)
    for table, _ in links:
        scan, old = scans[table.name], stored[table.name]
        for i in [*scan.stale, *scan.removed]:
            text = old.outcomes[i]
            if not text:
                raise FullSync(f"{table.name}: a changed row had been skipped or had cell errors")
            sentence, a, b = text.split(_SEP)
            link = normalizer._links[sentence.lower()]
            contributors.setdefault(sentence, Counter())[table.name] -= 1
            delta["edge", sentence] -= 1
            _keys(out.old_edges, link, link.anchor1, a, link.anchor2, b)


def _normalise_changed(
    normalizer: Normalizer,
    plan: TablePlan,
    links: list[tuple[RawTable, list[Any]]],
    scans: dict[str, _Scan],
    out: Plan,
    contributors: dict[str, Counter[str]],
    delta: Counter[tuple[str, str]],
) -> Recorder:
    """Normalise the changed and new rows (into a scratch report: their reads are put in)."""
    recorder = Recorder()
    real_report = normalizer.report
    scratch = SyncReport()
    normalizer.report, normalizer.recorder = scratch, recorder
    try:
        for anchor, table in plan.anchors:
            subset = _subset(table, scans[table.name], recorder, anchor=True)
            out.nodes.extend(normalizer.nodes(anchor, subset, context_ready=True))
        for table, candidates in links:
            subset = _subset(table, scans[table.name], recorder, anchor=False)
            out.edges.extend(normalizer.link_table_edges(subset, candidates))
        out.edges.extend(normalizer.foreign_key_edges())
    finally:
        normalizer.report, normalizer.recorder = real_report, None
    for sentence, counts in recorder.contributors.items():
        contributors.setdefault(sentence, Counter()).update(counts)
    for kind, reports in (("node", scratch.nodes), ("edge", scratch.edges)):
        for name, stats in reports.items():
            delta[kind, name] += stats.read
    return recorder


def _scan_anchor(normalizer: Normalizer, noun: str, table: RawTable, old: TableRows) -> tuple[_Scan, str]:
    """`_scan`, building the table's id and display maps from every row on the way (as
    `Normalizer.nodes` would) and the digest of what they hold."""
    id_cols = normalizer.id_columns(noun, table)
    label_cols = normalizer.label_columns(noun, table)
    wanted = [*id_cols, *label_cols]
    ids, row_ids, labels = normalizer.ids[noun], normalizer.row_ids[noun], normalizer.labels[noun]
    repeated = normalizer.repeated_ids[noun]
    for col in label_cols:
        labels.setdefault(col, {})
    context = hashlib.blake2b(digest_size=16)

    def on_row(row_id: int, raw: Any) -> None:
        cells = table.decode_some(raw, wanted)
        node_id = next((t for t in (_id_text(cells.get(c)) for c in id_cols) if t), None)
        if node_id is None:
            if id_cols or _blank(table.decode_raw(raw)):
                return
            node_id = f"{noun}:{row_id}"
        context.update(
            context_text(row_id, node_id, cells, label_cols).encode("utf-8", "surrogatepass") + b"\x1e"
        )
        row_ids.setdefault(row_id, node_id)
        for col in label_cols:
            label = _id_text(cells.get(col))
            if label:
                labels[col].setdefault(label, node_id)
        if node_id in ids:
            repeated.add(node_id)
        else:
            ids.add(node_id)

    scan = _scan(table, old, on_row)
    return scan, context.hexdigest()


def _subset(table: RawTable, scan: _Scan, recorder: Recorder, *, anchor: bool) -> RawTable:
    """The table's changed and new rows only, decoded, their digests kept by `recorder`."""
    rows = scan.changed
    part = RawTable(
        name=table.name,
        columns=table.columns,
        _raw_rows=lambda: iter(rows),
        decode=table.decode_raw,
        row_count=len(rows),
    )
    return recorder.reading(part, anchor)


def _keys(into: set[tuple[str, str, str, str, str]], link: Any, ft: str, fid: str, tt: str, tid: str) -> None:
    into.add((link.sentence, ft, fid, tt, tid))
    if not link.has_direction and (ft, fid) != (tt, tid):
        into.add((link.sentence, tt, tid, ft, fid))


def _check_new_edges(conn: Connection, out: Plan) -> None:
    """A changed row's new edge may not repeat another row's (the full path would collapse them
    and count a duplicate): among themselves, nor a live edge no changed row produced before."""
    keys = [tuple(e[:5]) for e in out.edges]
    if len(set(keys)) != len(keys):
        raise FullSync("changed rows now make the same edge twice")
    fresh = [k for k in keys if k not in out.old_edges]
    if not fresh:
        return
    from vedana.stores.staging_write import live_edges

    if live_edges(conn, fresh):
        raise FullSync("a changed row now makes an edge another row already makes")


def _rows_of(scan: _Scan) -> TableRows:
    from vedana.stores.sync_rows import TableRows

    return TableRows(scan.keys, bytes(scan.digests), scan.outcomes)


def apply_reading(report: SyncReport, summary: dict[str, Any], delta: dict[tuple[str, str], int]) -> None:
    """The report's reading (tables, reads, skips, cell notes, dropped columns, notes) is the last
    sync's, with the changed rows' reads taken out and put back in."""
    from collections import Counter as _Counter

    for kind, reports in (("node", summary["nodes"]), ("edge", summary["edges"])):
        for name, r in reports.items():
            stats = report.node(name) if kind == "node" else report.edge(name)
            stats.tables = list(r["tables"])
            stats.read = r["read"] + delta.get((kind, name), 0)
            stats.skipped = _Counter(r["skipped"])
            stats.cells = _Counter(r["cells"])
            stats.dropped_columns = list(r["dropped_columns"])
    report.notes = list(summary["notes"])


def loaded_before(summary: dict[str, Any], kind: str, name: str) -> int:
    entry = summary["nodes" if kind == "node" else "edges"].get(name)
    return int(entry["loaded"]) if entry else 0


__all__ = ["FullSync", "Plan", "Recorder", "plan_incremental", "signature", "summary_of"]
