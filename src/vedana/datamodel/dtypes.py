"""Casting cell values by an attribute's `dtype` from the Data Model.

Values end up as JSON scalars (or lists of them): dates and date-times as ISO text, since that
is what both Postgres JSONB and the graph can hold. A blank `dtype` keeps the value as the
source typed it (a Grist Numeric column stays a number; a CSV folder gives text).
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from typing import Any

from vedana.sources.cells import epoch_to_date, epoch_to_datetime, parse_bool_text, split_list

_ALIASES = {
    "": "",
    "str": "str",
    "string": "str",
    "text": "str",
    "int": "int",
    "integer": "int",
    "int64": "int",
    "float": "float",
    "float64": "float",
    "double": "float",
    "number": "float",
    "numeric": "float",
    "decimal": "float",
    "bool": "bool",
    "boolean": "bool",
    "date": "date",
    "datetime": "datetime",
    "timestamp": "datetime",
    "list": "list",
    "array": "list",
    "choicelist": "list",
    "list[str]": "list",
}

_DATE_FORMATS = ("%Y-%m-%d", "%d.%m.%Y", "%m/%d/%Y", "%Y/%m/%d")
_DATETIME_FORMATS = ("%Y-%m-%d %I:%M%p", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%m/%d/%Y %H:%M")


class CastError(ValueError):
    pass


def canonical_dtype(text: Any) -> str | None:
    """The dtype's canonical name ("" = as the source typed it), or None if unknown."""
    return _ALIASES.get(str(text or "").strip().lower())


# The JSON type of every value `cast_value` gives for a dtype: what a reader of the staged
# values may count on (a blank dtype keeps the source's types, so it promises nothing).
_JSON_TYPES = {
    "str": "string",
    "date": "string",
    "datetime": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "list",
}


def json_type(dtype: Any) -> str | None:
    """The JSON type of an attribute's staged values: "string", "integer" (of any size),
    "number", "boolean", "list" (of scalars), or None when the dtype is blank (the source's own
    types). An unknown dtype is read as "str", as the sync casts it."""
    canonical = canonical_dtype(dtype)
    return _JSON_TYPES.get("str" if canonical is None else canonical)


def is_empty(value: Any) -> bool:
    if value.__class__ is str:  # most cells: skip the isinstance chain
        return not value.strip()
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, list | tuple):
        return all(is_empty(v) for v in value)
    return False


def number_text(value: float | int) -> str:
    """Numbers as Grist displays them: 42.0 → "42", 4.2 → "4.2"."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


def as_text(value: Any) -> str:
    if value.__class__ is str:
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return number_text(value)
    if isinstance(value, list | tuple):
        return ", ".join(as_text(v) for v in value if not is_empty(v))
    return str(value)


def cast_value(value: Any, dtype: str) -> Any:
    """`value` cast to `dtype` (canonical name); raises `CastError` if it does not fit.
    Callers drop empty values before casting."""
    if dtype == "":
        if isinstance(value, float) and not math.isfinite(value):
            raise CastError("not a finite number")
        return [v for v in value if not is_empty(v)] if isinstance(value, list | tuple) else value
    if dtype == "str":
        return as_text(value)
    if dtype == "int":
        return _to_int(value)
    if dtype == "float":
        return _to_float(value)
    if dtype == "bool":
        return _to_bool(value)
    if dtype == "date":
        return _to_date(value)
    if dtype == "datetime":
        return _to_datetime(value)
    if dtype == "list":
        items = (
            value
            if isinstance(value, list | tuple)
            else split_list(value)
            if isinstance(value, str)
            else [value]
        )
        return [v for v in items if not is_empty(v)]
    raise CastError(f"unknown dtype {dtype!r}")


def _to_int(value: Any) -> int:
    if value.__class__ is str:
        try:  # "27": the common case, exact, without a detour through float
            return int(value)
        except ValueError:
            pass  # "27.0", "1e3", "abc": decided below
    if isinstance(value, bool):
        raise CastError("a boolean is not an int")
    if isinstance(value, int):
        return value
    number = _to_float(value)
    if not number.is_integer():
        raise CastError("not a whole number")
    return int(number)


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise CastError("a boolean is not a number")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise CastError("not a number") from None
    else:
        raise CastError("not a number")
    if not math.isfinite(number):
        raise CastError("not a finite number")
    return number


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        parsed = parse_bool_text(value)
        if parsed is not None:
            return parsed
    raise CastError("not a boolean")


def _to_date(value: Any) -> str:
    if isinstance(value, bool):
        raise CastError("not a date")
    if isinstance(value, int | float):
        return epoch_to_date(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return date.fromisoformat(text).isoformat()
        except ValueError:
            pass
        try:
            return datetime.fromisoformat(text).date().isoformat()
        except ValueError:
            pass
        for fmt in _DATE_FORMATS:
            try:
                return datetime.strptime(text, fmt).date().isoformat()
            except ValueError:
                continue
    raise CastError("not a date")


def _to_datetime(value: Any) -> str:
    if isinstance(value, bool):
        raise CastError("not a date-time")
    if isinstance(value, int | float):
        return epoch_to_datetime(value)
    if isinstance(value, str):
        text = value.strip()
        parsed: datetime | None = None
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            for fmt in _DATETIME_FORMATS:
                try:
                    parsed = datetime.strptime(text, fmt)  # %p matches "am" and "AM"
                    break
                except ValueError:
                    continue
        if parsed is not None:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return parsed.astimezone(UTC).isoformat()
    raise CastError("not a date-time")


# dtypes whose values are never embedded (numbers, dates, flags, references).
NON_TEXT_DTYPES = {
    "int", "integer", "float", "numeric", "number", "decimal", "bool", "boolean",
    "date", "datetime", "timestamp", "time", "id", "ref", "reflist",
}  # fmt: skip


def is_identifier(owner: str, attribute: str) -> bool:
    lowered = attribute.lower()
    return lowered in {"id", "node_id", "from_node_id", "to_node_id", "edge_label"} or (
        lowered == f"{owner.lower()}_id"
    )
