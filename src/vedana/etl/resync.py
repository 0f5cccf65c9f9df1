"""A re-sync that normalises only the source rows that changed.

Every sync remembers, per source row (table, row key), a digest of the row as read and what it
produced (`stores/sync_rows.py`): an anchor row its node id, display values and the targets of its
link columns ("+" in front when that is all it produced, "-" when it had more to say: a duplicate,
a formula error, a failed cast, an unresolved reference; "" when skipped), a link-table row its
link and oriented ends ("" when it made no edge or had more to say).

The next sync reads and hashes every row (CSV folders: checksums over the file's lines, in C) and
rebuilds the id / display maps of every anchor table: unchanged rows from what they recorded,
changed rows from their id and display columns. A CSV file's rows are keyed by their line: when
lines were inserted or removed before its end, a line is matched to the kept one with its digest
wherever it moved (for tables whose rows do not depend on their place: link tables, and anchor
tables whose ids and display values are unique), and an edited anchor row to the one that had its id. It then takes the incremental path when all of
this holds, else the full one (and says why):

- the data model, the tables and their columns, and the normalising rules are the same, the last
  sync made no duplicate edge, and staging is as it left it;
- every anchor table's maps hold what they held (changed rows keep their ids and display
  values), so every reference resolves as it did and unchanged rows produce what they produced.
  Rows may be added to an anchor table when their ids and display values are new to every
  anchor and the last sync resolved every reference (one that did not might name an added row
  now); rows may go when no other row named them (no live edge at their node but those the
  changed and removed rows made, and no dangling link row that may reference them by row id);
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import compress, islice
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
    _row_node_id,
    label_text,
)
from vedana.etl.report import DANGLING, DUPLICATE_EDGE, UNRESOLVED_REF, SyncReport, TypeReport
from vedana.sources.base import RawTable, RowDigests, differing, line_keys, row_digest
from vedana.stores.sync_rows import KeptOutcomes, ReorderedOutcomes, pack_outcomes, unpack_outcomes

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from vedana.datamodel import DataModel
    from vedana.stores.sync_rows import TableRows

_REFS = "\x1c"  # between an anchor row's link-column entries
_RUN = 4096  # link outcomes packed (and checked) at a time
_FIELD = "\x1f"


# --- recording what each row produced ------------------------------------------------------


class _Lines:
    """Row key -> position for rows keyed 1..n in order (a CSV file's records): the arithmetic
    instead of a dict, which cost ~100 bytes a row (100 MB at 1M rows)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def get(self, key: int, default: int = -1) -> int:
        return key - 1 if 0 < key <= self.n else default

    def __getitem__(self, key: int) -> int:
        if 0 < key <= self.n:
            return key - 1
        raise KeyError(key)

    def __len__(self) -> int:
        return self.n


@dataclass
class _Ledger:
    anchor: bool
    keys: array = field(default_factory=lambda: array("q"))
    low: array = field(default_factory=lambda: array("I"))
    high: array = field(default_factory=lambda: array("I"))
    blocks: array | None = None  # a CSV file's block checksums (`RowDigests.blocks`)
    outcomes: list[str] = field(default_factory=list)
    index: dict[int, int] | _Lines = field(default_factory=dict)
    refs: dict[int, list[str]] = field(default_factory=dict)
    spoiled: set[int] = field(default_factory=set)
    reads: dict[str, int] = field(default_factory=dict)  # link-table rows read per link
    calls: int = 0  # rows the normaliser was given
    whole: bool = False  # digests read at once (one per line): each line must have been a row
    # A link table's outcomes as they come, in row order, packed a run at a time (`pack_outcomes`):
    # one string per run instead of one per row (~50 bytes less a row, 40 MB at 1M rows). None:
    # kept in `outcomes`, one per row.
    packed: list[str] | None = None
    run: list[str] = field(default_factory=list)
    streamed: int = 0  # rows recorded into `packed` + `run`

    def add(self, row_id: int, digest: tuple[int, int]) -> None:
        index = self.index
        assert isinstance(index, dict)  # rows added one at a time are keyed by a dict
        index[row_id] = len(self.keys)
        self.keys.append(row_id)
        low, high = digest
        self.low.append(low)
        self.high.append(high)
        self.outcomes.append("")


class Recorder:
    """Keeps, while a sync normalises, each row's digest and outcome (`RowRecorder`)."""

    def __init__(self) -> None:
        self.tables: dict[str, _Ledger] = {}
        # sentence -> contributor (link table, or "Anchor_<noun>.<column>") -> rows / references
        self.contributors: dict[str, Counter[str]] = {}
        self.sound = True

    def reading(self, table: RawTable, anchor: bool) -> RawTable:
        """`table`, with each row's digest kept (all at once when the table can, else as the
        normaliser reads each row)."""
        ledger = self.tables[table.name] = _Ledger(anchor)
        bulk = table.digests()
        if bulk is not None:
            ledger.whole = True
            ledger.keys, ledger.low, ledger.high, ledger.blocks = bulk.keys, bulk.low, bulk.high, bulk.blocks
            lines = _are_lines(bulk.keys)
            ledger.index = _Lines(len(bulk.keys)) if lines else {k: i for i, k in enumerate(bulk.keys)}
            if lines and not anchor:
                ledger.packed = []
            else:
                ledger.outcomes = [""] * len(bulk.keys)
            return table

        def rows() -> Iterator[tuple[int, dict[str, Any]]]:
            add, decode = ledger.add, table.decode_raw
            for row_id, raw in table.raw_rows():
                add(row_id, row_digest(raw))
                yield row_id, decode(raw)

        return RawTable(name=table.name, columns=table.columns, _rows=rows, row_count=table.row_count)

    def _at(self, table: str, row_id: int) -> tuple[_Ledger, int]:
        ledger = self.tables[table]
        i = ledger.index.get(row_id, -1)
        if i < 0:
            self.sound = False  # the rows read were not those digested: trust nothing
        return ledger, i

    def node(self, table: str, row_id: int, node_id: str | None, labels: str) -> None:
        ledger, i = self._at(table, row_id)
        ledger.calls += 1
        if i >= 0 and node_id is not None:
            ledger.outcomes[i] = f"{node_id}{_SEP}{labels}"
            if not (node_id.isprintable() and labels.replace(_FIELD, "").isprintable()):
                self.sound = False  # a control character would garble the recorded outcome

    def spoil(self, table: str, row_id: int) -> None:
        ledger, i = self._at(table, row_id)
        ledger.spoiled.add(i)

    def link(self, table: str, row_id: int, sentence: str | None, outcome: str) -> None:
        # Called for every link-table row: kept lean; the outcomes are checked all at once (`rows`).
        ledger = self.tables[table]
        ledger.calls += 1
        i = ledger.index.get(row_id, -1)
        if i < 0:
            self.sound = False
        elif ledger.packed is None:
            ledger.outcomes[i] = outcome
        elif i == ledger.streamed:  # the next row, as always from a CSV file read in order
            run = ledger.run
            run.append(outcome)
            ledger.streamed += 1
            if len(run) == _RUN:
                self._pack(ledger)
        else:
            _unpack(ledger)
            ledger.outcomes[i] = outcome
        if sentence is not None:
            reads = ledger.reads
            reads[sentence] = reads.get(sentence, 0) + 1

    def references(
        self, table: str, row_id: int, fk: _ForeignKey, source: str, targets: list[str | None]
    ) -> None:
        ledger, i = self._at(table, row_id)
        self.contributors.setdefault(fk.link.sentence, Counter())[source] += 1
        if any(t is None for t in targets):
            ledger.spoiled.add(i)
            return
        if not all(t.isprintable() for t in targets):  # type: ignore[union-attr]
            self.sound = False
        ledger.refs.setdefault(i, []).append(_FIELD.join([fk.column, *targets]))  # type: ignore[list-item]

    def _pack(self, ledger: _Ledger) -> None:
        """The run recorded so far, checked as `rows` checks outcomes, into one packed string."""
        assert ledger.packed is not None
        if not _sound_links(ledger.run):
            self.sound = False
        ledger.packed.append(pack_outcomes(ledger.run))
        ledger.run = []

    def rows(self) -> dict[str, TableRows]:
        """Each table's rows as the store keeps them."""
        from vedana.stores.sync_rows import TableRows

        out: dict[str, TableRows] = {}
        for name, ledger in self.tables.items():
            if len(ledger.index) != len(ledger.keys):
                self.sound = False
            if ledger.whole and ledger.calls != len(ledger.keys):
                self.sound = False  # a record spanned lines: line digests do not stand for rows
            if ledger.packed is not None:
                if ledger.spoiled:
                    _unpack(ledger)
                else:
                    ledger.run += [""] * (len(ledger.keys) - ledger.streamed)  # rows never given
                    ledger.streamed = len(ledger.keys)
                    if ledger.run:
                        self._pack(ledger)
                    for sentence, n in ledger.reads.items():
                        self.contributors.setdefault(sentence, Counter())[name] += n
                    out[name] = TableRows(
                        ledger.keys, ledger.low, ledger.high, [], packed=ledger.packed, blocks=ledger.blocks
                    )
                    continue
            outcomes, spoiled, refs = ledger.outcomes, ledger.spoiled, ledger.refs
            if ledger.anchor:
                for i, text in enumerate(outcomes):
                    if text:
                        flag = "-" if i in spoiled else "+"
                        outcomes[i] = f"{flag}{text}{_SEP}{_REFS.join(refs.get(i, ()))}"
            else:
                for i in spoiled:
                    outcomes[i] = ""
                # A slice at a time: joining them all at once cost ~70 MB at 1M rows.
                if not all(_sound_links(outcomes[i : i + _RUN]) for i in range(0, len(outcomes), _RUN)):
                    self.sound = False
                for sentence, n in ledger.reads.items():
                    self.contributors.setdefault(sentence, Counter())[name] += n
            out[name] = TableRows(ledger.keys, ledger.low, ledger.high, outcomes, blocks=ledger.blocks)
        return out


def _sound_links(outcomes: list[str]) -> bool:
    """Each link outcome is "<link's place in the model>␞<id>␞<id>" (or ""): a separator or a control character
    inside an id would garble it, so then nothing recorded is trusted."""
    joined = "".join(outcomes)
    made = len(outcomes) - outcomes.count("")
    return joined.count(_SEP) == 2 * made and joined.replace(_SEP, "").isprintable()


def _unpack(ledger: _Ledger) -> None:
    """Outcomes one per row again (a row came out of order, or must be blanked)."""
    assert ledger.packed is not None
    outcomes = [text for packed in ledger.packed for text in unpack_outcomes(packed)]
    ledger.outcomes = outcomes + ledger.run + [""] * (len(ledger.keys) - ledger.streamed)
    ledger.packed, ledger.run = None, []


def signature(version: int, dm: DataModel, plan: TablePlan) -> str:
    """What the normalising of every row depends on besides the rows: when it changes, every
    row is normalised again."""

    def columns(table: RawTable) -> list[Any]:
        found: list[Any] = [(c.id, c.type, c.visible_col, c.is_formula) for c in table.columns.values()]
        # A header wider than its columns (a field unnamed or a name repeated): the unchanged
        # lines of a file may read as malformed now. Only then, so other signatures stay as they were.
        if table.header is not None and list(table.header) != list(table.columns):
            found.append(list(table.header))
        return found

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
    contributors: dict[str, Counter[str]],
) -> dict[str, Any]:
    """What the next sync needs besides the rows: the report's per-type reading (to carry over),
    who contributes to which link, and staging's version after."""

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
    keys: array
    low: array
    high: array
    # The old outcome of an unchanged row, "" for the others (filled later).
    outcomes: list[str] | KeptOutcomes
    changed: list[tuple[int, Any]] = field(default_factory=list)  # (row_id, raw), source order
    positions: dict[int, int] = field(default_factory=dict)  # changed row_id -> new position
    stale: list[int] = field(default_factory=list)  # old positions of changed rows
    removed: list[int] = field(default_factory=list)  # old positions of rows gone
    was: dict[int, int] = field(default_factory=dict)  # changed row_id -> its old position
    patched: set[int] | None = None  # in place: positions differing from the packed rows stored
    stored: int | None = None  # in place, rows added at the end: how many rows the stored fields hold
    by_digest: bool = False  # rows matched by digest, wherever they are (`_scan_lines`)
    moved: bool = False  # ... and some of them are not where they were
    order: array | None = None  # by digest: each line's kept line, -1 for none (`_align_lines`)
    blocks: array | None = None  # a CSV file's block checksums (`RowDigests.blocks`)


