"""The eighth round's review, by tests, of a CSV folder's faster re-sync: changed lines served
from the reading that checksummed them (`_LineDigester.fresh`, up to `_KEEP_BYTES`), the folder's
content digest taken by that reading when its files' listing changed (`state_as_read`), and the
changed lines parsed by one reader (`decode_many`). Each must give what the slower way gave:
the lines digested, a stored state never newer than staging, the same cells and findings."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import random
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from support.csv_lines import data_lines, random_csv
from support.sync_kb import blank_staging, report_counts, staging_state
from vedana.config import Settings
from vedana.errors import SourceError
from vedana.etl.sync import STATE_KEY, SyncReport, sync
from vedana.sources import csv_folder
from vedana.sources.base import LINE_BLOCK, Column, KeptLines, files_digest
from vedana.sources.cells import from_text
from vedana.sources.csv_folder import CsvFolderSource, line_digests
from vedana.sources.findings import SourceFindings
from vedana.stores.staging import get_state

Edit = Callable[[Path], None]
PEOPLE = "Anchor_person.csv"
LINKS = "Link_person_has_interest.csv"


# --- edits on a folder's files ------------------------------------------------------------


def _lines(name: str, fn: Callable[[list[bytes]], list[bytes]]) -> Edit:
    """An edit of one file's data lines (the header, a BOM and the last line break kept)."""

    def edit(data: Path) -> None:
        path = data / name
        content = path.read_bytes()
        bom = b"\xef\xbb\xbf" if content.startswith(b"\xef\xbb\xbf") else b""
        lines = content[len(bom) :].split(b"\n")
        closed = lines[-1] == b""
        if closed:
            lines.pop()
        path.write_bytes(bom + b"\n".join([lines[0], *fn(lines[1:])]) + (b"\n" if closed else b""))

    return edit


def _same_size_and_time(name: str, old: bytes, new: bytes) -> Edit:
    """`old` replaced by `new` (as long) in place: the same inode, size and mtime_ns after it."""
    assert len(old) == len(new)

    def edit(data: Path) -> None:
        path = data / name
        before = path.stat()
        content = path.read_bytes()
        assert old in content
        with path.open("r+b") as handle:
            handle.seek(content.index(old))
            handle.write(new)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

    return edit


def _cell_with_carriage_return(lines: list[bytes]) -> list[bytes]:
    """A name with a lone carriage return inside its quotes: one record, one line, yet not a
    file whose lines `line_digests` can take (it gives None, and rows are read as cells)."""
    fields = lines[4].split(b",")
    fields[1] = b'"' + fields[1] + b'\rjr"'
    return [*lines[:4], b",".join(fields), *lines[5:]]


def _rename(i: int, tag: bytes) -> Callable[[list[bytes]], list[bytes]]:
    def fn(lines: list[bytes]) -> list[bytes]:
        fields = lines[i].split(b",")
        fields[1] = fields[1] + tag
        return [*lines[:i], b",".join(fields), *lines[i + 1 :]]

    return fn


def _crlf(name: str) -> Edit:
    def edit(data: Path) -> None:
        path = data / name
        path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))

    return edit


def _bom(name: str) -> Edit:
    def edit(data: Path) -> None:
        path = data / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())

    return edit


def _open_end(name: str) -> Edit:
    def edit(data: Path) -> None:
        path = data / name
        path.write_bytes(path.read_bytes().rstrip(b"\r\n"))

    return edit


def _touch(data: Path) -> None:
    for path in data.glob("*.csv"):
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def _extra_file(data: Path) -> None:
    (data / "Notes.csv").write_text("a,b\n1,2\n")


def _no_extra_file(data: Path) -> None:
    (data / "Notes.csv").unlink()


def _both(*edits: Edit) -> Edit:
    def edit(data: Path) -> None:
        for e in edits:
            e(data)

    return edit


# --- syncs --------------------------------------------------------------------------------


def _stored(engine: Engine) -> dict[str, Any]:
    with engine.connect() as conn:
        return get_state(conn, STATE_KEY) or {}


def _copy(engine: Engine, kb: Path, tmp: Path) -> Path:
    blank_staging(engine)
    work = tmp / "kb"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(kb, work)
    return work


