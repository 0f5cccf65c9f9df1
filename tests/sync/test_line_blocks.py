"""A CSV file read against what the last sync kept of it (`csv_folder.line_digests(kept=)`):
blocks of lines whose bytes check out keep their kept digests unhashed, and every other line
is hashed, so the result is the file's digests whatever changed, moved, grew or shrank."""

from __future__ import annotations

import random
import shutil
import zlib
from array import array
from pathlib import Path

import pytest
from sqlalchemy import Engine

from bench.edit import edit_csv_folder
from bench.generate import generate
from support.csv_lines import data_lines
from support.sync_kb import blank_staging
from vedana.config import Settings
from vedana.sources import csv_folder
from vedana.sources.base import LINE_BLOCK, KeptLines
from vedana.sources.csv_folder import line_digests


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("blocks") / "kb"
    generate("people", 600, 11, out, "csv")
    return out


def _expected(content: bytes) -> tuple[list[int], list[int], list[bytes]]:
    """Each data line's CRC-32 and Adler-32 and its bytes, worked out the plain way."""
    lines = data_lines(content)
    return [zlib.crc32(x) for x in lines], [zlib.adler32(x) for x in lines], lines


def _kept(path: Path) -> KeptLines:
    found = line_digests(path)
    assert found is not None and found.blocks is not None
    return KeptLines(found.low, found.high, found.blocks)


def _edited(rnd: random.Random, body: list[str]) -> list[str]:
    body = list(body)
    for _ in range(rnd.randint(0, 6)):
        op = rnd.random()
        if op < 0.45 and body:
            body[rnd.randrange(len(body))] += "y"
        elif op < 0.6:
            body.insert(rnd.randint(0, len(body)), "new,z")
        elif op < 0.75 and body:
            del body[rnd.randrange(len(body))]
        elif op < 0.88:
            body += ["tail,q"] * rnd.randint(1, 40)
        elif op < 0.94:
            del body[rnd.randint(0, len(body)) :]
        else:
            body = body[rnd.randint(0, len(body)) :]
    return body


def _file(rnd: random.Random, header: str, body: list[str]) -> bytes:
    text = "\n".join([header, *body]) + rnd.choice(["\n", ""])
    if rnd.random() < 0.15:
        text = text.replace("\n", "\r\n")
    return text.encode()


def test_a_file_read_against_its_kept_blocks_gives_its_own_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rnd = random.Random(20261126)
    path = tmp_path / "Anchor_person.csv"
    checked = 0
    for trial in range(300):
        # Reads as small as a few bytes make blocks and lines straddle them.
        monkeypatch.setattr(csv_folder, "_READ", rnd.choice([5, 64, 1000, 1 << 18]))
        header = rnd.choice(["id,name", "\ufeffid,name"])
        size = rnd.choice([0, 1, LINE_BLOCK - 1, LINE_BLOCK, LINE_BLOCK + 1, 3 * LINE_BLOCK, 200])
        body = [f"{i},{'x' * rnd.randint(0, 30)}" for i in range(size)]
        path.write_bytes(_file(rnd, header, body))
        kept = _kept(path)
        content = _file(rnd, header, _edited(rnd, body))
        path.write_bytes(content)

        found = line_digests(path, kept)
        low, high, lines = _expected(content)
        assert found is not None
        assert (found.low.tolist(), found.high.tolist()) == (low, high), trial
        assert found.keys.tolist() == list(range(1, len(lines) + 1))
        fresh = line_digests(path)
        assert fresh is not None and found.blocks == fresh.blocks, trial  # kept for the next one
        picked = sorted(rnd.sample(range(len(lines)), min(len(lines), 5)))
        texts = found.fetch(picked)
        assert [t.rstrip("\n") for t in texts] == [lines[i].decode() for i in picked], trial
        checked += len(lines) >= LINE_BLOCK
    assert checked > 100


