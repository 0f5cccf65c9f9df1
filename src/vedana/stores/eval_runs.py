"""Evaluation runs and their per-question results: the only module that reads or writes
`eval_runs` / `eval_results`. Texts and traces arrive redacted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vedana.errors import VedanaError

if TYPE_CHECKING:
    from sqlalchemy import Engine


class UnknownEvalRun(VedanaError):
    """An evaluation run id that is not stored."""


def start_run(engine: Engine, golden: str, config: dict[str, Any], selection: dict[str, Any]) -> int:
    from vedana.stores import tables as t

    with engine.begin() as conn:
        row = conn.execute(
            t.eval_runs.insert()
            .values(golden=golden, config=config, selection=selection)
            .returning(t.eval_runs.c.id)
        ).one()
    return int(row.id)


def finish_run(engine: Engine, run_id: int, status: str) -> None:
    """Set the run's status (done, interrupted, or running again when resumed)."""
    from sqlalchemy import func

    from vedana.stores import tables as t

    finished = None if status == "running" else func.now()
    with engine.begin() as conn:
        conn.execute(
            t.eval_runs.update().where(t.eval_runs.c.id == run_id).values(status=status, finished_at=finished)
        )


def save_result(engine: Engine, run_id: int, result: dict[str, Any]) -> None:
    """Store one question's result as soon as it is known, so an interrupted run keeps it."""
    from sqlalchemy.dialects.postgresql import insert

    from vedana.stores import tables as t

    values = {"run_id": run_id, **result}
    statement = insert(t.eval_results).values(values)
    statement = statement.on_conflict_do_update(
        index_elements=["run_id", "position"],
        set_={k: statement.excluded[k] for k in result if k != "position"},
    )
    with engine.begin() as conn:
        conn.execute(statement)


def load_run(engine: Engine, run_id: int) -> dict[str, Any]:
    from sqlalchemy import select

    from vedana.stores import tables as t

    with engine.connect() as conn:
        run = conn.execute(select(t.eval_runs).where(t.eval_runs.c.id == run_id)).mappings().first()
        if run is None:
            raise UnknownEvalRun(f"no evaluation run {run_id}; list them with `vedana eval list`")
        results = conn.execute(
            select(t.eval_results)
            .where(t.eval_results.c.run_id == run_id)
            .order_by(t.eval_results.c.position)
        ).mappings()
        return {**dict(run), "results": [dict(r) for r in results]}


def list_runs(engine: Engine, limit: int = 20) -> list[dict[str, Any]]:
    """Runs newest first, with their question, pass and error counts."""
    from sqlalchemy import func, select

    from vedana.stores import tables as t

    r = t.eval_results
    counts = (
        select(
            r.c.run_id,
            func.count().label("questions"),
            func.count().filter(r.c.passed.is_(True)).label("passed"),
            func.count().filter(r.c.error.is_not(None)).label("errors"),
        )
        .group_by(r.c.run_id)
        .subquery()
    )
    query = (
        select(t.eval_runs, counts.c.questions, counts.c.passed, counts.c.errors)
        .select_from(t.eval_runs.outerjoin(counts, counts.c.run_id == t.eval_runs.c.id))
        .order_by(t.eval_runs.c.id.desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        return [dict(row) for row in conn.execute(query).mappings()]


def latest_run_id(engine: Engine, *, before: int | None = None, golden: str | None = None) -> int | None:
    """The newest run that is not running (older than `before` when given); with `golden`, the
    newest on that golden set if there is one, else the newest on any."""
    from sqlalchemy import func, select

    from vedana.stores import tables as t

    query = select(func.max(t.eval_runs.c.id)).where(t.eval_runs.c.status != "running")
    if before is not None:
        query = query.where(t.eval_runs.c.id < before)
    with engine.connect() as conn:
        value = conn.execute(query.where(t.eval_runs.c.golden == golden)).scalar() if golden else None
        if value is None:
            value = conn.execute(query).scalar()
    return None if value is None else int(value)
