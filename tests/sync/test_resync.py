"""A re-sync after an edit normalises only the changed rows (`etl/resync.py`), and its staging and
report equal what the full path (`--full`) makes of the same edit from the same previous state.

Each case: sync a generated `people` knowledge base (CSV folder), edit it, sync again (the
incremental path where it applies); then from a blank staging the same first sync, the same edit,
and `--full`. Staging rows (keys, attributes, hashes, tombstones) and every report count must match.
"""

from __future__ import annotations

import csv
import json
import shutil
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from bench.edit import edit_csv_folder
from bench.generate import generate
from support.sync_kb import blank_staging, report_counts, staging_state
from vedana.config import Settings
from vedana.etl.sync import SyncReport, sync
from vedana.sources.base import row_digest
from vedana.stores import tables as t

Edit = Callable[[Path], None]


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, list(reader)


def _write(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def _change(table: str, fn: Callable[[list[str], list[list[str]]], list[list[str]]]) -> Edit:
    def edit(data: Path) -> None:
        path = data / f"{table}.csv"
        header, rows = _rows(path)
        _write(path, header, fn(header, rows))

    return edit


def _set(table: str, line: int, column: str, value: str) -> Edit:
    def fn(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        rows[line - 1][header.index(column)] = value
        return rows

    return _change(table, fn)


def _both(*edits: Edit) -> Edit:
    def edit(data: Path) -> None:
        for one in edits:
            one(data)

    return edit


def _one_percent(data: Path) -> None:
    edit_csv_folder(data, "people", 0.05)


def _run(
    settings: Settings, engine: Engine, kb: Path, tmp: Path, edit: Edit, *, full: bool
) -> tuple[SyncReport, dict[str, Any]]:
    blank_staging(engine)
    work = tmp / "kb"  # the same path both ways: the report names it
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(kb, work)
    sync(settings, data_model=work / "model", data=work / "data")
    edit(work / "data")
    report = sync(settings, data_model=work / "model", data=work / "data", full=full)
    return report, staging_state(engine)


def _resyncs_end_as_full_ones(
    settings: Settings,
    engine: Engine,
    kb: Path,
    tmp: Path,
    edits: list[Edit],
    *,
    after_resync: Callable[[], None] = lambda: None,
) -> None:
    """A first sync, then each edit and a sync, once incrementally and once with --full (each
    from the same copy of `kb`): every incremental re-sync takes that path, and both end in the
    same staging with the same counts. `after_resync` runs after each incremental one."""

    def run(full: bool) -> tuple[list[SyncReport], dict[str, Any]]:
        blank_staging(engine)
        work = tmp / "kb"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(kb, work)
        sync(settings, data_model=work / "model", data=work / "data")
        reports = []
        for edit in edits:
            edit(work / "data")
            reports.append(sync(settings, data_model=work / "model", data=work / "data", full=full))
            if not full:
                after_resync()
        return reports, staging_state(engine)

    quick, quick_state = run(False)
    slow, slow_state = run(True)
    assert quick_state == slow_state
    assert [report_counts(r) for r in quick] == [report_counts(r) for r in slow]
    assert all(p.startswith("incremental") for r in quick for p in r.paths.values())


def _move(header: list[str], rows: list[list[str]]) -> list[list[str]]:
    """The third person lives in another city now."""
    column = header.index("person_city")
    cities = sorted({r[column] for r in rows if r[column]})
    rows[2][column] = next(c for c in cities if c != rows[2][column])
    return rows


def _add_interest(header: list[str], rows: list[list[str]]) -> list[list[str]]:
    """The first person takes up an interest they did not have."""
    person = rows[0][0]
    theirs = {r[1] for r in rows if r[0] == person}
    new = next(r[1] for r in rows if r[1] not in theirs)
    added = {"from_node_id": person, "to_node_id": new, "edge_label": "PERSON_has_INTEREST"}
    return [*rows, [added.get(h, rows[0][i]) for i, h in enumerate(header)]]


_new_city = _change("Anchor_city", lambda h, rows: [*rows, ["city:new", "Newtown", "Florin"]])


def _new_person(data: Path) -> None:
    """A person who lives in the new city, added at the end."""

    def fn(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        person = dict(zip(header, rows[0], strict=True))
        person.update(person_id="person:new", person_name="New Comer", person_city="city:new")
        return [*rows, [person[h] for h in header]]

    _change("Anchor_person", fn)(data)


def _new_interests(data: Path) -> None:
    """Two interests for the new person, added at the end."""

    def fn(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        added = []
        for row in rows[:2]:
            link = dict(zip(header, row, strict=True))
            link["from_node_id"] = "person:new"
            added.append([link[h] for h in header])
        return [*rows, *added]

    _change("Link_person_has_interest", fn)(data)


def _drop_person(which: int, *, with_links: bool) -> Edit:
    """Person `which` (a row index) leaves the club; `with_links`: their interests go too."""

    def edit(data: Path) -> None:
        header, rows = _rows(data / "Anchor_person.csv")
        person = rows.pop(which)[header.index("person_id")]
        _write(data / "Anchor_person.csv", header, rows)
        if with_links:
            _change("Link_person_has_interest", lambda h, rows: [r for r in rows if person not in r[:2]])(
                data
            )

    return edit


def _insert_person(header: list[str], rows: list[list[str]]) -> list[list[str]]:
    """A new person in the middle of the file (a sorted export): every later line moves down."""
    person = dict(zip(header, rows[0], strict=True))
    person.update(person_id="person:middle", person_name="Mid Dle")
    return [*rows[:20], [person[h] for h in header], *rows[20:]]


def _move_and_rename(header: list[str], rows: list[list[str]]) -> list[list[str]]:
    """One person's line moved to the end, another person renamed."""
    rows = [*rows[:5], *rows[6:], rows[5]]
    rows[20][header.index("person_name")] = "Re Named"
    return rows


CASES: dict[str, tuple[Edit, bool]] = {
    # edit -> whether the incremental path applies
    "text and numbers in every table": (_one_percent, True),
    "a person moves to another city (a link column)": (_change("Anchor_person", _move), True),
    "link rows deleted": (_change("Link_person_has_interest", lambda h, rows: rows[:5] + rows[9:]), True),
    "link rows added": (_change("Link_person_has_interest", _add_interest), True),
    "an id changed": (_set("Anchor_person", 2, "person_id", "person:renamed"), False),
    "a referenced anchor's id changed": (_set("Anchor_city", 1, "city_id", "city:moved"), False),
    "a duplicate id made": (_set("Anchor_interest", 4, "interest_id", "interest:0001"), False),
    "anchor rows deleted": (_change("Anchor_interest", lambda h, rows: rows[:-2]), False),
    # Nothing else names the last person once their interests go (their city is theirs to name).
    "a person and their interests deleted": (_drop_person(-1, with_links=True), True),
    "a person deleted whose interests stay": (_drop_person(-1, with_links=False), False),
    # A CSV line that moved is the row it was (found by its digest), when its key does not matter.
    "a person inserted mid-file": (_change("Anchor_person", _insert_person), True),
    "a person and their interests deleted mid-file": (_drop_person(10, with_links=True), True),
    "a person's line moved to the end, another renamed": (_change("Anchor_person", _move_and_rename), True),
    # A file sorted anew keeps few lines in their order: one whole reading does it.
    "link rows in reverse order, one noted anew": (
        _both(
            _change("Link_person_has_interest", lambda h, rows: rows[::-1]),
            _set("Link_person_has_interest", 3, "note", "Anew."),
        ),
        False,
    ),
    # A CSV folder's references name ids, never display values: a copy of another city's name
    # and country takes no reference from it.
    "anchor rows added": (
        _change("Anchor_city", lambda h, rows: [*rows, ["city:new", *rows[0][1:]]]),
        True,
    ),
    "a person added in a new city, with interests": (_both(_new_city, _new_person, _new_interests), True),
    "an added city repeats a city's id": (
        _both(
            _change("Anchor_city", lambda h, rows: [*rows, [rows[1][0], "Elsewhere", "Nowhere"]]),
            _set("Anchor_person", 2, "person_name", "Someone Else"),  # (the duplicate itself is skipped)
        ),
        False,
    ),
    "an added city has an interest's id": (
        _change("Anchor_city", lambda h, rows: [*rows, ["interest:0001", "Elsewhere", "Nowhere"]]),
        False,
    ),
    # A record over two lines: the file's lines no longer stand for its rows.
    "a quoted field over two lines": (_set("Anchor_person", 3, "person_name", "Two\nLines"), False),
    # The link table no longer contributes to its link: the report's table list changes.
    "every link row deleted": (_change("Link_person_has_interest", lambda h, rows: []), False),
    "a link row now dangles": (
        _set("Link_person_has_interest", 2, "to_node_id", "interest:none"),
        False,
    ),
    "text edits and a deleted link row together": (
        _both(_one_percent, _change("Link_person_has_interest", lambda h, rows: rows[1:])),
        True,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_resync_equals_full(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path, case: str
) -> None:
    edit, incremental = CASES[case]
    quick, quick_state = _run(settings, pg_engine, kb, tmp_path, edit, full=False)
    slow, slow_state = _run(settings, pg_engine, kb, tmp_path, edit, full=True)

    assert quick_state == slow_state
    assert report_counts(quick) == report_counts(slow)
    assert quick.changed
    paths = set(quick.paths.values())
    assert all(p.startswith("full: --full") for p in slow.paths.values())
    if incremental:
        assert all(p.startswith("incremental: ") for p in paths), paths
    else:
        assert all(p.startswith("full: ") for p in paths), paths


def test_the_edit_path_touches_only_changed_rows(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    report, _ = _run(
        settings,
        pg_engine,
        kb,
        tmp_path,
        _set("Link_person_has_interest", 1, "skill_level", "guru"),
        full=False,
    )
    assert report.paths["Link_person_has_interest"].startswith("incremental: 1 changed rows of ")
    assert report.paths["Anchor_person"].startswith("incremental: 0 changed rows of ")
    edges = report.to_dict()["totals"]["edges"]
    assert (edges["written"], edges["deleted"]) == (2, 0)  # an undirected link: two staging rows
    assert "paths" in report.to_dict()


def test_a_failed_resync_keeps_the_previous_rows(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A sync interrupted after its diff and the kept rows were written (here by its progress
    callback, as Ctrl-C would) rolls both back: the next sync still finds the edit."""
    blank_staging(pg_engine)
    work = tmp_path / "kb"
    shutil.copytree(kb, work)
    sync(settings, data_model=work / "model", data=work / "data")
    before = staging_state(pg_engine)
    _set("Anchor_person", 1, "person_name", "Changed Name")(work / "data")

    def interrupt(stage: str, done: int, total: int | None) -> None:
        if stage == "write staging" and done == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sync(settings, data_model=work / "model", data=work / "data", on_progress=interrupt)
    assert staging_state(pg_engine) == before

    again = sync(settings, data_model=work / "model", data=work / "data")
    assert again.paths["Anchor_person"].startswith("incremental: 1 changed rows of ")
    assert again.to_dict()["totals"]["nodes"]["written"] == 1


def test_the_cli_says_which_path_ran(pg_engine: Engine, kb: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from vedana.cli.app import app
    from vedana.config import reset_settings

    blank_staging(pg_engine)
    work = tmp_path / "kb"
    shutil.copytree(kb, work)
    where = ["--data-model", str(work / "model"), "--data", str(work / "data")]

    def invoke(*args: str) -> Any:
        reset_settings()
        return CliRunner().invoke(app, ["sync", *where, *args])

    first = invoke()
    assert first.exit_code == 0, first.output
    assert "rows" not in first.stdout.splitlines()[-2]  # a first sync says nothing of paths
    _set("Anchor_city", 1, "city_name", "Renamed")(work / "data")
    text = invoke().stdout
    assert "rows Anchor_city: incremental: 1 changed rows of " in text
    assert "rows Link_person_has_interest: incremental: 0 changed rows of " in text
    _set("Anchor_city", 1, "city_name", "Renamed again")(work / "data")
    report = json.loads(invoke("--json", "--full").stdout)
    assert set(report["paths"].values()) == {"full: --full"}
    assert report["totals"]["nodes"]["written"] == 1


def test_edits_one_after_another(settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path) -> None:
    """Each re-sync builds on what the previous one kept (the rows patched, then packed anew):
    three edits in a row end where three full syncs of the same edits do."""
    edits = [
        _both(_set("Anchor_person", 4, "person_name", "First"), _change("Anchor_person", _move)),
        _change("Link_person_has_interest", lambda h, rows: rows[:-3]),
        _both(_change("Anchor_person", _move), _one_percent),  # the same person moves again
        _set("Link_person_has_interest", 7, "skill_level", "guru"),
    ]

    _resyncs_end_as_full_ones(settings, pg_engine, kb, tmp_path, edits)


def test_rows_appended_are_added_to_what_was_kept(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file that grew at its end adds its new rows to the kept fields in Postgres, beside the
    patch of the rows edited before (not packed anew), and the re-syncs after it build on that:
    an edit, an append, an append with an edit, an edit of an appended row all end where full
    syncs of the same edits do."""
    from vedana.stores import sync_rows

    monkeypatch.setattr(sync_rows, "_RUN_ROWS", 7)  # the rows added span runs of their own
    edits = [
        _set("Anchor_person", 4, "person_name", "First"),
        _both(_new_city, _new_person, _new_interests),
        _both(_add_interest_at_end, _set("Anchor_person", 6, "person_name", "Second")),
        _set("Link_person_has_interest", -1, "skill_level", "guru"),  # a row appended before
    ]
    patches: list[dict[str, Any]] = []

    def kept_patches() -> None:
        with pg_engine.connect() as conn:
            patches.append(dict(conn.exec_driver_sql("SELECT table_name, patch FROM sync_rows").all()))

    _resyncs_end_as_full_ones(settings, pg_engine, kb, tmp_path, edits, after_resync=kept_patches)
    # The first edit's patch of Anchor_person is still there after the append: added to, not repacked.
    first = json.loads(patches[0]["Anchor_person"])
    assert first and json.loads(patches[1]["Anchor_person"])[: len(first)] == first


def _add_interest_at_end(data: Path) -> None:
    _change("Link_person_has_interest", _add_interest)(data)


@pytest.mark.parametrize("inline", [True, False], ids=["read whole", "streamed as runs"])
def test_kept_rows_with_rows_added_come_back_whole(
    pg_engine: Engine, monkeypatch: pytest.MonkeyPatch, inline: bool
) -> None:
    """Rows added after the stored ones (`TableRows.stored`) are stored by growing the fields:
    keys, both digest halves and outcomes read back as the whole table, the patch kept."""
    from vedana.stores import sync_rows

    monkeypatch.setattr(sync_rows, "_RUN_ROWS", 3)
    if not inline:
        monkeypatch.setattr(sync_rows, "_INLINE", -1)
    before = ["a", "", "b␞ü", "c", ""]
    n = len(before)
    first = sync_rows.TableRows(
        array("q", range(1, n + 1)), array("I", range(10, 10 + n)), array("I", range(20, 20 + n)), before
    )
    with pg_engine.begin() as conn:
        sync_rows.save_rows(conn, "src", {}, {"Anchor_a": first})
    with pg_engine.connect() as conn:
        _, kept = sync_rows.load_rows(conn, "src")
    rows = kept["Anchor_a"]
    outcomes = rows.outcomes
    assert isinstance(outcomes, sync_rows.KeptOutcomes) and rows.patched == set()
    outcomes = outcomes.extended(4)
    outcomes[1] = "edited"
    for i, text in zip(range(n, n + 4), ["new 1", "", "日本", "new 4"], strict=True):
        outcomes[i] = text
    grown = sync_rows.TableRows(
        array("q", [*rows.keys, 11, 12, 13, 14]),
        array("I", [*rows.low[:1], 99, *rows.low[2:], 31, 32, 33, 34]),
        array("I", [*rows.high, 41, 42, 43, 44]),
        outcomes,
        patched={1},
        stored=n,
    )
    with pg_engine.begin() as conn:
        sync_rows.save_rows(conn, "src", {}, {"Anchor_a": grown})
    with pg_engine.connect() as conn:
        _, back = sync_rows.load_rows(conn, "src")
    got = back["Anchor_a"]
    assert list(got.keys) == [1, 2, 3, 4, 5, 11, 12, 13, 14]
    assert list(got.low) == [10, 99, 12, 13, 14, 31, 32, 33, 34]
    assert list(got.high) == [20, 21, 22, 23, 24, 41, 42, 43, 44]
    assert list(got.outcomes) == ["a", "edited", "b␞ü", "c", "", "new 1", "", "日本", "new 4"]
    assert got.patched == {1}  # still a patch over the stored rows


def test_an_added_person_a_link_row_named_before_resyncs_whole(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """The last sync could not resolve a link row's person; that person is added now: the row
    makes an edge at last, which only a whole reading finds (the report says why)."""
    dangling = tmp_path / "dangling"
    shutil.copytree(kb, dangling)
    _new_interests(dangling / "data")  # rows for person:new, who is not there yet
    quick, quick_state = _run(settings, pg_engine, dangling, tmp_path, _new_person, full=False)
    slow, slow_state = _run(settings, pg_engine, dangling, tmp_path, _new_person, full=True)
    assert quick_state == slow_state and report_counts(quick) == report_counts(slow)
    assert any(e[2] == "person:new" and e[7] == "False" for e in quick_state["edges"])  # edges made now
    assert all(p.startswith("full: rows with ids were added and ") for p in quick.paths.values()), quick.paths


def test_a_quoted_csv_is_compared_row_by_row(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A file whose lines are not all whole records (a quoted field) is read and hashed row by
    row; only the edited row counts as changed."""
    quoted = tmp_path / "quoted"
    shutil.copytree(kb, quoted)
    _set("Anchor_person", 2, "person_name", 'Smith, "Jo"')(quoted / "data")
    edit = _set("Anchor_person", 5, "person_name", "Someone Else")
    quick, quick_state = _run(settings, pg_engine, quoted, tmp_path, edit, full=False)
    slow, slow_state = _run(settings, pg_engine, quoted, tmp_path, edit, full=True)
    assert quick_state == slow_state and report_counts(quick) == report_counts(slow)
    assert quick.paths["Anchor_person"].startswith("incremental: 1 changed rows of ")


def _cities_shown_by_node_id(data: Path) -> None:
    """Anchor_city gets a `node_id` column, first in the file (so a reference may name a city
    by it, and a city's id stays its `city_id`); the first two cities share one, and the first
    person names their city by it: the first of the two, as a map's first row wins."""
    header, rows = _rows(data / "Anchor_city.csv")
    shown = [["shared" if i < 2 else f"shown:{i}", *row] for i, row in enumerate(rows)]
    _write(data / "Anchor_city.csv", ["node_id", *header], shown)
    _set("Anchor_person", 1, "person_city", "shared")(data)


def test_moved_rows_whose_display_values_repeat(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """The first of two cities sharing a `node_id` is renamed and moved to the end (paired again
    by its id): the reference by the shared value now names the other city. Their ids are unique,
    but their display values are not: which row comes first matters."""
    base = tmp_path / "base"
    shutil.copytree(kb, base)
    _cities_shown_by_node_id(base / "data")

    def last(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        first = rows.pop(0)
        first[header.index("city_name")] = "Renamed"
        return [*rows, first]

    edit = _change("Anchor_city", last)
    quick, quick_state = _run(settings, pg_engine, base, tmp_path, edit, full=False)
    slow, slow_state = _run(settings, pg_engine, base, tmp_path, edit, full=True)
    assert quick_state == slow_state and report_counts(quick) == report_counts(slow)
    assert (
        quick.paths["Anchor_city"] == "full: Anchor_city: rows moved in a table whose display values repeat"
    )


def test_rows_whose_display_values_repeat_swapped_and_edited(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """The two cities sharing a `node_id` swap places, both renamed (so each is paired again by
    its id; every other line stays where it was): the reference by the shared value now names the
    other city, though no line paired by its digest moved."""
    base = tmp_path / "base"
    shutil.copytree(kb, base)
    more = [[f"city:more{i}", f"Moreton {i}", "Florin"] for i in range(7)]  # lines in place after them
    _change("Anchor_city", lambda h, rows: [*rows, *more])(base / "data")
    _cities_shown_by_node_id(base / "data")

    def swap(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        name = header.index("city_name")
        rows[0][name], rows[1][name] = "Renamed", "Renamed too"
        return [rows[1], rows[0], *rows[2:]]

    edit = _change("Anchor_city", swap)
    quick, quick_state = _run(settings, pg_engine, base, tmp_path, edit, full=False)
    slow, slow_state = _run(settings, pg_engine, base, tmp_path, edit, full=True)
    assert quick_state == slow_state and report_counts(quick) == report_counts(slow)
    assert (
        quick.paths["Anchor_city"] == "full: Anchor_city: rows moved in a table whose display values repeat"
    )


@pytest.mark.parametrize(
    "base",
    [
        _set("Anchor_interest", 5, "interest_id", "interest:0001"),  # a duplicate id (skipped)
        _cities_shown_by_node_id,  # two cities show one display value
    ],
    ids=["an id repeats", "a display value repeats"],
)
def test_a_small_table_edited_in_place_whose_rows_repeat(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path, base: Edit
) -> None:
    """A row of a table of a few rows edited in place: more than 1/20 of its lines differ, so
    they are matched by digest; none moved, so repeated ids or display values (which row comes
    first) are no reason to read everything."""
    data = tmp_path / "base"
    shutil.copytree(kb, data)
    base(data / "data")
    edit = _both(
        _set("Anchor_interest", 7, "interest_name", "Renamed"),
        _set("Anchor_interest", 8, "interest_name", "Renamed too"),  # 2 of 20 lines
        _set("Anchor_city", 3, "city_name", "Re"),  # 1 of 3
    )
    quick, quick_state = _run(settings, pg_engine, data, tmp_path, edit, full=False)
    slow, slow_state = _run(settings, pg_engine, data, tmp_path, edit, full=True)
    assert quick_state == slow_state and report_counts(quick) == report_counts(slow)
    assert all(p.startswith("incremental: ") for p in quick.paths.values()), quick.paths


@pytest.fixture(scope="module")
def grist_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("resync-grist") / "kb"
    generate("people", 400, 11, out, "grist")
    return out


GRIST_EDITS = {
    "a name": ("UPDATE Anchor_person SET person_name = 'Renamed' WHERE id = 3", True),
    "a link row gone": ("DELETE FROM Link_person_has_interest WHERE id IN (2, 5)", True),
    "a person moves (a Ref by row id)": (
        "UPDATE Anchor_person SET person_city = (SELECT max(id) FROM Anchor_city) WHERE id = 4",
        True,
    ),
    "a city's id": ("UPDATE Anchor_city SET city_id = 'city:elsewhere' WHERE id = 1", False),
    "a city added, a person moving there": (
        "INSERT INTO Anchor_city (id, manualSort, city_id, city_name, city_country)"
        " VALUES (1000, 1000, 'city:new', 'Newtown', 'Florin');"
        " UPDATE Anchor_person SET person_city = 1000 WHERE id = 4",
        True,
    ),
    "a person and their interests deleted": (
        "DELETE FROM Link_person_has_interest WHERE from_node_id = (SELECT person_id FROM Anchor_person"
        " WHERE id = 5) OR to_node_id = (SELECT person_id FROM Anchor_person WHERE id = 5);"
        " DELETE FROM Anchor_person WHERE id = 5",
        True,
    ),
    "a city deleted that people live in": (
        "DELETE FROM Anchor_city WHERE id = (SELECT person_city FROM Anchor_person WHERE person_city > 0 LIMIT 1)",
        False,
    ),
    "a city added with another city's id": (
        "INSERT INTO Anchor_city (id, manualSort, city_id, city_name, city_country)"
        " VALUES (1000, 1000, 'city:0002', 'Newtown', 'Florin');"
        " UPDATE Anchor_person SET person_name = 'Renamed' WHERE id = 3",
        False,
    ),
}


@pytest.mark.parametrize("case", list(GRIST_EDITS))
def test_a_grist_file_resyncs_the_same_way(
    settings: Settings, pg_engine: Engine, grist_kb: Path, tmp_path: Path, case: str
) -> None:
    """A `.grist` file has no cheap raw rows: its decoded rows are hashed, keyed by Grist's
    row ids, and references resolve by row id."""
    statement, incremental = GRIST_EDITS[case]
    _check_grist_edit(settings, pg_engine, grist_kb, tmp_path, statement, incremental)


def _check_grist_edit(
    settings: Settings,
    pg_engine: Engine,
    grist_kb: Path,
    tmp_path: Path,
    statement: str,
    incremental: bool,
    *,
    base: str = "",
) -> None:
    """Sync the `.grist` file (after the SQL `base`), run `statement` on it, re-sync both ways."""
    import sqlite3

    def execute(path: Path, script: str) -> None:
        with sqlite3.connect(path) as db:
            db.executescript(script)
        db.close()

    def run(full: bool) -> tuple[SyncReport, dict[str, Any]]:
        blank_staging(pg_engine)
        work = tmp_path / "kb"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(grist_kb, work)
        execute(work / "data.grist", base)
        sync(settings, data_model=work / "model.grist", data=work / "data.grist")
        execute(work / "data.grist", statement)
        report = sync(settings, data_model=work / "model.grist", data=work / "data.grist", full=full)
        return report, staging_state(pg_engine)

    quick, quick_state = run(False)
    slow, slow_state = run(True)
    assert quick_state == slow_state
    assert report_counts(quick) == report_counts(slow)
    assert quick.changed
    kinds = {p.split(":")[0] for p in quick.paths.values()}
    assert kinds == ({"incremental"} if incremental else {"full"}), quick.paths


# The link table's ends as Grist references (Ref columns holding row ids), not text.
_REF_ENDS = """
CREATE TABLE refs (id INTEGER PRIMARY KEY, manualSort NUMERIC DEFAULT 1e999,
  from_node_id INTEGER DEFAULT 0, to_node_id INTEGER DEFAULT 0, edge_label TEXT DEFAULT '',
  skill_level TEXT DEFAULT '', since_year INTEGER DEFAULT 0, note TEXT DEFAULT '');
INSERT INTO refs SELECT l.id, l.manualSort,
  (SELECT p.id FROM Anchor_person p WHERE p.person_id = l.from_node_id),
  (SELECT i.id FROM Anchor_interest i WHERE i.interest_id = l.to_node_id),
  l.edge_label, l.skill_level, l.since_year, l.note FROM Link_person_has_interest l;
DROP TABLE Link_person_has_interest;
ALTER TABLE refs RENAME TO Link_person_has_interest;
UPDATE _grist_Tables_column SET type = 'Ref:Anchor_person'
  WHERE colId = 'from_node_id' AND parentId = (SELECT id FROM _grist_Tables WHERE tableId = 'Link_person_has_interest');
UPDATE _grist_Tables_column SET type = 'Ref:Anchor_interest'
  WHERE colId = 'to_node_id' AND parentId = (SELECT id FROM _grist_Tables WHERE tableId = 'Link_person_has_interest');
"""


def test_a_person_removed_whom_a_dangling_link_row_references(
    settings: Settings, pg_engine: Engine, grist_kb: Path, tmp_path: Path
) -> None:
    """A link row referencing a person by row id, labelled with a link that does not fit its
    ends, dangles (no edge). The person goes, with their other link rows: the row's reference
    no longer resolves at all, which the full reading counts as an unresolved reference."""
    dangles = (
        "UPDATE Link_person_has_interest SET edge_label = 'PERSON_lives_in_CITY'"
        " WHERE id = (SELECT min(id) FROM Link_person_has_interest WHERE from_node_id = 5)"
    )
    statement = (
        "DELETE FROM Link_person_has_interest WHERE from_node_id = 5 AND edge_label != 'PERSON_lives_in_CITY';"
        " DELETE FROM Anchor_person WHERE id = 5"
    )
    _check_grist_edit(
        settings, pg_engine, grist_kb, tmp_path, statement, False, base=_REF_ENDS + dangles + ";"
    )


# Edits of a `.grist` file whose link table's ends are references (`_REF_ENDS`).
REF_END_EDITS = {
    "a person and their link rows removed": (
        "DELETE FROM Link_person_has_interest WHERE from_node_id = 5; DELETE FROM Anchor_person WHERE id = 5",
        True,
    ),
    "a person added with a link row referencing them": (
        "INSERT INTO Anchor_person (id, person_id, person_name, person_city) VALUES (800, 'person:new', 'New', 1);"
        " INSERT INTO Link_person_has_interest (id, from_node_id, to_node_id, edge_label)"
        " VALUES (5000, 800, 2, 'PERSON_has_INTEREST')",
        True,
    ),
}


@pytest.mark.parametrize("case", list(REF_END_EDITS))
def test_link_rows_referencing_their_ends_by_row_id(
    settings: Settings, pg_engine: Engine, grist_kb: Path, tmp_path: Path, case: str
) -> None:
    """Link-table ends that are Grist references resolve by row id: anchor rows added and removed
    with their link rows take the incremental path (no link row dangled)."""
    statement, incremental = REF_END_EDITS[case]
    _check_grist_edit(settings, pg_engine, grist_kb, tmp_path, statement, incremental, base=_REF_ENDS)


def _people_who_know_people(kb: Path, tmp_path: Path) -> Path:
    """The knowledge base and an undirected person–person link: each second person knows the next,
    each person the one three on, and one person themselves (an edge to oneself, made once)."""
    base = tmp_path / "base"
    shutil.copytree(kb, base)
    with (base / "model" / "Links.csv").open("a", encoding="utf-8") as f:
        f.write("person,person,PERSON_knows_PERSON,Knows.,,,,false\n")
    _, people = _rows(base / "data" / "Anchor_person.csv")
    ids = [row[0] for row in people]
    pairs = [(ids[i], ids[i + 1]) for i in range(0, len(ids) - 1, 2)]
    pairs += [(ids[i], ids[i + 3]) for i in range(len(ids) - 3)] + [(ids[5], ids[5])]
    _write(
        base / "data" / "Link_person_knows_person.csv",
        ["from_node_id", "to_node_id", "edge_label"],
        [[a, b, "PERSON_knows_PERSON"] for a, b in pairs],
    )
    return base


def test_people_who_know_people_come_and_go(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """Both ends of an undirected link are people: the person who knows themselves leaves (with
    their link rows, which named them at either end), and a new person comes, mid-file, knowing
    two others and themselves. Every edge at the leaver is one their rows made."""
    base = _people_who_know_people(kb, tmp_path)
    _, people = _rows(base / "data" / "Anchor_person.csv")
    leaver, friend, other = people[5][0], people[0][0], people[1][0]

    def edit(data: Path) -> None:
        def people_(header: list[str], rows: list[list[str]]) -> list[list[str]]:
            rows = [r for r in rows if r[0] != leaver]
            return [*rows[:20], _person(header, rows[0], person_id="person:new"), *rows[20:]]

        def knows(header: list[str], rows: list[list[str]]) -> list[list[str]]:
            rows = [r for r in rows if leaver not in r[:2]]
            met = [("person:new", friend), (other, "person:new"), ("person:new", "person:new")]
            return [*rows[:7], *([a, b, "PERSON_knows_PERSON"] for a, b in met), *rows[7:]]

        _change("Anchor_person", people_)(data)
        _change("Link_person_knows_person", knows)(data)
        _change("Link_person_has_interest", lambda h, rows: [r for r in rows if r[0] != leaver])(data)

    quick, quick_state = _run(settings, pg_engine, base, tmp_path, edit, full=False)
    slow, slow_state = _run(settings, pg_engine, base, tmp_path, edit, full=True)
    assert quick_state == slow_state and report_counts(quick) == report_counts(slow)
    assert all(p.startswith("incremental: ") for p in quick.paths.values()), quick.paths


def _person(header: list[str], like: list[str], **values: str) -> list[str]:
    person = dict(zip(header, like, strict=True))
    person.update(values)
    return [person[h] for h in header]


def test_a_person_removed_then_back(settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path) -> None:
    """A person leaves with their interests, comes back (their node and edges were tombstoned:
    now live again) and leaves again, each re-sync incremental and ending where full ones do."""
    kept: dict[str, list[list[str]]] = {}

    def leave(data: Path) -> None:
        header, rows = _rows(data / "Anchor_person.csv")
        kept["person"] = [rows.pop(12)]
        _write(data / "Anchor_person.csv", header, rows)
        theirs = kept["person"][0][0]
        links_header, links = _rows(data / "Link_person_has_interest.csv")
        kept["links"] = [r for r in links if r[0] == theirs]
        _write(data / "Link_person_has_interest.csv", links_header, [r for r in links if r[0] != theirs])

    def back(data: Path) -> None:
        _change("Anchor_person", lambda h, rows: [*rows, *kept["person"]])(data)
        _change("Link_person_has_interest", lambda h, rows: [*rows, *kept["links"]])(data)

    _resyncs_end_as_full_ones(settings, pg_engine, kb, tmp_path, [leave, back, leave])


@pytest.mark.parametrize(
    "text",
    [
        "\ufeffa_id,b\r\nx1,é\r\n\r\nx2,  \r\nx3,z",  # BOM, CRLF, a blank line, no final newline
        "a_id,b\nx1,y\n\n\nx2,ü\n",
        "a_id,b\n",
        "a_id\n\n",  # shorter than a BOM: the whole file comes in the first read
        "",
    ],
)
def test_line_checksums_equal_record_checksums(tmp_path: Path, text: str) -> None:
    """A CSV file's records, read at once from its lines (checksums, and any few of them read
    again by offset), are the records the reader gives, in blocks of any size."""
    from vedana.sources import csv_folder

    (tmp_path / "T.csv").write_bytes(text.encode("utf-8"))
    table = csv_folder.CsvFolderSource(tmp_path).table("T")
    assert table is not None
    rows = list(table.rows())
    for block in (1, 2, 3, 7, 1 << 22):
        csv_folder._BLOCK = block
        try:
            bulk = table.digests()
            assert bulk is not None
            assert list(bulk.keys) == [n for n, _ in rows]
            texts = bulk.fetch(list(range(len(bulk.keys))))
            assert [table.decode_raw(t) for t in texts] == [cells for _, cells in rows]
            assert [row_digest(t) for t in texts] == list(zip(bulk.low, bulk.high, strict=True))
            some = sorted({0, len(rows) // 2, len(rows) - 1}) if rows else []
            assert bulk.fetch(some) == [texts[i] for i in some]  # by offset, the last one too
            if len(some) > 1:
                with pytest.raises(ValueError):
                    bulk.fetch(some[::-1])
        finally:
            csv_folder._BLOCK = 1 << 22


@pytest.mark.parametrize("inline", [True, False], ids=["read whole", "streamed as runs"])
def test_kept_rows_survive_the_store_whole(
    pg_engine: Engine, monkeypatch: pytest.MonkeyPatch, inline: bool
) -> None:
    """What a sync keeps of each row goes to `sync_rows` by a binary COPY vedana writes itself, the
    outcomes a slice at a time: keys, digests and outcomes (non-ASCII ones, empty ones, more
    slices than one) come back exactly, whether a table's field is read whole or in runs."""
    from vedana.stores import sync_rows

    monkeypatch.setattr(sync_rows, "_RUN_ROWS", 3)  # several runs, a short last one
    if not inline:
        monkeypatch.setattr(sync_rows, "_INLINE", -1)  # every field streamed, even empty ones
    outcomes = ["+ä␞x", "", "PERSON␞p:1␞i:ü", "", "", "plain", "日本"]
    n = len(outcomes)
    rows = sync_rows.TableRows(
        array("q", range(1, n + 1)), array("I", range(10, 10 + n)), array("I", range(20, 20 + n)), outcomes
    )
    empty = sync_rows.TableRows(array("q"), array("I"), array("I"), [])
    lone = sync_rows.TableRows(array("q", [5]), array("I", [1]), array("I", [2]), [""])  # one skipped row
    with pg_engine.begin() as conn:
        sync_rows.save_rows(conn, "src", {"k": 1}, {"Anchor_a": rows, "Link_b": empty, "Link_c": lone})
    with pg_engine.connect() as conn:
        summary, stored = sync_rows.load_rows(conn, "src")
    assert summary is not None and summary["k"] == 1
    got = stored["Anchor_a"]
    assert (
        list(got.keys) == list(rows.keys)
        and list(got.low) == list(rows.low)
        and list(got.high) == list(rows.high)
    )
    assert list(got.outcomes) == outcomes
    assert got.patched == set()  # stored in runs a re-sync keeps: its next save can be a patch
    assert [got.outcomes[i] for i in reversed(range(n))] == outcomes[::-1]  # runs unpacked on demand
    assert list(stored["Link_b"].keys) == [] and list(stored["Link_b"].outcomes) == []
    assert list(stored["Link_c"].keys) == [5] and list(stored["Link_c"].outcomes) == [""]


@pytest.mark.parametrize("runs", [["a\x1db\x1dc", "d", "\x1de"], [""], ["x"], []])
def test_packed_outcomes_read_like_their_list(runs: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Outcomes held as packed runs (of any lengths, empty outcomes among them) read, change,
    copy and pack again exactly as the list of them would; a run packed again is cut to size."""
    from vedana.stores import sync_rows
    from vedana.stores.sync_rows import _RUN_SEPARATOR, PackedOutcomes

    monkeypatch.setattr(sync_rows, "_RUN_ROWS", 3)

    plain = [o for run in runs for o in run.split("\x1d")]
    kept = PackedOutcomes.stored(_RUN_SEPARATOR.join(runs), len(plain))
    assert len(kept) == len(plain) and list(kept) == plain
    assert [kept[i] for i in reversed(range(len(plain)))] == plain[::-1]
    with pytest.raises(IndexError):
        kept[len(plain)]
    if not plain:
        return
    other = kept.copy()
    other[len(plain) - 1] = "changed"
    plain_other = [*plain[:-1], "changed"]
    assert list(other) == plain_other and list(kept) == plain  # the original stays as it was
    assert [o for run in other.packed_runs() for o in run.split("\x1d")] == plain_other
    # Runs no row of which was set go out as stored, not unpacked and packed again.
    again = list(other.packed_runs())
    assert again[: len(runs) - 1] == runs[:-1]
    stored = list(kept.packed_runs())
    assert all(again[i] is stored[i] for i in range(len(runs) - 1))  # untouched: as stored
    assert all(run.count("\x1d") < 3 for run in again[len(runs) - 1 :])  # at most 3 rows a run


@pytest.mark.parametrize("runs", [["a\x1db\x1dc", "d"], [""], []])
def test_packed_outcomes_extended_by_empty_rows(runs: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows added at the end of a file: the kept outcomes and as many empty ones after them, set
    and packed like the list, the original left as it was."""
    from vedana.stores import sync_rows
    from vedana.stores.sync_rows import _RUN_SEPARATOR, PackedOutcomes

    monkeypatch.setattr(sync_rows, "_RUN_ROWS", 3)
    plain = [o for run in runs for o in run.split("\x1d")]
    kept = PackedOutcomes.stored(_RUN_SEPARATOR.join(runs), len(plain))
    grown = kept.extended(4)
    assert len(grown) == len(plain) + 4 and list(grown) == [*plain, "", "", "", ""]
    grown[len(plain) + 1] = "new"
    want = [*plain, "", "new", "", ""]
    assert list(grown) == want and list(kept) == plain
    assert [o for run in grown.packed_runs() for o in run.split("\x1d")] == want
    assert all(run.count("\x1d") < 3 for run in grown.packed_runs())  # runs of at most 3 rows


@pytest.mark.parametrize("order", ["in order", "out of order"])
def test_link_outcomes_packed_in_runs_are_the_outcomes(order: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CSV link table's outcomes are packed a run at a time while they come in row order; a row
    out of order turns them back into one per row. Either way the table keeps the same outcomes,
    with "" for a row never given."""
    from vedana.etl import resync
    from vedana.sources.base import RawTable, RowDigests
    from vedana.stores.sync_rows import unpack_outcomes

    monkeypatch.setattr(resync, "_RUN", 2)
    n = 6
    digests = RowDigests(array("q", range(1, n + 1)), array("I", [0] * n), array("I", [1] * n), fetch=list)
    recorder = resync.Recorder()
    recorder.reading(RawTable("Link_x", {}, _digests=lambda previous=None: digests), anchor=False)
    given = {1: "L␞a␞b", 2: "", 3: "L␞c␞d", 4: "L␞e␞f", 5: "L␞g␞h"}  # row 6 never given
    rows = [1, 2, 3, 4, 5] if order == "in order" else [1, 2, 4, 3, 5]
    for row_id in rows:
        recorder.link("Link_x", row_id, "L", given[row_id].replace("␞", resync._SEP))
    table = recorder.rows()["Link_x"]
    got = table.outcomes if table.packed is None else [o for p in table.packed for o in unpack_outcomes(p)]
    assert (table.packed is not None) == (order == "in order")
    assert got == [given.get(i, "").replace("␞", resync._SEP) for i in range(1, n + 1)]
    assert not recorder.sound  # five rows given of six: line digests cannot stand for rows


@pytest.mark.parametrize("seed", range(8))
def test_differing_positions_are_those_compared_one_by_one(seed: int) -> None:
    """The XOR of whole arrays finds exactly the positions an element-wise comparison finds: of
    one pair, or of two pairs at once (a position where either differs), with arrays of unequal
    lengths, changes in any byte of an item, at either end, and none at all."""
    import random

    from vedana.sources.base import differing

    rng = random.Random(seed)
    n = rng.choice([0, 1, 7, 8, 9, 63, 64, 65, 1000])
    pairs = []
    for _ in range(2):
        old = array("I", (rng.getrandbits(32) for _ in range(n)))
        new = array("I", old)
        for i in rng.sample(range(n), k=min(n, rng.choice([0, 1, 3, n // 5 + 1]))):
            new[i] ^= 1 << rng.randrange(32)
        if n and rng.random() < 0.5:
            new[rng.choice([0, n - 1])] ^= 1 << 31
        if rng.random() < 0.5:
            new.extend(rng.getrandbits(32) for _ in range(rng.randrange(1, 20)))  # rows added
        pairs.append((new, old))

    def one_by_one(new: array, old: array) -> set[int]:
        return {i for i in range(min(len(new), len(old))) if new[i] != old[i]}

    (new_low, old_low), (new_high, old_high) = pairs
    assert differing((new_low, old_low)) == sorted(one_by_one(new_low, old_low))
    both = one_by_one(new_low, old_low) | one_by_one(new_high, old_high)
    assert differing((new_low, old_low), (new_high, old_high)) == sorted(both)
    assert differing((old_low, old_low)) == []
    with pytest.raises(ValueError, match="one item size"):
        differing((new_low, old_low), (array("q", new_high), array("q", old_high)))


def test_prefetched_digests_are_the_digests(tmp_path: Path) -> None:
    """Digests hashed ahead on the source's own thread equal those hashed on demand, a file that
    cannot give them (a NUL) gives none either way, and closing the source stops the thread."""
    from vedana.sources.csv_folder import CsvFolderSource

    (tmp_path / "A.csv").write_text("a_id,b\nx1,é\nx2,y\n", encoding="utf-8")
    (tmp_path / "B.csv").write_bytes(b"b_id,c\nz1,\x00\n")
    import threading

    source = CsvFolderSource(tmp_path)
    source.prefetch_digests()
    try:
        a, b = source.table("A"), source.table("B")
        assert a is not None and b is not None
        ahead, again = a.digests(), a.digests()  # the second is hashed anew
        assert ahead is not None and again is not None and ahead is not again
        assert (ahead.keys, ahead.low, ahead.high) == (again.keys, again.low, again.high)
        assert ahead.fetch([0, 1]) == ["x1,é\n", "x2,y\n"]
        assert b.digests() is None
    finally:
        source.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("vedana-digests")]


def test_a_file_saved_again_between_hashing_and_reading_fails_clearly(tmp_path: Path) -> None:
    """A changed line is read again by offset: if the file was saved again in between (the lines
    moved, or a line changed), the sync stops with a one-line error instead of pairing one
    version's digest with another's text; a file gone says so too."""
    from vedana.errors import SourceError
    from vedana.sources.csv_folder import CsvFolderSource

    path = tmp_path / "A.csv"
    path.write_text("a_id,b\nx1,one\nx2,two\n", encoding="utf-8")
    source = CsvFolderSource(tmp_path)
    table = source.table("A")
    assert table is not None
    bulk = table.digests()
    assert bulk is not None
    path.write_text("a_id,b\nx1,one!\nx2,two\n", encoding="utf-8")  # the first line grew
    with pytest.raises(SourceError, match="changed while the sync was reading it"):
        bulk.fetch([1])
    path.unlink()
    source.prefetch_digests()
    try:
        with pytest.raises(SourceError, match="could not be read"):
            table.digests()
    finally:
        source.close()


def test_only_a_re_sync_hashes_ahead(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digests are hashed ahead when the last sync kept rows of this folder, not on a first
    sync (whose peak memory it would raise) nor with --full."""
    from vedana.sources.csv_folder import CsvFolderSource

    asked: list[list[str]] = []  # per hashing ahead, the tables it had kept lines to check against
    real = CsvFolderSource.prefetch_digests
    monkeypatch.setattr(
        CsvFolderSource,
        "prefetch_digests",
        lambda self, kept=None: (asked.append(sorted(kept or {})), real(self, kept))[1],
    )
    blank_staging(pg_engine)
    work = tmp_path / "kb"
    shutil.copytree(kb, work)
    sync(settings, data_model=work / "model", data=work / "data")
    assert asked == []
    _one_percent(work / "data")
    sync(settings, data_model=work / "model", data=work / "data", full=True)
    assert asked == []
    _one_percent(work / "data")
    report = sync(settings, data_model=work / "model", data=work / "data")
    assert asked == [sorted(report.paths)]  # every table read from a file came with its kept lines
    assert all(p.startswith("incremental: ") for p in report.paths.values())


def test_rows_kept_whole_the_old_way_are_stored_in_runs_again(
    pg_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outcomes stored as one run (before runs had a separator of their own) still load, with
    their patch, and the next save stores them cut into runs."""
    from vedana.stores import sync_rows

    monkeypatch.setattr(sync_rows, "_RUN_ROWS", 2)
    monkeypatch.setattr(sync_rows, "_INLINE", -1)  # streamed: Postgres splits the old field too
    outcomes = ["a", "", "c", "d", "e"]
    n = len(outcomes)
    rows = sync_rows.TableRows(
        array("q", range(1, n + 1)), array("I", range(n)), array("I", range(n)), list(outcomes)
    )
    with pg_engine.begin() as conn:
        sync_rows.save_rows(conn, "src", {"k": 1}, {"Link_a": rows})
        conn.exec_driver_sql(  # as stored before: one run, and a patch beside it
            "UPDATE sync_rows SET outcomes = %s, patch = %s",
            ("\x1d".join(outcomes), json.dumps([[1, 7, 7, "b"]])),
        )
    with pg_engine.begin() as conn:
        _, stored = sync_rows.load_rows(conn, "src")
        got = stored["Link_a"]
        assert list(got.outcomes) == ["a", "b", "c", "d", "e"] and got.patched is None
        sync_rows.save_rows(conn, "src", {"k": 1}, stored)
        field = conn.exec_driver_sql("SELECT outcomes, patch FROM sync_rows").one()
    assert field[0].split("\x1a") == ["a\x1db", "c\x1dd", "e"] and not field[1]
    with pg_engine.connect() as conn:
        _, again = sync_rows.load_rows(conn, "src")
    assert list(again["Link_a"].outcomes) == ["a", "b", "c", "d", "e"]
    assert again["Link_a"].patched == set()


@pytest.mark.parametrize("seed", range(24))
def test_lines_that_moved_pair_only_equal_lines(seed: int) -> None:
    """`_align_lines` over random edits of a file (lines inserted, removed, changed, blocks of
    them, a block moved): every new line paired with a kept line has its digest, no kept line is
    paired twice, and the unpaired lines on each side are exactly the rest. Lines that stayed in
    place between two edits are paired."""
    import random

    from vedana.etl.resync import _align_lines

    rng = random.Random(seed)
    old = [rng.getrandbits(40) for _ in range(rng.choice([0, 1, 50, 3000]))]
    new = list(old)
    for _ in range(rng.randint(0, 12)):
        at = rng.randint(0, len(new))
        kind = rng.choice(["insert", "remove", "change", "block in", "block out", "move"])
        if kind == "insert":
            new.insert(at, rng.getrandbits(40))
        elif kind == "remove" and at < len(new):
            del new[at]
        elif kind == "change" and at < len(new):
            new[at] = rng.getrandbits(40)
        elif kind == "block in":
            new[at:at] = [rng.getrandbits(40) for _ in range(rng.randint(2, 700))]
        elif kind == "block out":
            del new[at : at + rng.randint(2, 700)]
        elif kind == "move" and at < len(new):
            block = new[at : at + 30]
            del new[at : at + 30]
            new[rng.randint(0, len(new)) : 0] = block

    def halves(values: list[int]) -> tuple[array, array]:
        return array("I", (v & 0xFFFFF for v in values)), array("I", (v >> 20 for v in values))

    (new_low, new_high), (old_low, old_high) = halves(new), halves(old)
    order, fresh, gone, shifted = _align_lines(new_low, new_high, old_low, old_high)
    paired = [(i, j) for i, j in enumerate(order) if j >= 0]
    assert all(new[i] == old[j] for i, j in paired)
    assert len({j for _, j in paired}) == len(paired)
    assert sorted(fresh) == [i for i, j in enumerate(order) if j < 0]
    assert sorted(gone) == sorted(set(range(len(old))) - {j for _, j in paired})
    assert shifted == any(i != j for i, j in paired)
    if new == old:
        assert not fresh and not gone and not shifted
    # The untouched head is paired line by line, and so is the untouched tail (the walk found
    # its way again after the last edit).
    head = tail = 0
    while head < min(len(new), len(old)) and new[head] == old[head]:
        head += 1
    while tail < min(len(new), len(old)) - head and new[-1 - tail] == old[-1 - tail]:
        tail += 1
    assert list(order[:head]) == list(range(head))
    assert all(order[len(new) - 1 - k] == len(old) - 1 - k for k in range(tail))


def test_reordered_outcomes_read_like_their_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept outcomes read in another order (-1: a new line, ""), set, copied and packed again
    exactly as the list they stand for; the kept rows stay as they were."""
    from vedana.stores import sync_rows
    from vedana.stores.sync_rows import _RUN_SEPARATOR, PackedOutcomes, ReorderedOutcomes

    monkeypatch.setattr(sync_rows, "_RUN_ROWS", 3)
    runs = ["a\x1db\x1dc", "d\x1de"]
    kept = PackedOutcomes.stored(_RUN_SEPARATOR.join(runs), 5)
    view = ReorderedOutcomes(kept, array("q", [4, -1, 0, 1, -1, 3]))
    want = ["e", "", "a", "b", "", "d"]
    assert len(view) == 6 and list(view) == want and [view[i] for i in range(6)] == want
    other = view.copy()
    other[1] = "new"
    assert list(other) == ["e", "new", "a", "b", "", "d"] and list(view) == want
    assert [o for run in other.packed_runs() for o in run.split("\x1d")] == list(other)
    assert all(run.count("\x1d") < 3 for run in other.packed_runs())
    assert list(view.extended(2)) == [*want, "", ""]
    assert list(kept) == ["a", "b", "c", "d", "e"]
    with pytest.raises(IndexError):
        view[6]


def test_the_stored_data_model_is_known_by_its_digest(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A sync tells a changed data model by the digest stored with it; one stored before digests
    were is compared whole once, and its digest stored then. A description edited in the model
    is a change either way."""
    from vedana.stores.staging import DATA_MODEL_DIGEST_KEY, get_state

    blank_staging(pg_engine)
    work = tmp_path / "kb"
    shutil.copytree(kb, work)
    first = sync(settings, data_model=work / "model", data=work / "data")
    assert first.data_model.changed
    with pg_engine.connect() as conn:
        digest = get_state(conn, DATA_MODEL_DIGEST_KEY)
    assert digest
    with pg_engine.begin() as conn:  # as a data model stored by an older vedana
        conn.execute(t.vedana_state.delete().where(t.vedana_state.c.key == DATA_MODEL_DIGEST_KEY))
    again = sync(settings, data_model=work / "model", data=work / "data", full=True)
    assert not again.data_model.changed
    with pg_engine.connect() as conn:
        assert get_state(conn, DATA_MODEL_DIGEST_KEY) == digest
    _change("Anchors", lambda h, rows: [[*r[:1], r[1] + " (edited)", *r[2:]] for r in rows])(work / "model")
    edited = sync(settings, data_model=work / "model", data=work / "data")
    assert edited.data_model.changed
    with pg_engine.connect() as conn:
        assert get_state(conn, DATA_MODEL_DIGEST_KEY) not in (None, digest)


def test_old_keys_with_copy_escapes_are_tombstoned(
    settings: Settings, pg_engine: Engine, kb: Path, tmp_path: Path
) -> None:
    """A person whose id holds a backslash (COPY's escape character) moves a link to another
    interest and drops another link: the edges' old keys go to Postgres as the scope of the
    re-sync, escaped, and are tombstoned exactly as a --full sync does."""
    base = tmp_path / "base"
    shutil.copytree(kb, base)
    odd = "person:\\odd\\"
    header, people = _rows(base / "data" / "Anchor_person.csv")
    first = people[0][header.index("person_id")]

    def rename(header: list[str], rows: list[list[str]], column: str) -> list[list[str]]:
        at = header.index(column)
        for row in rows:
            if row[at] == first:
                row[at] = odd
        return rows

    _change("Anchor_person", lambda h, rows: rename(h, rows, "person_id"))(base / "data")
    _change("Link_person_has_interest", lambda h, rows: rename(h, rows, "from_node_id"))(base / "data")

    def move(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        mine = [row for row in rows if row[header.index("from_node_id")] == odd]
        assert len(mine) >= 2
        mine[0][header.index("to_node_id")] = "interest:0002"
        return [row for row in rows if row is not mine[1]]

    _resyncs_end_as_full_ones(
        settings, pg_engine, base, tmp_path, [_change("Link_person_has_interest", move)]
    )
