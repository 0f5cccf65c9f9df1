"""What every source yields: tables of rows with Grist column types, decoded to plain values.

A source reads one document (the Data Model or the data). Whatever the wire format, a cell
reaches the normaliser as one of:

- `None` (empty), `str`, `int`, `float`, `bool`;
- `list` of such values (ChoiceList, a formula returning a list);
- `Ref` for Ref/RefList columns: row ids (API, `.grist`) and/or display labels (CSV);
- `CELL_ERROR` for a formula that failed (treated as empty and counted, never as text).

Dates arrive as ISO text (`2024-03-15`), date-times as ISO 8601 text in UTC.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

HELPER_PREFIX = "gristHelper_"
SYSTEM_COLUMNS = frozenset({"id", "manualSort"})


def is_helper_column(column_id: str) -> bool:
    """Grist's own columns, which never become properties."""
    return column_id in SYSTEM_COLUMNS or column_id.startswith(HELPER_PREFIX)


class _CellError:
    """A formula cell that failed to compute (`#NameError` and the like)."""

    _instance: _CellError | None = None

    def __new__(cls) -> _CellError:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "CELL_ERROR"

    def __bool__(self) -> bool:
        return False


CELL_ERROR = _CellError()


@dataclass(frozen=True)
class Ref:
    """A Ref or RefList cell: row ids of the target table and/or their display labels.

    API and `.grist` sources give `row_ids` (plus `labels` when Grist's display helper column is
    there); CSV sources give only `labels`. Empty references have neither.
    """

    row_ids: tuple[int, ...] = ()
    labels: tuple[str, ...] = ()
    many: bool = False

    def __bool__(self) -> bool:
        return bool(self.row_ids or self.labels)


@dataclass(frozen=True)
class Column:
    """A column's id and Grist type (`Text`, `Numeric`, `Ref:Anchors`, …; "" when unknown)."""

    id: str
    type: str = ""
    is_formula: bool = False
    # For Ref/RefList: the target column whose value Grist shows (and exports) for the reference.
    visible_col: str = ""
    # "Ref" for "Ref:Anchors", "DateTime" for "DateTime:UTC": derived once, read per cell.
    base_type: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_type", self.type.partition(":")[0])

    @property
    def ref_table(self) -> str | None:
        kind, _, target = self.type.partition(":")
        return target if kind in ("Ref", "RefList") and target else None

    @property
    def is_ref_list(self) -> bool:
        return self.type.startswith("RefList:")


@dataclass
class RawTable:
    """One table: its columns (known before any row is read) and a one-shot row iterator.

    `rows()` yields `(row_id, cells)`; row ids are Grist's for the API and `.grist` sources and
    the 1-based data line number for CSV sources. `row_count` is known up front when cheap.
    """

    name: str
    columns: dict[str, Column]
    _rows: Any = field(repr=False, default=None)  # a callable returning the iterator
    row_count: int | None = None
    # Optional, for sources whose rows are cheap to read undecoded (CSV text): a callable giving
    # `(row_id, raw)` with `raw` the record's text (or its fields), and one turning it into cells.
    # A re-sync hashes every raw row and decodes only the rows that changed.
    _raw_rows: Any = field(repr=False, default=None)
    decode: Any = field(repr=False, default=None)
    # Optional: `(raw, column ids) -> cells` of just those columns (a re-sync's id/display pass).
    decode_columns: Any = field(repr=False, default=None)
    # Optional: `decode` of many raw rows at once, in order (a re-sync's changed CSV lines).
    decode_many: Any = field(repr=False, default=None)
    # Optional: every row's key and digest at once (`RowDigests`), or None when this table
    # cannot give them that way this time; then `row_digest` of each raw row stands in.
    _digests: Any = field(repr=False, default=None)
    # Optional: the header's fields as read, unnamed and repeated ones too (a CSV file): its width
    # decides which lines are malformed, so a change to it is a change to every row.
    header: tuple[str, ...] | None = None

    def rows(self) -> Iterator[tuple[int, dict[str, Any]]]:
        if self._rows is None and self._raw_rows is not None:
            decode = self.decode
            return ((row_id, decode(raw)) for row_id, raw in self._raw_rows())
        return self._rows() if self._rows is not None else iter(())

    def raw_rows(self) -> Iterator[tuple[int, Any]]:
        """`(row_id, raw)`: the undecoded row when the source has one, else its decoded cells;
        `row_digest(raw)` fingerprints either, `decode_raw(raw)` gives the cells."""
        if self._raw_rows is not None:
            return self._raw_rows()
        return self.rows()

    def decode_raw(self, raw: Any) -> dict[str, Any]:
        """Cells of a raw row (from `raw_rows`, or fetched through `digests`); decoded cells
        pass through."""
        return self.decode(raw) if self.decode is not None and not isinstance(raw, dict) else raw

    def decode_all(self, raws: list[Any]) -> list[dict[str, Any]]:
        """`decode_raw` of each raw row, in order (at once when the source can)."""
        if self.decode_many is not None and not any(isinstance(raw, dict) for raw in raws):
            return list(self.decode_many(raws))
        return [self.decode_raw(raw) for raw in raws]

    def decode_some(self, raw: Any, names: list[str]) -> dict[str, Any]:
        """The cells of `names` only (all of them when the source cannot pick)."""
        if self.decode_columns is not None and not isinstance(raw, dict):
            return self.decode_columns(raw, names)
        return self.decode_raw(raw)

    def digests(self) -> RowDigests | None:
        """`RowDigests` of every row, when the table gives them at once (else None)."""
        if self._digests is None:
            return None
        return self._digests()

    def column(self, name: str) -> Column | None:
        """The column by exact id, else case-insensitively (Grist column ids are unique
        ignoring case)."""
        found = self.columns.get(name)
        if found is None:
            lowered = name.lower()
            found = next((c for c in self.columns.values() if c.id.lower() == lowered), None)
        return found


