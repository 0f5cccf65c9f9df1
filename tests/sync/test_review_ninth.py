"""The ninth round's review, by tests, of `differing` over whole arrays (each pair XORed as one
integer, the pairs ORed, the nonzero bytes found by `bytes.find`) and of a re-sync that takes its
changed rows from it, on either digest half.

A CSV line's digest is its CRC-32 (the low half) and Adler-32 (the high half). CRC-32 is affine:
two strings of one length with the same CRC-32 keep it with any text before and after them, so
`_SAME_CRC` edits a line in its high half only, wherever it stands."""

from __future__ import annotations

import random
import shutil
import zlib
from array import array
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine

from support.csv_lines import data_lines
from support.sync_kb import blank_staging, report_counts, staging_state
from vedana.config import Settings
from vedana.etl.sync import SyncReport, sync
from vedana.sources.base import differing

Edit = Callable[[Path], None]
PEOPLE = "Anchor_person"
LINKS = "Link_person_has_interest"

# Found by a birthday search over 12 random letters: one CRC-32, two Adler-32s (their byte sums
# differ, so any line holding them does too).
_SAME_CRC = (b"vvekwlpxlsfh", b"duxbdagnvvkn")


def _one_by_one(*pairs: tuple[array, array]) -> list[int]:
    stop = min(min(len(new), len(old)) for new, old in pairs)
    return [i for i in range(stop) if any(new[i] != old[i] for new, old in pairs)]


# --- differing --------------------------------------------------------------------------------


def test_the_same_change_in_both_halves_is_found() -> None:
    """Pairs are ORed, never XORed together: the same bit flipped at the same position in both
    pairs would cancel out."""
    old_low, old_high = array("I", [5, 6, 7, 8]), array("I", [9, 10, 11, 12])
    new_low, new_high = array("I", old_low), array("I", old_high)
    for i in (0, 2):
        new_low[i] ^= 1 << 12
        new_high[i] ^= 1 << 12
    assert differing((new_low, old_low), (new_high, old_high)) == [0, 2]


@pytest.mark.parametrize("code", ["I", "Q", "q", "B"])
def test_an_item_differing_in_every_byte_is_found_once(code: str) -> None:
    """Past a difference the search goes on from the next item, not the next byte: an item
    whose every byte changed (and one changed only in its top byte, last) is one position."""
    size = array(code).itemsize
    top = (1 << (8 * size - 1)) - 1 if code == "q" else (1 << (8 * size)) - 1
    old = array(code, [0, 0, 0, 0, 0])
    new = array(code, [top, 0, top, 0, 0])
    new[4] = -(1 << (8 * size - 1)) if code == "q" else 1 << (8 * size - 1)  # only its top bit
    other_old = array(code, [1, 1, 1, 1, 1])
    other_new = array(code, [1, top, top, 1, 1])
    assert differing((new, old)) == [0, 2, 4]
    assert differing((new, old), (other_new, other_old)) == [0, 1, 2, 4]


def test_a_change_in_the_last_items_top_byte_is_found() -> None:
    """The flags buffer is `stop * size` bytes whatever the XOR's top bytes hold: a change only
    in the last item's highest byte, or only in the first item's lowest, is found."""
    old = array("I", [0x01020304] * 9)
    new = array("I", old)
    new[-1] ^= 0xFF000000
    assert differing((new, old)) == [8]
    new = array("I", old)
    new[0] ^= 1
    assert differing((new, old)) == [0]
    assert differing((new, old), (array("I", old), array("I", old))) == [0]  # a pair with no change


def test_arrays_of_unequal_lengths_are_compared_over_the_shortest() -> None:
    """Positions past the end of any array are left out, of every pair (rows added after the
    kept ones are not "differing"); empty arrays have none."""
    old = array("I", [1, 2, 3, 4, 5, 6])
    new = array("I", [1, 0, 3, 4, 0, 6, 7, 8])  # two rows added
    assert differing((new, old)) == [1, 4]
    short_old, short_new = array("I", [1, 2, 3]), array("I", [1, 2, 0])
    assert differing((new, old), (short_new, short_old)) == _one_by_one((new, old), (short_new, short_old))
    assert differing((new, old), (short_new, short_old)) == [1, 2]
    assert differing((array("I"), array("I"))) == []
    assert differing((new, array("I"))) == []
    assert differing((new, old), (array("I", [9]), array("I"))) == []
    assert differing((array("I", [7, 8]), array("I", [7, 8]))) == []


