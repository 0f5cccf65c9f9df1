"""A local folder of CSV files, one per table, named like the tables (`Anchors.csv`,
`Anchor_person.csv`, `Link_person_has_interest.csv`, …), shaped like Grist's CSV export.

There are no column types: every cell is text, the data model's `dtype` casts it, and link
columns are known from the data model (`anchor1_link_column_name`, …). A Ref/RefList cell holds
the referenced row's display value; in a folder that is the target's node id (comma-separated
for a RefList); when a value is not a node id, the target's first column is tried.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import os
import zlib
from array import array
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from itertools import accumulate, chain, pairwise
from pathlib import Path
from typing import Any

from vedana.errors import SourceError
from vedana.sources.base import (
    LINE_BLOCK,
    Column,
    KeptLines,
    RawTable,
    RowDigests,
    files_digest,
    line_keys,
    named_digest,
)
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
        self._pool: ThreadPoolExecutor | None = None
        self._digesting: dict[Path, Future[RowDigests | None]] = {}
        # Each file's SHA-256 as its first whole reading took it; None when that reading's
        # header was not the one `table()` read (the file saved in between): no state then.
        self._read: dict[Path, bytes | None] = {}
        self._headers: dict[Path, list[str] | None] = {}  # as `table()` read them; None: it differed

    def prefetch_digests(self, kept: Mapping[str, KeptLines] | None = None) -> None:
        """Start checksumming every file's lines in a thread of its own, for the re-sync about to
        ask (`RawTable.digests`), checking each file against what the last sync `kept` of it (by
        table name): meanwhile the sync talks to Postgres (the data model, the rest it kept), so
        its waits on the server overlap the hashing (the GIL lets only those overlap: the
        hashing holds it a call at a time)."""
        if self._pool is None:
            kept = kept or {}
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vedana-digests")
            self._digesting = {
                p: self._pool.submit(line_digests, p, kept.get(name)) for name, p in self._files.items()
            }

    def _digests_of(self, path: Path) -> RowDigests | None:
        # Each prefetched result serves one asker (a caller may change the arrays); later ones
        # hash again, as does an asker of a file still queued (rather than wait for the others).
        started = self._digesting.pop(path, None)
        try:
            found = line_digests(path) if started is None or started.cancel() else started.result()
        except OSError as exc:
            raise SourceError(f"{path} could not be read ({exc.strerror}); check the folder") from None
        self._note_reading(path, found)
        return found

    def _note_reading(self, path: Path, found: RowDigests | None) -> None:
        """Keep a whole reading's SHA-256 of the file, unless one came first (`state_as_read`)."""
        if found is not None and found.content is not None:
            self._read.setdefault(path, found.content if self._headed(path, found.head) else None)

    def _headed(self, path: Path, head: bytes | None) -> bool:
        """Whether a reading's header line is the header `table()` read before it: the cells
        synced are named by that one, and a state of bytes with another would be newer."""
        if path not in self._headers:
            return True
        header = self._headers[path]
        if header is None or head is None:
            return False
        try:
            return csv_header([head.decode("utf-8")]) == header
        except (UnicodeDecodeError, csv.Error):
            return False

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
        self._headers[path] = header if self._headers.get(path, header) == header else None
        records = _Records(path, header, self.findings)

        def rows() -> Iterator[tuple[int, dict[str, Any]]]:
            findings = self.findings.start(str(path), "line")
            try:
                with path.open(encoding="utf-8-sig", newline="") as handle:
                    _, read = csv_records(handle, findings)
                    cells = records.cells
                    for number, row in read:
                        yield number, cells(row)
            except UnicodeDecodeError:
                raise SourceError(f"{path} is not UTF-8 text; save it as UTF-8 CSV") from None

        return RawTable(
            name=name,
            columns=records.columns,
            _rows=rows,
            decode=records.decode,
            decode_columns=records.decode_columns,
            decode_many=records.decode_many,
            _digests=lambda: self._digests_of(path),
            header=tuple(header),
        )

    def state(self) -> str | None:
        return files_digest(self._files.values())

    def listing(self) -> str:
        """A digest of each file's name, size, modification time and inode: cheap (no byte is
        read), and different whenever the files may be. Equal listings say nothing of the bytes;
        a different one tells a sync that the content digest (`state`) need not be taken before
        the files are read, as their reading takes it (`state_as_read`)."""
        listed = []
        for path in self._files.values():
            try:
                found = path.stat()
            except OSError:
                return ""
            listed.append(f"{path.name}\0{found.st_size}\0{found.st_mtime_ns}\0{found.st_ino}")
        return hashlib.sha256("\0\0".join(listed).encode("utf-8", "surrogatepass")).hexdigest()

    def state_as_read(self) -> str | None:
        """`state`, from the bytes this source's line digests read (each file's first whole
        reading, which the sync's rows came from or followed): what was synced, whatever was saved
        since. None when a file was not read whole (then the next sync takes `state` anew)."""
        for path, started in self._digesting.items():  # read ahead, but asked for by no table
            try:
                found = started.result()
            except (OSError, CancelledError):
                return None
            self._note_reading(path, found)
        read = [(path.name, self._read.get(path)) for path in self._files.values()]
        if not all(content for _, content in read):
            return None
        return named_digest((name, content) for name, content in read if content)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool, self._digesting = None, {}


