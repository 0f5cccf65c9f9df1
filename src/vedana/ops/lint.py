"""Data-model lint: does the Data Model document describe the data document, and is the data
what sync expects? Reads the same sources as `vedana sync`, writes nothing.

Model rules look at the Data Model's own rows (links whose anchors do not exist, attributes of
unknown anchors, embeddable flags on values that are never embedded, rows sync skips). Data
rules compare each `Anchor_`/`Link_` table with the model (tables without a model row and vice
versa, described attributes without a column, columns nobody described, link columns that do
not exist, names that match only when case is ignored), then run sync's own normaliser over the
rows without writing, so duplicate node ids and references to missing rows are counted exactly
as a sync would count them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vedana.datamodel import Anchor, DataModel
from vedana.datamodel.read import read_data_model
from vedana.datamodel.validate import case_mismatch, model_problems
from vedana.errors import ConfigError, VedanaError
from vedana.etl.normalize import (
    ANCHOR_PREFIX,
    FROM,
    LABEL,
    LINK_PREFIX,
    TO,
    Normalizer,
    TablePlan,
    plan_tables,
)
from vedana.etl.report import (
    DANGLING,
    DUPLICATE_ID,
    FORMULA_ERROR,
    MISSING_ENDPOINT,
    MISSING_ID,
    UNRESOLVED_REF,
    SyncReport,
)
from vedana.problems import Problem, SectionResult, error, warning
from vedana.sources import RawTable, Source, is_helper_column, open_source
from vedana.sources.findings import SourceFindings, findings_of

if TYPE_CHECKING:
    from vedana.config import Settings


def lint(
    settings: Settings,
    *,
    data_model: str | Path | Source | None = None,
    data: str | Path | Source | None = None,
    csv: bool = False,
) -> SectionResult:
    """Lint the given (or configured) Data Model and data sources; skipped when neither is
    given nor configured."""
    started = time.monotonic()
    result = SectionResult("lint")
    sources: list[Source] = []
    try:
        try:
            model_source = open_source(data_model, role="data_model", settings=settings, csv=csv)
        except ConfigError as exc:
            result.skipped = str(exc)  # names what is missing and how to give it
            return result
        sources.append(model_source)
        data_source = None
        if data is not None or settings.grist_data_doc_id:
            data_source = open_source(data, role="data", settings=settings, csv=csv)
            sources.append(data_source)
        else:
            result.details["data"] = "not linted: pass --data or set GRIST_DATA_DOC_ID"
        lint_sources(model_source, data_source, result)
        for source in sources:  # what a source could not carry (the CSV export's lost columns)
            result.problems += [warning("lint.source-loss", note) for note in getattr(source, "notes", ())]
    except VedanaError as exc:
        result.problems.append(
            error(
                "lint.source-unreadable",
                f"cannot read the source: {exc}",
                source=str(data_model or data or "the configured Grist documents"),
            )
        )
    finally:
        for source in sources:
            source.close()
        result.seconds = time.monotonic() - started
    return result


def lint_sources(model_source: Source, data_source: Source | None, result: SectionResult) -> None:
    """Append the problems of these sources to `result`."""
    dm, dm_report = read_data_model(model_source)
    result.details.update(
        data_model=model_source.describe(),
        anchors=len(dm.anchors),
        links=len(dm.links),
    )
    problems = result.problems
    problems += model_problems(model_source, dm, dm_report)
    if data_source is None:
        problems += _source_findings(findings_of(model_source))
        return
    result.details["data"] = data_source.describe()
    plan = plan_tables(dm, data_source)
    names = data_source.table_names()
    problems += _anchor_tables(dm, plan, names)
    problems += _link_columns(dm, plan)
    for anchor, table in plan.anchors:
        problems += _anchor_columns(dm, anchor, table)
    report = _dry_run(dm, plan)
    problems += _link_tables(dm, plan, names, report)
    problems += _links_without_data(dm, plan, report)
    problems += _row_findings(report)
    problems += _source_findings(findings_of(model_source, data_source))
    result.details.update(
        tables=len(plan.anchors) + len(plan.links),
        rows_read=report.rows_read,
    )


# --- tables and columns of the data document --------------------------------------------------------


def _anchor_tables(dm: DataModel, plan: TablePlan, names: list[str]) -> list[Problem]:
    problems = []
    used = {table.name for _, table in plan.anchors}
    nouns = {a.noun.lower(): a.noun for a in dm.anchors}
    for name in names:
        if not name.startswith(ANCHOR_PREFIX) or name in used:
            continue
        noun = nouns.get(name[len(ANCHOR_PREFIX) :].lower())
        if noun is None:
            problems.append(
                warning(
                    "lint.table-without-anchor",
                    f"{name} has no row in the model's Anchors table, so its rows are ignored; "
                    f"add an anchor {name[len(ANCHOR_PREFIX) :]!r} or rename/delete the table",
                    table=name,
                )
            )
        else:
            problems.append(
                warning(
                    "lint.duplicate-anchor-table",
                    f"{name} is a second table for anchor {noun}; only "
                    f"{next(t.name for a, t in plan.anchors if a.noun == noun)} is read: merge or delete it",
                    table=name,
                    type=noun,
                )
            )
    for anchor, table in plan.anchors:
        if table.name != ANCHOR_PREFIX + anchor.noun:
            problems.append(case_mismatch(f"table {table.name}", ANCHOR_PREFIX + anchor.noun, table.name))
    for noun in plan.missing:
        problems.append(
            error(
                "lint.anchor-without-table",
                f"anchor {noun} has no {ANCHOR_PREFIX}{noun} table in the data, so it has no nodes; "
                "add the table or delete the anchor from the model",
                type=noun,
                table=ANCHOR_PREFIX + noun,
            )
        )
    return problems


def _link_column_names(dm: DataModel, noun: str) -> set[str]:
    """Columns of `Anchor_<noun>` that hold a link's references (never properties)."""
    names = set()
    for link in dm.links:
        if link.anchor1 == noun and link.anchor1_link_column_name:
            names.add(link.anchor1_link_column_name.lower())
        if link.anchor2 == noun and link.anchor2_link_column_name:
            names.add(link.anchor2_link_column_name.lower())
    return names


