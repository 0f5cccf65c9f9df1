"""Normalisation rules one by one, on small in-memory tables (no database needed for these)."""

from __future__ import annotations

import csv
import marshal
from pathlib import Path
from typing import Any

import pytest

from vedana.datamodel import Anchor, Attribute, DataModel, Link
from vedana.datamodel.dtypes import CastError, cast_value
from vedana.datamodel.read import read_data_model
from vedana.etl.normalize import Normalizer, plan_tables
from vedana.etl.report import SyncReport
from vedana.sources import CELL_ERROR, Column, RawTable, Ref
from vedana.sources.cells import decode_marshal, from_api, from_sqlite, from_text, split_list, unbuffer
from vedana.sources.csv_folder import CsvFolderSource


class MemorySource:
    kind = "memory"

    def __init__(self, tables: dict[str, tuple[list[Column], list[dict[str, Any]]]]) -> None:
        self.tables = tables

    def describe(self) -> str:
        return "memory"

    def table_names(self) -> list[str]:
        return list(self.tables)

    def table(self, name: str) -> RawTable | None:
        if name not in self.tables:
            return None
        columns, rows = self.tables[name]
        return RawTable(name, {c.id: c for c in columns}, lambda: iter(enumerate(rows, start=1)))

    def state(self) -> None:
        return None

    def close(self) -> None:
        pass


def normalise(dm: DataModel, source: MemorySource) -> tuple[dict, dict, SyncReport]:
    report = SyncReport()
    plan = plan_tables(dm, source)
    report.ignored_tables = plan.ignored
    normalizer = Normalizer(dm, report)
    normalizer.prepare(plan)
    nodes = {(n.node_type, n.node_id): n.attributes for a, t in plan.anchors for n in normalizer.nodes(a, t)}
    edges: dict = {}
    for table, candidates in plan.links:
        for e in normalizer.link_table_edges(table, candidates):
            edges.setdefault((e.edge_label, e.from_node_id, e.to_node_id), e.attributes)
    for e in normalizer.foreign_key_edges():
        edges.setdefault((e.edge_label, e.from_node_id, e.to_node_id), e.attributes)
    normalizer.finish()
    return nodes, edges, report


def cols(*names: str) -> list[Column]:
    return [Column(n) for n in names]


# --- cell decoding ---------------------------------------------------------------------------


def test_marshal_blobs_decode_to_values_and_errors() -> None:
    assert decode_marshal(marshal.dumps(["L", "a", 1, 2.5, None, True], 2)) == ["L", "a", 1, 2.5, None, True]
    assert decode_marshal(marshal.dumps(("x", {"k": [1]}), 4)) == ["x", {"k": [1]}]
    any_col = Column("f", "Any", is_formula=True)
    assert from_sqlite(marshal.dumps(["E", "NameError"], 2), any_col) is CELL_ERROR
    assert from_sqlite(marshal.dumps(["L", "a", "b"], 2), any_col) == ["a", "b"]
    # Not a value we understand (a code object): empty, never text.
    assert from_sqlite(marshal.dumps(compile("1", "f", "eval")), any_col) is None
    assert from_sqlite(b"\x00garbage", Column("t", "Text")) is None


def test_sql_buffers_and_sqlite_storage() -> None:
    blob = marshal.dumps(["E", "TypeError"], 2)
    assert unbuffer({"type": "Buffer", "data": list(blob)}) == blob
    ref_list = Column("r", "RefList:Anchor_x")
    assert from_sqlite("[3,1]", ref_list) == Ref(row_ids=(3, 1), many=True)
    assert from_sqlite(None, ref_list) == Ref(many=True)
    assert from_sqlite(0, Column("r", "Ref:Anchor_x")) == Ref()
    assert from_sqlite(2, Column("r", "Ref:Anchor_x"), "label") == Ref(row_ids=(2,), labels=("label",))
    assert from_sqlite(1, Column("b", "Bool")) is True
    assert from_sqlite(1710460800, Column("d", "Date")) == "2024-03-15"
    assert from_sqlite('["a","c"]', Column("c", "ChoiceList")) == ["a", "c"]
    assert from_sqlite(42, Column("n", "Numeric")) == 42.0


