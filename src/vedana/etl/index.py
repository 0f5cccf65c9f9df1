"""`index`: bring the graph and the vector tables in line with the staging tables.

Incremental by the staging contract (docs/architecture.md): each target keeps a watermark in
`vedana_state` (`index.graph.version`, `index.vectors.version`), handles exactly the staging
rows with a higher version, and advances the watermark only after it applied them, so a run
killed halfway is repaired by the next one. `full=True` rebuilds both from staging.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext, suppress
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from vedana.etl.embed_values import VectorChanges, embed_targets, embed_values, plan_values
from vedana.etl.graph_load import (
    DEFAULT_BATCH as DEFAULT_GRAPH_BATCH,
)
from vedana.etl.graph_load import (
    GraphChanges,
    VersionRange,
    count_changes,
    load_graph,
    owned_types,
    quote_name,
    rebuild_graph,
)
from vedana.stores.index_state import (
    GRAPH_VERSION_KEY,
    VECTORS_VERSION_KEY,
    embedded_targets,
    forget_watermark,
    set_watermark,
    staging_version,
    watermarks,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from vedana.config import Settings
    from vedana.embeddings import Embedder
    from vedana.stores.graph import GraphStore

Progress = Callable[[str, int, "int | None"], None]
Notice = Callable[[str], None]


@dataclass
class IndexReport:
    """What an index run did (or, with `plan`, would do)."""

    full: bool = False
    plan: bool = False
    model: str = ""
    dim: int = 0
    model_changed: bool = False
    graph_rebuilt: bool = False
    vectors_rebuilt: bool = False
    nodes_upserted: int = 0
    nodes_deleted: int = 0
    edges_upserted: int = 0
    edges_deleted: int = 0
    texts_embedded: int = 0  # distinct texts sent to the model (plan: texts that would be)
    tokens_estimated: int = 0
    values_written: int = 0  # embedding rows inserted or updated
    values_embedded: int = 0  # of those, rows whose vector was computed in this run
    values_reused: int = 0  # of those, rows whose vector came from the cache
    values_deleted: int = 0
    version: int = 0  # the staging version both targets are now in line with
    phase_seconds: dict[str, float] = field(default_factory=dict)
    total_seconds: float = 0.0
    notices: list[str] = field(default_factory=list)

    @property
    def graph_rows(self) -> int:
        return self.nodes_upserted + self.nodes_deleted + self.edges_upserted + self.edges_deleted

    @property
    def rows_per_s(self) -> float:
        seconds = self.phase_seconds.get("graph", 0.0)
        return round(self.graph_rows / seconds, 1) if seconds > 0 and self.graph_rows else 0.0

    @property
    def texts_per_s(self) -> float:
        seconds = self.phase_seconds.get("embed", 0.0)
        return round(self.texts_embedded / seconds, 1) if seconds > 0 and self.texts_embedded else 0.0

    @property
    def changed(self) -> bool:
        return bool(self.graph_rows or self.values_written or self.values_deleted or self.texts_embedded)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(graph_rows=self.graph_rows, rows_per_s=self.rows_per_s, texts_per_s=self.texts_per_s)
        return data

    def counts(self) -> dict[str, int]:
        """The numbers kept in the run log."""
        keys = (
            "nodes_upserted", "nodes_deleted", "edges_upserted", "edges_deleted",
            "texts_embedded", "values_written", "values_reused", "values_deleted", "version",
        )  # fmt: skip
        return {k: getattr(self, k) for k in keys}

    def _add_graph(self, changes: GraphChanges) -> None:
        self.nodes_upserted += changes.nodes_upserted
        self.nodes_deleted += changes.nodes_deleted
        self.edges_upserted += changes.edges_upserted
        self.edges_deleted += changes.edges_deleted

    def _add_vectors(self, changes: VectorChanges) -> None:
        self.texts_embedded += changes.texts_embedded
        self.values_written += changes.values_written
        self.values_embedded += changes.values_embedded
        self.values_reused += changes.values_reused
        self.values_deleted += changes.values_deleted


@dataclass
class _Start:
    """What the run starts from, read once at the beginning."""

    upto: int
    graph_since: int | None
    vectors_since: int | None
    vectors_targets_changed: bool
    recorded: Any  # ModelInfo | None
    current: Any  # ModelInfo


def index(
    settings: Settings,
    *,
    full: bool = False,
    plan: bool = False,
    on_progress: Progress | None = None,
    on_notice: Notice | None = None,
    engine: Engine | None = None,
    graph: GraphStore | None = None,
    embedder: Embedder | None = None,
    lock: bool = True,
    graph_batch_size: int = DEFAULT_GRAPH_BATCH,
) -> IndexReport:
    """Index staging into the graph and the vector tables.

    `plan` reports what would change (rows, values to embed, estimated tokens) and changes
    nothing. `on_progress(stage, done, total)` follows each phase; `on_notice(message)` hears
    about decisions the user should know of before they happen (a model change, a rebuild).
    `engine`, `graph` and `embedder` default to the configured ones; `lock=False` is for a
    caller that already holds the writer lock (`vedana run`).
    """
    from vedana.stores.staging import writer_lock

    if engine is None:
        from vedana.stores.postgres import get_engine

        engine = get_engine(settings)
    if embedder is None:
        from vedana.embeddings import get_embedder

        embedder = get_embedder(settings)
    if plan:
        return _plan(engine, embedder, full=full, on_notice=on_notice)
    progress: Progress = on_progress or (lambda stage, done, total: None)
    own_graph = graph is None
    try:
        with writer_lock(engine, on_notice=on_notice) if lock else nullcontext():
            from vedana.stores.run_log import record_run

            with record_run(engine, "index") as run:
                if graph is None:  # in the run, so an unreachable graph is logged as a failed index
                    from vedana.stores.graph_factory import open_graph

                    graph = open_graph(settings)
                report = _apply(
                    engine, graph, embedder, full=full, batch_size=graph_batch_size,
                    on_progress=progress, on_notice=on_notice,
                )  # fmt: skip
                run.counts = report.counts()
                run.status = "ok" if report.changed else "unchanged"
        return report
    finally:
        if own_graph and graph is not None:
            graph.close()


def _read_start(conn: Connection, embedder: Embedder, dm: Any) -> _Start:
    from vedana.stores.vectors import ModelInfo, recorded_model

    stored_targets = embedded_targets(conn)
    targets = [list(t) for t in embed_targets(dm)]
    marks = watermarks(conn)
    return _Start(
        upto=staging_version(conn),
        graph_since=marks.graph,
        vectors_since=marks.vectors,
        vectors_targets_changed=stored_targets is not None and stored_targets != targets,
        recorded=recorded_model(conn),
        current=ModelInfo(model=embedder.model, dim=embedder.dim),
    )


def _graph_mismatch(in_graph: dict[str, int], wanted: dict[str, int], most: int = 4) -> str:
    differ = sorted(
        name for name in in_graph.keys() | wanted.keys() if in_graph.get(name) != wanted.get(name)
    )
    names = ", ".join(differ[:most]) + (", …" if len(differ) > most else "")
    return (
        f"the graph holds {sum(in_graph.values())} nodes of the data model's types but staging "
        f"{sum(wanted.values())} (they differ for {names}): rebuilding the graph"
    )


def _say(report: IndexReport, on_notice: Notice | None, message: str) -> None:
    report.notices.append(message)
    if on_notice is not None:
        on_notice(message)


def _announce(report: IndexReport, start: _Start, on_notice: Notice | None, *, full: bool) -> None:
    """Tell the user, before anything happens, about the expensive decisions."""
    if start.recorded is not None and start.recorded != start.current:
        report.model_changed = True
        _say(
            report,
            on_notice,
            f"embedding model changed from {start.recorded.describe()} to {start.current.describe()}: "
            "re-embedding every value and dropping the old vectors",
        )
    elif start.vectors_targets_changed and not full:
        _say(report, on_notice, "embeddable attributes changed in the data model: checking every value")


def _graph_range(start: _Start, full: bool) -> VersionRange:
    first = start.graph_since is None or start.graph_since > start.upto
    return VersionRange(None if full or first else start.graph_since, start.upto)


def _vector_range(start: _Start, full: bool) -> VersionRange:
    everything = (
        full
        or start.vectors_since is None
        or start.vectors_since > start.upto
        or start.recorded != start.current
        or start.vectors_targets_changed
    )
    return VersionRange(None if everything else start.vectors_since, start.upto)


def _apply(
    engine: Engine,
    graph: GraphStore,
    embedder: Embedder,
    *,
    full: bool,
    batch_size: int,
    on_progress: Progress,
    on_notice: Notice | None,
) -> IndexReport:
    from vedana.stores.staging import load_data_model, staged_by
    from vedana.stores.vectors import reset_vector_tables

    began = time.perf_counter()
    report = IndexReport(full=full, model=embedder.model)
    with engine.connect() as conn:
        dm = load_data_model(conn)
        # The model's dtypes describe the staged values only when a data sync cast them by this
        # model (not after a `--data-model-only` sync changed it): else the rebuild samples them.
        typed_by = dm if staged_by(conn, dm) else None
        start = _read_start(conn, embedder, dm)
        conn.commit()
        report.dim, report.version = start.current.dim, start.upto
        _announce(report, start, on_notice, full=full)
        report.phase_seconds["read"] = time.perf_counter() - began

        # Graph: nodes, edges, deletions; then a cheap check that it holds what staging says.
        # Only vedana's own labels are cleared or counted: a shared server keeps other data.
        t0 = time.perf_counter()
        owned = owned_types(conn, dm, edges=False)  # the graph check compares nodes only
        for name in (*owned.nodes, *(link.sentence for link in dm.links)):
            quote_name(name)  # a name no engine can take stops the run before the graph is touched
        rows = _graph_range(start, full)

        def rebuild() -> None:
            report._add_graph(
                rebuild_graph(
                    conn,
                    graph,
                    start.upto,
                    owned.nodes,
                    batch_size=batch_size,
                    on_progress=on_progress,
                    dm=typed_by,
                )
            )

        if rows.full:
            forget_watermark(conn, GRAPH_VERSION_KEY)  # a run killed after the clear must not look done
            rebuild()
            report.graph_rebuilt = True
        else:
            report._add_graph(load_graph(conn, graph, rows, batch_size=batch_size, on_progress=on_progress))
        wanted = {name: n for name, n in owned.nodes.items() if n}
        in_graph = graph.counts(owned.nodes, ())["nodes"]
        if in_graph != wanted:
            _say(
                report,
                on_notice,
                _graph_mismatch(in_graph, wanted),
            )
            forget_watermark(conn, GRAPH_VERSION_KEY)
            report.graph_rebuilt = True
            rebuild()
        # Durable before the watermark says so (a crash before that loses nothing): the snapshot
        # is written while the vectors are, and the watermark set once it is on disk.
        saved = graph.persist_begin()
        report.phase_seconds["graph"] = time.perf_counter() - t0

        def graph_applied() -> None:
            waited = time.perf_counter()
            saved()
            set_watermark(conn, GRAPH_VERSION_KEY, start.upto)
            conn.commit()
            report.phase_seconds["graph"] += time.perf_counter() - waited  # what was not overlapped

        # Vectors: a new model (or the first run) starts from empty tables.
        t0 = time.perf_counter()
        try:
            if start.recorded != start.current:
                reset_vector_tables(conn, start.current)
                forget_watermark(conn, VECTORS_VERSION_KEY)  # in the same commit: empty tables, no watermark
                conn.commit()
            rows = _vector_range(start, full)
            report.vectors_rebuilt = rows.full
            embed_seconds = [0.0]
            changes = embed_values(
                conn, dm, embedder, rows, start.current, rebuild=full,
                on_progress=on_progress, on_embedded=lambda s: embed_seconds.__setitem__(0, s),
            )  # fmt: skip
        except BaseException:
            # The graph is done: record it if its snapshot is, so the next run need not redo it.
            conn.rollback()
            with suppress(Exception):
                graph_applied()
            raise
        report._add_vectors(changes)
        report.phase_seconds["embed"] = embed_seconds[0]
        report.phase_seconds["vectors"] = time.perf_counter() - t0 - embed_seconds[0]
        graph_applied()
    report.phase_seconds = {k: round(v, 3) for k, v in report.phase_seconds.items()}
    report.total_seconds = round(time.perf_counter() - began, 3)
    return report


def _plan(engine: Engine, embedder: Embedder, *, full: bool, on_notice: Notice | None) -> IndexReport:
    """Count what `_apply` would do, inside a transaction that is rolled back."""
    from vedana.stores.staging import load_data_model
    from vedana.stores.vectors import reset_vector_tables

    began = time.perf_counter()
    report = IndexReport(full=full, plan=True, model=embedder.model)
    with engine.connect() as conn:
        dm = load_data_model(conn)
        start = _read_start(conn, embedder, dm)
        report.dim, report.version = start.current.dim, start.upto
        _announce(report, start, on_notice, full=full)
        rows = _graph_range(start, full)
        report.graph_rebuilt = rows.full
        report._add_graph(count_changes(conn, rows))
        try:
            if start.recorded != start.current:
                reset_vector_tables(conn, start.current)  # undone by the rollback below
            rows = _vector_range(start, full)
            report.vectors_rebuilt = rows.full
            changes, tokens = plan_values(conn, dm, rows, start.current, rebuild=full)
        finally:
            conn.rollback()
        report._add_vectors(changes)
        report.tokens_estimated = tokens
    report.total_seconds = round(time.perf_counter() - began, 3)
    return report