def _run(
    settings: Settings,
    engine: Engine,
    kb: Path,
    tmp: Path,
    before: Edit | None,
    edits: list[Edit],
    *,
    full: bool,
) -> tuple[list[dict[str, Any]], list[SyncReport], list[dict[str, Any]]]:
    """From a fresh copy of `kb` (edited by `before`), a first sync, then each edit and a sync:
    the staging, report and stored states after each step."""
    work = _copy(engine, kb, tmp)
    if before is not None:
        before(work / "data")
    sync(settings, data_model=work / "model", data=work / "data")
    states, reports, stored = [], [], []
    for edit in edits:
        edit(work / "data")
        reports.append(sync(settings, data_model=work / "model", data=work / "data", full=full))
        states.append(staging_state(engine))
        stored.append(_stored(engine))
    return states, reports, stored


def _as_full(
    settings: Settings, engine: Engine, kb: Path, tmp: Path, before: Edit | None, edits: list[Edit]
) -> tuple[list[SyncReport], list[dict[str, Any]]]:
    """Each incremental step leaves the staging and counts `--full` leaves after the same edits;
    the incremental reports and stored states."""
    slow, slow_reports, _ = _run(settings, engine, kb, tmp, before, edits, full=True)
    quick, reports, stored = _run(settings, engine, kb, tmp, before, edits, full=False)  # left in place
    for step, (a, b) in enumerate(zip(quick, slow, strict=True)):
        assert a == b, step
    for step, (a, b) in enumerate(zip(reports, slow_reports, strict=True)):
        assert report_counts(a) == report_counts(b), step
    return reports, stored