def _anchor_columns(dm: DataModel, anchor: Anchor, table: RawTable) -> list[Problem]:
    problems = []
    for attr in anchor.attributes:
        column = table.column(attr.name)
        if column is None:
            problems.append(
                error(
                    "lint.missing-attribute-column",
                    f"attribute {attr.name} of {anchor.noun} is described but {table.name} has no such "
                    "column; add the column or delete the attribute from Anchor_attributes",
                    table=table.name,
                    column=attr.name,
                    type=anchor.noun,
                )
            )
        elif column.id != attr.name:
            problems.append(case_mismatch(f"column {column.id}", attr.name, table.name, column.id))
    described = {a.name.lower() for a in anchor.attributes}
    exempt = {f"{anchor.noun}_id".lower(), "node_id"} | _link_column_names(dm, anchor.noun)
    for name in table.columns:
        if is_helper_column(name) or name.lower() in exempt or name.lower() in described:
            continue
        problems.append(
            warning(
                "lint.undescribed-column",
                f"{table.name}.{name} is not described in Anchor_attributes, so it never reaches "
                "the graph; describe it or delete the column",
                table=table.name,
                column=name,
                type=anchor.noun,
            )
        )
    return problems


def _link_columns(dm: DataModel, plan: TablePlan) -> list[Problem]:
    """Each `anchorN_link_column_name` must be a column of `Anchor_<anchorN>`."""
    problems = []
    tables = {anchor.noun: table for anchor, table in plan.anchors}
    for link in dm.links:
        for side, noun, name in (
            ("anchor1_link_column_name", link.anchor1, link.anchor1_link_column_name),
            ("anchor2_link_column_name", link.anchor2, link.anchor2_link_column_name),
        ):
            table = tables.get(noun)
            if not name or table is None:
                continue
            column = table.column(name)
            if column is None:
                problems.append(
                    error(
                        "lint.missing-link-column",
                        f"link {link.sentence} names {side} {name!r} but {table.name} has no such column, "
                        "so none of its edges load; fix the name in Links or add the column",
                        table=table.name,
                        column=name,
                        link=link.sentence,
                    )
                )
            elif column.id != name:
                problems.append(
                    case_mismatch(f"link {link.sentence}'s {side} {name!r}", column.id, "Links", side)
                )
    return problems