def _scan(table: RawTable, old: TableRows, *, movable: bool = False) -> _Scan:
    """Every row's digest against the kept one: which rows are new, changed or gone. `movable`:
    a row's outcome does not depend on its key or on the rows before it (a link row; an anchor
    row with an id column whose display values are its ids), so a CSV line that moved is the
    row it was."""
    bulk = table.digests()
    if bulk is None:
        return _scan_rows(table, old, bulk)
    kept = len(old.keys)
    same_keys = bulk.keys[:kept] == old.keys  # maybe more after them
    differ = differing((bulk.low, old.low), (bulk.high, old.high)) if same_keys else []
    if same_keys and (not movable or len(differ) * _MOVED_SHARE <= kept):
        return _scan_in_place(bulk, old, differ, added=len(bulk.keys) - kept)
    if movable and _are_lines(bulk.keys) and _are_lines(old.keys):
        return _scan_lines(bulk, old, table.name)
    if same_keys:
        return _scan_in_place(bulk, old, differ, added=len(bulk.keys) - kept)
    return _scan_rows(table, old, bulk)


# Lines differing in place beyond this share (1/n) of a file's kept lines: lines were inserted or
# removed before its end (or much of it rewritten), and its lines are matched by digest instead.
_MOVED_SHARE = 20