class _Records:
    """A CSV file's records made cells: the rows of a whole reading (`cells`), and lines read on
    their own (`decode`, `decode_many`, `decode_columns`; only for files whose lines are their
    records, `line_digests`), the same cells either way."""

    def __init__(self, path: Path, header: list[str], findings: SourceFindings) -> None:
        self.path, self.header, self.findings = path, header, findings
        self.columns = {h: Column(id=h) for h in header if h}
        self.width = len(header)
        self.positions = {h: i for i, h in enumerate(header) if h}
        self.cells = _cells_of(header, self.columns)  # a record's cells

    def fields(self, text: str) -> list[str]:
        """One record's fields, read as `csv_records` reads them; a malformed one goes to the
        findings, as the whole file's reading would list it, and reads as a blank row."""
        try:
            row = next(csv.reader([text.rstrip("\r\n")], strict=True), [])
            why = "" if not row or len(row) == self.width else f"{len(row)} fields, header has {self.width}"
        except csv.Error as exc:
            row, why = [], str(exc)
        if why:
            found = self.findings.tables.get(str(self.path)) or self.findings.start(str(self.path), "line")
            found.malformed_row(0, why)
            return []
        return [] if all(not cell.strip() for cell in row) else row

    def decode(self, text: str) -> dict[str, Any]:
        return self.cells(self.fields(text))

    def decode_many(self, texts: list[str]) -> list[dict[str, Any]]:
        """`decode` of each text, parsed by one reader for them all (a reader per line cost more
        than its line): when each text reads as one well-formed record, else one at a time, so a
        malformed one is listed as `fields` lists it."""
        reader = csv.reader([text.rstrip("\r\n") for text in texts], strict=True)
        try:
            rows = list(reader)
        except csv.Error:
            return list(map(self.decode, texts))
        # Fewer records than texts: a quote opened on one line ran into the next.
        if len(rows) != len(texts) or any(row and len(row) != self.width for row in rows):
            return list(map(self.decode, texts))
        return [self.cells(row) if any(cell.strip() for cell in row) else {} for row in rows]

    def decode_columns(self, text: str, names: list[str]) -> dict[str, Any]:
        row, positions = self.fields(text), self.positions
        return {n: from_text(row[positions[n]], self.columns[n]) for n in names if n in positions and row}