def test_api_cells() -> None:
    assert from_api(["E", "NameError"], Column("f", "Any")) is CELL_ERROR
    assert from_api(["L", 1, 2], Column("r", "RefList:T")) == Ref(row_ids=(1, 2), many=True)
    assert from_api(["L", "a", "b"], Column("c", "ChoiceList")) == ["a", "b"]
    assert from_api(0, Column("r", "Ref:T")) == Ref()
    assert from_api(None, Column("r", "RefList:T")) == Ref(many=True)
    assert from_api(1710498600, Column("t", "DateTime:UTC")) == "2024-03-15T10:30:00+00:00"


def test_csv_cells() -> None:
    assert from_text("#NameError", Column("f", "Any")) is CELL_ERROR
    assert from_text("#ZeroDivisionError", Column("x")) is CELL_ERROR
    assert from_text("#hashtag", Column("x")) == "#hashtag"
    assert from_text("a, b", Column("r", "RefList:T")) == Ref(labels=("a", "b"), many=True)
    assert from_text("TRUE", Column("b", "Bool")) is True
    assert from_text("4.2", Column("n", "Numeric")) == 4.2
    assert from_text("n/a", Column("n", "Numeric")) == "n/a"  # alt text stays text
    assert split_list('x, "y, z", w') == ["x", "y, z", "w"]
    assert from_text("", Column("t", "Text")) is None


def test_csv_folder_rows_are_cells_as_from_text_reads_them(tmp_path: Path) -> None:
    """A CSV folder's rows: each cell as `from_text` reads an untyped cell (empty: None; a
    formula error: the error marker; any other text, `#hashtag` too, as it is), a column without
    a name left out, the last of a repeated column kept, a row of spaces blank."""
    header = ["id", "", "name", "name", "note"]
    records = [
        ["a", "skip", "first", "second", "plain"],
        ["b", "", "", "dup", "#DIV/0!"],
        ["c", "x", "#hashtag", "", ""],
        [" ", " ", "  ", " ", " "],
        ["d", "y", "multi\n#NameError", "z", "#NameError"],
        ["e", "w", "", "", ""],
    ]
    with (tmp_path / "Anchor_x.csv").open("w", newline="", encoding="utf-8") as out:
        csv.writer(out).writerows([header, *records])
    table = CsvFolderSource(tmp_path).table("Anchor_x")
    assert table is not None

    def by_from_text(row: list[str]) -> dict[str, Any]:
        cells: dict[str, Any] = {}
        for h, v in zip(header, row, strict=True):
            if h:
                cells[h] = from_text(v, Column(h))
        return cells

    got = dict(table.rows())
    assert got == {1: by_from_text(records[0]), 2: by_from_text(records[1]), 3: by_from_text(records[2]),
                   4: {}, 5: by_from_text(records[4]), 6: by_from_text(records[5])}  # fmt: skip
    assert got[2] == {"id": "b", "name": "dup", "note": CELL_ERROR}
    assert got[3] == {"id": "c", "name": None, "note": None}
    assert got[5] == {"id": "d", "name": "z", "note": CELL_ERROR}
    assert got[6] == {"id": "e", "name": None, "note": None}


# --- dtypes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "dtype", "expected"),
    [
        ("42", "int", 42),
        (42.0, "int", 42),
        ("4.2", "float", 4.2),
        (3, "float", 3.0),
        ("yes", "bool", True),
        ("FALSE", "bool", False),
        (0, "bool", False),
        (42.0, "str", "42"),
        (True, "str", "true"),
        (["a", "b"], "str", "a, b"),
        ("2024-03-15", "date", "2024-03-15"),
        ("15.03.2024", "date", "2024-03-15"),
        (1710460800, "date", "2024-03-15"),
        ("2024-03-15 10:30am", "datetime", "2024-03-15T10:30:00+00:00"),
        ("a, b", "list", ["a", "b"]),
        ("x", "", "x"),
        (7.5, "", 7.5),
    ],
)
def test_casts(value: Any, dtype: str, expected: Any) -> None:
    assert cast_value(value, dtype) == expected


@pytest.mark.parametrize(
    ("value", "dtype"), [("4.2", "int"), ("x", "float"), ("maybe", "bool"), (True, "int")]
)
def test_uncastable(value: Any, dtype: str) -> None:
    with pytest.raises(CastError):
        cast_value(value, dtype)


# --- the data model ---------------------------------------------------------------------------