def _are_lines(keys: array) -> bool:
    """Row keys 1..n in order: a CSV file's records, keyed by where they are, not what they are."""
    return not keys or (keys[0] == 1 and keys[-1] == len(keys) and keys == line_keys(len(keys)))


def _scan_lines(bulk: RowDigests, old: TableRows, name: str) -> _Scan:
    """A CSV file whose lines moved (some inserted or removed before its end): a line is the kept
    row whose digest it has, as `_align_lines` pairs them; the other lines are new and the kept
    lines not paired are gone. An edited anchor row is one gone and one new here, paired again
    by its id (`_rebuild_maps`)."""
    order, fresh, gone, shifted = _align_lines(bulk.low, bulk.high, old.low, old.high)
    if len(fresh) * 2 > len(order):  # mostly new or reordered: one whole reading is cheaper
        raise FullSync(f"{name}: most lines are new or moved")
    kept = old.outcomes
    outcomes = (
        ReorderedOutcomes(kept, order)
        if isinstance(kept, KeptOutcomes)
        else [kept[j] if j >= 0 else "" for j in order]
    )
    scan = _Scan(
        bulk.keys,
        bulk.low,
        bulk.high,
        outcomes,
        by_digest=True,
        moved=shifted,
        order=order,
        blocks=bulk.blocks,
    )
    for i, raw in zip(fresh, bulk.fetch(fresh), strict=True):
        key = bulk.keys[i]
        scan.positions[key] = i
        scan.changed.append((key, raw))
    scan.removed = gone
    return scan