def _cells_of(header: list[str], columns: dict[str, Column]) -> Callable[[list[str]], dict[str, Any]]:
    """A record's cells, by a closure (a whole reading calls it per row). `from_text` of an
    untyped cell is the text itself, None when empty, or a formula error ("#…"): the row is
    zipped straight into a dict (the last of a repeated column wins, as in the general way), and
    only a row with a cell that may be an error goes through it."""
    unnamed = "" in header  # a column without a name: never part of a row

    def cells(row: list[str]) -> dict[str, Any]:
        if "\n#" in "\n" + "\n".join(row):
            return {h: from_text(v, columns[h]) for h, v in zip(header, row, strict=False) if h}
        found: dict[str, Any] = dict(zip(header, row, strict=False))
        if unnamed:
            found.pop("", None)
        if "" in row:
            for h, v in found.items():
                if not v:
                    found[h] = None
        return found

    return cells


_READ = 1 << 20  # bytes read at a time: each read gives the GIL away, and waits to have it back
# The most memory a file's lines hashed anew may hold (`_LineDigester.fresh`), each line's
# bytes and its object (`_LINE_COST`): a 1 % edit at 100k rows keeps ~2 MB; a file read with no
# kept lines to check against (all of it new) keeps its first lines, and the rest is read again.
_KEEP_BYTES = 8 << 20
_LINE_COST = 48
# Blocks in a row that fail their check before the rest of a file is hashed without checking:
# lines inserted or removed before them shift every later block off its kept one.
_MISSES = 4


def line_digests(path: Path, kept: KeptLines | None = None) -> RowDigests | None:
    """Every line's digest straight from the file's bytes (no lone carriage return, no NUL),
    standing for its record: a sync that read the whole file found each line to be one record
    (`etl/resync.py` trusts the digests only then), and a changed line is parsed on its own, so
    a quoted field opened on it and closed on the next is found malformed. Checksums run in C
    over whole lines, with no per-row Python. With what the last sync `kept` of the file, a
    block of lines whose bytes check out keeps its lines' digests, unsplit and unhashed: a
    re-sync's reading costs little more than the blocks that changed. Each block's place in the
    file is kept, so the few lines a re-sync wants are read again by offset. None otherwise."""
    digester = _LineDigester(kept)
    content = hashlib.sha256()  # of every byte read: the file's state, as this reading saw it
    with path.open("rb") as handle:
        head = handle.read(len(codecs.BOM_UTF8))
        content.update(head)
        base = len(head) if head == codecs.BOM_UTF8 else 0  # the file offset of `data[0]`
        carry = b"" if base else head
        # One buffer for every read, no bigger than the file, the bytes not taken yet moved to
        # its front: a new one per read (and another to join the rest to it) cost more than the
        # checksums here, in page faults.
        chunk = min(_READ, os.fstat(handle.fileno()).st_size + 1)
        data = bytearray(chunk)
        while True:
            if len(data) < len(carry) + chunk:  # room for twice this carry: rarely again
                data = bytearray(2 * len(carry) + chunk)
            data[: len(carry)] = carry
            got = handle.readinto(memoryview(data)[len(carry) : len(carry) + chunk])
            content.update(memoryview(data)[len(carry) : len(carry) + got])  # the GIL let go
            size = len(carry) + got
            if data.find(b"\x00", 0, size) >= 0:  # NULs to remove and count: the whole reading does that
                return None
            if data.find(b"\r", 0, size) >= 0:
                lone = data.count(b"\r", 0, size) - data.count(b"\r\n", 0, size)
                if lone != (bool(got) and data[size - 1] == ord("\r")):
                    return None
            used = digester.feed(data, size, base, eof=not got)
            if not got:
                break
            carry, base = bytes(data[used:size]), base + used
    low, high, blocks, starts, end, open_last, fresh = (
        digester.low,
        digester.high,
        digester.blocks,
        digester.starts,
        digester.end,
        digester.open_last,
        digester.fresh,
    )
    return RowDigests(
        keys=line_keys(len(low)),
        low=low,
        high=high,
        fetch=lambda positions: _records_at(
            path, positions, starts, end, open_last, (low, high, blocks), fresh
        ),
        blocks=blocks,
        content=content.digest(),
        head=digester.head,
    )