@dataclass
class RowDigests:
    """A table's rows at a glance: keys, 64-bit digests (as two 32-bit halves), and a way to
    fetch the raw rows at some positions (ascending; only changed rows are fetched)."""

    keys: array
    low: array
    high: array
    fetch: Callable[[list[int]], list[Any]]
    # A CSV file's lines a block at a time (`KeptLines.blocks`), for the next sync to check whole
    # blocks against; None for other sources.
    blocks: array | None = None
    # The SHA-256 of a CSV file's bytes as this reading took them; None for other sources.
    content: bytes | None = None
    # A CSV file's header line (without a BOM or its line break) as this reading took it.
    head: bytes | None = None


def line_keys(count: int) -> array:
    """array('q') of 1..count: a CSV file's row keys (its data lines, in order). Made 65,536
    at a time from one packed run of 0..65535, whose third and fourth bytes (each value's bits
    16-31, little-endian) are set per run with two strided byte copies, where `array("q",
    range(...))` converts every value on its own (~7 ms per 100k keys, a third of a re-sync's
    hashing)."""
    if count <= 0:
        return array("q")
    if count >= 1 << 32 or array("q").itemsize != 8 or sys.byteorder != "little":
        return array("q", range(1, count + 1))
    low_run = _low_run()
    runs = bytearray()
    for high in range((count >> 16) + 1):
        run = bytearray(low_run)
        run[2::8] = bytes((high & 0xFF,)) * _RUN_KEYS
        run[3::8] = bytes((high >> 8,)) * _RUN_KEYS
        runs += run
    keys = array("q")
    keys.frombytes(runs[8 : 8 * (count + 1)])  # from 1: past the first run's 0
    return keys


_RUN_KEYS = 1 << 16


@functools.cache
def _low_run() -> bytes:
    """0..65535 packed as array('q'): bits 16-31 clear. Made on first use, not at import."""
    return array("q", range(_RUN_KEYS)).tobytes()


# Lines per block of a CSV file's kept block checksums (`KeptLines`). With a 1 % edit spread
# evenly, ~15 % of 16-line blocks differ: the rest are checked by two checksums over ~2 KB each
# instead of two per line, and a file's lines need not be split apart there.
LINE_BLOCK = 16


