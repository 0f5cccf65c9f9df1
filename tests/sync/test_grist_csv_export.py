"""`vedana sync --csv` (Grist's CSV export) leaves the same staging as the REST API.

The export shows display text (grist-core's ValueFormatter): a Ref without a shown column as
`Anchor_author[1]`, a formula error as `#DIV/0!`, a DateTime as `2024-03-15 6:30am` in its time
zone, a Numeric with at most ten decimals, a Date or Int by its widget format. The source reads
those columns' stored values (`/sql`, else `/records`) beside the download; only when Grist
refuses both does it read the shown text, and then it says what that lost, once per column.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from standins.fake_grist import FakeGrist
from standins.grist_files import Attr, CellError, Col, Doc, LinkSpec, Table, model_doc
from support.sync_kb import API_KEY, blank_staging, live_edges, live_nodes
from vedana.cli.app import app
from vedana.config import reset_settings
from vedana.errors import GristError

MODEL_ID, DATA_ID = "shelfModelDoc1", "shelfDataDoc01"
ADDED = datetime(2024, 3, 15, 10, 30, 5, 250000, tzinfo=UTC)  # 6:30:05.25am in New York


def shelf_model() -> Doc:
    book = ["book_id", "title", "price", "pages", "in_print", "published", "published_eu", "added"]
    dtypes = ["str", "str", "float", "int", "bool", "date", "date", "datetime"]
    return model_doc(
        MODEL_ID,
        ["book", "author", "genre"],
        [Attr("book", n, d) for n, d in zip(book, dtypes, strict=True)]
        + [
            Attr("book", "per_page", "float"),
            Attr("book", "blurb", "str"),
            Attr("book", "shelf", "str"),
            Attr("book", "note", "str"),
            Attr("author", "author_id", "str"),
            Attr("author", "author_name", "str"),
            Attr("genre", "genre_name", "str"),
        ],
        [
            LinkSpec("BOOK_by_AUTHOR", "book", "author", True, anchor1_link_column_name="author"),
            LinkSpec("BOOK_in_GENRE", "book", "genre", True, anchor1_link_column_name="genres"),
            LinkSpec("AUTHOR_writes_GENRE", "author", "genre", True),
        ],
        link_attributes=[Attr("AUTHOR_writes_GENRE", "weight", "float")],
    )


def shelf_data() -> Doc:
    book_cols = [
        Col("book_id"),
        Col("title", label="Title"),  # the export is asked for ids as its header, not labels
        Col("price", "Numeric"),
        Col("pages", "Int", options={"numMode": "decimal"}),  # shown as 1,234
        Col("in_print", "Bool"),
        Col("published", "Date"),
        Col("published_eu", "Date", options={"dateFormat": "DD.MM.YYYY"}),
        Col("added", "DateTime:America/New_York"),
        Col("per_page", "Numeric", formula="$price / $pages"),
        Col("blurb", "Any", formula="$title.upper()"),
        Col("author", "Ref:Anchor_author"),  # no shown column: exported as Anchor_author[1]
        Col("genres", "RefList:Anchor_genre"),
        Col("shelf", "Ref:Shelves"),  # an attribute: shown as Shelves[2] by both paths
        Col("note"),
    ]
    books = [
        {
            "book_id": "b1",
            "title": "Dune",
            "price": 1 / 3,
            "pages": 1234,
            "in_print": True,
            "published": date(1965, 8, 1),
            "published_eu": date(2024, 3, 1),
            "added": ADDED,
            "per_page": 1 / 3 / 1234,
            "blurb": "DUNE",
            "author": 1,
            "genres": [3, 7],
            "shelf": 2,
            "note": "#DIV/0!",  # typed by a person into a text column: text, not an error
        },
        {
            "book_id": "b2",
            "title": "Emma",
            "price": 12.5,
            "pages": 0,
            "in_print": False,
            "per_page": CellError("ZeroDivisionError"),
            "blurb": CellError("NameError"),
            "author": 2,
            "genres": [7],
        },
    ]
    return Doc(
        DATA_ID,
        [
            Table("Anchor_book", book_cols, books),
            Table(
                "Anchor_author",
                [Col("author_id"), Col("author_name")],
                [{"author_id": "a1", "author_name": "Herbert"}, {"author_id": "a2", "author_name": "Austen"}],
            ),
            # No id column: node ids are genre:<row id>, and these row ids have gaps.
            Table(
                "Anchor_genre", [Col("genre_name")], [{"genre_name": "sf"}, {"genre_name": "novel"}], [3, 7]
            ),
            Table(
                "Link_author_genre",
                [
                    Col("from_node_id", "Ref:Anchor_author"),
                    Col("to_node_id", "Ref:Anchor_genre"),
                    Col("edge_label"),
                    Col("weight", "Numeric"),
                ],
                [
                    {
                        "from_node_id": 1,
                        "to_node_id": 3,
                        "edge_label": "AUTHOR_writes_GENRE",
                        "weight": 0.1 + 0.2,
                    },
                    {"from_node_id": 2, "to_node_id": 7, "edge_label": "AUTHOR_writes_GENRE", "weight": 2.0},
                ],
            ),
            Table("Shelves", [Col("shelf_name")], [{"shelf_name": "top"}, {"shelf_name": "bottom"}]),
        ],
    )


@pytest.fixture
def shelf() -> FakeGrist:
    with FakeGrist(shelf_model(), shelf_data(), api_key=API_KEY) as server:
        yield server


def sync_cli(fake: FakeGrist, monkeypatch: pytest.MonkeyPatch, *flags: str) -> dict[str, Any]:
    """`vedana sync --json` on the stand-in server, as a user would run it."""
    for name, value in {
        "GRIST_SERVER_URL": fake.url,
        "GRIST_API_KEY": API_KEY,
        "GRIST_DATA_MODEL_DOC_ID": MODEL_ID,
        "GRIST_DATA_DOC_ID": DATA_ID,
    }.items():
        monkeypatch.setenv(name, value)
    reset_settings()
    result = CliRunner().invoke(app, ["sync", "--json", *flags])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def counts(report: dict[str, Any]) -> dict[str, Any]:
    """What the report says was read, skipped and found in cells, per node and edge type."""
    keys = ("read", "loaded", "skipped", "cells", "dropped_columns")
    return {
        kind: {name: {k: stats[k] for k in keys} for name, stats in report[kind].items()}
        for kind in ("nodes", "edges")
    }


def test_csv_export_gives_the_same_staging_as_the_api(
    shelf: FakeGrist, pg_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = sync_cli(shelf, monkeypatch)
    nodes, edges = live_nodes(pg_engine), live_edges(pg_engine)
    blank_staging(pg_engine)

    csv = sync_cli(shelf, monkeypatch, "--csv")

    assert csv["sources"]["data"].endswith("(CSV export)")
    assert shelf.paths("/download/csv?tableId=Anchor_book&header=colId")
    assert (live_nodes(pg_engine), live_edges(pg_engine)) == (nodes, edges)
    assert counts(csv) == counts(api)
    assert csv["notes"] == api["notes"] == []
    # What the export alone would have lost, carried whole.
    dune = nodes[("book", "b1")]
    assert dune["price"] == 1 / 3 and dune["pages"] == 1234 and dune["in_print"] is True
    assert (dune["published"], dune["published_eu"]) == ("1965-08-01", "2024-03-01")
    assert dune["added"] == "2024-03-15T10:30:05.250000+00:00"
    assert (dune["shelf"], dune["note"], dune["blurb"]) == ("Shelves[2]", "#DIV/0!", "DUNE")
    assert nodes[("book", "b2")] == {
        "book_id": "b2", "title": "Emma", "price": 12.5, "pages": 0, "in_print": False,
    }  # fmt: skip
    assert csv["nodes"]["book"]["cells"] == {"formula error read as empty": 2}
    # Edges of Ref/RefList columns that show no column, and of a link table of such Refs.
    assert set(edges) == {
        ("BOOK_by_AUTHOR", "b1", "a1"),
        ("BOOK_by_AUTHOR", "b2", "a2"),
        ("BOOK_in_GENRE", "b1", "genre:3"),
        ("BOOK_in_GENRE", "b1", "genre:7"),
        ("BOOK_in_GENRE", "b2", "genre:7"),
        ("AUTHOR_writes_GENRE", "a1", "genre:3"),
        ("AUTHOR_writes_GENRE", "a2", "genre:7"),
    }
    assert edges[("AUTHOR_writes_GENRE", "a1", "genre:3")] == {"weight": 0.1 + 0.2}

    # Either way round, a full re-read finds nothing to change.
    again = sync_cli(shelf, monkeypatch, "--full")
    assert not again["changed"], again


def test_where_sql_is_refused_the_records_endpoint_stands_in(
    shelf: FakeGrist, pg_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user without full read access gets 403 from `/sql` (grist-core: "insufficient
    document access"); `/records` gives the same stored values."""
    sync_cli(shelf, monkeypatch)
    nodes, edges = live_nodes(pg_engine), live_edges(pg_engine)
    blank_staging(pg_engine)
    shelf.fail("/sql", status=403, times=1000)

    report = sync_cli(shelf, monkeypatch, "--csv")

    assert (live_nodes(pg_engine), live_edges(pg_engine)) == (nodes, edges)
    assert report["notes"] == []
    assert shelf.paths("/tables/Anchor_book/records?hidden=true")