class _LineDigester:
    """`line_digests`' reading: the file's bytes a read at a time, its lines taken a block of
    `LINE_BLOCK` at a time (blocks never straddle reads, so they line up with the kept ones).

    While blocks are checked against the kept ones, the digests and block checksums start as
    copies of the kept ones and a block that fails its check is hashed over them, so a block
    that checks out costs two checksums and no Python per line.

    With kept lines, the lines of the blocks hashed anew (the changed ones) are kept as split,
    up to `_KEEP_BYTES` of them (`fresh`): the rows a re-sync fetches are those lines, already
    in memory and checksummed, rather than read from the file again and checked once more."""

    def __init__(self, kept: KeptLines | None) -> None:
        self.checkable = kept.usable_blocks() if kept is not None else 0  # blocks left to check
        if kept is not None and self.checkable:
            lines = self.checkable * LINE_BLOCK
            self.kept_blocks = kept.blocks
            self.low, self.high = kept.low[:lines], kept.high[:lines]
            self.blocks = kept.blocks[: 3 * self.checkable]
        else:
            self.kept_blocks = array("I")
            self.low, self.high = array("I"), array("I")
            self.blocks = array("I")  # crc32, adler32, byte length of each whole block
        self.misses = 0
        self.done = 0  # blocks taken so far (while checking, `low` holds more: the kept lines)
        self.starts = array("q")  # the file offset of each block's first line, the last too
        self.end = 0  # the file offset past the last line
        self.open_last = False  # the last line has no line break
        self.header = True
        self.head = b""  # the header line, without its line break
        self.fresh: dict[int, list[bytes]] = {}  # block -> its lines, without their line breaks
        # Bytes of lines `fresh` may still take: none with nothing kept to check against (a first
        # sync's reading, which fetches no line).
        self.keep = _KEEP_BYTES if kept is not None else 0

    def feed(self, data: bytearray, size_of: int, base: int, *, eof: bool) -> int:
        """Take the lines of the first `size_of` bytes of `data` (at file offset `base`) a block
        at a time; how many bytes were taken (the rest comes again, ahead of the next read). At
        the end of the file the lines left are taken too, a last block of fewer lines."""
        pos = 0
        if self.header:
            line_break = data.find(b"\n", 0, size_of)
            if line_break < 0:
                if not eof:
                    return 0
                line_break = size_of  # a header and nothing else
            self.head = bytes(data[:line_break])
            pos, self.header = line_break + 1, False
        view = memoryview(data)[:size_of]
        kept, starts = self.kept_blocks, self.starts
        crc32, adler32 = zlib.crc32, zlib.adler32
        while pos < size_of:
            block = self.done
            if block >= self.checkable:
                pos = self._hash_rest(view, pos, base, eof=eof)
                break
            at = 3 * block
            crc, adler, size = kept[at], kept[at + 1], kept[at + 2]
            if pos + size <= size_of:
                bytes_ = view[pos : pos + size]
                if crc32(bytes_) == crc and adler32(bytes_) == adler:  # its lines are the kept ones
                    starts.append(base + pos)
                    pos += size
                    self.done += 1
                    self.misses = 0
                    continue
            elif not eof:
                break  # the block runs into the next read
            taken = self._hash_block(view, pos, base, size) if self.misses + 1 < _MISSES else None
            if taken is None and not eof and self.misses + 1 < _MISSES:
                break  # the changed block runs into the next read
            if taken is None:  # lines moved, or fewer than a block's lines left: hash the rest
                self._stop_checking()
                continue
            self.misses += 1
            pos = taken
        if eof:
            if self.done < self.checkable:  # the file ends before the kept blocks do
                self._stop_checking()
            self.end = base + size_of
        return pos

    def _stop_checking(self) -> None:
        """Check no further block: the kept lines past the blocks taken are dropped."""
        self.checkable = self.done
        lines = self.done * LINE_BLOCK
        del self.low[lines:], self.high[lines:], self.blocks[3 * self.done :]

    def _hash_block(self, view: memoryview, pos: int, base: int, size: int) -> int | None:
        """Hash the block of lines at `pos` over the kept one it stands in for (`size`: the kept
        one's bytes, roughly this one's); where it ends, or None when the data holds fewer than
        a block's lines from there."""
        parts = view[pos : pos + size + _SLACK].tobytes().split(b"\n", LINE_BLOCK)
        if len(parts) <= LINE_BLOCK:  # a block that grew by more than the slack
            parts = view[pos:].tobytes().split(b"\n", LINE_BLOCK)
            if len(parts) <= LINE_BLOCK:
                return None
        del parts[LINE_BLOCK:]
        end = pos + sum(map(len, parts)) + LINE_BLOCK
        cost = end - pos + _LINE_COST * LINE_BLOCK
        if cost <= self.keep:
            self.keep -= cost
            self.fresh[self.done] = parts
        first = self.done * LINE_BLOCK
        self.low[first : first + LINE_BLOCK] = array("I", map(zlib.crc32, parts))
        self.high[first : first + LINE_BLOCK] = array("I", map(zlib.adler32, parts))
        bytes_ = view[pos:end]
        self.blocks[3 * self.done : 3 * self.done + 3] = array(
            "I", (zlib.crc32(bytes_), zlib.adler32(bytes_), end - pos)
        )
        self.starts.append(base + pos)
        self.done += 1
        return end

    def _hash_rest(self, view: memoryview, pos: int, base: int, *, eof: bool) -> int:
        """Hash every whole block from `pos` on, or at the end of the file every line left;
        where that leaves off."""
        lines = view[pos:].tobytes().split(b"\n")
        tail = lines.pop()  # what follows the last line break: part of a line, or nothing
        if not eof:
            del lines[len(lines) - len(lines) % LINE_BLOCK :]
        elif tail:
            lines.append(tail)  # the last line, with no line break after it
            self.open_last = True
        if not lines:
            return pos
        self.low.extend(map(zlib.crc32, lines))
        self.high.extend(map(zlib.adler32, lines))
        # Each block's first byte (and the end of the last): its lines and their line breaks.
        bounds = list(accumulate(map(_PLUS_ONE, map(len, lines)), initial=pos))
        taken = bounds[-1] - self.open_last
        bounds = bounds[::LINE_BLOCK]
        if len(lines) % LINE_BLOCK:
            bounds.append(taken)
        self.starts.extend(map(base.__add__, bounds[:-1]))
        cost = taken - pos + _LINE_COST * len(lines)
        if cost <= self.keep:  # the lines, a block's at a time, as `_records_at` asks for them
            self.keep -= cost
            for k in range(0, len(lines), LINE_BLOCK):
                self.fresh[self.done + k // LINE_BLOCK] = lines[k : k + LINE_BLOCK]
        # A block ending in the last line with no line break is not whole: the file may grow there.
        whole = (len(lines) - self.open_last) // LINE_BLOCK
        cuts = list(map(view.__getitem__, map(slice, bounds[:whole], bounds[1 : whole + 1])))
        self.blocks.extend(
            chain.from_iterable(
                zip(map(zlib.crc32, cuts), map(zlib.adler32, cuts), map(len, cuts), strict=True)
            )
        )
        self.done += -(-len(lines) // LINE_BLOCK)
        return taken


# Bytes past a kept block's length read to find its lines again when it changed (a block that
# grew by more is read to the end of the data instead).
_SLACK = 512
_PLUS_ONE = (1).__add__  # a line's length and its line break


def _records_at(
    path: Path,
    positions: list[int],
    starts: array,
    end: int,
    open_last: bool,
    digests: tuple[array, array, array],
    fresh: Mapping[int, list[bytes]] | None = None,
) -> list[str]:
    """The records at these 0-based positions (ascending), as text: from the lines `fresh`
    holds of their block (split from the bytes checksummed), else read again from the file by
    the block each is in (blocks of `LINE_BLOCK` lines starting at `starts`, the last one
    ending at `end`, as `line_digests` found them). Every block read must still be the one
    checksummed: a file saved again in between fails the sync (which writes nothing) rather
    than pair one version's digests with another's text."""
    if any(a > b for a, b in pairwise(positions)):
        raise ValueError("positions must ascend")
    found: list[str] = []
    last = len(digests[0]) - 1
    read = dict(fresh or {})
    blocks = sorted({position // LINE_BLOCK for position in positions} - read.keys())
    if blocks:
        with path.open("rb") as handle:
            again = _blocks_read(handle.fileno(), blocks, starts, end, digests)
        if again is None:
            raise SourceError(f"{path} changed while the sync was reading it; run the sync again")
        read.update(again)
    for position in positions:
        block, at = divmod(position, LINE_BLOCK)
        try:
            text = read[block][at].decode("utf-8")
        except UnicodeDecodeError:
            raise SourceError(f"{path} is not UTF-8 text; save it as UTF-8 CSV") from None
        found.append(text if open_last and position == last else text + "\n")
    return found


# The blocks to read again lie close together when a row in every hundred or so changed: one
# read takes several of them and the bytes between, up to `_SPAN` bytes. A read per block cost
# more than its bytes: each one gave the GIL away to the thread checksumming the next file.
_SPAN = 1 << 20
_GAP = 64 << 10  # the most bytes between two blocks taken by one read


def _blocks_read(
    fd: int, blocks: list[int], starts: array, end: int, digests: tuple[array, array, array]
) -> dict[int, list[bytes]] | None:
    """The lines of these blocks (ascending), read from the file; None unless they are the
    lines checksummed."""

    def bounds(block: int) -> tuple[int, int]:
        return starts[block], starts[block + 1] if block + 1 < len(starts) else end

    read: dict[int, list[bytes]] = {}
    i = 0
    while i < len(blocks):
        first, stop = bounds(blocks[i])
        j = i + 1
        while j < len(blocks):
            begin, after = bounds(blocks[j])
            if begin - stop > _GAP or after - first > _SPAN:
                break
            stop, j = after, j + 1
        span = memoryview(os.pread(fd, stop - first, first))
        for block in blocks[i:j]:
            begin, after = bounds(block)
            lines = _block_lines(span[begin - first : after - first], block, digests)
            if lines is None:
                return None
            read[block] = lines
        i = j
    return read


def _block_lines(data: memoryview, block: int, digests: tuple[array, array, array]) -> list[bytes] | None:
    """The lines of block `block` split from its bytes; None unless they are the lines
    checksummed. A whole block is checked by its own checksums (two calls, not two a line);
    the last one, when it has fewer lines, line by line."""
    low, high, blocks = digests
    first = block * LINE_BLOCK
    count = min(LINE_BLOCK, len(low) - first)
    at = 3 * block
    whole = at + 2 < len(blocks)  # a whole block: checksums of its own
    if whole and (zlib.crc32(data), zlib.adler32(data), len(data)) != tuple(blocks[at : at + 3]):
        return None
    lines = data.tobytes().split(b"\n")
    if not whole and not (
        list(map(zlib.crc32, lines[:count])) == low[first : first + count].tolist()
        and list(map(zlib.adler32, lines[:count])) == high[first : first + count].tolist()
    ):
        return None
    if len(lines) == count + 1 and lines[-1] == b"":
        lines.pop()  # after the block's last line break
    return lines if len(lines) == count else None