def test_a_changed_file_with_a_carriage_return_in_a_cell_resyncs(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A file whose lines give no digests (a lone CR inside a quoted cell) is compared row by
    row as cells: its changed rows are dicts, which `_subset` once made the keys of its decoded
    texts ("unhashable type: 'dict'", the sync failed)."""
    people = _lines(PEOPLE, _cell_with_carriage_return)
    reports, _ = _as_full(settings, pg_engine, kb, tmp_path, people, [_lines(PEOPLE, _rename(9, b" Jr"))])
    assert reports[0].paths["Anchor_person"].startswith("incremental")
    assert reports[0].nodes["person"].updated == 1
    # Its reading gave no digest of the folder (None stored): the next sync compares the
    # contents (and stores their digest), the one after stops early.
    work = tmp_path / "kb"
    assert not sync(settings, data_model=work / "model", data=work / "data").unchanged_early
    assert sync(settings, data_model=work / "model", data=work / "data").unchanged_early


def _random_edit(seed: int) -> Edit:
    """One of many edits (the same each time it is made), in place with the same size and
    mtime one time in three."""

    def edit(data: Path) -> None:
        rnd = random.Random(seed)
        name = rnd.choice([PEOPLE, LINKS, "Anchor_interest.csv"])
        path = data / name
        lines = path.read_bytes().split(b"\n")
        i = rnd.randrange(1, len(lines) - 1)
        kind = rnd.randrange(6)
        if kind < 2:  # same size, same mtime: only the bytes tell
            line = lines[i]
            j = line.index(b",") + 1
            new = line[:j] + line[j:][::-1] if kind == 0 else line[:j] + line[j:].swapcase()
            if new != line and b'"' not in line:
                _same_size_and_time(name, b"\n" + line + b"\n", b"\n" + new + b"\n")(data)
                return
            _touch(data)
        elif kind == 2:
            _touch(data)
        elif kind == 3:
            moved = [*lines[:i], *lines[i + 1 : -1], lines[i], lines[-1]]  # a line moved to the end
            path.write_bytes(b"\n".join(moved))
        elif kind == 4:
            path.write_bytes(b"\n".join([*lines[:i], *lines[i + 1 :]]))
        else:
            _crlf(name)(data)

    return edit


def test_random_edits_in_place_or_not_resync_as_full(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A chain of random edits, a third of them rewrites that keep a file's size and mtime_ns:
    after each, the re-sync ends as `--full` does (none stops early on bytes it has not seen)."""
    rnd = random.Random(2026)
    edits = [_random_edit(rnd.randrange(1 << 30)) for _ in range(10)]
    reports, stored = _as_full(settings, pg_engine, kb, tmp_path, None, edits)
    assert not any(r.unchanged_early for r in reports)  # every edit left bytes or a time to see
    assert any(p.startswith("incremental") for r in reports for p in r.paths.values())
    data = tmp_path / "kb" / "data"
    assert stored[-1]["data"] in (None, _digest_of(data))


# --- the state stored: the files' as read, never newer than staging ------------------------


def _digest_of(data: Path) -> str:
    return f"CSV folder {data}@{files_digest(sorted(data.glob('*.csv')))}"


def test_each_kind_of_resync_stores_the_digest_of_the_files_synced(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """Whatever a re-sync did (lines edited, grown, cut, moved so far it read the file whole,
    CRLF, a BOM, no last line break, touched only, a file added to the folder and removed):
    the staging is `--full`'s, the state stored is the digest of the files as they are (read
    whole, each of them) and the next sync with nothing touched stops early."""
    edits: list[Edit] = [
        _lines(PEOPLE, _rename(3, b"x")),
        _lines(LINKS, lambda lines: [*lines, lines[0].replace(b"person:0001", b"person:0002")]),
        _lines(LINKS, lambda lines: lines[: len(lines) - 20]),
        _lines(LINKS, lambda lines: lines[::-1]),  # most lines moved: read whole
        _crlf(PEOPLE),
        _bom("Anchor_city.csv"),
        _open_end(LINKS),
        _touch,
        _both(_extra_file, _lines(PEOPLE, _rename(7, b"y"))),
        _no_extra_file,
    ]
    reports, stored = _as_full(settings, pg_engine, kb, tmp_path, None, edits)
    data = tmp_path / "kb" / "data"
    assert any(p.startswith("full") for r in reports for p in r.paths.values())  # the fallback ran
    assert stored[-1]["data"] == _digest_of(data)
    assert stored[-1]["data_files"] == CsvFolderSource(data).listing()
    for step, report in enumerate(reports):
        assert not report.unchanged_early, step
    assert sync(settings, data_model=data.parent / "model", data=data).unchanged_early


def test_each_step_stores_the_state_of_what_it_read(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """Step by step (not only at the end): the state stored is the digest of the files the sync
    read, and the listing stored theirs."""
    work = _copy(pg_engine, kb, tmp_path)
    data, model = work / "data", work / "model"
    sync(settings, data_model=model, data=data)
    for edit in [
        _lines(PEOPLE, _rename(3, b"x")),
        _touch,
        _extra_file,
        _lines(LINKS, lambda lines: lines[::-1]),
        _no_extra_file,
        _open_end(PEOPLE),
    ]:
        edit(data)
        report = sync(settings, data_model=model, data=data)
        assert not report.unchanged_early
        assert _stored(pg_engine)["data"] == _digest_of(data)
        assert _stored(pg_engine)["data_files"] == CsvFolderSource(data).listing()


def test_a_file_rewritten_with_the_same_size_and_time_is_still_caught(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """An unchanged listing (same names, sizes, mtime_ns, inodes) says nothing of the bytes: the
    content is compared, the edit found and synced, as `--full` syncs it."""
    work = _copy(pg_engine, kb, tmp_path)
    sync(settings, data_model=work / "model", data=work / "data")
    people = (work / "data" / PEOPLE).read_bytes().split(b"\n")
    old = people[5].split(b",")[1]
    new = old[::-1]
    assert old != new
    edit = _same_size_and_time(PEOPLE, old, new)
    listing = CsvFolderSource(work / "data").listing()
    edit(work / "data")
    assert CsvFolderSource(work / "data").listing() == listing  # the edit left no trace there
    report = sync(settings, data_model=work / "model", data=work / "data")
    assert not report.unchanged_early and report.nodes["person"].updated == 1
    assert _stored(pg_engine)["data"] == _digest_of(work / "data")
    # And right after a re-sync that took the state from its own reading:
    _touch(work / "data")
    sync(settings, data_model=work / "model", data=work / "data")
    listing = CsvFolderSource(work / "data").listing()
    _same_size_and_time(PEOPLE, new, old)(work / "data")
    assert CsvFolderSource(work / "data").listing() == listing
    again = sync(settings, data_model=work / "model", data=work / "data")
    assert not again.unchanged_early and again.nodes["person"].updated == 1


def test_full_and_data_model_only_store_as_before(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """`--full` takes the state up front (its reading is not the incremental one) and stores the
    listing; `--data-model-only` keeps both as the last sync stored them."""
    work = _copy(pg_engine, kb, tmp_path)
    data, model = work / "data", work / "model"
    sync(settings, data_model=model, data=data)
    _lines(PEOPLE, _rename(2, b"z"))(data)
    report = sync(settings, data_model=model, data=data, full=True)
    assert report.nodes["person"].updated == 1
    after_full = _stored(pg_engine)
    assert after_full["data"] == _digest_of(data)
    assert after_full["data_files"] == CsvFolderSource(data).listing()
    _lines(PEOPLE, _rename(2, b"w"))(data)
    _crlf("Anchors.csv")(model)  # other bytes, the same data model: staging still the data's
    only = sync(settings, data_model=model, data_model_only=True)
    assert not only.unchanged_early and not only.data_model.changed
    kept = _stored(pg_engine)
    assert kept["data_model"] != after_full["data_model"]
    assert (kept["data"], kept["data_files"]) == (after_full["data"], after_full["data_files"])
    report = sync(settings, data_model=model, data=data)
    assert not report.unchanged_early and report.nodes["person"].updated == 1
    assert _stored(pg_engine)["data"] == _digest_of(data)


def test_a_strict_sync_that_fails_stores_nothing_and_the_next_one_reads_again(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A malformed changed line in strict mode fails the sync: no state is stored, so the next
    sync (not strict) reads the folder again rather than stopping early."""
    work = _copy(pg_engine, kb, tmp_path)
    data, model = work / "data", work / "model"
    sync(settings, data_model=model, data=data)
    before = (_stored(pg_engine), staging_state(pg_engine))
    _lines(PEOPLE, lambda lines: [*lines[:6], lines[6] + b',"open', *lines[7:]])(data)
    with pytest.raises(SourceError):
        sync(settings, data_model=model, data=data, strict=True)
    assert (_stored(pg_engine), staging_state(pg_engine)) == before
    report = sync(settings, data_model=model, data=data)
    assert not report.unchanged_early and report.findings
    assert _stored(pg_engine)["data"] == _digest_of(data)


def _set_field(i: int, column: int, value: bytes) -> Callable[[list[bytes]], list[bytes]]:
    def fn(lines: list[bytes]) -> list[bytes]:
        fields = next(csv.reader([lines[i].decode()]))
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(fields)
        assert out.getvalue().encode() == lines[i]  # the line as csv writes it: fields split right
        fields[column] = value.decode()
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(fields)
        return [*lines[:i], out.getvalue().encode(), *lines[i + 1 :]]

    return fn


def test_changed_lines_decoded_together_resync_as_full(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """Changed lines that are duplicates of each other, formula errors, blank cells, malformed
    (too few fields, a quote left open) among well-formed ones: decoded at once or one by one,
    the re-syncs end as `--full` does, findings and all."""
    edits: list[Edit] = [
        _lines(PEOPLE, _both_lines(_set_field(4, 2, b"#N/A"), _set_field(8, 1, b"#DIV/0!"))),
        _lines(PEOPLE, _both_lines(_set_field(10, 2, b""), _set_field(11, 3, b" "))),
        _lines(LINKS, lambda lines: [*lines, b",,,,,", b",,,,,"]),  # the same blank line twice
        _lines(LINKS, lambda lines: [lines[0], lines[1].replace(b"beginner", b"expert"), *lines[2:]]),
        _lines(LINKS, lambda lines: [*lines[:5], b"person:0002,interest:0001", *lines[5:]]),
        _lines(LINKS, lambda lines: [*lines[:9], lines[9] + b',"open', *lines[10:]]),
        _lines(LINKS, lambda lines: [*lines, lines[3], lines[3]]),  # the same new edge twice
    ]
    reports, _ = _as_full(settings, pg_engine, kb, tmp_path, None, edits)
    assert any(r.findings for r in reports)
    assert any(p.startswith("incremental") for r in reports for p in r.paths.values())


def _both_lines(*fns: Callable[[list[bytes]], list[bytes]]) -> Callable[[list[bytes]], list[bytes]]:
    def fn(lines: list[bytes]) -> list[bytes]:
        for f in fns:
            lines = f(lines)
        return lines

    return fn


# --- decode_many: one reader for many lines, the cells and findings of one each ------------


def _random_field(rnd: random.Random) -> str:
    return rnd.choice(
        [
            "",
            " ",
            "x",
            "#N/A",
            "#REF!",
            "#DIV/0!",
            "#ValueError",
            "# not an error?",
            "a#b",
            '"q,uoted"',
            '"with ""quotes"""',
            '""',
            "  padded  ",
            "é ü",
            '"#DIV/0!"',
            '"multi\r\nline"',
            '"lone\rcr"',
            '"open',
            'tail"',
            'a"b',
            '"a"b',
            "\t",
        ]
    )


def _random_text(rnd: random.Random, width: int) -> str:
    n = rnd.choice([width, width, width, width - 1, width + 1, 0, 1])
    text = ",".join(_random_field(rnd) for _ in range(max(n, 0)))
    return text + rnd.choice(["\n", "\n", "\r\n", ""])


_HEADERS = [
    ["id", "name", "note"],
    ["id", "name", "name"],  # repeated: the last one wins
    ["id", "", "note"],  # unnamed: never part of a row
    ["id", "", "", "name", "id"],
    ["only"],
]


def _findings(found: SourceFindings) -> dict[str, Any]:
    return found.to_dict()


def test_decode_many_is_decode_of_each_line(tmp_path: Path) -> None:
    """Random lines (formula errors, blanks, quotes, a quote opened and closed on the next line,
    wrong widths, strict-mode errors, duplicates): `decode_many` gives each line's `decode`, and
    the same findings."""
    rnd = random.Random(8)
    path = tmp_path / "T.csv"
    fell_back = fast = 0
    for trial in range(3000):
        header = rnd.choice(_HEADERS)
        texts = [_random_text(rnd, len(header)) for _ in range(rnd.randint(1, 8))]
        if rnd.random() < 0.3:
            texts += rnd.sample(texts, rnd.randint(1, len(texts)))  # duplicate lines
        one, many = SourceFindings(), SourceFindings()
        expected = [csv_folder._Records(path, header, one).decode(t) for t in texts]
        got = csv_folder._Records(path, header, many).decode_many(texts)
        assert got == expected, (trial, header, texts)
        assert _findings(many) == _findings(one), (trial, header, texts)
        if one:
            fell_back += 1
        else:
            fast += 1
    assert fell_back > 300 and fast > 300


def _random_file(rnd: random.Random, header: list[str]) -> bytes:
    """A CSV file whose lines are its records (no line break inside a cell)."""
    rows = []
    for _ in range(rnd.randint(0, 3 * LINE_BLOCK)):
        fields = [
            rnd.choice(
                ["", " ", "x", "#N/A", "#DIV/0!", "#TypeError", "#CircularRef", "a,b", 'say "hi"', "é"]
            )
            for _ in header
        ]
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerow(fields)
        rows.append(out.getvalue())
    newline = rnd.choice(["\n", "\r\n"])
    text = ",".join(header) + "\n" + "".join(rows)
    if rnd.random() < 0.3:
        text = text.rstrip("\n")
    return (b"\xef\xbb\xbf" if rnd.random() < 0.3 else b"") + text.replace("\n", newline).encode()


def test_lines_decoded_together_are_the_whole_readings_rows(tmp_path: Path) -> None:
    """A file's lines fetched and decoded at once (`decode_all`) give the cells its whole
    reading gives (BOM, CRLF, no last line break, formula errors, blank rows, repeated and
    unnamed columns)."""
    rnd = random.Random(88)
    for trial in range(300):
        folder = tmp_path / f"f{trial}"
        folder.mkdir()
        header = rnd.choice(_HEADERS)
        (folder / "T.csv").write_bytes(_random_file(rnd, header))
        table = CsvFolderSource(folder).table("T")
        assert table is not None
        whole = [cells for _, cells in table.rows()]
        digests = line_digests(folder / "T.csv")
        assert digests is not None
        texts = digests.fetch(list(range(len(digests.low))))
        assert table.decode_all(texts) == whole, trial
        assert [table.decode_raw(t) for t in texts] == whole, trial
        assert whole == _cells_the_general_way(folder / "T.csv"), trial


def _cells_the_general_way(path: Path) -> list[dict[str, Any]]:
    """Each record's cells as `from_text` gives them, column by column (the way before the
    shortcut of `_cells_of`): a blank record has none."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        header, *rows = list(csv.reader(handle))
    return [
        {h: from_text(v, Column(id=h)) for h, v in zip(header, row, strict=False) if h}
        if any(v.strip() for v in row)
        else {}
        for row in rows
    ]


# --- fresh lines: kept from the reading that checksummed them -----------------------------


def _edited(rnd: random.Random, content: bytes) -> bytes:
    """Some lines changed, added or removed, in place or shifting the rest."""
    head, *lines = content.split(b"\n")
    for _ in range(rnd.randint(1, 4)):
        op = rnd.randrange(4)
        if not lines:
            break
        i = rnd.randrange(len(lines))
        if op == 0:
            lines[i] = lines[i].replace(b",", b",E", 1)
        elif op == 1:
            lines.insert(i, b"99,inserted")
        elif op == 2 and len(lines) > 1:
            del lines[i]
        else:
            lines.append(b"100,appended")
    return b"\n".join([head, *lines])


def test_fresh_lines_are_the_lines_digested_and_need_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against kept lines, every block hashed anew is kept as split while the budget lasts (its
    lines' checksums the digests'), within `_KEEP_BYTES`; a fetch of lines in those blocks needs
    no file (it may be gone), the others read it and fail once it changed."""
    rnd = random.Random(808)
    path = tmp_path / "T.csv"
    served = failed = 0
    for trial in range(400):
        monkeypatch.setattr(csv_folder, "_READ", rnd.choice([7, 100, 1000, 1 << 20]))
        monkeypatch.setattr(csv_folder, "_KEEP_BYTES", rnd.choice([0, 500, 2000, 10_000, 8 << 20]))
        count = rnd.choice([1, LINE_BLOCK - 1, LINE_BLOCK, LINE_BLOCK + 1, rnd.randint(1, 10 * LINE_BLOCK)])
        first = random_csv(rnd, count, "a", longest=40, crlf=0.3)
        path.write_bytes(first)
        old = line_digests(path)
        assert old is not None and old.blocks is not None
        content = (
            _edited(rnd, first) if rnd.random() < 0.8 else random_csv(rnd, count, "b", longest=40, crlf=0.3)
        )
        path.write_bytes(content)
        found = line_digests(path, KeptLines(old.low, old.high, old.blocks))
        assert found is not None
        lines = data_lines(content)
        assert len(found.low) == len(lines), trial
        assert list(found.low) == [zlib.crc32(line) for line in lines], trial
        kept = _fresh_of(found)
        cost = 0
        for block, block_lines in kept.items():
            at = block * LINE_BLOCK
            assert block_lines == lines[at : at + LINE_BLOCK], (trial, block)
            cost += sum(map(len, block_lines)) + len(block_lines) * (1 + csv_folder._LINE_COST)
        assert cost <= csv_folder._KEEP_BYTES + 1, trial  # (+1: a last line with no line break)
        texts = [line.decode() + "\n" for line in lines]
        if not content.endswith(b"\n") and texts:
            texts[-1] = texts[-1][:-1]
        path.unlink()
        in_fresh = [i for i in range(len(lines)) if i // LINE_BLOCK in kept]
        if in_fresh:
            assert found.fetch(in_fresh) == [texts[i] for i in in_fresh], trial
            served += 1
        others = [i for i in range(len(lines)) if i // LINE_BLOCK not in kept]
        if others:
            path.write_bytes(_edited(rnd, content))
            try:
                got = found.fetch(others)
            except SourceError as error:
                assert "changed while the sync was reading it" in str(error)
                failed += 1
            else:
                assert got == [texts[i] for i in others], trial
    assert served > 100 and failed > 50


def _fresh_of(found: Any) -> dict[int, list[bytes]]:
    """The `fresh` lines a `RowDigests.fetch` closes over."""
    cells = found.fetch.__closure__ or ()
    for cell in cells:
        value = cell.cell_contents
        if isinstance(value, dict):
            return value
    raise AssertionError("fetch keeps no fresh lines")


def _budget_case(tmp_path: Path, appended: bool) -> tuple[Path, KeptLines, int]:
    """A file of 4 blocks, checked against its earlier version: its third block changed in
    place (`_hash_block`), or half a block's lines appended past the kept ones (`_hash_rest`).
    The file, what was kept, and the exact cost of the lines hashed anew."""
    path = tmp_path / "B.csv"
    lines = [f"{i},name{i}".encode() for i in range(4 * LINE_BLOCK)]
    path.write_bytes(b"\n".join([b"id,name", *lines]) + b"\n")
    old = line_digests(path)
    assert old is not None and old.blocks is not None
    if appended:
        new = [f"{i},more{i}".encode() for i in range(LINE_BLOCK // 2)]
        lines += new
        cost = sum(len(line) + 1 + csv_folder._LINE_COST for line in new)
    else:
        at = 2 * LINE_BLOCK + 3
        lines[at] = lines[at] + b"-edited"
        cost = sum(len(line) + 1 + csv_folder._LINE_COST for line in lines[2 * LINE_BLOCK : 3 * LINE_BLOCK])
    path.write_bytes(b"\n".join([b"id,name", *lines]) + b"\n")
    return path, KeptLines(old.low, old.high, old.blocks), cost


@pytest.mark.parametrize("appended", [False, True], ids=["block-changed", "lines-appended"])
def test_the_keep_budget_holds_exactly_to_its_edge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, appended: bool
) -> None:
    """Lines costing exactly `_KEEP_BYTES` are kept; a byte less and none are (then the fetch
    reads them again, the same lines)."""
    path, kept, cost = _budget_case(tmp_path, appended)
    changed = [2] if not appended else [4]
    for budget, keeps in [(cost, True), (cost - 1, False)]:
        monkeypatch.setattr(csv_folder, "_KEEP_BYTES", budget)
        found = line_digests(path, kept)
        assert found is not None
        assert sorted(_fresh_of(found)) == (changed if keeps else []), budget
        wanted = list(range(changed[0] * LINE_BLOCK, len(found.low)))[:LINE_BLOCK]
        expected = [line.decode() + "\n" for line in data_lines(path.read_bytes())]
        assert found.fetch(wanted) == [expected[i] for i in wanted]


class _HeaderSavedAfterItsReading(CsvFolderSource):
    """A folder whose `PEOPLE` file is saved again (a column renamed, the same size and mtime)
    right after the sync read its header, before its lines are read (as when its digests were
    still queued behind other files': here never read ahead)."""

    def prefetch_digests(self, kept: Any = None) -> None:
        pass

    def table(self, name: str) -> Any:
        found = super().table(name)
        path = self.folder / PEOPLE
        if name == PEOPLE[:-4] and b"person_name" in path.read_bytes()[:200]:
            _same_size_and_time(PEOPLE, b"person_name", b"person_NAME")(self.folder)
        return found


def test_a_header_saved_again_after_its_reading_is_not_stored_as_synced(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """The state stored must describe bytes no newer than staging's: a header read by `table()`
    before the file was saved again (and its lines read after) leaves staging with the old
    column names, so the next sync, finding the same listing, must not stop early on a digest
    of the new header's file; it must end as `--full` of those files does."""
    work = _copy(pg_engine, kb, tmp_path)
    data, model = work / "data", work / "model"
    sync(settings, data_model=model, data=data)
    _lines(PEOPLE, _rename(3, b"x"))(data)  # the listing changes: the digest taken by the reading
    sync(settings, data_model=model, data=_HeaderSavedAfterItsReading(data))
    assert b"person_NAME" in (data / PEOPLE).read_bytes()
    report = sync(settings, data_model=model, data=data)
    assert not report.unchanged_early
    quick = staging_state(pg_engine)
    sync(settings, data_model=model, data=data, full=True)
    assert staging_state(pg_engine) == quick


@pytest.mark.parametrize("budget", [8 << 20, 0], ids=["lines-kept", "lines-read-again"])
def test_a_file_saved_again_after_its_lines_were_read_is_read_again_next_time(
    settings: Settings,
    pg_engine: Engine,
    kb: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    budget: int,
) -> None:
    """A file saved again (same size, same mtime_ns) right after the re-sync digested it: the
    sync stores the digest of what it read, the next one sees other bytes and syncs them, as
    `--full` does; never "unchanged" over a staging that lacks the second edit."""
    monkeypatch.setattr(csv_folder, "_KEEP_BYTES", budget)
    work = _copy(pg_engine, kb, tmp_path)
    data, model = work / "data", work / "model"
    sync(settings, data_model=model, data=data)
    _lines(PEOPLE, _rename(3, b"x"))(data)
    lines = (data / PEOPLE).read_bytes().split(b"\n")
    old = lines[40]
    new = old[:12] + old[12:][::-1]
    assert new != old
    real = csv_folder.line_digests
    read: list[bytes] = []

    def saved_again_after(path: Path, kept: KeptLines | None = None) -> Any:
        found = real(path, kept)
        if path.name == PEOPLE and not read:
            read.append(path.read_bytes())
            _same_size_and_time(PEOPLE, b"\n" + old + b"\n", b"\n" + new + b"\n")(data)
        return found

    monkeypatch.setattr(csv_folder, "line_digests", saved_again_after)
    report = sync(settings, data_model=model, data=data)
    monkeypatch.setattr(csv_folder, "line_digests", real)
    assert read and report.nodes["person"].updated == 1
    files = sorted(data.glob("*.csv"))
    as_read = [read[0] if p.name == PEOPLE else p.read_bytes() for p in files]
    digest = files_digest(files)
    assert _stored(pg_engine)["data"] != f"CSV folder {data}@{digest}"
    named = hashlib.sha256()
    for path, content in zip(files, as_read, strict=True):
        named.update(path.name.encode() + b"\0" + hashlib.sha256(content).digest())
    assert _stored(pg_engine)["data"] == f"CSV folder {data}@{named.hexdigest()}"
    again = sync(settings, data_model=model, data=data)
    assert not again.unchanged_early and again.nodes["person"].updated == 1
    quick = staging_state(pg_engine)
    sync(settings, data_model=model, data=data, full=True)
    assert staging_state(pg_engine) == quick


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\n",
        b"id,name",
        b"id,name\n",
        b"\xef\xbb\xbfid,name\r\n1,a\r\n",
        b'"id","na,me"\n1,"x,y"\n',
        b" id , name \n1,a",
        b"id,,name,id\n1,,a,2\n",
        b"\xef\xbb\xbf",
    ],
    ids=[
        "empty",
        "newline",
        "header",
        "header-nl",
        "bom-crlf",
        "quoted",
        "spaces",
        "unnamed-repeated",
        "bom",
    ],
)
def test_a_file_read_once_gives_its_state(tmp_path: Path, content: bytes) -> None:
    """Read as a sync reads it (its header, then its lines), an unchanged file's state as read
    is its state taken apart, whatever its header looks like: no header is mistaken for one
    saved in between."""
    (tmp_path / "T.csv").write_bytes(content)
    (tmp_path / "U.csv").write_bytes(b"a\n1\n")
    source = CsvFolderSource(tmp_path)
    try:
        for name in source.table_names():
            table = source.table(name)
            assert table is not None
            table.digests()
        assert source.state_as_read() == source.state()
    finally:
        source.close()


def _restore(kb: Path, name: str) -> Edit:
    def edit(data: Path) -> None:
        shutil.copyfile(kb / "data" / name, data / name)

    return edit


def test_a_file_emptied_and_grown_back_resyncs_as_full(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A link file cut to its header, to nothing at all, grown back, then all its lines but
    the last line break: each re-sync ends as `--full` does and stores the files' digest."""
    edits: list[Edit] = [
        _lines(LINKS, lambda lines: []),
        lambda data: (data / LINKS).write_bytes(b""),
        _restore(kb, LINKS),
        _open_end(LINKS),
        _lines(LINKS, lambda lines: lines[:LINE_BLOCK]),
        _restore(kb, LINKS),
    ]
    _, stored = _as_full(settings, pg_engine, kb, tmp_path, None, edits)
    assert stored[-1]["data"] == _digest_of(tmp_path / "kb" / "data")
