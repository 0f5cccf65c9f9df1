"""What the engines (and plain Python) do on the same rows, measured in the same run as vedana:
the limits vedana's sync phases are held against (issue 13).

- `CopyBaseline`: the rows a sync left in staging, dumped once (`COPY … TO`, not timed), then
  `COPY … FROM` into empty tables made `LIKE nodes/edges INCLUDING ALL` (same columns,
  defaults, primary keys and the version indexes), both tables in one transaction, commit
  included. That is Postgres' bulk-load speed for exactly the finished rows: nothing to parse,
  cast, resolve, hash or diff. The tables are logged, as staging is: staging must survive a
  crash, so what an unlogged table saves (the WAL, ~15 % of this COPY here) is not a speed
  vedana could ever have.
- `hash_pass`: the least a diff-only re-sync of a CSV folder must do: read every file, hash each
  row and compare it with the previous run's hash of the same key, kept in memory.

The bench may talk to Postgres directly (it is not part of `src/`); vedana itself never does.
"""

from __future__ import annotations

import csv
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Engine

STAGING_TABLES = ("nodes", "edges")
_CHUNK = 1 << 20
_SEP = "\x1f"  # joins a row's cells before hashing: never inside a CSV cell we generate


def psycopg_url(engine: Engine) -> str:
    """The engine's URL for a plain psycopg connection (password included: it is ours)."""
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


@dataclass
class CopyBaseline:
    """The finished staging rows of one sync, kept in files, and the timed COPY back in."""

    folder: Path
    rows: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)

    def dump(self, engine: Engine) -> None:
        """`COPY nodes/edges TO` files in `folder` (text format, every column). Not timed."""
        import psycopg

        self.folder.mkdir(parents=True, exist_ok=True)
        with psycopg.connect(psycopg_url(engine)) as conn, conn.cursor() as cur:
            for table in STAGING_TABLES:
                path = self.folder / f"{table}.copy"
                with path.open("wb") as out, cur.copy(f"COPY {table} TO STDOUT") as copy:
                    for data in copy:
                        out.write(data)
                self.bytes[table] = path.stat().st_size
                self.rows[table] = int(cur.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]

    def timed_copy(self, engine: Engine) -> float:
        """Seconds to COPY the dumped rows into empty staging-shaped tables and commit. The
        tables are created before and dropped after the timing."""
        import psycopg

        names = {table: f"bench_copy_{table}" for table in STAGING_TABLES}
        with psycopg.connect(psycopg_url(engine), autocommit=True) as conn:
            for table, name in names.items():
                conn.execute(f"DROP TABLE IF EXISTS {name}")
                conn.execute(f"CREATE TABLE {name} (LIKE {table} INCLUDING ALL)")
            try:
                started = time.perf_counter()
                with conn.transaction(), conn.cursor() as cur:
                    for table, name in names.items():
                        with (
                            (self.folder / f"{table}.copy").open("rb") as src,
                            cur.copy(f"COPY {name} FROM STDIN") as copy,
                        ):
                            while chunk := src.read(_CHUNK):
                                copy.write(chunk)
                seconds = time.perf_counter() - started
                copied = {
                    table: int(conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0])  # type: ignore[index]
                    for table, name in names.items()
                }
            finally:
                for name in names.values():
                    conn.execute(f"DROP TABLE IF EXISTS {name}")
        if copied != self.rows:  # the baseline must load exactly the rows vedana wrote
            raise RuntimeError(f"COPY baseline loaded {copied}, staging held {self.rows}")
        return seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "tables": "logged, LIKE nodes/edges INCLUDING ALL (primary keys, version indexes)",
            "rows": self.rows,
            "mb": {k: round(v / 2**20, 1) for k, v in self.bytes.items()},
        }


# ---------------------------------------------------------------------------------------------
# read + hash + compare
# ---------------------------------------------------------------------------------------------

RowHashes = dict[str, dict[str, bytes]]  # table -> row key -> digest of the row's cells


@dataclass
class HashPass:
    """One pass over a CSV folder: every row's hash, and how it compares with the previous pass."""

    hashes: RowHashes
    rows: int = 0
    new: int = 0
    changed: int = 0
    gone: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "new": self.new,
            "changed": self.changed,
            "gone": self.gone,
            "seconds": round(self.seconds, 4),
        }


def _key_columns(header: list[str]) -> list[int]:
    """A link table's rows are keyed by their ends (and label); any other table by its first
    column, the node id."""
    ends = [header.index(c) for c in ("from_node_id", "to_node_id", "edge_label") if c in header]
    return ends if len(ends) >= 2 else [0]


def hash_pass(data: Path, previous: RowHashes | None = None) -> HashPass:
    """Read every `*.csv` in `data`, hash each row (blake2b-128 of its cells), and compare each
    hash with `previous` (the same key's hash from the last pass): counts of new, changed and
    vanished rows. Times itself."""
    previous = previous or {}
    started = time.perf_counter()
    out = HashPass(hashes={})
    blake = hashlib.blake2b
    for path in sorted(data.glob("*.csv")):
        before = previous.get(path.stem, {})
        seen: dict[str, bytes] = {}
        with path.open(encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                continue
            keys = _key_columns(header)
            single = keys[0] if len(keys) == 1 else None
            for row in reader:
                if not row:
                    continue
                key = row[single] if single is not None else _SEP.join([row[i] for i in keys])
                digest = blake(_SEP.join(row).encode("utf-8"), digest_size=16).digest()
                seen[key] = digest
                old = before.get(key)
                if old is None:
                    out.new += 1
                elif old != digest:
                    out.changed += 1
        out.rows += len(seen)
        out.gone += sum(1 for key in before if key not in seen)
        out.hashes[path.stem] = seen
    out.seconds = time.perf_counter() - started
    return out