def _align_lines(
    new_low: array, new_high: array, old_low: array, old_high: array
) -> tuple[array, list[int], list[int], bool]:
    """Each new line's kept line (the same digest), -1 for none, walking both files in order:
    runs of equal lines are taken whole; past a difference, both walks go on from the nearest
    pair of equal lines (`_realign`). Returns that order, the new lines paired with none, the
    kept lines paired with none, and whether a paired line is not where it was. Memory: 8 bytes
    a line; time: about a compare per line."""
    n, m = len(new_low), len(old_low)
    order = array("q", [-1]) * n
    fresh: list[int] = []
    gone: list[int] = []
    far = [0]
    i = j = 0
    shifted = False
    while i < n and j < m:
        run = _equal_run(new_low, new_high, i, old_low, old_high, j)
        if run:
            order[i : i + run] = array("q", range(j, j + run))
            shifted = shifted or i != j
            i, j = i + run, j + run
            continue
        di, dj = _realign(new_low, new_high, i, old_low, old_high, j, far)
        fresh += range(i, i + di)
        gone += range(j, j + dj)
        i, j = i + di, j + dj
    fresh += range(i, n)
    gone += range(j, m)
    return order, fresh, gone, shifted


def _equal_run(new_low: array, new_high: array, i: int, old_low: array, old_high: array, j: int) -> int:
    """How many lines from new `i` and kept `j` on are equal: blocks compared in C, growing while
    they agree, halving down to the first line that differs."""
    size, run = 64, 0
    limit = min(len(new_low) - i, len(old_low) - j)
    while run < limit:
        size = min(size, limit - run)
        a, b = i + run, j + run
        if (
            new_low[a : a + size] == old_low[b : b + size]
            and new_high[a : a + size] == old_high[b : b + size]
        ):
            run += size
            size *= 4
        elif size > 1:
            size //= 2
        else:
            break
    return run


_REALIGN_WINDOW = 256  # lines looked ahead on each side for the nearest pair of equal lines, at first
_REALIGN_WINDOW_MAX = 1 << 16  # ... and at most (the window's digests are held in a dict)
_FAR_SEARCHES = 64  # searches past the window, at most, before the rest of a file counts as new


def _realign(
    new_low: array, new_high: array, i: int, old_low: array, old_high: array, j: int, far: list[int]
) -> tuple[int, int]:
    """(di, dj), di + dj > 0: lines to skip on each side to the nearest new line `i + di` and
    kept line `j + dj` that are equal. Within a window (growing fourfold while it finds none),
    the pair with fewest lines skipped; past the largest (a block of lines inserted or removed),
    the kept line `j` further on in the new file or the new line `i` further on in the kept one,
    searched in C; neither: both lines changed. `far` counts those searches: past
    `_FAR_SEARCHES` the rest of the file is new (it was reordered)."""
    n, m = len(new_low), len(old_low)

    def same(a: int, b: int) -> bool:
        return a < n and b < m and new_low[a] == old_low[b] and new_high[a] == old_high[b]

    for di, dj in ((1, 1), (1, 0), (0, 1)):  # one line changed, added or removed: the usual
        if same(i + di, j + dj):
            return di, dj
    window = _REALIGN_WINDOW
    while True:
        first: dict[tuple[int, int], int] = {}
        for dj in range(min(window, m - j)):
            first.setdefault((old_low[j + dj], old_high[j + dj]), dj)
        best: tuple[int, int] | None = None
        for di in range(min(window, n - i)):
            if best is not None and di >= best[0] + best[1]:
                break
            dj = first.get((new_low[i + di], new_high[i + di]), -1)
            if dj >= 0 and (best is None or di + dj < best[0] + best[1]):
                best = (di, dj)
        if best is not None:
            return best
        if window >= max(n - i, m - j):
            return n - i, m - j  # no line of either rest is in the other
        if window >= _REALIGN_WINDOW_MAX:
            break
        window *= 4
    far[0] += 1
    if far[0] > _FAR_SEARCHES:
        return n - i, m - j
    inserted = _find(new_low, new_high, i, old_low[j], old_high[j])  # old line j further on
    removed = _find(old_low, old_high, j, new_low[i], new_high[i])  # new line i further on
    if inserted < 0 and removed < 0:
        return 1, 1
    if removed < 0 or 0 <= inserted - i <= removed - j:
        return inserted - i, 0
    return 0, removed - j


