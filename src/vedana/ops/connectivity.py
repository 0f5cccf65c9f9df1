"""Connectivity: can vedana reach everything it is configured to use?

Each probe does the cheapest thing that proves the service works: one GET per Grist document,
`SELECT` the server and pgvector versions, `RETURN 1` on the graph, embed one short text, and,
only when asked (it costs a call), one tiny chat completion. Probes open what later sections
reuse (the engine, the graph, the embedder) and record their failure once.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vedana.problems import Problem, SectionResult, error
from vedana.redaction import redact

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.config import Settings
    from vedana.embeddings import Embedder
    from vedana.stores.graph import GraphStore

GRIST_TIMEOUT_S = 10.0
PROBE_TEXT = "vedana check: is the embedding model working?"
_MISSING = object()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return redact(text.splitlines()[0] if text else type(exc).__name__)


@dataclass
class Services:
    """The engine, graph and embedder of one check, opened on first use; a failure to open one
    is kept (and reported once, by whichever section needed it first)."""

    settings: Settings
    engine_: Any = _MISSING
    graph_: Any = _MISSING
    embedder_: Any = _MISSING
    failures: dict[str, Problem] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)
    _own_graph: bool = False

    def _get(self, attr: str, name: str, opener: Callable[[], Any], code: str, fix: str) -> Any:
        if getattr(self, attr) is _MISSING:
            try:
                setattr(self, attr, opener())
            except Exception as exc:
                setattr(self, attr, None)
                self.failures[name] = error(code, f"{_first_line(exc)} ({fix})", service=name)
        return getattr(self, attr)

    def engine(self) -> Engine | None:
        from vedana.stores.postgres import get_engine

        return self._get(
            "engine_",
            "postgres",
            lambda: get_engine(self.settings),
            "connectivity.postgres",
            "check DB_CONN_URI, or unset it to use the embedded Postgres",
        )

    def graph(self) -> GraphStore | None:
        def open_it() -> GraphStore:
            from vedana.stores.graph_factory import open_graph

            store = open_graph(self.settings)
            try:
                store.query("RETURN 1 AS ok")
            except Exception:
                store.close()
                raise
            self._own_graph = True
            return store

        return self._get(
            "graph_",
            "graph",
            open_it,
            "connectivity.graph",
            "check MEMGRAPH_URI / MEMGRAPH_USER / MEMGRAPH_PWD, or unset MEMGRAPH_URI for the embedded graph",
        )

    def embedder(self) -> Embedder | None:
        from vedana.embeddings import get_embedder

        return self._get(
            "embedder_",
            "embeddings",
            lambda: get_embedder(self.settings),
            "connectivity.embeddings",
            "check EMBEDDINGS_MODEL / EMBEDDINGS_DIM",
        )

    def report_failure(self, name: str, section: SectionResult) -> None:
        """Put the failure to open `name` in `section`, unless an earlier section has it."""
        if name in self.failures and name not in self.reported:
            section.problems.append(self.failures[name])
            self.reported.add(name)

    def close(self) -> None:
        if self._own_graph and self.graph_ not in (None, _MISSING):
            self.graph_.close()


def _probe(
    section: SectionResult,
    services: Services,
    name: str,
    probe: Callable[[], str],
    code: str,
    fix: str = "",
) -> bool:
    """Run one probe, time it, list it under `details["checks"]`, record its problem."""
    started = time.monotonic()
    try:
        detail, ok = probe(), True
    except _Failed:
        services.report_failure(name, section)
        failure = services.failures.get(name)
        detail, ok = (failure.message if failure else "unavailable"), False
    except Exception as exc:
        detail, ok = _first_line(exc), False
        section.problems.append(error(code, f"{detail} ({fix})" if fix else detail, service=name))
    section.details.setdefault("checks", []).append(
        {"name": name, "ok": ok, "detail": detail, "seconds": round(time.monotonic() - started, 3)}
    )
    return ok


def connectivity(services: Services, *, llm: bool = False) -> SectionResult:
    """Probe Grist (when configured), Postgres + pgvector, the graph, the embedding model and,
    with `llm`, the language model(s)."""
    started = time.monotonic()
    section = SectionResult("connectivity")
    settings = services.settings
    if settings.grist_server_url:
        _probe(section, services, "grist", lambda: _probe_grist(settings), "connectivity.grist")
    if _probe(section, services, "postgres", lambda: _probe_postgres(services), "connectivity.postgres"):
        _probe(
            section,
            services,
            "pgvector",
            lambda: _probe_pgvector(services),
            "connectivity.pgvector",
            "install pgvector into that Postgres; vedana creates the extension itself",
        )
    _probe(section, services, "graph", lambda: _probe_graph(services), "connectivity.graph")
    _probe(section, services, "embeddings", lambda: _probe_embeddings(services), "connectivity.embeddings")
    if llm:
        for model in dict.fromkeys(_llm_models(settings)):
            _probe(
                section,
                services,
                f"llm {model}",
                functools.partial(_probe_llm, settings, model),
                "connectivity.llm",
            )
    section.seconds = time.monotonic() - started
    return section


class _Failed(Exception):
    """A service could not be opened; its problem is in `Services.failures`."""


def _probe_grist(settings: Settings) -> str:
    from vedana.sources.grist_http import GristClient

    key = settings.grist_api_key.get_secret_value() if settings.grist_api_key else None
    docs = {
        "data model": settings.grist_data_model_doc_id,
        "data": settings.grist_data_doc_id,
        "test set": settings.grist_test_set_doc_id,
    }
    assert settings.grist_server_url is not None
    seen = []
    for role, doc_id in docs.items():
        if not doc_id:
            continue
        client = GristClient(settings.grist_server_url, doc_id, key, timeout_s=GRIST_TIMEOUT_S, retries=0)
        try:
            client.latest_action_hash()
        finally:
            client.close()
        seen.append(role)
    if not seen:
        client = GristClient(settings.grist_server_url, "-", key, timeout_s=GRIST_TIMEOUT_S, retries=0)
        try:
            client.call("status", prefix="/")
        finally:
            client.close()
        return f"{settings.grist_server_url} answers (no document id configured)"
    return f"{settings.grist_server_url}: {', '.join(seen)} document(s) readable"


def _probe_postgres(services: Services) -> str:
    engine = services.engine()
    if engine is None:
        raise _Failed
    with engine.connect() as conn:
        version = conn.exec_driver_sql("SHOW server_version").scalar()
    where = "embedded" if services.settings.uses_embedded_postgres else "DB_CONN_URI"
    return f"PostgreSQL {version} ({where})"


def _probe_pgvector(services: Services) -> str:
    engine = services.engine()
    if engine is None:
        raise _Failed
    with engine.connect() as conn:
        version = conn.exec_driver_sql(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).scalar()
    if not version:
        raise RuntimeError("the pgvector extension is not installed in the database")
    return f"pgvector {version}"


def _probe_graph(services: Services) -> str:
    graph = services.graph()
    if graph is None:
        raise _Failed
    from vedana.config import redact_uri

    where = (
        "embedded"
        if services.settings.uses_embedded_graph
        else redact_uri(services.settings.memgraph_uri or "")
    )
    return f"{graph.engine} ({where}) answers"


def _probe_embeddings(services: Services) -> str:
    embedder = services.embedder()
    if embedder is None:
        raise _Failed
    try:
        [vector] = embedder.embed([PROBE_TEXT])
        if len(vector) != embedder.dim:
            raise RuntimeError(
                f"{embedder.model} returned {len(vector)} dimensions instead of {embedder.dim}"
            )
    except Exception as exc:
        services.embedder_ = None
        services.failures["embeddings"] = error(
            "connectivity.embeddings",
            f"{_first_line(exc)} (check EMBEDDINGS_MODEL / EMBEDDINGS_DIM / EMBEDDINGS_API_BASE)",
            service="embeddings",
        )
        raise _Failed from None
    return f"{embedder.model} embeds ({embedder.dim} dimensions)"


def _llm_models(settings: Settings) -> list[str]:
    models = [settings.model]
    if settings.enable_dm_filtering:
        models.append(settings.effective_filter_model)
    return models


def _probe_llm(settings: Settings, model: str) -> str:
    from vedana.agent.llm import LLM

    client = LLM(settings)
    response = client.complete(
        model,
        [{"role": "user", "content": "Reply with the single word OK."}],
        purpose="check",
        max_tokens=5,
    )
    reply = (response.choices[0].message.content or "").strip()
    return f"{model} answered {reply[:40]!r} in {client.calls[-1].elapsed_s:.2f} s"
