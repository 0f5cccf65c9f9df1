"""Decoding Grist's cell encodings into the plain values of `base.py`.

Three wire formats carry the same cell:

- the REST `/records` JSON: Ref = row id (0 = empty), RefList/ChoiceList = `["L", …]`,
  an error = `["E", "NameError"]` or `null` plus an entry in the record's `errors`;
- SQLite storage, seen in `.grist` files and in `/sql` answers: Bool = 0/1, RefList and
  ChoiceList = JSON text `[1,3]`, Date = epoch seconds, formula values that are not plain
  scalars (lists, errors) = a Python-marshal blob (`{"type": "Buffer", "data": [...]}` in `/sql`);
- CSV export text: display values, Bools `true`/`false`, lists joined with ", ", errors `#NameError`.
"""

from __future__ import annotations

import csv
import json
import math
import re
import struct
from datetime import UTC, date, datetime
from typing import Any

from vedana.sources.base import CELL_ERROR, Column, Ref

# --- Python marshal (the subset Grist writes), decoded without `marshal.loads` --------------
# `marshal` is not meant for data one did not write oneself; this reader understands only
# plain values and fails closed on anything else.

_MAX_DEPTH = 32


class MarshalError(ValueError):
    pass


class _MarshalReader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.refs: list[Any] = []

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MarshalError("truncated marshal data")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int32(self) -> int:
        return struct.unpack("<i", self.take(4))[0]

    def read(self, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise MarshalError("marshal data nested too deeply")
        code = self.take(1)[0]
        flag_ref = code & 0x80
        kind = chr(code & 0x7F)
        slot = None
        if flag_ref and kind in "([{<>":
            slot = len(self.refs)
            self.refs.append(None)
        value = self._value(kind, depth)
        if flag_ref:
            if slot is None:
                self.refs.append(value)
            else:
                self.refs[slot] = value
        return value

    def _value(self, kind: str, depth: int) -> Any:
        simple = {"N": None, "T": True, "F": False}
        if kind in simple:
            return simple[kind]
        if kind == "i":
            return self.int32()
        if kind == "I":
            return struct.unpack("<q", self.take(8))[0]
        if kind == "l":
            n = self.int32()
            digits = struct.unpack(f"<{abs(n)}H", self.take(2 * abs(n)))
            value = sum(d << (15 * i) for i, d in enumerate(digits))
            return -value if n < 0 else value
        if kind == "g":
            return struct.unpack("<d", self.take(8))[0]
        if kind == "f":
            return float(self.take(self.take(1)[0]).decode("ascii"))
        if kind in "sutaA":
            return self.take(self.int32()).decode("utf-8", errors="replace")
        if kind in "zZ":
            return self.take(self.take(1)[0]).decode("utf-8", errors="replace")
        if kind in "[(<>":
            return [self.read(depth + 1) for _ in range(self.int32())]
        if kind == ")":
            return [self.read(depth + 1) for _ in range(self.take(1)[0])]
        if kind == "{":
            out: dict[Any, Any] = {}
            while self.data[self.pos : self.pos + 1] != b"0":
                key = self.read(depth + 1)
                out[key if isinstance(key, str | int | float | bool) else str(key)] = self.read(depth + 1)
            self.take(1)
            return out
        if kind == "r":
            index = self.int32()
            if not 0 <= index < len(self.refs):
                raise MarshalError("bad marshal back-reference")
            return self.refs[index]
        raise MarshalError(f"unsupported marshal type {kind!r}")


def decode_marshal(data: bytes) -> Any:
    """Decode a marshal blob of plain values (None, bool, int, float, str, list, tuple, dict)."""
    reader = _MarshalReader(data)
    value = reader.read()
    if reader.pos != len(data):
        raise MarshalError("trailing bytes after marshal data")
    return value


# --- Grist's typed-list values ------------------------------------------------------------


def _from_typed_list(value: list[Any]) -> Any:
    """Grist encodes non-primitive values as lists whose first item is a type code."""
    if not value or not isinstance(value[0], str):
        return value
    code, rest = value[0], value[1:]
    if code == "E":
        return CELL_ERROR
    if code == "L":
        return [_plain(v) for v in rest]
    if code == "d" and rest and isinstance(rest[0], int | float):
        return epoch_to_date(rest[0])
    if code == "D" and rest and isinstance(rest[0], int | float):
        return epoch_to_datetime(rest[0])
    if code == "R" and len(rest) >= 2 and isinstance(rest[1], int):
        return Ref(row_ids=(rest[1],) if rest[1] else ())
    if code == "r" and len(rest) >= 2 and isinstance(rest[1], list):
        return Ref(row_ids=tuple(i for i in rest[1] if isinstance(i, int) and i), many=True)
    if code == "O" and rest and isinstance(rest[0], dict):
        return json.dumps(rest[0], sort_keys=True, ensure_ascii=False)
    # "P" pending, "C" censored, "U" unmarshallable, "S" skip, "V" versions: nothing usable.
    return None


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return _from_typed_list(value)
    return value


# --- dates ---------------------------------------------------------------------------------


def epoch_to_date(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).date().isoformat()


def epoch_to_datetime(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat()


# --- one decoder per wire format -------------------------------------------------------------


def _decode_blob(raw: bytes) -> Any:
    try:
        value = decode_marshal(raw)
    except (MarshalError, ValueError, struct.error, UnicodeDecodeError):
        return None  # an undecodable blob is empty, never text
    return _plain(value) if isinstance(value, list) else value


def _json_list(text: str) -> list[Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def _as_row_id(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value or None
    if isinstance(value, float) and value.is_integer():
        return int(value) or None
    return None


def _labels(value: Any) -> tuple[str, ...]:
    """Display labels from a helper-column value (text or a list)."""
    if value is None or value is CELL_ERROR:
        return ()
    if isinstance(value, list):
        return tuple(str(v) for v in value if v not in (None, ""))
    text = str(value)
    return (text,) if text else ()


def _typed_scalar(value: Any, column: Column) -> Any:
    """Apply the column type to a scalar that arrived as a JSON/SQLite number or text."""
    base = column.base_type
    if value is None:
        return None
    if base == "Bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float):
            return bool(value)
        return value
    if base == "Numeric" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if base == "Int" and isinstance(value, float) and value.is_integer():
        return int(value)
    if base == "Date" and isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_to_date(value)
    if base == "DateTime" and isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_to_datetime(value)
    return value


_PLAIN_TEXT = frozenset({"Text", "Choice", "Any", ""})


def from_sqlite(value: Any, column: Column, helper: Any = None) -> Any:
    """A cell as stored in SQLite (a `.grist` file, or `/sql` after `unbuffer`). `helper` is the
    value of the column's display helper (`gristHelper_Display*`), when it has one."""
    base = column.base_type
    if value.__class__ is str and base in _PLAIN_TEXT:
        return value  # the common case, first
    if isinstance(value, bytes | bytearray | memoryview):
        decoded = _decode_blob(bytes(value))
        if decoded is CELL_ERROR or column.ref_table is None:
            return decoded
        value = decoded
    if base == "Ref":
        if isinstance(value, Ref):
            return value
        row_id = _as_row_id(value)
        return Ref(row_ids=(row_id,), labels=_labels(helper)[:1]) if row_id else Ref()
    if base == "RefList":
        ids = _json_list(value) if isinstance(value, str) else value if isinstance(value, list) else None
        if not ids:
            return Ref(many=True)
        row_ids = tuple(i for i in (_as_row_id(v) for v in ids) if i)
        labels = _labels(_decode_blob(bytes(helper)) if isinstance(helper, bytes) else helper)
        return Ref(row_ids=row_ids, labels=labels if len(labels) == len(row_ids) else (), many=True)
    if base in ("ChoiceList", "Attachments") and isinstance(value, str):
        items = _json_list(value)
        return items if items is not None else value
    return _typed_scalar(value, column)


def unbuffer(value: Any) -> Any:
    """`/sql` sends SQLite blobs as `{"type": "Buffer", "data": [bytes…]}`."""
    if isinstance(value, dict) and value.get("type") == "Buffer" and isinstance(value.get("data"), list):
        return bytes(value["data"])
    return value


def from_api(value: Any, column: Column, helper: Any = None) -> Any:
    """A cell of the REST `/records` answer (errors given separately are handled by the caller)."""
    if isinstance(value, list):
        decoded = _from_typed_list(value)
        if decoded is CELL_ERROR:
            return CELL_ERROR
        if column.base_type == "RefList":
            ids = tuple(i for i in (_as_row_id(v) for v in (decoded or [])) if i)
            labels = _labels(_plain(helper) if isinstance(helper, list) else helper)
            return Ref(row_ids=ids, labels=labels if len(labels) == len(ids) else (), many=True)
        return decoded
    base = column.base_type
    if base == "Ref":
        row_id = _as_row_id(value)
        return Ref(row_ids=(row_id,), labels=_labels(helper)[:1]) if row_id else Ref()
    if base == "RefList":
        return Ref(many=True)  # null
    return _typed_scalar(value, column)


# grist-core's RaisedException.toString: `#` + the exception's name, except `#DIV/0!` for
# ZeroDivisionError and `#Invalid Ref: text` for a value of the wrong type.
_ERROR_TEXT = re.compile(
    r"^#(?:[A-Z][A-Za-z]*(?:Error|Exception)|CircularRef|DIV/0!|Invalid [\w:]+: .*)$", re.S
)


def is_error_text(text: str) -> bool:
    """`#NameError`, `#DIV/0!`, … as Grist writes a failed formula into a CSV export."""
    return bool(_ERROR_TEXT.match(text))


def split_list(text: str) -> list[str]:
    """A list cell of a CSV export ("a, b, c"; items with commas are quoted)."""
    if not text.strip():
        return []
    if "," not in text and '"' not in text and "\n" not in text and "\r" not in text:
        return [text.strip()]  # one item, the usual reference: what the reader below would give
    try:
        items = next(csv.reader([text], skipinitialspace=True))
    except (csv.Error, StopIteration):
        items = text.split(",")
    return [item.strip() for item in items if item.strip()]


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_bool_text(text: str) -> bool | None:
    lowered = text.strip().lower()
    if lowered in ("true", "t", "yes", "y", "1", "on"):
        return True
    if lowered in ("false", "f", "no", "n", "0", "off"):
        return False
    return None


def from_text(text: str | None, column: Column) -> Any:
    """A CSV cell. With a known Grist type (CSV export) the text is typed; without one (a local
    CSV folder) it stays text and the data model's dtype decides later."""
    if not column.type:  # the common case of a CSV folder, first
        if not text:
            return None
        return CELL_ERROR if text[0] == "#" and is_error_text(text) else text
    if text is None or text == "":
        if column.base_type == "Ref":
            return Ref()
        if column.base_type == "RefList":
            return Ref(many=True)
        return None
    if is_error_text(text):
        return CELL_ERROR
    base = column.base_type
    if base == "Ref":
        return Ref(labels=(text.strip(),))
    if base == "RefList":
        return Ref(labels=tuple(split_list(text)), many=True)
    if base in ("ChoiceList", "Attachments"):
        return split_list(text)
    if base == "Bool":
        parsed = parse_bool_text(text)
        return text if parsed is None else parsed
    if base == "Numeric":
        number = _number(text)
        return text if number is None else number
    if base == "Int":
        number = _number(text)
        return int(number) if number is not None and number.is_integer() else text
    if base == "Date":
        return _date_text(text)
    return text


_DATE_FORMATS = ("%Y-%m-%d", "%m/%d/%Y", "%d.%m.%Y", "%Y/%m/%d", "%d/%m/%Y")


def _date_text(text: str) -> str:
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(text.strip(), fmt).date().isoformat()
        except ValueError:
            continue
    return text


def is_iso_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True
