"""Data-model lint: each rule on a crafted data model, the samples, and a Grist document read
over the API (Ref cells as row ids)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from ops_kb import ATTR_HEADER, KB

from standins.fake_grist import FakeGrist
from support.sync_kb import API_KEY, club_data, club_model, grist_settings
from vedana.config import Settings
from vedana.ops.lint import lint
from vedana.problems import Problem

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def lint_kb(settings: Settings, kb: KB, root: Path) -> list[Problem]:
    model, data = kb.write(root)
    section = lint(settings, data_model=model, data=data)
    assert section.skipped is None
    return section.problems


def only(problems: list[Problem], code: str) -> list[Problem]:
    return [p for p in problems if p.code == code]


def test_the_base_knowledge_base_is_clean(settings: Settings, kb: KB, tmp_path: Path) -> None:
    model, data = kb.write(tmp_path)
    section = lint(settings, data_model=model, data=data)

    assert section.problems == []
    assert section.status() == "ok"
    assert section.details["anchors"] == 2
    assert section.details["links"] == 2
    assert section.details["rows_read"] == 3 + 2 + 1 + 3  # nodes, link-table rows, Ref cells


# Each case: how to break the base, then the one problem expected (severity, code, where).
Case = tuple[Callable[[KB], None], str, str, dict[str, str]]


def _anchor_table_without_anchor(kb: KB) -> None:
    kb.data["Anchor_planet"] = [["planet_id", "planet_name"], ["mars", "Mars"]]


def _anchor_without_table(kb: KB) -> None:
    kb.model["Anchors"].append(["planet", "A planet.", "mars", ""])


def _link_table_without_link(kb: KB) -> None:
    kb.data["Link_person_owns_city"] = [
        ["from_node_id", "to_node_id", "edge_label"],
        ["p1", "lisbon", "OWNS"],
    ]


def _link_without_data(kb: KB) -> None:
    kb.model["Links"].append(["person", "city", "PERSON_visited_CITY", "Trips.", "", "", "", "true"])


def _described_attribute_missing(kb: KB) -> None:
    kb.model["Anchor_attributes"].append(["person", "person_email", "Email.", "a@b.c", "false", "", "str"])


def _described_link_attribute_missing(kb: KB) -> None:
    kb.model["Link_attributes"].append(["PERSON_knows_PERSON", "where", "Place.", "club", "false", "", "str"])


def _link_column_link_with_attribute(kb: KB) -> None:
    kb.model["Link_attributes"].append(["PERSON_lives_in_CITY", "since", "Year.", "2019", "false", "", "int"])


def _undescribed_anchor_column(kb: KB) -> None:
    kb.add_column(kb.data, "Anchor_person", "person_nickname", ["ada", "bo", "cy"])


def _undescribed_link_column(kb: KB) -> None:
    kb.add_column(kb.data, "Link_person_knows_person", "reviewer", ["DT"])


def _link_to_unknown_anchor(kb: KB) -> None:
    kb.model["Links"].append(["person", "planet", "PERSON_from_PLANET", "", "", "", "", "true"])


def _table_name_case(kb: KB) -> None:
    kb.data["Anchor_City"] = kb.data.pop("Anchor_city")


def _link_anchor_case(kb: KB) -> None:
    kb.set_cell(kb.model, "Links", 1, "anchor1", "Person")


def _embeddable_number(kb: KB) -> None:
    kb.set_cell(kb.model, "Anchor_attributes", 3, "embeddable", "true")  # person_age, an int


def _duplicate_node_id(kb: KB) -> None:
    kb.data["Anchor_person"].append(["p2", "Bo Chen (again)", "41", "porto"])


def _missing_row_in_link_column(kb: KB) -> None:
    kb.set_cell(kb.data, "Anchor_person", 2, "person_city", "atlantis")


def _missing_row_in_link_table(kb: KB) -> None:
    kb.data["Link_person_knows_person"].append(["p1", "p9", "PERSON_knows_PERSON", "online", "2020"])


def _missing_link_column(kb: KB) -> None:
    kb.set_cell(kb.model, "Links", 1, "anchor1_link_column_name", "person_town")


def _attribute_of_unknown_anchor(kb: KB) -> None:
    kb.model["Anchor_attributes"].append(["planet", "planet_name", "Name.", "Mars", "false", "", "str"])


def _unknown_dtype(kb: KB) -> None:
    kb.set_cell(kb.model, "Anchor_attributes", 3, "dtype", "money")


def _link_table_without_endpoints(kb: KB) -> None:
    kb.data["Link_person_knows_person"] = [["from_node_id", "edge_label", "how", "since"]]


def _missing_node_id(kb: KB) -> None:
    kb.data["Anchor_person"].append(["", "Nobody", "50", "lisbon"])


def _failed_formula(kb: KB) -> None:
    kb.set_cell(kb.data, "Anchor_person", 1, "person_age", "#NameError")


def _invalid_value(kb: KB) -> None:
    kb.set_cell(kb.data, "Anchor_person", 1, "person_age", "thirty-four")


def _empty_endpoint(kb: KB) -> None:
    kb.data["Link_person_knows_person"].append(["p3", "", "PERSON_knows_PERSON", "", ""])


def _second_table_for_an_anchor(kb: KB) -> None:
    kb.data["Anchor_City"] = [["city_id", "city_name"], ["faro", "Faro"]]


CASES: dict[str, Case] = {
    "table without anchor": (
        _anchor_table_without_anchor, "warning", "lint.table-without-anchor", {"table": "Anchor_planet"},
    ),
    "anchor without table": (
        _anchor_without_table, "error", "lint.anchor-without-table", {"type": "planet", "table": "Anchor_planet"},
    ),
    "link table without link": (
        _link_table_without_link, "warning", "lint.link-table-without-link", {"table": "Link_person_owns_city"},
    ),
    "link without data": (
        _link_without_data, "error", "lint.link-without-data", {"link": "PERSON_visited_CITY"},
    ),
    "attribute without column": (
        _described_attribute_missing, "error", "lint.missing-attribute-column",
        {"table": "Anchor_person", "column": "person_email", "type": "person"},
    ),
    "link attribute without column": (
        _described_link_attribute_missing, "error", "lint.missing-attribute-column",
        {"table": "Link_person_knows_person", "column": "where", "link": "PERSON_knows_PERSON"},
    ),
    "undescribed anchor column": (
        _undescribed_anchor_column, "warning", "lint.undescribed-column",
        {"table": "Anchor_person", "column": "person_nickname", "type": "person"},
    ),
    "undescribed link column": (
        _undescribed_link_column, "warning", "lint.undescribed-column",
        {"table": "Link_person_knows_person", "column": "reviewer"},
    ),
    "link to unknown anchor": (
        _link_to_unknown_anchor, "error", "lint.link-unknown-anchor",
        {"table": "Links", "column": "anchor2", "link": "PERSON_from_PLANET"},
    ),
    "table name case": (_table_name_case, "warning", "lint.case-mismatch", {"table": "Anchor_City"}),
    "link anchor case": (_link_anchor_case, "warning", "lint.case-mismatch", {"table": "Links", "column": "anchor1"}),
    "embeddable number": (
        _embeddable_number, "warning", "lint.embeddable-non-text",
        {"table": "Anchor_attributes", "type": "person", "attribute": "person_age"},
    ),
    "duplicate node id": (
        _duplicate_node_id, "warning", "lint.duplicate-node-id", {"table": "Anchor_person", "type": "person"},
    ),
    "reference to a missing row (link column)": (
        _missing_row_in_link_column, "warning", "lint.missing-reference",
        {"table": "Anchor_person.person_city", "link": "PERSON_lives_in_CITY"},
    ),
    "reference to a missing row (link table)": (
        _missing_row_in_link_table, "warning", "lint.missing-reference",
        {"table": "Link_person_knows_person", "link": "PERSON_knows_PERSON"},
    ),
    "link column that does not exist": (
        _missing_link_column, "error", "lint.missing-link-column",
        {"table": "Anchor_person", "column": "person_town", "link": "PERSON_lives_in_CITY"},
    ),
    "attribute of unknown anchor": (
        _attribute_of_unknown_anchor, "error", "lint.attribute-unknown-owner",
        {"table": "Anchor_attributes", "column": "anchor", "attribute": "planet_name"},
    ),
    "attribute of a link read from a link column": (
        _link_column_link_with_attribute, "warning", "lint.link-attributes-without-table",
        {"link": "PERSON_lives_in_CITY"},
    ),
    "row sync skips": (_unknown_dtype, "warning", "lint.model-row-skipped", {"table": "Anchor_attributes"}),
    "link table without endpoint columns": (
        _link_table_without_endpoints, "error", "lint.link-table-columns", {"table": "Link_person_knows_person"},
    ),
    "row without id": (
        _missing_node_id, "warning", "lint.missing-node-id", {"table": "Anchor_person", "type": "person"},
    ),
    "failed formula": (
        _failed_formula, "warning", "lint.formula-error", {"table": "Anchor_person", "type": "person"},
    ),
    "value of the wrong type": (
        _invalid_value, "warning", "lint.invalid-value",
        {"table": "Anchor_person", "column": "person_age", "type": "person"},
    ),
    "empty endpoint": (
        _empty_endpoint, "warning", "lint.empty-endpoint",
        {"table": "Link_person_knows_person", "link": "PERSON_knows_PERSON"},
    ),
    "second table for an anchor": (
        _second_table_for_an_anchor, "warning", "lint.duplicate-anchor-table", {"table": "Anchor_City", "type": "city"},
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_each_rule_reports_its_code_and_location(settings: Settings, tmp_path: Path, case: str) -> None:
    breaks, severity, code, where = CASES[case]
    kb = KB()
    breaks(kb)

    problems = lint_kb(settings, kb, tmp_path)

    found = only(problems, code)
    assert len(found) == 1, problems
    assert found[0].severity == severity
    assert found[0].where == where
    assert found[0].message.strip() and "; " in found[0].message  # says what is wrong, then the fix


def test_a_broken_link_column_is_not_also_reported_as_a_link_without_data(
    settings: Settings, tmp_path: Path
) -> None:
    kb = KB()
    _missing_link_column(kb)

    found = sorted((p.code, p.location()) for p in lint_kb(settings, kb, tmp_path))

    # person_city, no longer named by a link, is now just an undescribed column.
    assert found == [
        ("lint.missing-link-column", "Anchor_person.person_town"),
        ("lint.undescribed-column", "Anchor_person.person_city"),
    ]


def test_counts_name_how_many_rows(settings: Settings, tmp_path: Path) -> None:
    kb = KB()
    kb.data["Anchor_person"] += [["p1", "Ada again", "34", ""], ["p1", "Ada thrice", "34", ""]]

    [problem] = only(lint_kb(settings, kb, tmp_path), "lint.duplicate-node-id")

    assert problem.message.startswith("2 row(s) of Anchor_person")


def test_the_regulations_sample_shows_exactly_its_documented_quirks(settings: Settings) -> None:
    folder = SAMPLES / "regulations"
    section = lint(settings, data_model=folder / "model", data=folder / "data")

    found = sorted((p.severity, p.code, p.location()) for p in section.problems)
    assert found == [
        ("warning", "lint.duplicate-node-id", "Anchor_document, type document"),
        ("warning", "lint.formula-error", "Anchor_document, type document"),
        (
            "warning",
            "lint.missing-reference",
            "Link_document_covers_regulation, link DOCUMENT_covers_REGULATION",
        ),
        ("warning", "lint.undescribed-column", "Anchor_document.document_internal_note"),
        ("warning", "lint.undescribed-column", "Link_document_covers_regulation.reviewer"),
    ]
    assert section.status() == "problems"  # warnings only: a check without --strict passes


def test_the_people_sample_is_clean(settings: Settings) -> None:
    folder = SAMPLES / "people"
    section = lint(settings, data_model=folder / "model", data=folder / "data")

    assert section.problems == []
    assert section.details["rows_read"] > 2000


def test_lint_reads_grist_documents_over_the_api(settings: Settings) -> None:
    """The club documents (support.sync_kb) through the fake Grist server, Refs as row ids:
    every data quirk the club was built with that sync drops, and nothing else."""
    with FakeGrist(club_model(), club_data(), api_key=API_KEY) as grist:
        section = lint(grist_settings(settings, grist.url))

    found = sorted((p.code, p.location()) for p in section.problems)
    people, likes = "Anchor_person, type person", "Link_person_has_interest, link PERSON_has_INTEREST"
    assert found == [
        ("lint.duplicate-node-id", people),  # row 4 repeats p1
        ("lint.empty-endpoint", likes),  # from_node_id 0: an empty Ref
        ("lint.formula-error", people),  # Cy's nickname
        ("lint.invalid-value", "Anchor_person.person_age"),  # "n/a" in a Numeric column
        ("lint.link-table-without-link", "Link_misc"),  # IS_COUSIN_OF is no link
        ("lint.missing-node-id", people),  # the row without person_id
        ("lint.missing-reference", likes),  # interest:99
        ("lint.table-without-anchor", "Anchor_planet"),
        ("lint.undescribed-column", "Anchor_interest.interest_rank"),
        ("lint.undescribed-column", "Anchor_person.person_secret"),
        ("lint.undescribed-column", "Link_person_has_interest.note"),
    ]
    assert {p.severity for p in section.problems} == {"warning"}


def test_without_a_source_lint_is_skipped_and_says_how_to_give_one(settings: Settings) -> None:
    section = lint(settings.model_copy(update={"grist_data_model_doc_id": None}))

    assert section.status() == "skipped"
    assert "--data-model" in (section.skipped or "")


def test_a_data_model_alone_is_linted_without_the_data(settings: Settings, tmp_path: Path) -> None:
    kb = KB()
    kb.model["Anchor_attributes"].append(["person", "person_score", "", "", "true", "", "float"])
    model, _ = kb.write(tmp_path)

    section = lint(settings, data_model=model)

    assert [p.code for p in section.problems] == ["lint.embeddable-non-text"]
    assert "not linted" in section.details["data"]


def test_an_unreadable_source_is_an_error(settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()  # a folder without Anchors.csv

    section = lint(settings, data_model=tmp_path / "model")

    [problem] = section.problems
    assert (problem.severity, problem.code) == ("error", "lint.source-unreadable")
    assert "Anchors" in problem.message


def test_attribute_header_is_what_the_model_reader_expects() -> None:
    # Guard for the crafted model: the same columns as samples/*/model/Anchor_attributes.csv.
    header = (SAMPLES / "people" / "model" / "Anchor_attributes.csv").read_text().splitlines()[0].split(",")
    assert header[: len(ATTR_HEADER)] == ATTR_HEADER