def test_with_no_stored_values_the_shown_text_is_read_and_the_losses_said_once(
    shelf: FakeGrist, pg_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    shelf.fail("/sql", status=403, times=1000)
    shelf.fail("/records", status=403, times=1000)

    report = sync_cli(shelf, monkeypatch, "--csv")

    nodes, edges = live_nodes(pg_engine), live_edges(pg_engine)
    dune = nodes[("book", "b1")]
    # Errors are empty, never text; a date-time read as shown, to the minute, in UTC.
    assert "per_page" not in nodes[("book", "b2")] and "blurb" not in nodes[("book", "b2")]
    assert report["nodes"]["book"]["cells"] == {"formula error read as empty": 2}
    assert dune["added"] == "2024-03-15T10:30:00+00:00"
    assert (dune["price"], dune["pages"], dune["published_eu"]) == (0.3333333333, 1234, "2024-03-01")
    assert (dune["note"], dune["shelf"]) == ("#DIV/0!", "Shelves[2]")
    # `Anchor_author[1]` names the row id, which holds while the rows have no gaps.
    assert ("BOOK_by_AUTHOR", "b1", "a1") in edges and ("BOOK_by_AUTHOR", "b2", "a2") in edges
    notes = [n for n in report["notes"] if n.startswith("Anchor_book")]
    lost = ["price", "per_page", "pages", "added", "blurb", "author", "genres", "shelf", "published_eu"]
    assert sorted(n.split(" ")[0] for n in notes) == sorted(
        ["Anchor_book:", *(f"Anchor_book.{c}" for c in lost)]
    )
    assert len(report["notes"]) == len(set(report["notes"]))
    added = next(n for n in notes if n.startswith("Anchor_book.added"))
    assert added.startswith(
        "Anchor_book.added (DateTime:America/New_York): read from the CSV export as shown"
    )


def test_an_edit_between_the_export_and_the_stored_values_stops_the_sync(
    shelf: FakeGrist, pg_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows are matched by position (the export has no row ids): an edit landing between the two
    reads must fail the sync with one clear line, never pair one row's cells with another's."""
    books = shelf.docs[DATA_ID].table("Anchor_book")
    assert books is not None
    # The data document's first /sql read is Anchor_book's stored values; its export comes next.
    shelf.after(f"/api/docs/{DATA_ID}/sql", lambda: books.rows[0].update(book_id="b1-renamed"))
    for name, value in {"GRIST_SERVER_URL": shelf.url, "GRIST_API_KEY": API_KEY}.items():
        monkeypatch.setenv(name, value)
    reset_settings()

    result = CliRunner().invoke(app, ["sync", "--csv", "--data-model", MODEL_ID, "--data", DATA_ID])

    # `main()` prints a GristError as its one `error:` line (CliRunner hands the error back).
    assert isinstance(result.exception, GristError), result.output
    assert str(result.exception) == (
        f"the CSV export of 'Anchor_book' and its stored values from {shelf.url} disagree at "
        "line 2: the document changed while it was read; sync again"
    )
    # Nothing was written; the next sync, on the settled document, goes through.
    assert live_nodes(pg_engine) == {}
    assert sync_cli(shelf, monkeypatch, "--csv")["nodes"]["book"]["loaded"] == 2


def test_check_lint_says_what_the_export_lost(shelf: FakeGrist, monkeypatch: pytest.MonkeyPatch) -> None:
    shelf.fail("/sql", status=403, times=1000)
    shelf.fail("/records", status=403, times=1000)
    for name, value in {"GRIST_SERVER_URL": shelf.url, "GRIST_API_KEY": API_KEY}.items():
        monkeypatch.setenv(name, value)
    reset_settings()

    result = CliRunner().invoke(
        app, ["check", "--only", "lint", "--csv", "--data-model", MODEL_ID, "--data", DATA_ID, "--json"]
    )

    problems = json.loads(result.stdout)["problems"]
    lost = [p for p in problems if p["code"] == "lint.source-loss"]
    assert lost and all(p["severity"] == "warning" for p in lost)
    assert len({p["message"] for p in lost}) == len(lost)  # once each
    assert any(p["message"].startswith("Anchor_book.added (DateTime:America/New_York)") for p in lost)