def _link_tables(dm: DataModel, plan: TablePlan, names: list[str], report: SyncReport) -> list[Problem]:
    problems = []
    planned = {table.name: (table, candidates) for table, candidates in plan.links}
    loaded_from = {t for stats in report.edges.values() for t in stats.tables}
    for name in names:
        if not name.startswith(LINK_PREFIX):
            continue
        table, candidates = planned.get(name, (None, []))
        if not candidates and name not in loaded_from:
            problems.append(
                warning(
                    "lint.link-table-without-link",
                    f"{name} matches no link of the model (by sentence or <anchor1>_<anchor2>) and no "
                    "row's edge_label names one, so its rows are ignored; add the link to Links or "
                    "rename the table",
                    table=name,
                )
            )
            continue
        if table is None:
            continue
        if table.column(FROM) is None or table.column(TO) is None:
            problems.append(
                error(
                    "lint.link-table-columns",
                    f"{name} needs {FROM} and {TO} columns holding node ids; add them",
                    table=name,
                )
            )
            continue
        for link in candidates:
            for attr in link.attributes:
                if table.column(attr.name) is None:
                    problems.append(
                        error(
                            "lint.missing-attribute-column",
                            f"attribute {attr.name} of link {link.sentence} is described but {name} has no "
                            "such column; add the column or delete the attribute from Link_attributes",
                            table=name,
                            column=attr.name,
                            link=link.sentence,
                        )
                    )
        described = {a.name.lower() for link in candidates for a in link.attributes}
        structural = {FROM, TO, LABEL}
        for column in table.columns:
            if is_helper_column(column) or column.lower() in structural or column.lower() in described:
                continue
            problems.append(
                warning(
                    "lint.undescribed-column",
                    f"{name}.{column} is not described in Link_attributes, so it never reaches the "
                    "graph; describe it or delete the column",
                    table=name,
                    column=column,
                )
            )
    return problems


def _links_without_data(dm: DataModel, plan: TablePlan, report: SyncReport) -> list[Problem]:
    with_table = {link.sentence for _, candidates in plan.links for link in candidates}
    problems = []
    for link in dm.links:
        has_columns = link.anchor1_link_column_name or link.anchor2_link_column_name
        stats = report.edges.get(link.sentence)
        tables = stats.tables if stats else ()
        from_table = link.sentence in with_table or any(t.startswith(LINK_PREFIX) for t in tables)
        if has_columns and link.attributes and not from_table:
            # A link column carries only the endpoint: its attributes have no column to come from.
            problems.append(
                warning(
                    "lint.link-attributes-without-table",
                    f"link {link.sentence} is read from a link column only, so its attributes "
                    f"({', '.join(a.name for a in link.attributes)}) have no column and no edge gets them; "
                    f"add a {LINK_PREFIX}{link.sentence} table with those columns or delete the attributes",
                    link=link.sentence,
                )
            )
        if has_columns or from_table or tables:
            continue
        problems.append(
            error(
                "lint.link-without-data",
                f"link {link.sentence} has no {LINK_PREFIX} table and no link column, so it never has "
                f"edges; add a {LINK_PREFIX}{link.sentence} table or set anchor1_link_column_name",
                link=link.sentence,
            )
        )
    return problems


