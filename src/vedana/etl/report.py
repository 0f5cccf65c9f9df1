"""What a sync did, per anchor and link type: read / written / unchanged / deleted / skipped."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from vedana.datamodel.report import DataModelReport
from vedana.sources.findings import SourceFindings

# Why a row (or a reference) did not become a node/edge. Keys of `TypeReport.skipped`.
MISSING_ID = "missing id"
DUPLICATE_ID = "duplicate id"
MISSING_ENDPOINT = "missing endpoint"
DANGLING = "dangling endpoint"
UNRESOLVED_REF = "unresolved reference"
DUPLICATE_EDGE = "duplicate edge"

# Cell-level observations. Keys of `TypeReport.cells`.
FORMULA_ERROR = "formula error read as empty"


@dataclass
class TypeReport:
    kind: Literal["node", "edge"]
    name: str
    tables: list[str] = field(default_factory=list)
    read: int = 0  # source rows (nodes, link-table edges) and references (foreign-key edges)
    new: int = 0  # inserted, or back after being deleted
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0  # tombstoned: gone from the source
    skipped: Counter[str] = field(default_factory=Counter)
    cells: Counter[str] = field(default_factory=Counter)
    dropped_columns: list[str] = field(default_factory=list)  # not described in the data model

    @property
    def written(self) -> int:
        return self.new + self.updated

    @property
    def loaded(self) -> int:
        """Live rows of this type after the sync."""
        return self.new + self.updated + self.unchanged

    def to_dict(self) -> dict[str, Any]:
        return {
            "tables": self.tables,
            "read": self.read,
            "loaded": self.loaded,
            "written": self.written,
            "new": self.new,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "skipped": dict(sorted(self.skipped.items())),
            "cells": dict(sorted(self.cells.items())),
            "dropped_columns": self.dropped_columns,
        }


@dataclass
class GristFetch:
    """How the rows of a Grist data document were obtained, for the sync report."""

    path: str  # "changes" | "full"
    reason: str  # why a full read, or what the changes were
    rows_fetched: int = 0
    tables_changed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "reason": self.reason,
            "rows_fetched": self.rows_fetched,
            "tables_changed": self.tables_changed,
        }

    def describe(self) -> str:
        if self.path == "changes":
            return (
                f"fetched {self.rows_fetched:,} changed row(s) of {self.tables_changed} table(s) "
                "(Grist's changes since the last sync)"
            )
        return f"fetched all {self.rows_fetched:,} rows ({self.reason})"


@dataclass
class SyncReport:
    sources: dict[str, str] = field(default_factory=dict)
    data_model: DataModelReport = field(default_factory=DataModelReport)
    nodes: dict[str, TypeReport] = field(default_factory=dict)
    edges: dict[str, TypeReport] = field(default_factory=dict)
    ignored_tables: list[str] = field(default_factory=list)  # not Anchor_*/Link_*, or not in the model
    missing_tables: list[str] = field(default_factory=list)  # anchors without an Anchor_<noun> table
    notes: list[str] = field(default_factory=list)
    data_model_only: bool = False
    unchanged_early: bool = False  # neither document changed since the last sync: nothing read
    seconds: float = 0.0  # from connected to Postgres to committed
    version: int | None = None  # highest staging version after the sync
    run_id: int | None = None
    grist_fetch: GristFetch | None = None  # Grist API data: changed rows only, or all (why)
    # Per data table, which path normalised it: "incremental: 1,000 changed rows of 100,000"
    # (only changed rows were normalised and diffed) or "full: <why>".
    paths: dict[str, str] = field(default_factory=dict)
    # What the sources repaired or skipped as they read: NUL characters, malformed CSV rows.
    findings: SourceFindings = field(default_factory=SourceFindings)
    # What `--allow-deletions` let through that the deletion guard would have refused.
    deletions_allowed: list[str] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return self.findings.messages()

    def node(self, noun: str) -> TypeReport:
        found = self.nodes.get(noun)
        if found is None:
            found = self.nodes[noun] = TypeReport("node", noun)
        return found

    def edge(self, sentence: str) -> TypeReport:
        found = self.edges.get(sentence)
        if found is None:
            found = self.edges[sentence] = TypeReport("edge", sentence)
        return found

    @staticmethod
    def _total(reports: dict[str, TypeReport]) -> dict[str, Any]:
        skipped: Counter[str] = Counter()
        for r in reports.values():
            skipped.update(r.skipped)
        return {
            "read": sum(r.read for r in reports.values()),
            "loaded": sum(r.loaded for r in reports.values()),
            "written": sum(r.written for r in reports.values()),
            "unchanged": sum(r.unchanged for r in reports.values()),
            "deleted": sum(r.deleted for r in reports.values()),
            "skipped": dict(sorted(skipped.items())),
        }

    @property
    def rows_read(self) -> int:
        return sum(r.read for r in self.nodes.values()) + sum(r.read for r in self.edges.values())

    @property
    def changed(self) -> bool:
        rows = [*self.nodes.values(), *self.edges.values()]
        return self.data_model.changed or any(r.written or r.deleted for r in rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "changed": self.changed,
            "unchanged_early": self.unchanged_early,
            "data_model_only": self.data_model_only,
            "sources": self.sources,
            "data_model": self.data_model.to_dict(),
            "nodes": {k: v.to_dict() for k, v in sorted(self.nodes.items())},
            "edges": {k: v.to_dict() for k, v in sorted(self.edges.items())},
            "totals": {"nodes": self._total(self.nodes), "edges": self._total(self.edges)},
            "ignored_tables": self.ignored_tables,
            "missing_tables": self.missing_tables,
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
            "rows_per_s": round(self.rows_read / self.seconds, 1) if self.seconds > 0 else None,
            "version": self.version,
            "run_id": self.run_id,
            "grist_fetch": self.grist_fetch.to_dict() if self.grist_fetch else None,
            "paths": self.paths,
            "warnings": self.warnings,
            "deletions_allowed": self.deletions_allowed,
            **self.findings.to_dict(),
        }