def write(folder: Path, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")


def test_data_model_from_csv_folder(tmp_path: Path) -> None:
    write(
        tmp_path,
        "Anchors.csv",
        "noun,description,id_example,query,extra\nbook,A book.,book:1,,x\n,,,,\nauthor,,,,\nbook,dup,,,\n",
    )
    write(
        tmp_path,
        "Anchor_attributes.csv",
        "anchor,attribute_name,description,data_example,embeddable,query,dtype,embed_threshold,embed_top_n\n"
        "book,title,Title,,TRUE,,String,0.4,5\n"
        "book,pages,,,0,,Integer,,\n"
        "book,when,,,no,,timestamp,,\n"
        "book,odd,,,yes,,weird,,\n"
        "ghost,name,,,,,,,\n"
        ",,,,,,,,\n",
    )
    write(
        tmp_path,
        "Links.csv",
        "anchor1,anchor2,sentence,description,query,anchor1_link_column_name,anchor2_link_column_name,has_direction\n"
        "author,book,AUTHOR_wrote_BOOK,,,,book_author,1\n"
        "author,nobody,BROKEN,,,,,true\n",
    )

    dm, report = read_data_model(CsvFolderSource(tmp_path))

    assert [a.noun for a in dm.anchors] == ["book", "author"]
    title, pages, when, odd = dm.anchor("book").attributes
    assert (title.embeddable, title.dtype, title.embed_threshold, title.embed_top_n) == (True, "str", 0.4, 5)
    assert (pages.embeddable, pages.dtype, when.dtype, odd.dtype, odd.embeddable) == (
        False,
        "int",
        "datetime",
        "str",
        True,
    )
    wrote = dm.link("AUTHOR_wrote_BOOK")
    assert (wrote.has_direction, wrote.anchor2_link_column_name) == (True, "book_author")
    assert report.skipped == {
        "Anchors: blank row": 1,
        "Anchors: duplicate noun": 1,
        "Anchor_attributes: blank row": 1,
        "Anchor_attributes: unknown anchor": 1,
        "Anchor_attributes: unknown dtype 'weird' read as str": 1,
        "Links: unknown anchor1/anchor2": 1,
    }
    # Optional tables may be missing.
    assert report.missing_tables == ["Link_attributes", "Queries", "Prompts", "ConversationLifecycle"]
    assert dm.queries == [] and dm.prompts == []


# --- nodes ----------------------------------------------------------------------------------


def test_node_id_precedence_and_fallback() -> None:
    dm = DataModel(
        anchors=[
            Anchor("a", attributes=(Attribute("name"),)),
            Anchor("b", attributes=(Attribute("name"),)),
            Anchor("c", attributes=(Attribute("name"),)),
        ]
    )
    source = MemorySource(
        {
            # <noun>_id wins over node_id; an empty <noun>_id falls back to node_id.
            "Anchor_a": (cols("a_id", "node_id", "name"), [
                {"a_id": "a1", "node_id": "n1", "name": "x"},
                {"a_id": "", "node_id": "n2", "name": "y"},
                {"a_id": "", "node_id": "", "name": "no id"},
            ]),
            # no id column at all: <noun>:<row id>
            "Anchor_b": (cols("name"), [{"name": "first"}, {"name": None}, {"name": "third"}]),
            # numeric ids read as text without ".0"
            "Anchor_c": ([Column("c_id", "Numeric"), Column("name")], [{"c_id": 7.0, "name": "seven"}]),
        }
    )  # fmt: skip
    nodes, _, report = normalise(dm, source)

    assert set(nodes) == {("a", "a1"), ("a", "n2"), ("b", "b:1"), ("b", "b:3"), ("c", "7")}
    assert report.nodes["a"].skipped == {"missing id": 1}
    assert report.nodes["b"].skipped == {"blank row": 1}


def test_only_described_columns_and_no_helpers() -> None:
    dm = DataModel(
        anchors=[Anchor("a", attributes=(Attribute("name"), Attribute("manualSort"), Attribute("id")))]
    )
    source = MemorySource(
        {"Anchor_a": (cols("a_id", "name", "extra", "manualSort", "gristHelper_Display"), [
            {"a_id": "1", "name": "x", "extra": "dropped", "manualSort": 1, "gristHelper_Display": "h"},
        ])}
    )  # fmt: skip
    nodes, _, report = normalise(dm, source)
    assert nodes == {("a", "1"): {"name": "x"}}
    assert report.nodes["a"].dropped_columns == ["extra"]


def test_tables_match_and_others_are_ignored() -> None:
    dm = DataModel(
        anchors=[Anchor("person"), Anchor("city")],
        links=[Link("LIVES_IN", "person", "city", has_direction=True)],
    )
    source = MemorySource(
        {
            "Anchor_Person": (cols("person_id"), [{"person_id": "p"}]),  # noun matched ignoring case
            "Anchor_city": (cols("city_id"), [{"city_id": "c"}]),
            "Anchor_planet": (cols("planet_id"), [{"planet_id": "x"}]),
            "Link_person_city": (
                cols("from_node_id", "to_node_id"),
                [{"from_node_id": "p", "to_node_id": "c"}],
            ),
            "Cities": (cols("city_id"), [{"city_id": "z"}]),
            "Link_attributes": (cols("link", "attribute_name"), []),
        }
    )
    nodes, edges, report = normalise(dm, source)
    assert set(nodes) == {("person", "p"), ("city", "c")}
    assert edges == {("LIVES_IN", "p", "c"): {}}
    assert report.ignored_tables == ["Anchor_planet", "Cities", "Link_attributes"]


# --- edges ----------------------------------------------------------------------------------


def test_undirected_self_link_and_reverse_edges() -> None:
    dm = DataModel(
        anchors=[Anchor("p")],
        links=[Link("KNOWS", "p", "p", has_direction=False, attributes=(Attribute("since", dtype="int"),))],
    )
    source = MemorySource(
        {
            "Anchor_p": (cols("p_id"), [{"p_id": "x"}, {"p_id": "y"}]),
            "Link_knows": (cols("from_node_id", "to_node_id", "edge_label", "since"), [
                {"from_node_id": "x", "to_node_id": "y", "edge_label": "KNOWS", "since": "2001"},
                {"from_node_id": "x", "to_node_id": "x", "edge_label": "KNOWS"},
            ]),
        }
    )  # fmt: skip
    _, edges, _ = normalise(dm, source)
    assert edges == {
        ("KNOWS", "x", "y"): {"since": 2001},
        ("KNOWS", "y", "x"): {"since": 2001},
        ("KNOWS", "x", "x"): {},  # a self-loop exists once
    }


def test_csv_folder_references_by_id_then_first_column() -> None:
    dm = DataModel(
        anchors=[Anchor("book"), Anchor("author")],
        links=[Link("WROTE", "author", "book", has_direction=True, anchor2_link_column_name="book_authors")],
    )
    source = MemorySource(
        {
            "Anchor_author": (cols("author_name", "author_id"), [
                {"author_name": "Ann", "author_id": "a1"},
                {"author_name": "Bob", "author_id": "a2"},
            ]),
            # by node id, by the first column's value, and one that matches nothing
            "Anchor_book": (cols("book_id", "book_authors"), [{"book_id": "b1", "book_authors": "a1, Bob, Zed"}]),
        }
    )  # fmt: skip
    _, edges, report = normalise(dm, source)
    assert edges == {("WROTE", "a1", "b1"): {}, ("WROTE", "a2", "b1"): {}}
    assert report.edges["WROTE"].skipped == {"unresolved reference": 1}
    assert report.edges["WROTE"].read == 3


def test_missing_link_column_is_noted() -> None:
    dm = DataModel(
        anchors=[Anchor("a"), Anchor("b")],
        links=[Link("A_B", "a", "b", anchor1_link_column_name="a_b_ref")],
    )
    source = MemorySource({"Anchor_a": (cols("a_id"), [{"a_id": "1"}]), "Anchor_b": (cols("b_id"), [])})
    _, edges, report = normalise(dm, source)
    assert edges == {}
    assert report.notes == ["Anchor_a has no column 'a_b_ref' named by link A_B"]


def test_formula_errors_are_empty_not_text() -> None:
    dm = DataModel(anchors=[Anchor("a", attributes=(Attribute("f"), Attribute("g", dtype="int")))])
    source = MemorySource(
        {"Anchor_a": (cols("a_id", "f", "g"), [{"a_id": "1", "f": CELL_ERROR, "g": CELL_ERROR}])}
    )
    nodes, _, report = normalise(dm, source)
    assert nodes == {("a", "1"): {}}
    assert report.nodes["a"].cells == {"formula error read as empty": 2}
