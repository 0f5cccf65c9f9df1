"""Whether a sync may delete what it staged: never a whole type lost to a renamed table or id column,
nor more than a set share of any type's rows, unless asked to (`--allow-deletions`).

A type the data model no longer names is deleted on purpose: the model changing is the explicit step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vedana.errors import DeletionRefused
from vedana.etl.normalize import ANCHOR_PREFIX, LINK_PREFIX, TablePlan

if TYPE_CHECKING:
    from vedana.datamodel import DataModel, Link
    from vedana.etl.report import SyncReport
    from vedana.sources.base import RawTable
    from vedana.stores.staged_deletions import StagedDeletion

FLAG = "--allow-deletions"


@dataclass(frozen=True)
class DeletionLimits:
    """How much one sync may delete of a type before it needs `--allow-deletions`."""

    share: float = 0.5  # VEDANA_MAX_DELETE_SHARE: of a type's live rows
    floor: int = 10  # VEDANA_MAX_DELETE_FLOOR: deleting this many rows of a type or fewer always passes
    allow: bool = False  # --allow-deletions


@dataclass(frozen=True)
class Cause:
    """Why a type's rows went: what is missing from the data document, and how to undo it."""

    text: str
    fix: str


@dataclass(frozen=True)
class Refusal:
    deletion: StagedDeletion
    cause: Cause


def check_deletions(
    deletions: list[StagedDeletion],
    dm: DataModel,
    plan: TablePlan,
    report: SyncReport,
    limits: DeletionLimits,
) -> list[str]:
    """Raise `DeletionRefused` (one line: the cause, what would go, the fix) when the staged sync
    deletes too much; with `limits.allow`, return what the guard let through, for the report."""
    refused = refusals(deletions, dm, plan, report, limits)
    if not refused:
        return []
    if not limits.allow:
        raise DeletionRefused(refusal_message(refused))
    return [f"{FLAG}: {_amount(r.deletion)} deleted ({r.cause.text})" for r in refused]


def refusals(
    deletions: list[StagedDeletion],
    dm: DataModel,
    plan: TablePlan,
    report: SyncReport,
    limits: DeletionLimits,
) -> list[Refusal]:
    """The deletions over the limits, a missing table's or column's first."""
    named = {("node", a.noun) for a in dm.anchors} | {("edge", lk.sentence) for lk in dm.links}
    emptied = {d.name for d in deletions if d.kind == "node" and d.deleted >= d.before}
    causes = structural_causes(dm, plan, report, emptied)
    found: list[Refusal] = []
    for deletion in deletions:
        key = (deletion.kind, deletion.name)
        if key not in named:
            continue
        cause = causes.get(key)
        if cause is not None and deletion.deleted >= deletion.before:
            found.append(Refusal(deletion, cause))
        elif deletion.deleted > limits.floor and deletion.deleted > limits.share * deletion.before:
            found.append(Refusal(deletion, _over_share(limits)))
    order = list(dict.fromkeys(c for c in causes.values()))
    found.sort(key=lambda r: order.index(r.cause) if r.cause in order else len(order))
    return found


def refusal_message(refused: list[Refusal]) -> str:
    """One line: the first cause, every type it costs, how many other types are over the limit."""
    first = refused[0].cause
    same = [r.deletion for r in refused if r.cause == first]
    others = len(refused) - len(same)
    more = f" (and {others} more type(s) over the limit)" if others else ""
    return f"{first.text}: this sync would delete {_listing(same)}{more}; {first.fix}"


def structural_causes(
    dm: DataModel, plan: TablePlan, report: SyncReport, emptied: set[str]
) -> dict[tuple[str, str], Cause]:
    """Per node type and link the model names, what is missing from the data document that would
    empty it: its table, its id column (when the type is `emptied` while its table still makes
    nodes: ids fell back to row numbers), a link's column or table, or an end's own cause."""
    causes: dict[tuple[str, str], Cause] = {}
    tables = {anchor.noun: table for anchor, table in plan.anchors}
    for noun in plan.missing:
        causes["node", noun] = Cause(
            f"table {ANCHOR_PREFIX}{noun} of anchor {noun} is missing from the data document",
            f"rename it back, remove the anchor from the data model, or run with {FLAG}",
        )
    for noun, table in tables.items():
        id_columns = (f"{noun}_id", "node_id")
        renamed = noun in emptied and _loaded(report, noun)
        if renamed and all(table.column(c) is None for c in id_columns):
            causes["node", noun] = Cause(
                f"table {table.name} has no column {id_columns[0]} or {id_columns[1]}, so every {noun} "
                f"node would get a new id ({noun}:<row id>)",
                f"restore the id column (or check that this is the right data document), or run with {FLAG}",
            )
    linked = {lk.sentence for _, candidates in plan.links for lk in candidates}
    for link in dm.links:
        cause = _link_cause(link, causes, tables, linked)
        if cause is not None:
            causes["edge", link.sentence] = cause
    return causes


def _loaded(report: SyncReport, noun: str) -> int:
    stats = report.nodes.get(noun)
    return stats.loaded if stats is not None else 0


def _link_cause(
    link: Link, causes: dict[tuple[str, str], Cause], tables: dict[str, RawTable], linked: set[str]
) -> Cause | None:
    """What would empty a link: its ends' own cause (a missing table or id column), a missing link
    column or link table."""
    for end in (link.anchor1, link.anchor2):
        if ("node", end) in causes:
            return causes["node", end]
    sides = ((link.anchor1, link.anchor1_link_column_name), (link.anchor2, link.anchor2_link_column_name))
    columns = [(tables[own], name) for own, name in sides if name and own in tables]
    for table, name in columns:
        if table.column(name) is None:
            return Cause(
                f"table {table.name} has no column {name} named by link {link.sentence}",
                f"restore the column, or run with {FLAG}",
            )
    if not columns and link.sentence not in linked:
        return Cause(
            f"no table {LINK_PREFIX}{link.sentence} (nor {LINK_PREFIX}{link.anchor1}_{link.anchor2}) of link "
            f"{link.sentence} is in the data document",
            f"rename it back, remove the link from the data model, or run with {FLAG}",
        )
    return None


def _over_share(limits: DeletionLimits) -> Cause:
    return Cause(
        f"over VEDANA_MAX_DELETE_SHARE ({limits.share:.0%}) of a type's rows, and over "
        f"VEDANA_MAX_DELETE_FLOOR ({limits.floor:,}) rows",
        f"check the data document, or run with {FLAG}",
    )


def _amount(deletion: StagedDeletion) -> str:
    whole = "all " if deletion.deleted >= deletion.before else ""
    of = "" if whole else f" of {deletion.before:,}"
    return f"{whole}{deletion.deleted:,}{of} {deletion.name} {deletion.kind}s"


def _listing(deletions: list[StagedDeletion], shown: int = 3) -> str:
    parts = [_amount(d) for d in deletions[:shown]]
    if len(deletions) > shown:
        parts.append(f"{len(deletions) - shown} more type(s)")
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