def test_item_sizes_are_checked_in_every_pair() -> None:
    """One pair of 4-byte items and one of 8: an error, whichever pair comes first and whether
    or not the odd pair differs."""
    four, eight = array("I", [1, 2]), array("Q", [1, 2])
    for pairs in [
        ((four, four), (eight, eight)),
        ((eight, eight), (four, four)),
        ((four, array("Q", [1, 2])),),
    ]:
        with pytest.raises(ValueError, match="one item size"):
            differing(*pairs)


# --- re-syncs whose lines change in one digest half -------------------------------------------


def _set_field(table: str, lines: list[int], column: int, value: bytes) -> Edit:
    """Field `column` of these data lines (1-based; unquoted fields before it) set to `value`,
    the rest of each line as it was, byte for byte. The last field (`column` -1) may be quoted."""

    def edit(data: Path) -> None:
        path = data / f"{table}.csv"
        head, *rows = path.read_bytes().split(b"\n")
        for line in lines:
            if column < 0:
                fields = rows[line - 1].split(b",", 5)
                rows[line - 1] = b",".join([*fields[:5], value])
            else:
                fields = rows[line - 1].split(b",")
                fields[column] = value
                rows[line - 1] = b",".join(fields)
        path.write_bytes(b"\n".join([head, *rows]))

    return edit


def _append_person(data: Path) -> None:
    """A person added at the file's end, in a city that exists."""
    path = data / f"{PEOPLE}.csv"
    text = path.read_bytes()
    ending = b"" if text.endswith(b"\n") else b"\n"
    path.write_bytes(text + ending + b"person:new,New Comer,40,2020-01-01,city:0001,false\n")


def _both(*edits: Edit) -> Edit:
    def edit(data: Path) -> None:
        for one in edits:
            one(data)

    return edit


def _resyncs(
    settings: Settings,
    engine: Engine,
    kb: Path,
    tmp: Path,
    before: Edit,
    edits: list[Edit],
    paths: list[dict[str, str]] | None,
    *,
    check: Callable[[Path], None] = lambda data: None,
) -> None:
    """`before` made to a copy of `kb`, a first sync, then each edit and a re-sync, whose paths
    (of the tables named) must be `paths` (None: incremental, every table); then the same from a blank staging with --full each
    time: the same staging and counts. `check` runs on the folder after each incremental edit."""

    def run(full: bool) -> tuple[list[SyncReport], dict[str, object]]:
        blank_staging(engine)
        work = tmp / "kb"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(kb, work)
        before(work / "data")
        sync(settings, data_model=work / "model", data=work / "data")
        reports = []
        for edit in edits:
            edit(work / "data")
            if not full:
                check(work / "data")
            reports.append(sync(settings, data_model=work / "model", data=work / "data", full=full))
        return reports, staging_state(engine)

    quick, quick_state = run(False)
    if paths is None:
        assert all(p.startswith("incremental") for r in quick for p in r.paths.values())
    else:
        assert [{name: r.paths[name] for name in want} for r, want in zip(quick, paths, strict=True)] == paths
    slow, slow_state = run(True)
    assert quick_state == slow_state
    assert [report_counts(r) for r in quick] == [report_counts(r) for r in slow]


def _only_high_differs(table: str, line: int) -> Callable[[Path], None]:
    """A guard on the crafted edits: the line, with one of `_SAME_CRC` in it, keeps its CRC-32
    with the other one in its place and not its Adler-32."""

    def check(data: Path) -> None:
        new = data_lines((data / f"{table}.csv").read_bytes())[line - 1]
        v1, v2 = _SAME_CRC
        other = new.replace(v1, v2) if v1 in new else new.replace(v2, v1)
        assert other != new and zlib.crc32(other) == zlib.crc32(new)
        assert zlib.adler32(other) != zlib.adler32(new)

    return check