def _find(low: array, high: array, start: int, want_low: int, want_high: int) -> int:
    """The first position from `start` holding that digest, -1 for none (a scan in C)."""
    while True:
        try:
            at = low.index(want_low, start)
        except ValueError:
            return -1
        if high[at] == want_high:
            return at
        start = at + 1


def _scan_in_place(bulk: RowDigests, old: TableRows, differ: list[int], *, added: int = 0) -> _Scan:
    """The same row keys in the same order (the usual edit), and `added` rows after them (a file
    that grew at the end): the rows whose digests differ from the kept ones (`differ`, ascending)
    changed; the added rows are new."""
    low, high = bulk.low, bulk.high
    kept = len(old.keys)
    outcomes = _copy_of(old.outcomes)
    if added:
        outcomes = outcomes.extended(added) if isinstance(outcomes, KeptOutcomes) else outcomes + [""] * added
    scan = _Scan(bulk.keys, low, high, outcomes, blocks=bulk.blocks)
    positions = [*differ, *range(kept, kept + added)]
    raws = bulk.fetch(positions)
    for i, raw in zip(positions, raws, strict=True):
        key = bulk.keys[i]
        if i < kept:
            scan.stale.append(i)
            scan.was[key] = i
        scan.positions[key] = i
        scan.outcomes[i] = ""
        scan.changed.append((key, raw))
    # A patch covers the rows stored; rows added at the end are added to what is stored.
    scan.patched = None if old.patched is None else old.patched.union(differ)
    scan.stored = kept if added else None
    return scan


def _copy_of(outcomes: list[str] | KeptOutcomes) -> list[str] | KeptOutcomes:
    """Outcomes to set rows in while the ones copied stay as they were (packed ones: a view of
    the same runs)."""
    return outcomes.copy() if isinstance(outcomes, KeptOutcomes) else list(outcomes)


def _scan_rows(table: RawTable, old: TableRows, bulk: RowDigests | None) -> _Scan:
    """Rows were added, removed or moved (or the table gives no digests at once): by key."""
    at = {k: i for i, k in enumerate(old.keys)}
    if len(at) != len(old.keys):
        raise FullSync(f"{table.name}: row keys repeat")
    outcomes: list[str] = []  # one per row here: the rows are in another order than stored
    scan = _Scan(array("q"), array("I"), array("I"), outcomes)
    seen = bytearray(len(old.keys))
    wanted: list[int] = []  # positions of changed rows whose raw text is still to be fetched

    def compare(i: int, row_id: int, low: int, high: int, raw: Any) -> None:
        scan.keys.append(row_id)
        scan.low.append(low)
        scan.high.append(high)
        j = at.get(row_id, -1)
        if j >= 0:
            if seen[j]:
                raise FullSync(f"{table.name} gives row {row_id} twice")
            seen[j] = 1
            if low == old.low[j] and high == old.high[j]:
                outcomes.append(old.outcomes[j])
                return
            scan.stale.append(j)
            scan.was[row_id] = j
        scan.positions[row_id] = i
        outcomes.append("")
        scan.changed.append((row_id, raw))
        if raw is None:
            wanted.append(len(scan.changed) - 1)

    if bulk is not None:
        scan.blocks = bulk.blocks  # the digests gathered are the bulk's, in its order
        for i, row_id in enumerate(bulk.keys):
            compare(i, row_id, bulk.low[i], bulk.high[i], None)
        raws = bulk.fetch([scan.positions[scan.changed[k][0]] for k in wanted])
        for k, raw in zip(wanted, raws, strict=True):
            scan.changed[k] = (scan.changed[k][0], raw)
    else:
        for i, (row_id, raw) in enumerate(table.raw_rows()):
            compare(i, row_id, *row_digest(raw), raw)  # only changed rows' raws are kept
    scan.removed = [j for j in range(len(old.keys)) if not seen[j]]
    return scan


