"""Connecting to Postgres (embedded by default) and creating/migrating the schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from vedana.errors import ServiceError

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from vedana.config import Settings

_engines: dict[str, Engine] = {}


def database_url(settings: Settings) -> str:
    """The SQLAlchemy URL: `DB_CONN_URI` (normalised to psycopg 3) or the embedded server's."""
    if settings.uses_embedded_postgres:
        from vedana.stores.embedded_postgres import ensure_postgres

        return ensure_postgres(settings.home)
    assert settings.db_conn_uri is not None
    uri = settings.db_conn_uri.get_secret_value()
    for prefix in ("postgresql://", "postgres://", "postgresql+psycopg2://"):
        if uri.startswith(prefix):
            return "postgresql+psycopg://" + uri[len(prefix) :]
    return uri


def get_engine(settings: Settings, *, migrate: bool = True) -> Engine:
    """One pooled engine per URL for the process, with the schema up to date."""
    from sqlalchemy import create_engine
    from sqlalchemy.exc import OperationalError

    url = database_url(settings)
    engine = _engines.get(url)
    if engine is None:
        engine = create_engine(url, pool_pre_ping=True, future=True)
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
        except OperationalError as exc:
            from vedana.config import redact_uri

            raise ServiceError(
                f"cannot connect to Postgres at {redact_uri(url)}; check DB_CONN_URI "
                f"({str(exc.orig).splitlines()[0] if exc.orig else exc})"
            ) from None
        if migrate:
            ensure_schema(engine)
        _engines[url] = engine
    return engine


def dispose_engines() -> None:
    for engine in _engines.values():
        engine.dispose()
    _engines.clear()


# Numbered migrations run once each, in order, after `create_all` made the current tables.
# Append new ones; never edit an applied one.
Migration = Callable[["Connection"], None]
MIGRATIONS: list[tuple[int, str, Migration]] = []


def migration(number: int, name: str) -> Callable[[Migration], Migration]:
    def register(fn: Migration) -> Migration:
        MIGRATIONS.append((number, name, fn))
        return fn

    return register


@migration(1, "pgvector extension")
def _m001_vector(conn: Connection) -> None:
    conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")


@migration(2, "staging change indexes")
def _m002_staging_indexes(conn: Connection) -> None:
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS nodes_version_idx ON nodes (version)")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS edges_version_idx ON edges (version)")


SCHEMA_LOCK_KEY = 0x7665_6461  # "veda": serialises concurrent first runs creating the schema


def ensure_schema(engine: Engine) -> None:
    """Create missing tables and apply pending migrations; safe to call from many processes."""
    from sqlalchemy import select

    from vedana.stores import tables

    with engine.begin() as conn:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK_KEY})")
        conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
        tables.metadata.create_all(conn, checkfirst=True)
        applied = set(conn.execute(select(tables.schema_migrations.c.version)).scalars())
        for number, name, fn in sorted(MIGRATIONS, key=lambda m: m[0]):
            if number in applied:
                continue
            fn(conn)
            conn.execute(tables.schema_migrations.insert().values(version=number, name=name))
