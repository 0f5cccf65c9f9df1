"""The seventh round's review, by tests: orjson's fast path in `attributes_json` must write
exactly json's canonical text (or raise what json raises) for any value, and the span reads
of changed lines must return the file's own lines or fail when the file was saved again."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import enum
import json
import uuid
from typing import Any

import pytest

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