def plan_incremental(
    conn: Connection,
    normalizer: Normalizer,
    plan: TablePlan,
    summary: dict[str, Any] | None,
    stored: dict[str, TableRows],
    sig: str,
    version: int,
) -> Plan:
    """Decide, and when the incremental path applies, normalise the changed rows; raises
    `FullSync` (why) otherwise. `version`: staging's (`staging_version`), in this transaction.
    The normaliser's maps hold every anchor row afterwards."""
    if not summary:
        raise FullSync("no rows kept from an earlier sync of this source")
    if summary.get("signature") != sig:
        raise FullSync("the data model, the tables or their columns changed")
    if not summary.get("clean"):
        raise FullSync(
            "the last sync could not vouch for every row (a duplicate edge, a repaired or malformed row, a record over several lines)"
        )
    if not version:
        raise FullSync("staging is empty")
    if version != summary.get("version"):
        raise FullSync("staging changed since the last sync")
    links = [(t, c) for t, c in plan.links if t.column(FROM) is not None and t.column(TO) is not None]
    names = [t.name for _, t in plan.anchors] + [t.name for t, _ in links]
    if set(names) != set(stored):
        raise FullSync("the tables changed")

    out = Plan()
    scans: dict[str, _Scan] = {}
    added: dict[str, list[str]] = {}  # noun -> ids of the anchor rows new to its table
    removed: list[tuple[str, str]] = []  # (noun, id) of the anchor rows gone from their table
    for anchor, table in plan.anchors:
        # Key-free rows: an id column, and display values (a map's first row wins) only from it.
        id_cols = normalizer.id_columns(anchor.noun, table)
        movable = bool(id_cols) and set(normalizer.label_columns(anchor.noun, table)) <= set(id_cols)
        scan = _scan(table, stored[table.name], movable=movable)
        added[anchor.noun], gone = _rebuild_maps(normalizer, anchor.noun, table, scan, stored[table.name])
        removed += [(anchor.noun, node_id) for node_id in gone]
        scans[table.name] = scan
    if any(added.values()):
        _check_added_ids(normalizer, summary, added)
    for table, _ in links:
        scans[table.name] = _scan(table, stored[table.name], movable=True)

    contributors = {s: Counter(c) for s, c in summary.get("contributors", {}).items()}
    delta: Counter[tuple[str, str]] = Counter()
    _take_out(normalizer, plan, links, scans, stored, out, contributors, delta)
    if removed:
        _check_removed_ids(conn, normalizer, removed, out, links, summary)
    recorder, fresh = _normalise_changed(normalizer, plan, links, scans, out, contributors, delta)
    if not recorder.sound:
        raise FullSync("a changed row's ids hold control characters")
    for name, ledger in fresh.items():
        if any(not text or text[0] == "-" for text in ledger.outcomes):
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
            if not text or text[0] != "+":
                raise FullSync(f"{table.name}: a changed row had been skipped or had cell errors")
            node_id, _, refs = text[1:].split(_SEP)
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
            code, a, b = text.split(_SEP)
            try:  # the link's place in the model, the last sync's (`signature` says so)
                link = normalizer.links_in_order[int(code)]
            except (ValueError, IndexError):
                raise FullSync(f"{table.name}: the rows recorded by the last sync do not read back") from None
            contributors.setdefault(link.sentence, Counter())[table.name] -= 1
            delta["edge", link.sentence] -= 1
            _keys(out.old_edges, link, link.anchor1, a, link.anchor2, b)


def _normalise_changed(
    normalizer: Normalizer,
    plan: TablePlan,
    links: list[tuple[RawTable, list[Any]]],
    scans: dict[str, _Scan],
    out: Plan,
    contributors: dict[str, Counter[str]],
    delta: Counter[tuple[str, str]],
) -> tuple[Recorder, dict[str, TableRows]]:
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
    fresh = recorder.rows()  # also counts the link-table rows per link
    for sentence, counts in recorder.contributors.items():
        contributors.setdefault(sentence, Counter()).update(counts)
    for kind, reports in (("node", scratch.nodes), ("edge", scratch.edges)):
        for name, stats in reports.items():
            delta[kind, name] += stats.read
    return recorder, fresh


