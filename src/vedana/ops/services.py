"""Status, start and stop of the embedded services, as data (what `vedana services` prints)."""

from __future__ import annotations

from typing import Any

from vedana.config import Settings, redact_uri
from vedana.embeddings.service import DEFAULT_IDLE_S

SERVICES = ("postgres", "falkordb", "model")


def services_status(settings: Settings) -> dict[str, Any]:
    """Each embedded service's state (never starts one) and whether the settings use it or an
    external server instead."""
    from vedana.embeddings.local import is_local
    from vedana.embeddings.service import model_status
    from vedana.stores.embedded_falkordb import falkordb_status
    from vedana.stores.embedded_postgres import postgres_status

    home = settings.home
    external_db = settings.db_conn_uri.get_secret_value() if settings.db_conn_uri else None
    return {
        "home": str(home),
        "postgres": {**postgres_status(home), "in_use": settings.uses_embedded_postgres},
        "falkordb": {**falkordb_status(home), "in_use": settings.uses_embedded_graph},
        "model": {
            **model_status(home),
            "in_use": is_local(settings.embeddings_model) and settings.vedana_model_idle_s > 0,
            "version": settings.embeddings_model,
        },
        "db_conn_uri": redact_uri(external_db) if external_db else None,
        "memgraph_uri": redact_uri(settings.memgraph_uri) if settings.memgraph_uri else None,
    }


def start_services(settings: Settings, services: tuple[str, ...] = SERVICES) -> dict[str, Any]:
    """Start the named embedded services (if not running) and return `services_status`."""
    from vedana.stores.embedded_falkordb import ensure_falkordb
    from vedana.stores.embedded_postgres import ensure_postgres

    if "postgres" in services:
        ensure_postgres(settings.home)
    if "falkordb" in services:
        ensure_falkordb(settings.home, query_memory_mb=settings.graph_query_memory_mb)
    if "model" in services:
        from vedana.embeddings.service import ensure_model_service

        ensure_model_service(settings.home, settings.vedana_model_idle_s or DEFAULT_IDLE_S)
    return services_status(settings)


def stop_services(settings: Settings, services: tuple[str, ...] = SERVICES) -> dict[str, bool]:
    """Stop the named embedded services: {service: True if it was running and is now stopped}."""
    from vedana.stores.embedded_falkordb import stop_falkordb
    from vedana.stores.embedded_postgres import stop_postgres
    from vedana.stores.postgres import dispose_engines

    stopped: dict[str, bool] = {}
    if "postgres" in services:
        dispose_engines()  # our own pooled connections would only delay a fast shutdown
        stopped["postgres"] = stop_postgres(settings.home)
    if "falkordb" in services:
        stopped["falkordb"] = stop_falkordb(settings.home)
    if "model" in services:
        from vedana.embeddings.service import stop_model_service

        stopped["model"] = stop_model_service(settings.home)
    return stopped
