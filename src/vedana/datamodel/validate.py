"""Model rules of `vedana check`'s lint: what the Data Model document's own rows get wrong.

Links naming anchors that do not exist, attributes of unknown anchors or links, names that
match only when case is ignored, embeddable flags on values that are never embedded, and the
rows reading the model skips. The data rules (the data document against the model) are in
`vedana.ops.lint`. Names that cannot be graph names are refused earlier, by `read_data_model`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from vedana.datamodel.dtypes import NON_TEXT_DTYPES, is_identifier
from vedana.datamodel.model import Anchor, DataModel, Link
from vedana.datamodel.report import BLANK_ROW, DataModelReport
from vedana.problems import Problem, error, warning
from vedana.sources import CELL_ERROR, RawTable, Ref, Source

# Rows reading the model skips for reasons a rule below reports in more detail.
_COVERED_SKIPS = ("unknown anchor1/anchor2", "unknown anchor", "unknown link", BLANK_ROW)


def model_problems(source: Source, dm: DataModel, report: DataModelReport) -> list[Problem]:
    """Every model rule's problems for the model read from `source`."""
    problems = _model_references(source, dm)
    problems += [
        warning(
            "lint.model-row-skipped",
            f"{what} ({n} row(s)), which sync skips or reads differently; fix those rows",
            table=what.split(":", 1)[0],
        )
        for what, n in sorted(report.skipped.items())
        if not any(what.endswith(skip) for skip in _COVERED_SKIPS)
    ]
    problems += _embeddable_flags(dm)
    return problems


def _text(value: Any) -> str:
    if value is None or value is CELL_ERROR:
        return ""
    if isinstance(value, Ref):
        return ", ".join(value.labels)
    return str(value).strip()


def _find_table(source: Source, name: str) -> RawTable | None:
    actual = next((n for n in source.table_names() if n.lower() == name.lower()), None)
    return source.table(actual) if actual else None


def _rows(table: RawTable | None) -> Iterator[tuple[int, dict[str, Any]]]:
    if table is not None:
        yield from table.rows()


def _key_rows(source: Source, table: str, key: str) -> dict[int, str]:
    """Row id → key text (noun, sentence) of a model table, for resolving Ref cells."""
    return {row_id: _text(cells.get(key)) for row_id, cells in _rows(_find_table(source, table))}


def _ref_name(value: Any, by_row: dict[int, str]) -> str:
    """The name a Ref cell of the model points at: by row id (API, .grist) or display text (CSV)."""
    if isinstance(value, Ref):
        if value.row_ids:
            return by_row.get(value.row_ids[0], "")
        return value.labels[0] if value.labels else ""
    if isinstance(value, int) and not isinstance(value, bool):
        return by_row.get(value, "")
    return _text(value)


def _match(name: str, known: list[str]) -> tuple[str | None, bool]:
    """(the known name `name` refers to, whether only ignoring case)."""
    if name in known:
        return name, False
    folded = next((k for k in known if k.lower() == name.lower()), None)
    return folded, folded is not None


def _model_references(source: Source, dm: DataModel) -> list[Problem]:
    """Links naming anchors that do not exist; attributes of unknown anchors or links; names
    that resolve only when case is ignored."""
    problems: list[Problem] = []
    nouns = [a.noun for a in dm.anchors]
    anchors_by_row = _key_rows(source, "Anchors", "noun")
    links_by_row = _key_rows(source, "Links", "sentence")
    all_sentences = [s for s in links_by_row.values() if s]

    for _, cells in _rows(_find_table(source, "Links")):
        sentence = _text(cells.get("sentence"))
        if not sentence:
            continue
        for column in ("anchor1", "anchor2"):
            name = _ref_name(cells.get(column), anchors_by_row)
            found, folded = _match(name, nouns)
            if found is None:
                problems.append(
                    error(
                        "lint.link-unknown-anchor",
                        f"link {sentence} names {column} {name or '(empty)'!r}, which is not an anchor; "
                        f"use one of: {', '.join(nouns) or 'none'} (sync skips this link)",
                        table="Links",
                        column=column,
                        link=sentence,
                    )
                )
            elif folded:
                problems.append(case_mismatch(f"link {sentence}'s {column} {name!r}", found, "Links", column))

    for table, owner_col, owners, by_row in (
        ("Anchor_attributes", "anchor", nouns, anchors_by_row),
        ("Link_attributes", "link", all_sentences, links_by_row),
    ):
        for _, cells in _rows(_find_table(source, table)):
            attribute = _text(cells.get("attribute_name"))
            if not attribute:
                continue
            name = _ref_name(cells.get(owner_col), by_row)
            found, folded = _match(name, owners)
            if found is None:
                problems.append(
                    error(
                        "lint.attribute-unknown-owner",
                        f"attribute {attribute} belongs to {owner_col} {name or '(empty)'!r}, which the "
                        f"model does not have; point it at an existing {owner_col} (sync skips it)",
                        table=table,
                        column=owner_col,
                        attribute=attribute,
                    )
                )
            elif folded:
                problems.append(
                    case_mismatch(f"attribute {attribute}'s {owner_col} {name!r}", found, table, owner_col)
                )
    return problems


def case_mismatch(what: str, actual: str, table: str, column: str = "") -> Problem:
    where = {"table": table, **({"column": column} if column else {})}
    return warning(
        "lint.case-mismatch",
        f"{what} matches {actual!r} only when case is ignored; write it exactly as {actual!r} "
        "(graph labels and Cypher are case-sensitive)",
        **where,
    )


def _embeddable_flags(dm: DataModel) -> list[Problem]:
    """Embeddable set on numbers, dates, booleans or ids: the index never embeds those."""
    problems = []
    owners: list[tuple[str, Anchor | Link, str]] = [("Anchor_attributes", a, a.noun) for a in dm.anchors]
    owners += [("Link_attributes", lk, lk.sentence) for lk in dm.links]
    for table, owner, label in owners:
        for attr in owner.attributes:
            if not attr.embeddable:
                continue
            dtype = attr.dtype.strip().lower()
            if dtype in NON_TEXT_DTYPES:
                why = f"its dtype is {dtype}"
            elif is_identifier(label, attr.name):
                why = "it is an identifier"
            else:
                continue
            problems.append(
                warning(
                    "lint.embeddable-non-text",
                    f"{label}.{attr.name} is marked embeddable but {why}, so it is never embedded; "
                    "clear its embeddable flag (search it with Cypher instead)",
                    table=table,
                    type=label,
                    attribute=attr.name,
                )
            )
    return problems