def test_a_line_changed_in_its_high_half_only_is_resynced(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A person's name changed so that its line keeps its CRC-32 (the low half): the re-sync
    still finds that row changed, and the next re-sync, of another row, finds only that one (the
    first change was kept in the patch, not only in staging)."""
    v1, v2 = _SAME_CRC
    name = 1  # person_name
    _resyncs(
        settings,
        pg_engine,
        kb,
        tmp_path,
        _set_field(PEOPLE, [7], name, v1),
        [
            _set_field(PEOPLE, [7], name, v2),
            _set_field(PEOPLE, [30], name, b"Someone Else"),
            _set_field(PEOPLE, [7], name, v1),  # back: high half only again
        ],
        [{PEOPLE: "incremental: 1 changed rows of 60", LINKS: "incremental: 0 changed rows of 317"}] * 3,
        check=_only_high_differs(PEOPLE, 7),
    )


def test_rows_appended_with_a_high_half_edit(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A line changed in its high half only and a row appended in one re-sync (the kept fields
    added to, beside a patch), then re-syncs of other rows: each finds only its own changes."""
    v1, v2 = _SAME_CRC
    _resyncs(
        settings,
        pg_engine,
        kb,
        tmp_path,
        _set_field(PEOPLE, [12], 1, v1),
        [
            _both(_set_field(PEOPLE, [12], 1, v2), _append_person),
            _set_field(PEOPLE, [3], 1, b"Third Person"),
            _set_field(PEOPLE, [61], 1, b"Newer Comer"),  # the appended row
            _set_field(PEOPLE, [40], 1, b"Forty"),
        ],
        [
            {PEOPLE: "incremental: 2 changed rows of 61"},
            {PEOPLE: "incremental: 1 changed rows of 61"},
            {PEOPLE: "incremental: 1 changed rows of 61"},
            {PEOPLE: "incremental: 1 changed rows of 61"},
        ],
    )


def test_many_link_lines_changed_in_their_high_half_only(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """More than a twentieth of the link lines changed in their high half only: a share of
    changed lines that both halves count, so the lines are matched by digest (each changed line
    one gone and one new: 70 rows), as lines changed in both halves are; it ends where --full
    does, and a later re-sync of one line finds only it."""
    v1, v2 = _SAME_CRC
    lines = list(range(3, 317, 9))  # 35 of 317
    _resyncs(
        settings,
        pg_engine,
        kb,
        tmp_path,
        _set_field(LINKS, lines, -1, v1),
        [_set_field(LINKS, lines, -1, v2), _set_field(LINKS, [5], -1, b"Changed.")],
        [{LINKS: "incremental: 70 changed rows of 317"}, {LINKS: "incremental: 1 changed rows of 317"}],
    )


@pytest.mark.parametrize("seed", range(4))
def test_edits_of_either_half_and_appends_one_after_another(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path, seed: int
) -> None:
    """Re-syncs one after another, each of some lines changed in their high half only (names
    swapped between `_SAME_CRC`'s twins), some changed outright and maybe a row appended: each
    takes the incremental path, and they end where full syncs of the same edits do."""
    rng = random.Random(seed)
    twins = [5, 17, 33, 48]  # lines holding one of the twins
    names = {line: 0 for line in twins}
    count = 60
    edits: list[Edit] = []
    for step in range(4):
        parts: list[Edit] = []
        for line in rng.sample(twins, rng.randint(1, 2)):
            names[line] ^= 1
            parts.append(_set_field(PEOPLE, [line], 1, _SAME_CRC[names[line]]))
        others = [n for n in range(1, count + 1) if n not in twins]
        parts += [
            _set_field(PEOPLE, [n], 1, f"Name {seed} {step} {n}".encode()) for n in rng.sample(others, 2)
        ]
        if rng.random() < 0.5:
            parts.append(_append_person_as(f"person:new{step}"))
            count += 1
        edits.append(_both(*parts))
    _resyncs(settings, pg_engine, kb, tmp_path, _set_field(PEOPLE, twins, 1, _SAME_CRC[0]), edits, None)


def _append_person_as(person_id: str) -> Edit:
    def edit(data: Path) -> None:
        path = data / f"{PEOPLE}.csv"
        text = path.read_bytes()
        ending = b"" if text.endswith(b"\n") else b"\n"
        path.write_bytes(text + ending + f"{person_id},New Comer,40,2020-01-01,city:0001,false\n".encode())

    return edit