def test_a_block_that_checks_out_is_not_hashed_again(tmp_path: Path) -> None:
    """The trust is in the block's checksums: the lines of a block whose bytes match keep the
    kept digests as they are (here deliberately not the lines' own), while a block that does
    not match is hashed line by line."""
    path = tmp_path / "Link_person_has_interest.csv"
    body = [f"p{i},i{i}" for i in range(3 * LINE_BLOCK)]
    path.write_bytes(("a,b\n" + "\n".join(body) + "\n").encode())
    kept = _kept(path)
    marked = KeptLines(array("I", [7] * len(kept.low)), array("I", [9] * len(kept.high)), kept.blocks)
    body[LINE_BLOCK + 3] = "changed,line"
    content = ("a,b\n" + "\n".join(body) + "\n").encode()
    path.write_bytes(content)

    found = line_digests(path, marked)
    low, high, _ = _expected(content)
    assert found is not None
    second = slice(LINE_BLOCK, 2 * LINE_BLOCK)
    assert found.low[:LINE_BLOCK].tolist() == [7] * LINE_BLOCK  # checked out: kept as is
    assert found.low[2 * LINE_BLOCK :].tolist() == [7] * LINE_BLOCK
    assert (found.low[second].tolist(), found.high[second].tolist()) == (low[second], high[second])


def test_kept_blocks_that_do_not_fit_the_kept_lines_are_not_used(tmp_path: Path) -> None:
    path = tmp_path / "Anchor_city.csv"
    path.write_bytes(("id\n" + "".join(f"c{i}\n" for i in range(2 * LINE_BLOCK))).encode())
    kept = _kept(path)
    short = KeptLines(kept.low[:LINE_BLOCK], kept.high[:LINE_BLOCK], kept.blocks)
    assert short.usable_blocks() == 0
    found = line_digests(path, short)
    assert found is not None and found.low == kept.low and found.high == kept.high


