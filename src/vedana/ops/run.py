"""`run`: sync then index in one process, under the run lock, logged as one `run` row.

Made for cron: a second run that finds the lock taken waits up to `wait` seconds, then raises
`LockBusy` (exit code 75) having written nothing but a `busy` row in the run log. Sync and index
still log their own rows; the `run` row holds both phases' counts and the overall outcome:
`ok` (something changed), `unchanged` (already up to date) or `failed` (with the error).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vedana.errors import LockBusy
from vedana.ops.lock import advisory_lock, file_lock

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.config import Settings
    from vedana.embeddings import Embedder
    from vedana.etl.index import IndexReport
    from vedana.etl.sync import SyncReport
    from vedana.sources import Source
    from vedana.stores.graph import GraphStore

log = logging.getLogger(__name__)

Progress = Callable[[str, int, "int | None"], None]
Notice = Callable[[str], None]
# Called as each phase ends, so a log shows the sync line even if the index then fails.
PhaseDone = Callable[[str, Any], None]

DEFAULT_WAIT_S = 10.0
UPDATED: Literal["updated"] = "updated"
UP_TO_DATE: Literal["up to date"] = "up to date"


@dataclass
class RunReport:
    status: Literal["updated", "up to date"]
    sync: SyncReport
    index: IndexReport
    run_id: int | None = None
    started_at: str = ""  # ISO 8601, UTC
    lock_wait_s: float = 0.0
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return self.status == UPDATED

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "changed": self.changed,
            "run_id": self.run_id,
            "started_at": self.started_at,
            "sync": self.sync.to_dict(),
            "index": self.index.to_dict(),
            "lock_wait_s": round(self.lock_wait_s, 3),
            "seconds": round(self.seconds, 3),
        }

    def counts(self) -> dict[str, Any]:
        """What the run log keeps: a few numbers of each phase."""
        sync = self.sync.to_dict()
        return {
            "status": self.status,
            "sync": {
                "changed": sync["changed"],
                "unchanged_early": sync["unchanged_early"],
                "nodes": {k: sync["totals"]["nodes"][k] for k in ("loaded", "written", "deleted")},
                "edges": {k: sync["totals"]["edges"][k] for k in ("loaded", "written", "deleted")},
                "run_id": self.sync.run_id,
            },
            "index": self.index.counts(),
            "lock_wait_s": round(self.lock_wait_s, 3),
            "seconds": round(self.seconds, 3),
        }


def describe_sources(data_model: str | Path | Source | None, data: str | Path | Source | None) -> str:
    def one(spec: Any, setting: str) -> str:
        if spec is None:
            return setting
        return str(spec) if isinstance(spec, str | Path) else spec.describe()

    return f"data model {one(data_model, 'GRIST_DATA_MODEL_DOC_ID')}; data {one(data, 'GRIST_DATA_DOC_ID')}"


def run(
    settings: Settings,
    *,
    data_model: str | Path | Source | None = None,
    data: str | Path | Source | None = None,
    csv: bool = False,
    full: bool = False,
    strict: bool = False,
    allow_deletions: bool = False,
    wait: float = DEFAULT_WAIT_S,
    on_progress: Progress | None = None,
    on_notice: Notice | None = None,
    on_phase: PhaseDone | None = None,
    engine: Engine | None = None,
    graph: GraphStore | None = None,
    embedder: Embedder | None = None,
) -> RunReport:
    """Sync (sources as for `vedana.etl.sync.sync`) then index, holding the run lock throughout;
    `full` makes the sync compare every row and the index rebuild from staging. Raises `LockBusy`
    when another run holds it for longer than `wait` seconds; any other failure is logged in the
    `run` row and raised."""
    from vedana.etl.index import index
    from vedana.etl.sync import sync
    from vedana.stores.run_log import record_run

    started = time.monotonic()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    source = describe_sources(data_model, data)
    try:
        with file_lock(settings.home, wait):
            lock_wait = time.monotonic() - started
            if engine is None:
                from vedana.stores.postgres import get_engine

                engine = get_engine(settings)
            asked = time.monotonic()
            with advisory_lock(engine, max(wait - lock_wait, 0.0), on_notice):
                lock_wait += time.monotonic() - asked
                with record_run(engine, "run", source=source) as record:
                    sync_report = sync(
                        settings,
                        data_model=data_model,
                        data=data,
                        csv=csv,
                        full=full,
                        strict=strict,
                        allow_deletions=allow_deletions,
                        on_progress=on_progress,
                    )
                    if on_phase is not None:
                        on_phase("sync", sync_report)
                    index_report = index(
                        settings, full=full, engine=engine, graph=graph, embedder=embedder,
                        on_progress=on_progress, on_notice=on_notice,
                    )  # fmt: skip
                    if on_phase is not None:
                        on_phase("index", index_report)
                    changed = sync_report.changed or index_report.changed
                    report = RunReport(
                        status=UPDATED if changed else UP_TO_DATE,
                        sync=sync_report,
                        index=index_report,
                        run_id=record.id,
                        started_at=started_at,
                        lock_wait_s=lock_wait,
                        seconds=time.monotonic() - started,
                    )
                    record.counts = report.counts()
                    record.status = "ok" if changed else "unchanged"
    except LockBusy as busy:
        _record_busy(settings, engine, source, str(busy))
        raise
    return report


def _record_busy(settings: Settings, engine: Engine | None, source: str, message: str) -> None:
    """A `busy` row, so the run log shows the runs that were skipped; best effort only, a busy
    run must exit promptly whatever the database says."""
    from vedana.redaction import redact

    try:
        from vedana.stores.run_log import record_busy

        if engine is None:
            from vedana.stores.postgres import get_engine

            engine = get_engine(settings)
        record_busy(engine, "run", source, message)
    except Exception as exc:  # the lock holder's Postgres may be starting or gone: just say so
        log.warning("could not record the busy run in the run log: %s", redact(str(exc)).splitlines()[0])