@dataclass(frozen=True)
class KeptLines:
    """What the last sync kept of a CSV file's lines, for a re-sync to check the file against a
    block at a time (`csv_folder.line_digests`): each line's digest halves, and for each whole
    block of `LINE_BLOCK` lines (each with its line break) three numbers, the CRC-32 and Adler-32
    of its bytes and their count. A block whose bytes check out holds the lines it held, so
    their digests are the kept ones: its lines are neither split apart nor checksummed."""

    low: array
    high: array
    blocks: array  # array('I'): crc32, adler32, byte length, per block

    def usable_blocks(self) -> int:
        """How many blocks, from the first, can stand for their lines (all, unless the digests
        kept are fewer than the blocks claim: then none)."""
        count = len(self.blocks) // 3
        fits = count * LINE_BLOCK <= min(len(self.low), len(self.high)) and len(self.blocks) % 3 == 0
        return count if fits else 0


# A byte's flag: 0 stays 0, any other byte becomes 1 (`bytes.translate`).
_NONZERO = bytes(1) + b"\x01" * 255


def differing(*pairs: tuple[array, array]) -> list[int]:
    """The positions where any (new, old) pair of arrays of one item size differ, ascending
    (positions past the end of a shorter array are left out). Each pair is XORed as one big
    integer and the pairs ORed, so the positions to visit are the nonzero bytes of one buffer,
    found by `bytes.find`: all in C but the ~1 % of rows that differ, where comparing chunk by
    chunk in Python was 2.7 ms for each of a 80k-line file's two digest halves."""
    stop = min(min(len(new), len(old)) for new, old in pairs)
    size = pairs[0][0].itemsize
    either = 0
    for new, old in pairs:
        if new.itemsize != size or old.itemsize != size:
            raise ValueError("differing: arrays of one item size only")
        mine, theirs = new[:stop].tobytes(), old[:stop].tobytes()
        if mine != theirs:
            either |= int.from_bytes(mine, "little") ^ int.from_bytes(theirs, "little")
    if not either:
        return []
    flags = either.to_bytes(stop * size, "little").translate(_NONZERO)
    found: list[int] = []
    at = flags.find(1)
    while at >= 0:
        position = at // size
        found.append(position)
        at = flags.find(1, (position + 1) * size)
    return found


def line_digest(line: bytes) -> tuple[int, int]:
    """A CSV line's digest, its line break left out: CRC-32 and Adler-32 of its bytes
    (`csv_folder.line_digests` computes the same over whole files, a block of lines at a time)."""
    return zlib.crc32(line), zlib.adler32(line)


def row_digest(raw: Any) -> tuple[int, int]:
    """A 64-bit fingerprint of one row as read, as two 32-bit halves: equal rows, equal digests;
    what a re-sync compares to find the rows that changed. A CSV record's text is checksummed
    like its line in the file (`csv_folder.line_digests`), so either way gives the same digest;
    decoded cells are hashed."""
    if isinstance(raw, str):
        return line_digest((raw[:-1] if raw.endswith("\n") else raw).encode("utf-8", "surrogatepass"))
    text = "\x1f".join(raw) if isinstance(raw, tuple | list) else repr(tuple(raw.items()))
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:], "little")


class Source(Protocol):
    """One Grist document (or a folder/file standing in for one)."""

    kind: str  # "grist-api" | "grist-csv" | "grist-file" | "csv-folder"

    def describe(self) -> str:
        """A short human description, free of secrets."""
        ...

    def table_names(self) -> list[str]: ...

    def table(self, name: str) -> RawTable | None:
        """The table's columns and rows, or None when the document has no such table."""
        ...

    def state(self) -> str | None:
        """An identifier of the document's current content (Grist's latest action hash, a
        digest of the files), or None when the source cannot tell cheaply."""
        ...

    def close(self) -> None: ...


def files_digest(paths: Iterable[Path]) -> str:
    """A digest of the files' names and bytes: equal digests, equal content. Hashing runs at
    disk speed, far faster than parsing, so an unchanged folder or file is cheap to detect.
    SHA-256, which the CPU computes itself (SHA extensions): twice blake2b's speed here, which
    counts, as every sync (and every `check`) reads all the files this way first."""
    named = []
    for path in paths:
        with path.open("rb") as handle:
            named.append((path.name, hashlib.file_digest(handle, "sha256").digest()))
    return named_digest(named)


def named_digest(contents: Iterable[tuple[str, bytes]]) -> str:
    """`files_digest` of files whose bytes' SHA-256 is known: (name, digest) in order."""
    digest = hashlib.sha256()
    for name, content in contents:
        digest.update(name.encode("utf-8", "surrogatepass") + b"\0" + content)
    return digest.hexdigest()
