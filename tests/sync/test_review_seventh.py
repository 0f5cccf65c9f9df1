"""The seventh round's review, by tests: orjson's fast path in `attributes_json` must write
exactly json's canonical text (or raise what json raises) for any value, and the span reads
of changed lines must return the file's own lines or fail when the file was saved again."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import enum
import json
import os
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

from support.csv_lines import data_lines, random_csv
from vedana.errors import SourceError
from vedana.sources import csv_folder
from vedana.sources.base import LINE_BLOCK, KeptLines
from vedana.sources.csv_folder import line_digests
from vedana.stores import staging_write


def _canonical(attributes: dict[str, Any]) -> str:
    return json.dumps(attributes, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class _Colour(enum.Enum):
    RED = "red"


class _Dict(dict):  # type: ignore[type-arg]
    pass


class _List(list):  # type: ignore[type-arg]
    pass


@dataclasses.dataclass
class _Point:
    x: int


# Values json's encoder refuses (TypeError) that orjson would write on its own terms.
_REFUSED_BY_JSON = [
    datetime.datetime(2024, 1, 2, 3, 4, 5),
    datetime.date(2024, 1, 2),
    datetime.time(3, 4),
    uuid.UUID(int=5),
    _Colour.RED,
    _Point(1),
]


@pytest.mark.parametrize("value", _REFUSED_BY_JSON, ids=lambda v: type(v).__name__)
def test_values_json_refuses_are_refused_whichever_encoder(value: Any) -> None:
    """A value json cannot encode is an error, as it was before orjson: never a text json
    would not have written (a datetime's "T", an enum's value), which a later encoding by json
    could not reproduce."""
    with pytest.raises(TypeError):
        _canonical({"a": value})
    with pytest.raises(TypeError):
        staging_write.attributes_json({"a": value})


@pytest.mark.parametrize(
    "value",
    [
        (1e-05,),
        (1e-07, 2),
        _List([1e-05]),
        _Dict(x=1e-05),
        collections.OrderedDict(x=1e-05),
        (0.1, "a", None),
    ],
    ids=["tuple", "tuple2", "list-subclass", "dict-subclass", "ordered-dict", "tuple-flat"],
)
def test_floats_inside_containers_json_encodes_are_written_as_json_writes_them(value: Any) -> None:
    """Tuples and subclasses of list and dict are not `list` or `dict`, yet hold floats: json
    writes 1e-05, orjson 0.00001. The stored text must be json's."""
    attributes = {"a": value, "b": "x"}
    assert staging_write.attributes_json(attributes) == _canonical(attributes)


@pytest.mark.parametrize(
    "value",
    [(float("nan"),), (float("inf"), 1), _List([float("nan")]), _Dict(n=float("-inf"))],
    ids=["tuple-nan", "tuple-inf", "list-subclass-nan", "dict-subclass-inf"],
)
def test_nan_inside_any_container_still_raises(value: Any) -> None:
    """NaN and infinities are refused (ValueError) wherever they sit: orjson would write null."""
    with pytest.raises(ValueError):
        staging_write.attributes_json({"a": value})


# --- changed lines read again a span of blocks at a time ---------------------------------------


def _rewritten(rnd: random.Random, content: bytes) -> bytes:
    """The file saved again: a byte changed in place (same length), bytes cut from the end or
    added to it, or a line's bytes swapped with its neighbour's."""
    op = rnd.randrange(5)
    data = bytearray(content)
    if op == 0 and data:
        at = rnd.randrange(len(data))
        data[at] = ord("Z") if data[at] != ord("Z") else ord("Y")
    elif op == 1:
        del data[len(data) - rnd.randint(1, 40) :]
    elif op == 2:
        data += rnd.choice([b"", b"\n"]) + b"7,grown" + rnd.choice([b"", b"\n"])
    elif op == 3:
        lines = bytes(data).split(b"\n")
        if len(lines) > 3:
            i = rnd.randrange(1, len(lines) - 1)
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        data = bytearray(b"\n".join(lines))
    else:  # the same bytes, one block's worth of lines later: every offset shifts
        data = bytearray(content.replace(b"\n", b"\nq,shifted\n", 1))
    return bytes(data)


