"""`status`: recent runs from the run log and what the knowledge base holds now.

A run killed before it could finish its row (kill -9, the OOM killer, a reboot) leaves it
`running` forever; since its locks died with it, a `running` row whose lock nobody holds is
shown as `interrupted`.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vedana.ops import inventory
from vedana.redaction import redact
from vedana.stores.locks import held_locks

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from vedana.config import Settings
    from vedana.etl.graph_load import OwnedTypes
    from vedana.stores.graph import GraphStore

log = logging.getLogger(__name__)

SUCCESS = ("ok", "unchanged")
DEMO_HOME = ".vedana-demo"  # where `make demo` keeps its knowledge base, beside the default home


def _seconds(row: dict[str, Any]) -> float | None:
    start, end = row.get("started_at"), row.get("finished_at")
    if isinstance(start, datetime) and isinstance(end, datetime):
        return round((end - start).total_seconds(), 3)
    return None


def _interrupted(row: dict[str, Any], held: set[str]) -> bool:
    """A `running` row whose process is gone: killed (kill -9, OOM, reboot) before it could
    finish its row. Its lock went with it, so nothing holds the lock it would hold."""
    lock = "run" if row["kind"] == "run" else "writer"
    return row["status"] == "running" and lock not in held


def run_row(row: dict[str, Any], held: set[str] | None = None) -> dict[str, Any]:
    """A run-log row as plain data (timestamps as ISO text); with `held` (see `held_locks`), a
    `running` row of a process that is gone reads `interrupted`."""

    def iso(value: Any) -> str | None:
        return value.isoformat() if isinstance(value, datetime) else None

    interrupted = held is not None and _interrupted(row, held)
    return {
        "id": row["id"],
        "kind": row["kind"],
        "status": "interrupted" if interrupted else row["status"],
        "started_at": iso(row.get("started_at")),
        "finished_at": iso(row.get("finished_at")),
        "seconds": _seconds(row),
        "source": row.get("source") or "",
        "counts": row.get("counts") or {},
        "error": row.get("error"),
    }


def _last_success(conn: Connection, kind: str) -> dict[str, Any] | None:
    from vedana.stores.run_log import last_success

    row = last_success(conn, kind, SUCCESS)
    return run_row(row) if row is not None else None


def knowledge_base(settings: Settings, engine: Engine, graph: GraphStore | None = None) -> dict[str, Any]:
    """Counts per type in staging, the graph and the vectors; the last successful sync, index
    and run; the embedding model the vectors were made with and the one configured."""
    from vedana.etl.graph_load import owned_types
    from vedana.ops.lock import is_run_locked, read_holder
    from vedana.stores.staging import load_data_model
    from vedana.stores.vectors import recorded_model

    with engine.connect() as conn:
        dm = load_data_model(conn, required=False)
        owned = owned_types(conn, dm)
        staging = owned.live()
        version = inventory.staging_version(conn)
        marks = inventory.watermarks(conn)
        vectors = inventory.vector_counts(conn)
        in_use = recorded_model(conn)
        last = {kind: _last_success(conn, kind) for kind in ("sync", "index", "run")}
    locked = is_run_locked(settings.home)
    return {
        "synced": bool(dm.anchors),  # False: nothing synced into this knowledge base yet
        "empty_home": None if dm.anchors else empty_home_message(settings),
        "staging": {**staging, "version": version},
        "graph": _graph_counts(settings, graph, owned),
        "vectors": vectors,
        "indexed_version": marks.to_dict(),
        "up_to_date": bool(marks.graph == version and marks.vectors == version),
        "last_sync": last["sync"],
        "last_index": last["index"],
        "last_run": last["run"],
        "embeddings": {
            "in_use": None if in_use is None else {"model": in_use.model, "dim": in_use.dim},
            "configured": {"model": _configured_model(settings), "dim": settings.embeddings_dim},
        },
        "run_lock": {"held": locked, "holder": read_holder(settings.home) if locked else None},
    }


def _graph_counts(settings: Settings, graph: GraphStore | None, owned: OwnedTypes) -> dict[str, Any]:
    """The graph's counts of vedana's own types (a shared server's other data is not counted)."""
    try:
        if graph is not None:
            return graph.counts(owned.nodes, owned.edges)
        from vedana.stores.graph_factory import open_graph

        with open_graph(settings) as store:
            return store.counts(owned.nodes, owned.edges)
    except Exception as exc:  # status must still show the rest when the graph is down
        return {"error": redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}


def _configured_model(settings: Settings) -> str:
    """The canonical name vectors are recorded under (no model is loaded to find it)."""
    try:
        from vedana.embeddings import get_embedder

        return get_embedder(settings).model
    except Exception:
        return settings.embeddings_model


def status(
    settings: Settings,
    *,
    limit: int = 10,
    kind: str | None = None,
    engine: Engine | None = None,
    graph: GraphStore | None = None,
) -> dict[str, Any]:
    """The `limit` most recent runs (of `kind`, if given), newest first, and the knowledge base."""
    from vedana.stores.run_log import recent_runs

    if engine is None:
        from vedana.stores.postgres import get_engine

        engine = get_engine(settings)
    with engine.connect() as conn:
        held = held_locks(conn)
    return {
        "runs": [run_row(r, held) for r in recent_runs(engine, limit=limit, kind=kind)],
        "knowledge_base": knowledge_base(settings, engine, graph),
    }


def _shown(path: Path) -> str:
    """`path` as a user would type it here: relative to the working directory when inside it."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def demo_home(settings: Settings) -> Path | None:
    """The demo's home beside this one, when it is another home that holds a knowledge base."""
    demo = settings.home.parent / DEMO_HOME
    if not settings.uses_embedded_postgres or demo == settings.home:
        return None
    return demo if (demo / "postgres" / "PG_VERSION").is_file() else None


def empty_home_message(settings: Settings) -> str | None:
    """The line for a home with nothing synced when the demo's has a knowledge base, else None."""
    demo = demo_home(settings)
    if demo is None:
        return None
    return (
        f"this home ({_shown(settings.home)}) is empty; the demo's knowledge base is in {_shown(demo)}: "
        f"export VEDANA_HOME={_shown(demo)}"
    )


def empty_knowledge_base_note(settings: Settings, engine: Engine | None = None) -> str | None:
    """One line when no data model has been synced into this knowledge base, else None."""
    from vedana.stores.staging import load_data_model

    if engine is None:
        from vedana.stores.postgres import get_engine

        engine = get_engine(settings)
    with engine.connect() as conn:
        if load_data_model(conn, required=False).anchors:
            return None
    where = f" in {_shown(settings.home)}" if settings.uses_embedded_postgres else ""
    return empty_home_message(settings) or f"the knowledge base{where} is empty: run `vedana sync` first"


def _looks_empty(value: Any) -> bool:
    return value in (None, 0, [], {}, "")


def empty_result_note(settings: Settings, rows: list[dict[str, Any]]) -> str | None:
    """For a query result that shows nothing (no rows, or only zeros and nulls): a line saying
    so when that is because the knowledge base is empty, else None."""
    if any(not _looks_empty(value) for row in rows for value in row.values()):
        return None
    return empty_knowledge_base_note(settings)
