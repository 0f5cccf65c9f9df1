"""Reading Grist's CSV export text back by column type and widget options, as grist-core's
ValueFormatter writes it (the cells here are shaped like a grist-core 1.7 export: `Tags[1]`,
`2024-03-15 10:30am`, `#DIV/0!`). Used only when Grist refuses `/sql` and `/records`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from vedana.sources.base import CELL_ERROR, Column, Ref
from vedana.sources.cells import is_error_text
from vedana.sources.grist_export import ExportColumn


def shown(type_: str, *, formula: str = "", visible: str = "", **options: Any) -> ExportColumn:
    fields = {"isFormula": bool(formula), "formula": formula, "widgetOptions": json.dumps(options)}
    return ExportColumn.from_record(Column("c", type_, is_formula=bool(formula), visible_col=visible), fields)


@pytest.mark.parametrize(
    ("column", "text", "value"),
    [
        (shown("Ref:Tags"), "Tags[1]", Ref(row_ids=(1,))),
        (shown("Ref:Tags"), "[4]", Ref(row_ids=(4,))),  # a hidden table's rows show no table name
        (shown("RefList:Tags"), "Tags[1], Tags[2]", Ref(row_ids=(1, 2), many=True)),
        (shown("RefList:Tags"), "", Ref(many=True)),
        (shown("Ref:Tags", visible="name"), "red", Ref(labels=("red",))),
        (shown("Ref:Tags", visible="name"), "Tags[1]", Ref(labels=("Tags[1]",))),  # a name, not an id
        (shown("Numeric", formula="$a / $b"), "#DIV/0!", CELL_ERROR),
        (shown("Any", formula="$a.b"), "#AttributeError", CELL_ERROR),
        (shown("Ref:Tags", formula="$a"), "#Invalid Ref:Tags: abc", CELL_ERROR),
        (shown("Text"), "#DIV/0!", "#DIV/0!"),  # typed by a person: no formula, no error
        (shown("DateTime:UTC"), "2024-03-15 10:30am", "2024-03-15T10:30:00+00:00"),
        (shown("DateTime:Europe/Berlin"), "2024-03-15 10:30am", "2024-03-15T09:30:00+00:00"),
        (
            shown("DateTime:UTC", dateFormat="MM/DD/YYYY", timeFormat="HH:mm:ss"),
            "03/15/2024 22:30:05",
            "2024-03-15T22:30:05+00:00",
        ),
        (shown("DateTime:UTC", dateFormat="dddd"), "Friday", "Friday"),  # a format it cannot read back
        (shown("Date"), "2024-03-15", "2024-03-15"),
        (shown("Date", dateFormat="DD.MM.YYYY"), "15.03.2024", "2024-03-15"),
        (shown("Numeric"), "0.3333333333", 0.3333333333),
        (shown("Numeric", numMode="currency"), "$1,234.50", 1234.5),
        (shown("Numeric", numMode="decimal", numSign="parens"), "(1,234.5)", -1234.5),
        (shown("Numeric", numMode="percent"), "12.5%", 0.125),
        (shown("Int", numMode="decimal"), "1,234", 1234),
        (shown("Int"), "7", 7),
        (shown("Bool"), "true", True),
        (shown("ChoiceList"), '"a, b", c', ["a, b", "c"]),
    ],
)
def test_shown_text_read_back(column: ExportColumn, text: str, value: Any) -> None:
    assert column.decode(text) == value


def test_which_columns_the_export_shows_whole() -> None:
    whole = [shown("Text"), shown("Choice"), shown("ChoiceList"), shown("Bool"), shown("Int"), shown("Date")]
    assert all(c.faithful for c in whole)
    lossy = [
        shown("Text", formula="$a"),  # an error reads like text
        shown("Ref:Tags"),
        shown("RefList:Tags", visible="name"),
        shown("DateTime:UTC"),  # to the minute by default
        shown("Numeric"),  # at most 10 decimals
        shown("Int", numMode="decimal"),
        shown("Date", dateFormat="MMM D, YYYY"),
        shown("Any"),
        shown("Attachments"),
    ]
    assert not any(c.faithful for c in lossy)
    # A data column with a trigger formula can hold errors too.
    trigger = ExportColumn.from_record(Column("c", "Text"), {"isFormula": False, "formula": "NOW()"})
    assert not trigger.faithful


def test_error_texts_of_grist_core() -> None:
    """RaisedException.toString: `#` + name, `#DIV/0!`, `#Invalid <type>: <text>`."""
    for text in ("#NameError", "#DIV/0!", "#Invalid Numeric: abc", "#CircularRef", "#TypeError"):
        assert is_error_text(text), text
    for text in ("#hashtag", "#1", "DIV/0!", "# NameError"):
        assert not is_error_text(text), text
