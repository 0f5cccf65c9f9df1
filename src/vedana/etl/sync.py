"""`sync`: the data model and the data from Grist (or a `.grist` file, or CSV) into Postgres staging.

One run = one Postgres transaction under the writer lock, logged in the run log:

1. ask each source what its content is: the Grist server's latest action hash (`/states`),
   or a digest of the `.grist` file / CSV files; when both equal what the last successful sync
   stored, stop early: nothing changed;
2. read the Data Model document, store it if it differs from the stored one;
3. unless `data_model_only`: plan the data document's tables, stream every `Anchor_*` table
   into nodes, then `Link_*` tables and link columns into edges (`vedana.etl.normalize`), and
   write them to staging (`vedana.stores.staging_write`: straight in on a first sync, else the
   difference); after a small edit, only the changed rows when that gives the same result
   (`vedana.etl.resync`: the report's `paths` say which ran per table);
4. store the action hashes and commit.

Any error rolls the whole transaction back: staging stays as the previous sync left it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vedana.datamodel.read import read_data_model
from vedana.errors import SourceError
from vedana.etl.deletion_guard import DeletionLimits, check_deletions
from vedana.etl.gc_pause import cyclic_gc_paused
from vedana.etl.grist_mirror import refresh_mirror
from vedana.etl.normalize import (
    FROM,
    TO,
    Normalizer,
    TablePlan,
    note_missing_attribute_columns,
    plan_tables,
)
from vedana.etl.report import DUPLICATE_EDGE, SyncReport, TypeReport
from vedana.etl.resync import (
    FullSync,
    Recorder,
    apply_reading,
    loaded_before,
    plan_incremental,
    signature,
    summary_of,
)
from vedana.sources import Source, open_source
from vedana.sources.findings import findings_of
from vedana.sources.grist_api import GristApiSource
from vedana.stores.staged_deletions import staged_deletions
from vedana.stores.staging_write import Counts, StagingWriter
from vedana.stores.sync_rows import save_rows

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from vedana.config import Settings
    from vedana.datamodel import DataModel
    from vedana.sources.base import KeptLines
    from vedana.stores.sync_rows import TableRows

__all__ = ["SyncReport", "sync"]

ProgressCallback = Callable[[str, int, "int | None"], None]

STATE_KEY = "sync.grist_states"
# Bump when normalisation changes, so an unchanged Grist document is still read again once.
# 2: floats with an exponent written positionally (jsonb kept 1e20 as an integer); 3: a link-table
# row's recorded outcome names its link by place in the model, not by sentence.
NORMALIZE_VERSION = 3
_PROGRESS_EVERY = 500


def sync(
    settings: Settings,
    *,
    data_model: str | Path | Source | None = None,
    data: str | Path | Source | None = None,
    csv: bool = False,
    data_model_only: bool = False,
    on_progress: ProgressCallback | None = None,
    full: bool = False,
    strict: bool = False,
    allow_deletions: bool = False,
) -> SyncReport:
    """Sync the data model (and, unless `data_model_only`, the data) into staging.

    `data_model` / `data`: a folder of CSV files, a `.grist` file, or a Grist document id on
    `settings.grist_server_url` (read over the API, or via its CSV export with `csv=True`);
    None means the configured `GRIST_DATA_MODEL_DOC_ID` / `GRIST_DATA_DOC_ID`.
    `full`: read and compare everything even when the documents did not change since the last
    sync (their Grist action hash, or the files' digest, is what the last sync stored).
    `strict`: fail, writing nothing, when a source had to be repaired (NUL characters removed)
    or had malformed rows skipped; without it they are warnings of the report.
    `allow_deletions`: let through what the deletion guard refuses (`vedana.etl.deletion_guard`:
    a type emptied by a missing table or id column, or more than a set share of a type's rows).
    Sources passed in as objects are closed when the sync ends.
    """
    from vedana.stores.postgres import get_engine
    from vedana.stores.run_log import record_run
    from vedana.stores.staging import writer_lock

    progress = on_progress or _no_progress
    sources: list[Source] = []
    try:
        model_source = open_source(data_model, role="data_model", settings=settings, csv=csv)
        sources.append(model_source)
        data_source = None
        if not data_model_only:
            data_source = open_source(data, role="data", settings=settings, csv=csv)
            sources.append(data_source)
        report = SyncReport(data_model_only=data_model_only)
        report.sources = {"data_model": model_source.describe()}
        if data_source is not None:
            report.sources["data"] = data_source.describe()

        engine = get_engine(settings)
        started = time.monotonic()  # the sync's own time, not starting Postgres or migrating
        with record_run(engine, "sync", source="; ".join(report.sources.values())) as run:
            report.run_id = run.id
            with writer_lock(engine, on_notice=report.notes.append):
                progress("check for changes", 0, None)
                with engine.connect() as conn:
                    stored = _stored_states(conn)
                # The data's digest is taken by its reading when its files were touched since
                # the last sync, rather than by a whole reading of its own first.
                listing = _listing(data_source)
                later = None if full else _state_read_later(data_source, stored, listing)
                states = _current_states(model_source, data_source, listing, data_later=later is not None)
                unchanged = not full and _unchanged_since_last_sync(stored, states, data_model_only)
                if unchanged:
                    report.unchanged_early = True
                    run.status = "unchanged"
                else:
                    rows_source = data_source
                    if isinstance(data_source, GristApiSource) and data_source.rows_via == "sql":
                        progress("fetch from Grist", 0, None)
                        rows_source, fetch = refresh_mirror(engine, data_source, full=full)
                        report.grist_fetch = fetch
                    with engine.begin() as conn, cyclic_gc_paused(), _RowsAhead() as ahead:
                        if not full and rows_source is not None:
                            ahead.start(engine, rows_source.describe(), _hash_ahead(conn, rows_source))
                        planned = _sync_into(
                            conn, model_source, rows_source, report, progress, full=full, kept=ahead
                        )
                        if planned is not None:
                            _guard_deletions(conn, *planned, report, settings, allow=allow_deletions)
                        # What a source could not carry (the CSV export's lost columns), said once.
                        report.notes += [n for s in sources for n in getattr(s, "notes", ())]
                        report.findings = findings_of(model_source, rows_source)
                        if strict and report.findings:
                            raise SourceError(strict_failure(report.warnings))
                        if later is not None:
                            states["data"] = later()
                        _store_states(conn, states, stored, data_model_only, report.data_model.changed)
                        if data_source is not None:
                            _store_where_from(conn, data_source)
            report.seconds = time.monotonic() - started
            run.counts = _run_counts(report)
        return report
    finally:
        for source in sources:
            source.close()


def _guard_deletions(
    conn: Connection, dm: DataModel, plan: TablePlan, report: SyncReport, settings: Settings, *, allow: bool
) -> None:
    """Before commit: refuse (`DeletionRefused`, rolling everything back) what the staged rows
    would delete beyond the guard's limits, or note what `allow` let through."""
    limits = DeletionLimits(settings.max_delete_share, settings.max_delete_floor, allow)
    report.deletions_allowed = check_deletions(staged_deletions(conn), dm, plan, report, limits)
    report.notes += report.deletions_allowed


def _hash_ahead(conn: Connection, source: Source) -> dict[str, KeptLines] | None:
    """A re-sync starts by checksumming every row: a source that can do that on a thread of its
    own starts now, with what the last sync kept of its files' lines to check them against,
    while the sync reads the rest from Postgres. Not for a first sync: its reading hashes each
    file as it goes, and holding every file's digests from the start would raise its peak
    memory. Returns what was kept, for `load_rows` not to read it again."""
    from vedana.stores.sync_rows import kept_lines

    prefetch = getattr(source, "prefetch_digests", None)
    if prefetch is None:
        return None
    lines = kept_lines(conn, source.describe())
    if lines is not None:
        prefetch(lines)
    return lines


class _RowsAhead:
    """What the last sync kept of every row (`load_rows`), read on a connection and a thread of
    their own while the sync reads the data model and plans: the transfer (megabytes at 100k
    rows) waits on the server and the socket, which the GIL lets overlap. Safe outside the
    sync's transaction: the writer lock keeps every other sync from changing the rows kept."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._future: Future[tuple[dict[str, Any] | None, dict[str, TableRows]]] | None = None

    def __enter__(self) -> _RowsAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def start(self, engine: Engine, source: str, lines: dict[str, KeptLines] | None) -> None:
        """Read the rows kept of `source` (but for the digests in `lines`, read already)."""
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vedana-kept-rows")
        self._future = self._pool.submit(_load_rows_apart, engine, source, lines)

    def result(self) -> tuple[dict[str, Any] | None, dict[str, TableRows]] | None:
        """The rows read ahead, or None when none were (then read them on the sync's own)."""
        return self._future.result() if self._future is not None else None


def _load_rows_apart(
    engine: Engine, source: str, lines: dict[str, KeptLines] | None
) -> tuple[dict[str, Any] | None, dict[str, TableRows]]:
    from vedana.stores.sync_rows import load_rows

    with engine.connect() as conn:
        return load_rows(conn, source, lines)


def strict_failure(warnings: list[str]) -> str:
    """The one line `--strict` fails with: the first warning and how many more."""
    more = f" (and {len(warnings) - 1} more warning(s))" if len(warnings) > 1 else ""
    return f"--strict: {warnings[0]}{more}; fix the source, or sync without --strict"


def _store_where_from(conn: Connection, data_source: Source) -> None:
    """Remember where the data came from, so an answer's sources can point at their rows."""
    from vedana.sources.locate import STATE_KEY, where_from
    from vedana.stores.staging import set_state

    set_state(conn, STATE_KEY, where_from(data_source))


def _no_progress(stage: str, done: int, total: int | None) -> None:
    del stage, done, total


# --- early stop on unchanged documents ------------------------------------------------------


def _current_states(
    model: Source, data: Source | None, listing: str | None, *, data_later: bool = False
) -> dict[str, str | None]:
    """Per document: "<source>@<content state>", or None when the source cannot tell (or, with
    `data_later`, for the data: its reading tells, `_state_read_later`); and the data's files'
    `listing` ("data_files")."""

    def state(source: Source) -> str | None:
        value = source.state()
        return f"{source.describe()}@{value}" if value else None

    states = {"data_model": state(model)}
    if data is not None:
        states["data"] = None if data_later else state(data)
        states["data_files"] = listing
    return states


def _listing(data: Source | None) -> str | None:
    """The data's files' listing (`CsvFolderSource.listing`), None for a source without one."""
    listing = getattr(data, "listing", None)
    return listing() if listing is not None else None


def _state_read_later(
    data: Source | None, stored: dict[str, Any], listing: str | None
) -> Callable[[], str | None] | None:
    """For a folder whose files' `listing` changed since the last sync of it (so it will be
    read): what gives its state as its reading took it, at the end of the sync; None otherwise.
    A listing says nothing of equal bytes, so an unchanged one still has the content compared
    first; a changed one only spares that first reading (8 ms of a 1 % edit's 150 at 100k)."""
    as_read = getattr(data, "state_as_read", None)
    if data is None or listing is None or as_read is None:
        return None
    name = data.describe()
    if not str(stored.get("data") or "").startswith(f"{name}@") or stored.get("data_files") == listing:
        return None

    def state() -> str | None:
        value = as_read()
        return f"{name}@{value}" if value else None

    return state


def _stored_states(conn: Connection) -> dict[str, Any]:
    from vedana.stores.staging import get_state

    return get_state(conn, STATE_KEY) or {}


def _unchanged_since_last_sync(
    stored: dict[str, Any], states: dict[str, str | None], data_model_only: bool
) -> bool:
    keys = ["data_model"] if data_model_only else ["data_model", "data"]
    if not all(states.get(k) for k in keys):
        return False
    if stored.get("normalize_version") != NORMALIZE_VERSION:
        return False
    return all(stored.get(k) == states.get(k) for k in keys)


def _store_states(
    conn: Connection,
    states: dict[str, str | None],
    stored: dict[str, Any],
    data_model_only: bool,
    model_changed: bool,
) -> None:
    """What the next sync compares with (`stored`: what this one found, under the same lock)."""
    from vedana.stores.staging import set_state

    value = {"normalize_version": NORMALIZE_VERSION, "data_model": states["data_model"]}
    if not data_model_only:
        value["data"], value["data_files"] = states.get("data"), states.get("data_files")
    elif not model_changed:
        # Staging still matches that data document.
        value["data"], value["data_files"] = stored.get("data"), stored.get("data_files")
    else:
        # Staging was normalised by the old model: the next full sync must read the data again.
        value["data"] = None
    set_state(conn, STATE_KEY, value)


# --- the sync itself ------------------------------------------------------------------------


def _sync_into(
    conn: Connection,
    model_source: Source,
    data_source: Source | None,
    report: SyncReport,
    progress: ProgressCallback,
    *,
    full: bool = False,
    kept: _RowsAhead | None = None,
) -> tuple[DataModel, TablePlan] | None:
    """Sync the model (and the data, when there is a source of it) into staging, on the
    incremental path when it applies (`kept`: the last sync's rows, being read ahead).
    Returns the model and the data's tables when the data was synced."""
    from vedana.stores.staging import mark_staged_by, save_data_model, stored_data_model_is

    progress("data model", 0, None)
    dm, report.data_model = read_data_model(model_source)
    report.data_model.changed = not stored_data_model_is(conn, dm)
    if report.data_model.changed:
        save_data_model(conn, dm)
    progress("data model", 1, 1)
    if data_source is None:
        return None  # staging's rows stay as the model they were normalised by cast them
    # Every staged row is normalised by `dm` once this transaction commits (a changed model
    # re-reads them all): the index may read their values by its dtypes.
    mark_staged_by(conn, dm)

    plan = plan_tables(dm, data_source)
    if not plan.anchors:
        # Most likely the wrong document: syncing it would mark every stored node deleted.
        raise SourceError(
            f"the data ({data_source.describe()}) has no Anchor_<noun> table for any anchor of the "
            f"data model ({', '.join(a.noun for a in dm.anchors)}); check --data / GRIST_DATA_DOC_ID"
        )
    report.ignored_tables = plan.ignored
    report.missing_tables = plan.missing
    note_missing_attribute_columns(report, plan)
    for anchor in dm.anchors:
        report.node(anchor.noun)
    for link in dm.links:
        report.edge(link.sentence)

    sig = signature(NORMALIZE_VERSION, dm, plan)
    source_key = data_source.describe()
    if not full:
        try:
            _sync_changed_rows(conn, dm, plan, report, source_key, sig, progress, kept)
            return dm, plan
        except FullSync as why:
            reason = str(why)
    else:
        reason = "--full"
    normalizer = Normalizer(dm, report)
    normalizer.prepare(plan)
    recorder = normalizer.recorder = Recorder()
    with StagingWriter(conn) as writer:
        if writer.first_sync:
            reason = "first sync"
        _stream(plan, normalizer, writer, report, progress, recorder)
        progress("write staging", 0, 1)
        result = writer.apply()
    for noun, counts in result.nodes.items():
        _apply_counts(report.node(noun), counts)
    for sentence, counts in result.edges.items():
        stats = report.edge(sentence)
        _apply_counts(stats, counts)
        if counts.duplicates:
            stats.skipped[DUPLICATE_EDGE] += counts.duplicates
    report.version = result.version
    rows = recorder.rows()
    for name in rows:
        report.paths[name] = f"full: {reason}"
    summary = summary_of(
        report,
        signature=sig,
        # Rows a source repaired or skipped are listed by a whole reading only: the next sync reads all.
        clean=recorder.sound and not getattr(data_source, "findings", None),
        version=result.version,
        contributors=recorder.contributors,
    )
    save_rows(conn, source_key, summary, rows)
    progress("write staging", 1, 1)
    return dm, plan


def _sync_changed_rows(
    conn: Connection,
    dm: DataModel,
    plan: TablePlan,
    report: SyncReport,
    source_key: str,
    sig: str,
    progress: ProgressCallback,
    kept: _RowsAhead | None = None,
) -> None:
    """The incremental path (`etl/resync.py`); raises `FullSync` when it does not apply."""
    from vedana.stores.index_state import staging_version
    from vedana.stores.sync_rows import load_rows

    version = staging_version(conn)  # asked while the kept rows are still on their way
    ahead = kept.result() if kept is not None else None
    summary, stored = ahead if ahead is not None else load_rows(conn, source_key)
    # Its own normaliser and report: a fallback to the full path starts from scratch.
    normalizer = Normalizer(dm, SyncReport())
    normalizer.prepare(plan)
    progress("compare rows", 0, None)
    change = plan_incremental(conn, normalizer, plan, summary, stored, sig, version)
    assert summary is not None
    progress("write staging", 0, 1)
    with StagingWriter(conn, scoped=True) as writer:
        for node in change.nodes:
            writer.add_node(*node)
        for edge in change.edges:
            writer.add_edge(*edge)
        writer.scope(change.old_nodes, change.old_edges)
        result = writer.apply()
    apply_reading(report, summary, change.read_delta)
    for kind, reports, counts_by in (
        ("node", report.nodes, result.nodes),
        ("edge", report.edges, result.edges),
    ):
        for name, stats in reports.items():
            counts = counts_by.get(name, Counts())
            stats.new, stats.updated, stats.deleted = counts.new, counts.updated, counts.deleted
            stats.unchanged = loaded_before(summary, kind, name) - counts.updated - counts.deleted
    report.version = result.version
    for name, (touched, total) in change.touched.items():
        report.paths[name] = f"incremental: {touched:,} changed rows of {total:,}"
    new_summary = summary_of(
        report,
        signature=sig,
        clean=True,
        version=result.version,
        contributors=change.contributors,
    )
    save_rows(conn, source_key, new_summary, change.rows)
    progress("write staging", 1, 1)


def _stream(
    plan: TablePlan,
    normalizer: Normalizer,
    writer: StagingWriter,
    report: SyncReport,
    progress: ProgressCallback,
    recorder: Recorder | None = None,
) -> None:
    """Every node, then every edge, from the planned tables into the writer's open COPYs
    (each row's digest and outcome kept by `recorder`, for the next sync)."""
    add_node, add_edge = writer.add_node, writer.add_edge
    for anchor, table in plan.anchors:
        stats = report.node(anchor.noun)
        progress(table.name, 0, table.row_count)
        read = recorder.reading(table, anchor=True) if recorder else table
        for node in normalizer.nodes(anchor, read):
            add_node(*node)
            if stats.read % _PROGRESS_EVERY == 0:
                progress(table.name, stats.read, table.row_count)
        progress(table.name, stats.read, table.row_count or stats.read)
    for table, candidates in plan.links:
        done = 0
        progress(table.name, 0, table.row_count)
        read = table
        if recorder and table.column(FROM) is not None and table.column(TO) is not None:
            read = recorder.reading(table, anchor=False)
        for edge in normalizer.link_table_edges(read, candidates):
            add_edge(*edge)
            done += 1
            if done % _PROGRESS_EVERY == 0:
                progress(table.name, done, table.row_count)
        progress(table.name, done, table.row_count or done)
    for edge in normalizer.foreign_key_edges():
        add_edge(*edge)
    normalizer.finish()


def _apply_counts(stats: TypeReport, counts: Any) -> None:
    stats.new, stats.updated, stats.unchanged = counts.new, counts.updated, counts.unchanged
    stats.deleted = counts.deleted


def _run_counts(report: SyncReport) -> dict[str, Any]:
    data = report.to_dict()
    return {
        "changed": data["changed"],
        "unchanged_early": data["unchanged_early"],
        "data_model_only": data["data_model_only"],
        "nodes": data["totals"]["nodes"],
        "edges": data["totals"]["edges"],
        "seconds": data["seconds"],
        "version": data["version"],
        **({"deletions_allowed": report.deletions_allowed} if report.deletions_allowed else {}),
    }