def _rebuild_maps(
    normalizer: Normalizer, noun: str, table: RawTable, scan: _Scan, old: TableRows
) -> tuple[list[str], list[str]]:
    """The table's id and display maps as `Normalizer.nodes` builds them from every row in order,
    here from what the rows recorded; a changed row must still give what it recorded (its ids and
    display cells are read to check), else `FullSync`: a reference anywhere may resolve anew.

    A row new to the table may bring an id, when no other row of the anchor shows its id or
    display values (as an id or as a display value): then no reference that resolved before
    resolves otherwise now (`_check_added_ids` rules out the ones that did not resolve). A row
    may go away when nothing that stays named it (`_check_removed_ids`). Returns the ids of the
    rows added and of those removed."""
    id_cols = normalizer.id_columns(noun, table)
    label_cols = normalizer.label_columns(noun, table)
    wanted = [*id_cols, *label_cols]
    gone: dict[str, int] = {}  # id -> old position, of the rows no longer there
    for j in scan.removed:
        if text := old.outcomes[j]:
            gone.setdefault(text[1:].split(_SEP, 1)[0], j)
    texts = _copy_of(scan.outcomes)
    paired: dict[int, int] = {}  # old position -> new, of the rows paired again by id
    added: list[tuple[str, str]] = []  # (id, display values) of the rows new to the table
    for row_id, raw in scan.changed:
        cells = table.decode_some(raw, wanted)
        node_id = _row_node_id(cells, id_cols)
        if node_id is None and not id_cols and not _blank(table.decode_raw(raw)):
            node_id = f"{noun}:{row_id}"
        shows = label_text(cells, label_cols)
        now = f"{node_id}{_SEP}{shows}" if node_id is not None else ""
        at = scan.was.get(row_id)
        if at is None and scan.by_digest and node_id in gone:  # an edited row, matched by digest
            at = scan.was[row_id] = gone.pop(node_id)
            scan.stale.append(at)
            paired[at] = scan.positions[row_id]
        if at is None:
            if now:
                if not (node_id.isprintable() and shows.replace(_FIELD, "").isprintable()):  # type: ignore[union-attr]
                    raise FullSync(
                        f"{table.name}: an added row's id or display values hold control characters"
                    )
                added.append((node_id, shows))  # type: ignore[arg-type]
                texts[scan.positions[row_id]] = f"+{now}{_SEP}"  # as recorded, with no reference yet
            continue
        before = old.outcomes[at]
        if (before[1:].rsplit(_SEP, 1)[0] if before else "") != now:
            raise FullSync(f"{table.name}: ids or display values changed (references may resolve anew)")
        texts[scan.positions[row_id]] = before
    if paired and not scan.moved:
        # Lines paired by digest keep their order (`_align_lines`); rows paired by id may have
        # swapped places with no such line shifting.
        assert scan.order is not None
        scan.moved = not _in_order(scan.order, paired)
    removed = _removed_ids(table.name, scan, old)
    # Every row as it recorded itself: "±<id>␞<display values>␞<references>", "" if skipped.
    # Ids, display values and references hold no separator (the recorder vouched for that), so
    # every recorded row is three fields: a slice of rows at a time (memory), split at once in C.
    keys: list[int] = []
    ids: list[str] = []
    shown: list[str] = []
    everything = iter(texts)
    for start in range(0, len(scan.keys), _RUN):
        some = list(islice(everything, _RUN))
        joined = _SEP.join(filter(None, some))
        fields = joined.split(_SEP) if joined else []
        keys += compress(scan.keys[start : start + _RUN], some)
        if len(fields) != 3 * (len(keys) - len(ids)):
            raise FullSync(f"{table.name}: the rows recorded by the last sync do not read back")
        ids += [signed[1:] for signed in fields[0::3]]
        shown += fields[1::3]
    if added:
        _check_added_rows(table.name, added, ids, shown)
    normalizer.row_ids[noun].update(zip(keys, ids, strict=True))  # row keys are unique
    unique = set(ids)
    if scan.moved and len(unique) != len(ids):  # which of two rows with one id comes first moved
        raise FullSync(f"{table.name}: rows moved in a table whose ids repeat")
    normalizer.ids[noun].update(unique)
    if len(unique) != len(ids):
        normalizer.repeated_ids[noun].update(i for i, n in Counter(ids).items() if n > 1)
    _display_maps(normalizer.labels[noun], label_cols, ids, shown, table.name, moved=scan.moved)
    if removed and not normalizer.ids[noun].isdisjoint(removed):
        raise FullSync(f"{table.name}: a removed row's id is held by another row (a duplicate before)")
    return [node_id for node_id, _ in added], removed


def _in_order(order: array, paired: dict[int, int]) -> bool:
    """Whether the rows paired by id (old position -> new) keep their places among the lines
    paired by digest (`order`: each line's kept line, -1 for none): every line's kept line comes
    after the kept line of the line before. In C but for the pairs."""
    kept = array("q", order)
    for j, i in paired.items():
        kept[i] = j
    present = list(filter((-1).__lt__, kept))
    return present == sorted(present)


def _removed_ids(table: str, scan: _Scan, old: TableRows) -> list[str]:
    """The ids of the rows gone from the table (rows paired again by id, `scan.stale`, are
    changed rows, not gone); a gone row that had said more than its keys: `FullSync`."""
    if scan.stale and scan.by_digest:
        paired = set(scan.stale)
        scan.removed = [j for j in scan.removed if j not in paired]
    removed = []
    for j in scan.removed:
        if text := old.outcomes[j]:
            if text[0] != "+":  # a duplicate id, or a row that said more than its keys
                raise FullSync(f"{table}: rows with ids were removed (references may resolve anew)")
            removed.append(text[1:].split(_SEP, 1)[0])
    return removed


