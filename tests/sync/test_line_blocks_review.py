"""Adversarial checks of the block-checked re-sync of a CSV folder (`csv_folder.line_digests(kept=)`,
`sync_rows.line_blocks`): many re-syncs in a row, each reading the blocks the one before saved
(patched, repacked, grown by `_add_rows`), through edits chosen to look like the kept bytes
(the same length, bytes shifted inside a block, blocks swapped, a final line break lost and
found, CRLF, a BOM, a header change, a file that shrinks to nothing and grows back, another
table's file). After every incremental re-sync staging equals what `--full` makes of the same
files, and what is kept of each file's lines is what a fresh reading of it gives."""

from __future__ import annotations

import csv
import io
import random
import shutil
import threading
import zlib
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from bench.edit import append_csv_folder
from bench.generate import generate
from support.sync_kb import blank_staging, report_counts, staging_state
from vedana.config import Settings
from vedana.errors import SourceError
from vedana.etl.sync import sync
from vedana.sources import csv_folder
from vedana.sources.base import LINE_BLOCK, KeptLines
from vedana.sources.csv_folder import line_digests

Edit = Callable[[Path], None]
LINKS = "Link_person_has_interest.csv"
PEOPLE = "Anchor_person.csv"


@pytest.fixture(scope="module")
def other_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("review-other") / "kb"
    generate("people", 400, 8, out, "csv")
    return out


# --- edits on a file's bytes ----------------------------------------------------------------


def _split(content: bytes) -> tuple[bytes, bytes, list[bytes], bool]:
    """BOM, header, data lines (without their line breaks), whether the last one has one."""
    bom = b"\xef\xbb\xbf" if content.startswith(b"\xef\xbb\xbf") else b""
    lines = content[len(bom) :].split(b"\n")
    closed = lines[-1] == b""
    if closed:
        lines.pop()
    return bom, lines[0], lines[1:], closed


def _join(bom: bytes, header: bytes, lines: list[bytes], closed: bool) -> bytes:
    return bom + b"\n".join([header, *lines]) + (b"\n" if closed else b"")


def _lines(name: str, fn: Callable[[list[bytes]], list[bytes]]) -> Edit:
    def edit(data: Path) -> None:
        bom, header, lines, closed = _split((data / name).read_bytes())
        (data / name).write_bytes(_join(bom, header, fn(list(lines)), closed))

    return edit


def _whole(
    name: str, fn: Callable[[bytes, bytes, list[bytes], bool], tuple[bytes, bytes, list[bytes], bool]]
) -> Edit:
    def edit(data: Path) -> None:
        (data / name).write_bytes(_join(*fn(*_split((data / name).read_bytes()))))

    return edit


def _same_length(i: int) -> Callable[[list[bytes]], list[bytes]]:
    """Line `i` with one byte changed (a person's name's first letter, a link's since_year's last
    digit): the block keeps its size and its line breaks' places."""

    def fn(lines: list[bytes]) -> list[bytes]:
        parts = lines[i].split(b",", 5)
        field, at = (4, -1) if parts[1].startswith(b"interest:") else (1, 0)
        value = bytearray(parts[field])
        value[at] ^= 1  # 'A' <-> '@', '4' <-> '5': one byte either way
        parts[field] = bytes(value)
        lines[i] = b",".join(parts)
        return lines

    return fn


def _shift_within_block(i: int) -> Callable[[list[bytes]], list[bytes]]:
    """The last letter of line `i`'s name moves to the front of line `i + 1`'s: the block keeps
    its length and its line count, only where the line break falls moves."""

    def fn(lines: list[bytes]) -> list[bytes]:
        a = lines[i].split(b",", 2)
        b = lines[i + 1].split(b",", 2)
        a[1], b[1] = a[1][:-1], a[1][-1:] + b[1]
        lines[i], lines[i + 1] = b",".join(a), b",".join(b)
        return lines

    return fn


def _swap_blocks(first: int, second: int) -> Callable[[list[bytes]], list[bytes]]:
    def fn(lines: list[bytes]) -> list[bytes]:
        a = slice(first * LINE_BLOCK, (first + 1) * LINE_BLOCK)
        b = slice(second * LINE_BLOCK, (second + 1) * LINE_BLOCK)
        lines[a], lines[b] = lines[b], lines[a]
        return lines

    return fn