# --- the rows, as sync's normaliser sees them -------------------------------------------------------


def _dry_run(dm: DataModel, plan: TablePlan) -> SyncReport:
    """Normalise every row exactly as sync would, keeping only the counts."""
    report = SyncReport()
    normalizer = Normalizer(dm, report)
    normalizer.prepare(plan)
    for anchor, table in plan.anchors:
        for _ in normalizer.nodes(anchor, table):
            pass
    for table, candidates in plan.links:
        for _ in normalizer.link_table_edges(table, candidates):
            pass
    for _ in normalizer.foreign_key_edges():
        pass
    normalizer.finish()
    return report


def _row_findings(report: SyncReport) -> list[Problem]:
    problems = []
    for noun, stats in sorted(report.nodes.items()):
        table = ", ".join(stats.tables) or ANCHOR_PREFIX + noun
        if stats.skipped[DUPLICATE_ID]:
            problems.append(
                warning(
                    "lint.duplicate-node-id",
                    f"{stats.skipped[DUPLICATE_ID]} row(s) of {table} repeat a node id of an earlier row; "
                    f"only the first loads: give every row its own {noun}_id",
                    table=table,
                    type=noun,
                )
            )
        if stats.skipped[MISSING_ID]:
            problems.append(
                warning(
                    "lint.missing-node-id",
                    f"{stats.skipped[MISSING_ID]} row(s) of {table} have no {noun}_id, so they do not "
                    "load; fill in the id",
                    table=table,
                    type=noun,
                )
            )
        problems += _cell_findings(stats, table, type=noun)
    for sentence, stats in sorted(report.edges.items()):
        table = ", ".join(stats.tables)
        missing = stats.skipped[UNRESOLVED_REF] + stats.skipped[DANGLING]
        if missing:
            problems.append(
                warning(
                    "lint.missing-reference",
                    f"{missing} reference(s) of link {sentence} in {table} point at rows that do not "
                    "exist, so those edges do not load; fix or delete them",
                    table=table,
                    link=sentence,
                )
            )
        if stats.skipped[MISSING_ENDPOINT]:
            problems.append(
                warning(
                    "lint.empty-endpoint",
                    f"{stats.skipped[MISSING_ENDPOINT]} row(s) of {table} leave {FROM} or {TO} empty, so "
                    "they do not load; fill both in",
                    table=table,
                    link=sentence,
                )
            )
        problems += _cell_findings(stats, table, link=sentence)
    return problems


def _source_findings(found: SourceFindings) -> list[Problem]:
    """What the sources repaired or skipped while being read, as sync reports it."""
    problems = [
        warning(
            "lint.nul-character",
            f"{table.nul_message(column)}: Postgres text cannot hold NUL, so sync removes it; clean the source",
            table=table.where,
            column=column.column,
        )
        for table, column in found.nul_columns()
    ]
    problems += [
        warning(
            "lint.malformed-row",
            f"{table.malformed_message()}; sync skips them: fix the rows",
            table=table.where,
        )
        for table in found.malformed_tables()
    ]
    return problems


def _cell_findings(stats: Any, table: str, **owner: str) -> list[Problem]:
    problems = []
    for what, n in sorted(stats.cells.items()):
        if what == FORMULA_ERROR:
            problems.append(
                warning(
                    "lint.formula-error",
                    f"{n} cell(s) of {table} hold a failed formula and are read as empty; fix the formula",
                    table=table,
                    **owner,
                )
            )
        else:
            column, _, reason = what.partition(": ")
            problems.append(
                warning(
                    "lint.invalid-value",
                    f"{n} value(s) of {table}.{column} are {reason} and are "
                    "left out; fix the values or the attribute's dtype",
                    table=table,
                    column=column,
                    **owner,
                )
            )
    return problems