def test_a_sync_keeps_each_files_blocks_and_the_next_one_reads_them(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A full sync stores the block checksums beside the rows; an incremental one replaces them
    with its reading's, which is what a fresh reading of the files gives."""
    from vedana.etl.sync import sync
    from vedana.stores.sync_rows import kept_lines

    blank_staging(pg_engine)
    work = tmp_path / "kb"
    shutil.copytree(kb, work)
    source = f"CSV folder {work / 'data'}"
    sync(settings, data_model=work / "model", data=work / "data")
    for _ in range(2):
        edit_csv_folder(work / "data", "people", 0.05)
        report = sync(settings, data_model=work / "model", data=work / "data")
        assert all(p.startswith("incremental: ") for p in report.paths.values())
        with pg_engine.connect() as conn:
            lines = kept_lines(conn, source)
        assert lines is not None and set(lines) == set(report.paths)
        for name, kept in lines.items():
            fresh = line_digests(work / "data" / f"{name}.csv")
            assert fresh is not None
            assert (kept.low, kept.high, kept.blocks) == (fresh.low, fresh.high, fresh.blocks), name


@pytest.mark.parametrize("count", [0, 1, 2, 3, 65_535, 65_536, 65_537, 131_072, 200_001])
def test_line_keys_are_one_to_count(count: int) -> None:
    from vedana.sources.base import line_keys

    assert line_keys(count) == array("q", range(1, count + 1))


def test_lines_read_again_come_right_however_the_blocks_group_into_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changed lines are read again a span of blocks at a time (`_blocks_read`): whatever the
    span and gap allow, each line fetched is the file's own, the last one's missing line break
    included."""
    rnd = random.Random(7)
    path = tmp_path / "Anchor_person.csv"
    for trial in range(200):
        monkeypatch.setattr(csv_folder, "_SPAN", rnd.choice([1, 40, 300, 5000, 1 << 20]))
        monkeypatch.setattr(csv_folder, "_GAP", rnd.choice([0, 1, 50, 1000, 1 << 16]))
        body = [f"{i},{'x' * rnd.randint(0, 40)}" for i in range(rnd.randint(1, 12 * LINE_BLOCK))]
        content = _file(rnd, "id,name", body)
        path.write_bytes(content)
        _, _, lines = _expected(content)
        found = line_digests(path)
        assert found is not None
        picked = sorted(rnd.sample(range(len(lines)), rnd.randint(1, len(lines))))
        texts = found.fetch(picked)
        ends_open = not content.endswith(b"\n")
        want = [lines[i].decode() + ("" if ends_open and i == len(lines) - 1 else "\n") for i in picked]
        assert texts == want, trial


def test_a_line_changed_in_place_beside_a_fetched_one_fails_the_read(tmp_path: Path) -> None:
    """A whole block read again is checked by its own checksums: one of its other lines saved
    again with the same length (the offsets all hold) still fails the read, clearly."""
    from vedana.errors import SourceError

    path = tmp_path / "Anchor_person.csv"
    body = [f"p{i:03d},name {i:03d}" for i in range(3 * LINE_BLOCK)]
    path.write_text("\n".join(["id,name", *body]) + "\n")
    found = line_digests(path)
    assert found is not None
    assert found.fetch([LINE_BLOCK + 2]) == [body[LINE_BLOCK + 2] + "\n"]
    body[LINE_BLOCK + 9] = body[LINE_BLOCK + 9].replace("name", "NAME")
    path.write_text("\n".join(["id,name", *body]) + "\n")
    assert found.fetch([2, 2 * LINE_BLOCK + 1]) == [body[2] + "\n", body[2 * LINE_BLOCK + 1] + "\n"]
    with pytest.raises(SourceError, match="changed while the sync was reading it"):
        found.fetch([2, LINE_BLOCK + 2])


def test_changed_lines_come_from_the_reading_that_checksummed_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked against kept lines, the lines of the blocks hashed anew are kept as read: a fetch
    of a changed line gives the bytes its digest was taken of, with no second read (the file
    saved again since does not matter); past `_KEEP_BYTES` blocks are read again and checked."""
    from vedana.errors import SourceError

    path = tmp_path / "Anchor_person.csv"
    body = [f"p{i:03d},name {i:03d}" for i in range(6 * LINE_BLOCK)]
    path.write_text("\n".join(["id,name", *body]) + "\n")
    kept = _kept(path)
    edited = list(body)
    changed = [3, 2 * LINE_BLOCK + 5, 5 * LINE_BLOCK + 1]
    for i in changed:
        edited[i] = edited[i].replace("name", "NAME")
    path.write_text("\n".join(["id,name", *edited]) + "\n")
    _, _, lines = _expected(path.read_bytes())

    found = line_digests(path, kept)
    assert found is not None
    path.write_text("\n".join(["id,name", *body]) + "\n")  # saved again, as it was
    assert found.fetch(changed) == [lines[i].decode() + "\n" for i in changed]

    # Kept lines go only as far as the budget: the block past it is read from the file, which
    # no longer holds what was checksummed, so the fetch fails clearly instead.
    path.write_text("\n".join(["id,name", *edited]) + "\n")
    monkeypatch.setattr(csv_folder, "_KEEP_BYTES", 2 * (LINE_BLOCK * (len(body[0]) + 1 + 48)))
    found = line_digests(path, kept)
    assert found is not None
    assert found.fetch(changed) == [lines[i].decode() + "\n" for i in changed]  # read, checked
    path.write_text("\n".join(["id,name", *body]) + "\n")
    assert found.fetch(changed[:2]) == [lines[i].decode() + "\n" for i in changed[:2]]
    with pytest.raises(SourceError, match="changed while the sync was reading it"):
        found.fetch(changed)

    # With nothing kept to check against (a first sync's reading) no line is held.
    monkeypatch.setattr(csv_folder, "_KEEP_BYTES", 1 << 30)
    found = line_digests(path)
    assert found is not None
    path.write_text("\n".join(["id,name", *edited]) + "\n")
    with pytest.raises(SourceError, match="changed while the sync was reading it"):
        found.fetch([3])


def test_changed_lines_decoded_together_read_as_each_on_its_own(tmp_path: Path) -> None:
    """`decode_many` (one reader for all of a re-sync's changed lines) gives what `decode` gives
    each line on its own, findings too: blank, quoted, formula-error and malformed lines, a
    quote left open into the next line, repeated and unnamed columns."""
    from vedana.sources.csv_folder import CsvFolderSource

    rnd = random.Random(5)
    cells = ["", " ", "x", "#N/A", "#x", '"a,b"', '"say ""hi"""', "é", '"open', 'sh"ut']
    for trial in range(300):
        header = rnd.choice(["id,name,note", "id,name,name", "id,,note"])
        lines = []
        for _ in range(rnd.randint(1, 12)):
            width = 3 if rnd.random() < 0.9 else rnd.choice([1, 2, 4])
            lines.append(",".join(rnd.choice(cells) for _ in range(width)) + "\n")
        folder = tmp_path / str(trial)
        folder.mkdir()
        (folder / "Anchor_t.csv").write_text(header + "\n" + "".join(lines), encoding="utf-8")
        one, many = CsvFolderSource(folder), CsvFolderSource(folder)
        each, together = one.table("Anchor_t"), many.table("Anchor_t")
        assert each is not None and together is not None
        assert together.decode_all(lines) == [each.decode_raw(line) for line in lines], trial
        assert one.findings.to_dict() == many.findings.to_dict(), trial