def _move_line(src: int, dst: int) -> Callable[[list[bytes]], list[bytes]]:
    def fn(lines: list[bytes]) -> list[bytes]:
        lines.insert(dst, lines.pop(src))
        return lines

    return fn


def _field_edit(i: int, column: int, value: bytes) -> Callable[[list[bytes]], list[bytes]]:
    def fn(lines: list[bytes]) -> list[bytes]:
        row = next(csv.reader(io.StringIO(lines[i].decode())))
        row[column] = value.decode()
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(row)
        lines[i] = out.getvalue().encode()
        return lines

    return fn


def _every_nth_year(step: int) -> Callable[[list[bytes]], list[bytes]]:
    """since_year (the fifth field) + 1 on every `step`-th link line, same length: a big edit."""

    def fn(lines: list[bytes]) -> list[bytes]:
        for i in range(0, len(lines), step):
            parts = lines[i].split(b",", 5)
            if parts[4].isdigit():
                parts[4] = str(int(parts[4]) + 1).encode()
                lines[i] = b",".join(parts)
        return lines

    return fn


def _closed(value: bool) -> Edit:
    return _whole(LINKS, lambda bom, header, lines, _: (bom, header, lines, value))


def _bom(value: bool) -> Edit:
    return _whole(
        LINKS, lambda _, header, lines, closed: (b"\xef\xbb\xbf" if value else b"", header, lines, closed)
    )


def _crlf(name: str, value: bool) -> Edit:
    def edit(data: Path) -> None:
        content = (data / name).read_bytes().replace(b"\r\n", b"\n")
        (data / name).write_bytes(content.replace(b"\n", b"\r\n") if value else content)

    return edit


def _keep_first(n: int) -> Edit:
    return _lines(LINKS, lambda lines: lines[:n])


def _restore(kb: Path, name: str) -> Edit:
    def edit(data: Path) -> None:
        shutil.copyfile(kb / "data" / name, data / name)

    return edit


def _grow_back_to(kb: Path, n: int) -> Edit:
    """The link file's first `n` lines as the generated one has them (after fewer)."""

    def edit(data: Path) -> None:
        _, _, original, _ = _split((kb / "data" / LINKS).read_bytes())
        bom, header, _, closed = _split((data / LINKS).read_bytes())
        (data / LINKS).write_bytes(_join(bom, header, original[:n], closed))

    return edit


def _reorder_city_columns(data: Path) -> None:
    path = data / "Anchor_city.csv"
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    with path.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([[r[1], r[0], *r[2:]] for r in rows])


def _append(tag: str) -> Edit:
    """Rows added at the end of every file (new ids, new links to them)."""

    def edit(data: Path) -> None:
        append_csv_folder(data, "people", 0.02, tag=tag)

    return edit


# --- the oracle ------------------------------------------------------------------------------


def _kept_is_fresh(engine: Engine, data: Path, step: int) -> None:
    """What is kept of each file's lines is what a fresh reading of the file gives."""
    from vedana.stores.sync_rows import kept_lines

    with engine.connect() as conn:
        lines = kept_lines(conn, f"CSV folder {data}") or {}
    assert set(lines) == {p.stem for p in data.glob("*.csv") if p.stat().st_size}, (
        step
    )  # (no header: no table)
    for name, kept in lines.items():
        fresh = line_digests(data / f"{name}.csv")
        assert fresh is not None and fresh.blocks is not None, (step, name)
        assert (kept.low, kept.high, kept.blocks) == (fresh.low, fresh.high, fresh.blocks), (step, name)


def _synced_copy(settings: Settings, engine: Engine, kb: Path, tmp: Path) -> Path:
    """A fresh copy of `kb` under `tmp`, synced first into blank staging; the copy's folder."""
    blank_staging(engine)
    work = tmp / "kb"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(kb, work)
    sync(settings, data_model=work / "model", data=work / "data")
    return work


