"""The run log: one row per sync/index/run, written at start and finished with status and counts.

The start row is committed on its own connection, so a run that crashes halfway still leaves
a `running`/`failed` trace, whatever happens to the run's own transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vedana.redaction import redact

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine


@dataclass
class RunRecord:
    id: int
    kind: str
    counts: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"  # the caller may set e.g. "unchanged"


@contextmanager
def record_run(engine: Engine, kind: str, source: str = "") -> Iterator[RunRecord]:
    """Log a run: `running` on entry, then `ok` (or `record.status`) or `failed` with the error."""
    from sqlalchemy import func

    from vedana.stores.tables import runs

    with engine.begin() as conn:
        run_id = conn.execute(
            runs.insert().values(kind=kind, source=redact(source)).returning(runs.c.id)
        ).scalar_one()
    record = RunRecord(id=run_id, kind=kind)
    try:
        yield record
    except BaseException as exc:
        error = redact(f"{type(exc).__name__}: {exc}")[:2000]
        with engine.begin() as conn:
            conn.execute(
                runs.update()
                .where(runs.c.id == run_id)
                .values(status="failed", finished_at=func.now(), counts=record.counts, error=error)
            )
        raise
    with engine.begin() as conn:
        conn.execute(
            runs.update()
            .where(runs.c.id == run_id)
            .values(status=record.status, finished_at=func.now(), counts=record.counts)
        )


def recent_runs(engine: Engine, limit: int = 20, kind: str | None = None) -> list[dict[str, Any]]:
    from sqlalchemy import select

    from vedana.stores.tables import runs

    query = select(runs).order_by(runs.c.id.desc()).limit(limit)
    if kind:
        query = query.where(runs.c.kind == kind)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def last_success(conn: Connection, kind: str, statuses: tuple[str, ...]) -> dict[str, Any] | None:
    """The newest row of `kind` whose status is one of `statuses`, or None."""
    from sqlalchemy import select

    from vedana.stores.tables import runs

    row = conn.execute(
        select(runs)
        .where(runs.c.kind == kind, runs.c.status.in_(statuses))
        .order_by(runs.c.id.desc())
        .limit(1)
    ).first()
    return dict(row._mapping) if row is not None else None


def record_busy(engine: Engine, kind: str, source: str, message: str) -> None:
    """A finished `busy` row: a run that found the lock taken and changed nothing."""
    from sqlalchemy import func

    from vedana.stores.tables import runs

    with engine.begin() as conn:
        conn.execute(
            runs.insert().values(
                kind=kind,
                status="busy",
                source=redact(source),
                finished_at=func.now(),
                error=redact(message)[:2000],
            )
        )


def last_failure(conn: Connection, kind: str) -> str | None:
    """The first line of the error of the most recent finished `kind` run when it failed; None
    when it succeeded or none has finished."""
    from sqlalchemy import select

    from vedana.stores.tables import runs

    row = conn.execute(
        select(runs.c.status, runs.c.error)
        .where(runs.c.kind == kind, runs.c.status != "running")
        .order_by(runs.c.id.desc())
        .limit(1)
    ).first()
    if row is None or row.status != "failed":
        return None
    return (row.error or "no error recorded").splitlines()[0][:300]