def _display_maps(
    labels: dict[str, dict[str, str]],
    label_cols: list[str],
    ids: list[str],
    shown: list[str],
    table: str,
    *,
    moved: bool,
) -> None:
    """Each display column's map, value -> id, from every row's id and display values in order."""
    for c, col in enumerate(label_cols):
        values = shown if len(label_cols) == 1 else [v.split(_FIELD)[c] for v in shown]
        # The first row showing a value wins: later rows are written first, earlier ones over them.
        found = dict(zip(reversed(values), reversed(ids), strict=True))
        found.pop("", None)
        if moved and len(found) != len(values) - values.count(""):
            # A value two rows show names the first of them: moved lines may change which (unique
            # ids do not rule it out when the display column is a second id column, node_id).
            raise FullSync(f"{table}: rows moved in a table whose display values repeat")
        labels[col] = found


def _check_added_rows(table: str, added: list[tuple[str, str]], ids: list[str], shown: list[str]) -> None:
    """Each added row's id and display values are its own: no other row of the table (the table's
    rows being `ids` and `shown`, added ones included) has one of them as an id or a display
    value. An id met twice would make duplicates; a value another row has could take a reference
    that resolved to that row (a map's first row wins; an id beats another column's value)."""
    names = [{node_id, *filter(None, shows.split(_FIELD))} for node_id, shows in added]
    wanted = set().union(*names)
    held: Counter[str] = Counter()  # how many rows have each wanted name
    for node_id, text in zip(ids, shown, strict=True):
        if (
            node_id in wanted
            or text in wanted
            or (_FIELD in text and not wanted.isdisjoint(text.split(_FIELD)))
        ):
            held.update(wanted.intersection({node_id, *text.split(_FIELD)}))
    for (node_id, _), own in zip(added, names, strict=True):
        if any(held[name] != 1 for name in own):
            raise FullSync(
                f"{table}: a row added with id {node_id!r} shares its id or a display value with "
                "another row (references may resolve anew)"
            )


def _check_removed_ids(
    conn: Connection,
    normalizer: Normalizer,
    removed: list[tuple[str, str]],
    out: Plan,
    links: list[tuple[RawTable, list[Any]]],
    summary: dict[str, Any],
) -> None:
    """Anchor rows went away: every live edge at one of their nodes must be one the changed and
    removed rows made (taken out with them). An edge another row made means that row named the
    node (by id or display value) and would resolve otherwise now: the whole reading finds how.

    A link-table row whose end is a reference (a Grist Ref, by row id) to one of them names it
    without an edge when its ends did not fit the link (`dangling endpoint`): now the reference
    does not resolve, which counts otherwise (`unresolved reference`)."""
    from vedana.stores.staging_write import live_edges_touching

    nouns = {noun for noun, _ in removed}
    dangled = {s for s, r in summary.get("edges", {}).items() if r.get("skipped", {}).get(DANGLING)}
    contributors = summary.get("contributors", {})
    for table, _ in links:
        ends = (table.column(FROM), table.column(TO))
        refers = any(c is not None and normalizer._noun_of_table(c.ref_table) in nouns for c in ends)
        if refers and any(contributors.get(sentence, {}).get(table.name) for sentence in dangled):
            raise FullSync(
                f"rows with ids were removed and {table.name} had dangling rows whose references "
                "may name them (they would not resolve now)"
            )
    if live_edges_touching(conn, removed) - out.old_edges:
        raise FullSync("rows with ids were removed that other rows name (references resolve anew)")


def _check_added_ids(normalizer: Normalizer, summary: dict[str, Any], added: dict[str, list[str]]) -> None:
    """Rows with ids were added: no reference of the last sync may have failed to resolve (it
    might name one of them now), and no added id may be another anchor's id too (a link-table
    row naming it could then be read the other way round)."""
    for sentence, reading in summary.get("edges", {}).items():
        skipped = reading.get("skipped", {})
        if skipped.get(UNRESOLVED_REF) or skipped.get(DANGLING):
            raise FullSync(
                f"rows with ids were added and {sentence} had references that did not resolve "
                "(they may resolve now)"
            )
    for noun, new_ids in added.items():
        for other, ids in normalizer.ids.items():
            if other != noun and any(node_id in ids for node_id in new_ids):
                raise FullSync(f"a row added to {noun} has an id that {other} has too")


def _subset(table: RawTable, scan: _Scan, recorder: Recorder, *, anchor: bool) -> RawTable:
    """The table's changed and new rows only, decoded, their digests kept by `recorder`."""
    rows = scan.changed
    decode: Callable[[Any], dict[str, Any]] = table.decode_raw
    # All at once; equal texts decode alike. Not for rows read as cells (a CSV file whose lines
    # were not digested, as one with a carriage return inside a cell): a dict is no key.
    if table.decode_many is not None and not any(isinstance(raw, dict) for _, raw in rows):
        texts = [raw for _, raw in rows]
        decode = dict(zip(texts, table.decode_all(texts), strict=True)).__getitem__
    part = RawTable(
        name=table.name,
        columns=table.columns,
        _raw_rows=lambda: iter(rows),
        decode=decode,
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

    return TableRows(
        scan.keys, scan.low, scan.high, scan.outcomes, scan.patched, stored=scan.stored, blocks=scan.blocks
    )


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