def _chain_ends_as_full_ones(
    settings: Settings, engine: Engine, kb: Path, tmp: Path, edits: list[Edit]
) -> list[str]:
    """A first sync, then each edit and a sync, incrementally and with --full from the same copy
    of `kb`: after every step both give the same staging and counts, and the incremental one
    keeps each file's fresh line digests and blocks. Returns the incremental paths taken."""

    def run(full: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
        work = _synced_copy(settings, engine, kb, tmp)
        states, counts, paths = [], [], []
        for step, edit in enumerate(edits):
            edit(work / "data")
            report = sync(settings, data_model=work / "model", data=work / "data", full=full)
            states.append(staging_state(engine))
            counts.append(report_counts(report))
            paths += [f"{step} {name}: {p}" for name, p in report.paths.items()]
            if not full:
                _kept_is_fresh(engine, work / "data", step)
        return states, counts, paths

    quick, quick_counts, paths = run(False)
    slow, slow_counts, _ = run(True)
    for step, (a, b) in enumerate(zip(quick, slow, strict=True)):
        assert a == b, f"step {step}: staging differs from --full"
    for step, (a, b) in enumerate(zip(quick_counts, slow_counts, strict=True)):
        assert a == b, f"step {step}: counts differ from --full"
    return paths


def _tricky_edits(kb: Path, other_kb: Path) -> list[Edit]:
    return [
        _lines(PEOPLE, _same_length(4)),
        _lines(PEOPLE, _same_length(4)),  # and back: the block's bytes are the first sync's again
        _lines(PEOPLE, _shift_within_block(LINE_BLOCK + 2)),
        _lines(LINKS, _swap_blocks(1, 2)),
        _lines(LINKS, _move_line(LINE_BLOCK - 1, LINE_BLOCK + 4)),
        _lines(LINKS, _field_edit(3 * LINE_BLOCK + 5, 3, b"beginner")),
        _closed(False),  # the last line loses its line break: same lines, fewer whole blocks
        _both(_closed(True), _lines(LINKS, _field_edit(-1, 4, b"1999"))),
        _crlf(PEOPLE, True),
        _lines(PEOPLE, _same_length(LINE_BLOCK * 2 + 1)),  # a CRLF file edited in place
        _crlf(PEOPLE, False),
        _append("r"),  # rows added at the ends (`_add_rows`)
        _lines(LINKS, _same_length(7)),  # the blocks `_add_rows` saved, read back
        _lines(LINKS, _same_length(7)),  # and back
        _append("s"),
        _bom(True),
        _keep_first(2 * LINE_BLOCK),  # shrinks to exactly two blocks
        _grow_back_to(kb, 2 * LINE_BLOCK + 8),
        _keep_first(LINE_BLOCK),  # exactly one
        _keep_first(0),  # a header only
        _restore(kb, LINKS),  # grows back whole
        _lines(LINKS, _every_nth_year(3)),  # a big edit: packed anew
        _lines(LINKS, _field_edit(LINE_BLOCK * 5, 4, b"2001")),  # a patch over the repacked rows
        _both(_bom(False), _lines(LINKS, _same_length(LINE_BLOCK * 6 + 15))),
        _reorder_city_columns,  # a header change
        _lines(PEOPLE, _move_line(2, 40)),
        _restore(other_kb, LINKS),  # another document's file of the same table
        _lines(LINKS, _same_length(LINE_BLOCK * 4)),
    ]


def test_edits_made_to_fool_the_block_checks_resync_as_full(
    settings: Settings, pg_engine: Engine, kb: Path, other_kb: Path, tmp_path: Path
) -> None:
    edits = _tricky_edits(kb, other_kb)
    paths = _chain_ends_as_full_ones(settings, pg_engine, kb, tmp_path, edits)
    incremental = [p for p in paths if ": incremental" in p]
    assert len(incremental) > len(paths) // 2, paths  # the block checks ran, mostly


def _both(*edits: Edit) -> Edit:
    def edit(data: Path) -> None:
        for one in edits:
            one(data)

    return edit


def _kept_now(engine: Engine, data: Path) -> dict[str, tuple[array, array, array]]:
    from vedana.stores.sync_rows import kept_lines

    with engine.connect() as conn:
        lines = kept_lines(conn, f"CSV folder {data}") or {}
    return {name: (k.low, k.high, k.blocks) for name, k in lines.items()}


def _our_threads() -> list[str]:
    return [
        th.name for th in threading.enumerate() if th.name.startswith(("vedana-kept-rows", "vedana-digests"))
    ]


def test_a_bad_changed_line_fails_the_resync_and_leaves_the_last_one_whole(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A changed line that is not UTF-8 is found while the kept rows are read ahead and the
    files checked on threads of their own: the sync fails with a one-line error, staging and
    what is kept are the last sync's, no thread or connection is left behind, and once the
    line is fixed the next re-sync still finds every edit made since."""
    work = _synced_copy(settings, pg_engine, kb, tmp_path)
    data = work / "data"
    _lines(LINKS, _same_length(3))(data)
    sync(settings, data_model=work / "model", data=data)  # a patch: blocks saved by UPDATE
    before, kept_before = staging_state(pg_engine), _kept_now(pg_engine, data)

    _lines(PEOPLE, _same_length(LINE_BLOCK + 1))(data)  # a good edit, then a bad one after it
    _lines(LINKS, _field_edit(2 * LINE_BLOCK, 3, b"beginner"))(data)
    good = (data / LINKS).read_bytes()
    _lines(LINKS, lambda lines: [*lines[:40], lines[40] + b"\xff", *lines[41:]])(data)
    with pytest.raises(SourceError, match=f"{LINKS} is not UTF-8"):
        sync(settings, data_model=work / "model", data=data)
    assert staging_state(pg_engine) == before
    assert _kept_now(pg_engine, data) == kept_before
    assert _our_threads() == []
    assert pg_engine.pool.checkedout() == 0  # type: ignore[attr-defined]

    (data / LINKS).write_bytes(good)
    report = sync(settings, data_model=work / "model", data=data)
    assert report.paths[PEOPLE[:-4]] == "incremental: 1 changed rows of 60"
    assert report.paths[LINKS[:-4]] == "incremental: 1 changed rows of 317"
    after = staging_state(pg_engine)
    _kept_is_fresh(pg_engine, data, 0)
    blank_staging(pg_engine)
    sync(settings, data_model=work / "model", data=data)
    assert staging_state(pg_engine) == after


def test_a_full_sync_never_reads_against_kept_blocks(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --full every file is read afresh: kept line digests made wrong on purpose (which an
    incremental re-sync would trust for the blocks that check out) change nothing, and the
    sync keeps the files' true digests again."""
    work = _synced_copy(settings, pg_engine, kb, tmp_path)
    data = work / "data"
    _lines(LINKS, _same_length(5))(data)
    reference = tmp_path / "reference"
    shutil.copytree(work, reference)

    asked: list[bool] = []
    real = csv_folder.line_digests

    def spy(path: Path, kept: KeptLines | None = None) -> Any:
        asked.append(kept is not None)
        return real(path, kept)

    monkeypatch.setattr(csv_folder, "line_digests", spy)
    with pg_engine.begin() as conn:  # every line's kept digest now says nothing of it
        conn.exec_driver_sql(
            "UPDATE sync_rows SET digests = decode(repeat('00', octet_length(digests)), 'hex')"
        )
    assert all(not any(low) for low, _, _ in _kept_now(pg_engine, data).values())
    report = sync(settings, data_model=work / "model", data=data, full=True)
    assert all(p == "full: --full" for p in report.paths.values())
    assert asked and not any(asked)
    _kept_is_fresh(pg_engine, data, 0)
    state = staging_state(pg_engine)

    blank_staging(pg_engine)
    sync(settings, data_model=reference / "model", data=reference / "data")
    assert staging_state(pg_engine) == state

    # The spy sees an incremental re-sync read against the kept blocks (so it can fail above).
    blank_staging(pg_engine)
    sync(settings, data_model=work / "model", data=data)
    _lines(LINKS, _same_length(6))(data)
    asked.clear()
    sync(settings, data_model=work / "model", data=data)
    assert any(asked)


def _chained_edit(rnd: random.Random, lines: list[bytes]) -> list[bytes]:
    """One of the edits above, or a few, on lines `b"<n>,<text>"`."""
    lines = list(lines)
    blocks = len(lines) // LINE_BLOCK
    for _ in range(rnd.randint(1, 3)):
        op = rnd.randrange(9)
        if op == 0 and lines:  # one byte, the same length
            i = rnd.randrange(len(lines))
            lines[i] = lines[i][:-1] + bytes([lines[i][-1] ^ 1]) if lines[i] else b"z"
        elif op == 1 and len(lines) > 1:  # bytes shifted between two lines of one block
            i = rnd.randrange(len(lines) - 1)
            if lines[i]:
                lines[i], lines[i + 1] = lines[i][:-1], lines[i][-1:] + lines[i + 1]
        elif op == 2 and blocks >= 2:
            a, b = rnd.sample(range(blocks), 2)
            sa, sb = slice(a * LINE_BLOCK, (a + 1) * LINE_BLOCK), slice(b * LINE_BLOCK, (b + 1) * LINE_BLOCK)
            lines[sa], lines[sb] = lines[sb], lines[sa]
        elif op == 3 and lines:  # a line moved, maybe into another block
            lines.insert(rnd.randint(0, len(lines) - 1), lines.pop(rnd.randrange(len(lines))))
        elif op == 4:
            del lines[rnd.choice([0, LINE_BLOCK, 2 * LINE_BLOCK, rnd.randint(0, len(lines))]) :]
        elif op == 5:
            lines += [b"%d,added" % rnd.randrange(1000) for _ in range(rnd.choice([1, LINE_BLOCK, 40]))]
        elif op == 6 and lines:  # two lines become one, or one two: the bytes stay
            i = rnd.randrange(len(lines))
            if b"," in lines[i][1:]:
                cut = lines[i].index(b",", 1)
                lines[i : i + 1] = [lines[i][:cut], lines[i][cut + 1 :]]
            elif i + 1 < len(lines):
                lines[i : i + 2] = [lines[i] + b"," + lines[i + 1]]
        elif op == 7 and lines:  # a line edited within its block, the block's length the same
            i = rnd.randrange(len(lines))
            lines[i] = bytes(reversed(lines[i]))
        elif op == 8:
            lines = [bytes(x) for x in lines]
    return lines


def test_readings_in_a_row_each_against_the_last_ones_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reading's digests and blocks are the next one's kept ones (as a sync saves them):
    through edits made to look like the kept bytes, and line-break, CRLF and BOM changes, every
    reading gives the file's own digests and the blocks a fresh reading gives."""
    rnd = random.Random(20261127)
    path = tmp_path / "Link_a_b.csv"
    checked = 0
    for chain in range(40):
        size = rnd.choice([0, LINE_BLOCK, 2 * LINE_BLOCK, 2 * LINE_BLOCK + 1, 100])
        lines = [b"%d,%s" % (i, b"x" * rnd.randint(0, 12)) for i in range(size)]
        bom, crlf, closed = b"", False, True
        kept: KeptLines | None = None
        for step in range(12):
            monkeypatch.setattr(csv_folder, "_READ", rnd.choice([7, 100, 1 << 18]))
            if step:
                lines = _chained_edit(rnd, lines)
                if rnd.random() < 0.15:
                    closed = not closed
                if rnd.random() < 0.1:
                    crlf = not crlf
                if rnd.random() < 0.1:
                    bom = b"" if bom else b"\xef\xbb\xbf"
            closed = closed or not lines
            expected = [x + b"\r" for x in lines] if crlf else list(lines)
            if crlf and not closed:
                expected[-1] = lines[-1]  # a last line with no line break has no CR either
            content = _join(bom, b"a,b\r" if crlf else b"a,b", expected, closed)
            path.write_bytes(content)
            found = line_digests(path, kept)
            fresh = line_digests(path)
            assert found is not None and fresh is not None
            assert found.low.tolist() == [zlib.crc32(x) for x in expected], (chain, step)
            assert found.high.tolist() == [zlib.adler32(x) for x in expected], (chain, step)
            assert found.blocks == fresh.blocks, (chain, step)
            if lines:
                picked = sorted(rnd.sample(range(len(lines)), min(3, len(lines))))
                assert [x.rstrip("\r\n") for x in found.fetch(picked)] == [lines[i].decode() for i in picked]
            assert found.blocks is not None
            kept = KeptLines(found.low, found.high, found.blocks)
            checked += len(lines) >= LINE_BLOCK
    assert checked > 200


def _header(name: str, fn: Callable[[bytes], bytes]) -> Edit:
    return _whole(name, lambda bom, header, lines, closed: (bom, fn(header), lines, closed))


def test_a_header_that_changes_only_its_width_resyncs_as_full(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A column without a name, or a name repeated, is no column of the table, but it is one of
    the header's fields: every line with one field fewer is now malformed (a whole reading
    skips it), though no line changed. The re-sync must not keep those rows."""
    edits = [
        _header("Anchor_interest.csv", lambda h: h + b","),  # an unnamed column: 20 malformed rows
        _header("Anchor_interest.csv", lambda h: h[:-1]),  # and back
        _header("Anchor_city.csv", lambda h: h + b",city_name"),  # a name repeated
        _header("Anchor_city.csv", lambda h: h.rsplit(b",", 1)[0]),
    ]
    _chain_ends_as_full_ones(settings, pg_engine, kb, tmp_path, edits)


def test_files_at_and_around_block_sizes_resync_as_full(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """Files of no bytes, of a header with no line break, of exactly one or two blocks, one line
    past a block with and without its line break, each read against the blocks the last saved."""

    def empty(data: Path) -> None:
        (data / LINKS).write_bytes(b"")

    def header_alone(data: Path) -> None:
        (data / LINKS).write_bytes((data / LINKS).read_bytes().split(b"\n")[0])

    edits = [
        empty,
        _restore(kb, LINKS),
        header_alone,
        _restore(kb, LINKS),
        _keep_first(LINE_BLOCK),
        _closed(False),
        _grow_back_to(kb, LINE_BLOCK + 1),
        _closed(True),
        _grow_back_to(kb, 2 * LINE_BLOCK + 8),
        _keep_first(2 * LINE_BLOCK),
        _closed(False),
        _grow_back_to(kb, 3 * LINE_BLOCK),
    ]
    _chain_ends_as_full_ones(settings, pg_engine, kb, tmp_path, edits)


def _quoted_lines(kb: Path) -> list[int]:
    """The link lines whose last field is quoted."""
    _, _, lines, _ = _split((kb / "data" / LINKS).read_bytes())
    return [i for i, x in enumerate(lines) if x.endswith(b'"')]


def test_lines_that_stop_being_records_resync_as_full(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """An edited line whose quote opens a record over the unchanged lines after it, a line split
    inside a quoted field, blank rows and an empty line: a changed line's neighbours may read
    otherwise now, so the re-sync must end as --full does. Then the model's links in another
    order (a link-table row's outcome names its link by place)."""
    quoted = _quoted_lines(kb)

    def unclose(lines: list[bytes]) -> list[bytes]:
        lines[quoted[0]] = lines[quoted[0]][:-1]
        return lines

    def reclose(lines: list[bytes]) -> list[bytes]:
        lines[quoted[0]] += b'"'
        return lines

    def split_quoted(lines: list[bytes]) -> list[bytes]:
        i = quoted[1]
        lines[i : i + 1] = [lines[i][:-10], lines[i][-10:]]
        return lines

    def blank(i: int) -> Callable[[list[bytes]], list[bytes]]:
        def fn(lines: list[bytes]) -> list[bytes]:
            lines[i] = b",,,,,"
            return lines

        return fn

    def links_swapped(data: Path) -> None:
        path = data.parent / "model" / "Links.csv"
        with path.open(encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        with path.open("w", encoding="utf-8", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows([rows[0], *reversed(rows[1:])])

    edits = [
        _lines(LINKS, unclose),
        _lines(LINKS, reclose),
        _lines(LINKS, blank(20)),
        _lines(PEOPLE, blank(3)),
        _lines(LINKS, lambda lines: [*lines[:33], b"", *lines[33:]]),
        _lines(LINKS, split_quoted),
        _restore(kb, LINKS),
        _lines(LINKS, _same_length(2)),
        links_swapped,
        _lines(LINKS, _same_length(LINE_BLOCK + 2)),
        _lines(LINKS, _move_line(5, 60)),
    ]
    paths = _chain_ends_as_full_ones(settings, pg_engine, kb, tmp_path, edits)
    assert any(p.startswith("10 Link_person_has_interest: incremental") for p in paths), paths