def test_lines_read_again_are_the_ones_digested_or_the_read_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the reads' sizes, spans and gaps, digests taken fresh or against an earlier
    version's blocks: the lines fetched are the ones digested; once the file is saved again
    (same length, cut, grown, lines swapped or shifted), a fetch either fails with a clear
    error or still gives exactly the lines digested, never another version's."""
    rnd = random.Random(77)
    path = tmp_path / "Anchor_person.csv"
    failed = 0
    for trial in range(400):
        monkeypatch.setattr(csv_folder, "_READ", rnd.choice([5, 64, 700, 1 << 20]))
        monkeypatch.setattr(csv_folder, "_SPAN", rnd.choice([1, 100, 2000, 1 << 20]))
        monkeypatch.setattr(csv_folder, "_GAP", rnd.choice([0, 30, 1000, 1 << 16]))
        count = rnd.choice(
            [1, LINE_BLOCK - 1, LINE_BLOCK, LINE_BLOCK + 1, 3 * LINE_BLOCK, rnd.randint(1, 9 * LINE_BLOCK)]
        )
        kept = None
        if rnd.random() < 0.5:
            path.write_bytes(random_csv(rnd, count, "a", longest=30, crlf=0.2))
            first = line_digests(path)
            assert first is not None and first.blocks is not None
            kept = KeptLines(first.low, first.high, first.blocks)
            count = max(1, count + rnd.randint(-3, 3))
        lines_tag = rnd.choice(["a", "b"])
        content = random_csv(rnd, count, lines_tag, longest=30, crlf=0.2)
        if kept is not None and rnd.random() < 0.5:  # most blocks unchanged from the kept ones
            content = (
                b"\xef\xbb\xbf" if content.startswith(b"\xef\xbb\xbf") else b""
            ) + path.read_bytes().lstrip(b"\xef\xbb\xbf").replace(b"5,a", b"5,b", 1)
        path.write_bytes(content)
        found = line_digests(path, kept)
        assert found is not None, trial
        lines = data_lines(content)
        assert len(found.low) == len(lines), trial
        ends_open = not content.endswith(b"\n")

        texts = [line.decode() + "\n" for line in lines]
        if ends_open:
            texts[-1] = texts[-1][:-1]

        picked = sorted(rnd.sample(range(len(lines)), rnd.randint(1, len(lines))))
        assert found.fetch(picked) == [texts[i] for i in picked], trial
        path.write_bytes(_rewritten(rnd, content))
        picked = sorted(rnd.sample(range(len(lines)), rnd.randint(1, len(lines))))
        try:
            got = found.fetch(picked)
        except SourceError as error:
            assert "changed while the sync was reading it" in str(error)
            failed += 1
            continue
        assert got == [texts[i] for i in picked], trial
    assert failed > 50  # the rewrites did reach the lines fetched


# --- the embedded Postgres' shared buffers ---------------------------------------------------


def _cgroups(tmp_path: Path, own: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A cgroup mount and a /proc/self/cgroup naming this process' groups (`own`)."""
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    proc = tmp_path / "self-cgroup"
    proc.write_text(own)
    return root, proc


@pytest.mark.parametrize(
    ("own", "files", "limit"),
    [
        # cgroup v2, a container: its own group is the mount's root
        ("0::/\n", {"memory.max": "2147483648\n"}, 2 << 30),
        ("0::/\n", {"memory.max": "max\n"}, None),
        # cgroup v2 on a host: a service's group (systemd MemoryMax=) below the root
        (
            "0::/system.slice/vedana.service\n",
            {"system.slice/vedana.service/memory.max": "1073741824\n"},
            1 << 30,
        ),
        # cgroup v1 (this machine's kind): the memory controller's own file
        (
            "9:name=systemd:/\n4:memory:/jobs/a1\n1:cpu:/\n",
            {"memory/jobs/a1/memory.limit_in_bytes": "3221225472\n"},
            3 << 30,
        ),
        ("4:memory:/jobs/a1\n", {"memory/memory.limit_in_bytes": "3221225472\n"}, 3 << 30),  # namespaced
        ("4:memory:/\n", {"memory/memory.limit_in_bytes": "9223372036854771712\n"}, None),  # no limit
        ("", {}, None),
    ],
    ids=["v2-root", "v2-max", "v2-nested", "v1", "v1-namespaced", "v1-unlimited", "none"],
)
def test_the_memory_counted_is_the_cgroups_limit_where_there_is_one(
    tmp_path: Path, own: str, files: dict[str, str], limit: int | None
) -> None:
    """Shared buffers are sized by the memory this process may use: a cgroup's limit (v2's
    memory.max, v1's memory.limit_in_bytes, the process' own group or the mount's root) when
    lower than the machine's, which a container's or a service's limit usually is."""
    from vedana.stores.embedded_postgres import _memory_bytes

    root, proc = _cgroups(tmp_path, own, files)
    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert _memory_bytes(root, proc) == (min(machine, limit) if limit else machine)
