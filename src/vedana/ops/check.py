"""`check`: connectivity, data-model lint, consistency and a smoke question, as one report.

Errors fail the check; warnings are reported and fail it only with `strict`, so a team can
adopt it gradually. A section that cannot run says why (`skipped`) instead of failing, except
that a service it needs and cannot reach is an error.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from vedana.errors import ConfigError
from vedana.ops.connectivity import Services, connectivity
from vedana.ops.consistency import consistency
from vedana.ops.lint import lint
from vedana.ops.smoke import smoke
from vedana.problems import SECTIONS, CheckReport, SectionResult

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.config import Settings
    from vedana.embeddings import Embedder
    from vedana.sources import Source
    from vedana.stores.graph import GraphStore
    from vedana.stores.vectors import ModelInfo


def check(
    settings: Settings,
    *,
    data_model: str | Path | Source | None = None,
    data: str | Path | Source | None = None,
    csv: bool = False,
    llm: bool = False,
    ask: str | None = None,
    expect: str | None = None,
    strict: bool = False,
    only: Iterable[str] | None = None,
    engine: Engine | None = None,
    graph: GraphStore | None = None,
    embedder: Embedder | None = None,
) -> CheckReport:
    """Run the sections in `only` (default: all). `llm` also calls the language model(s);
    `ask` runs the smoke question (`expect`: text the answer must contain)."""
    wanted = list(SECTIONS) if only is None else [s for s in SECTIONS if s in set(only)]
    unknown = set(only or ()) - set(SECTIONS)
    if unknown:
        raise ConfigError(f"unknown check section(s) {', '.join(sorted(unknown))}; use {', '.join(SECTIONS)}")
    if expect is not None and ask is None:
        raise ConfigError('--expect needs a question: pass --ask "question" --expect "text"')

    started = time.monotonic()
    report = CheckReport(strict=strict)
    services = Services(settings)
    if engine is not None:
        services.engine_ = engine
    if graph is not None:
        services.graph_ = graph
    if embedder is not None:
        services.embedder_ = embedder
    try:
        for name in wanted:
            if name == "connectivity":
                section = connectivity(services, llm=llm)
            elif name == "lint":
                section = lint(settings, data_model=data_model, data=data, csv=csv)
            elif name == "consistency":
                section = _consistency(services)
            else:
                section = _smoke(settings, services, ask, expect)
            report.sections[name] = section
    finally:
        services.close()
    report.seconds = time.monotonic() - started
    return report


def _consistency(services: Services) -> SectionResult:
    engine = services.engine()
    if engine is None:
        section = SectionResult("consistency", skipped="Postgres is not reachable")
        services.report_failure("postgres", section)
        return section
    graph = services.graph()
    configured = _configured_model(services)
    section = consistency(engine, graph, configured)
    if graph is None and not section.skipped:
        section.details["graph"] = "not compared: the graph is not reachable"
        services.report_failure("graph", section)
    return section


def _configured_model(services: Services) -> ModelInfo | None:
    from vedana.stores.vectors import ModelInfo

    embedder = services.embedder()
    if embedder is None:
        return None
    try:
        return ModelInfo(model=embedder.model, dim=embedder.dim)
    except Exception:  # a remote model of unknown size that cannot be reached: connectivity says so
        return None


def _smoke(settings: Settings, services: Services, ask: str | None, expect: str | None) -> SectionResult:
    if ask is None:
        return SectionResult("smoke", skipped='no question: pass --ask "question" --expect "text"')
    engine, graph = services.engine(), services.graph()
    if engine is None or graph is None:
        section = SectionResult("smoke", skipped="Postgres or the graph is not reachable")
        services.report_failure("postgres", section)
        services.report_failure("graph", section)
        return section
    return smoke(settings, ask, expect, engine=engine, graph=graph, embedder=services.embedder())
