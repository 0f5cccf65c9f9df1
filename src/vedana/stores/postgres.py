"""Connecting to Postgres (embedded by default) and creating/migrating the schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from vedana.errors import ConfigError, ServiceError

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
            uri = "postgresql+psycopg://" + uri[len(prefix) :]
            break
    _check_url(uri)
    return uri


def _check_url(uri: str) -> None:
    """A `ConfigError` for a DB_CONN_URI that is not a parsable Postgres URL (the message shows
    it with the password masked; SQLAlchemy's own errors would echo it whole)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from vedana.config import redact_uri, uri_password_forms

    hint = "expected postgresql://user:password@host:5432/dbname (percent-encode special characters)"
    try:
        url = make_url(uri)
        url.port  # noqa: B018  -- parsing the port happens here
    except (ArgumentError, ValueError):
        raise ConfigError(f"DB_CONN_URI {redact_uri(uri)!r} is not a valid URL; {hint}") from None
    if url.password is not None and url.password not in uri_password_forms(uri):
        # e.g. an unescaped "@" or "/" in the password: the host would be read from part of it.
        raise ConfigError(
            "DB_CONN_URI: the password holds characters that must be percent-encoded "
            "(@ as %40, / as %2F, : as %3A, # as %23, ? as %3F)"
        )
    if url.drivername != "postgresql+psycopg":
        raise ConfigError(
            f"DB_CONN_URI must point at Postgres (with pgvector), not {url.drivername!r}; {hint}"
        )


def get_engine(settings: Settings, *, migrate: bool = True) -> Engine:
    """One pooled engine per URL for the process, with the schema up to date."""
    from sqlalchemy import create_engine
    from sqlalchemy.exc import OperationalError

    url = database_url(settings)
    engine = _engines.get(url)
    if engine is None:
        from vedana.stores.backends import application_name

        # Named with this process's pid and host, so a later run can tell a dead one's backends.
        engine = create_engine(
            url, pool_pre_ping=True, future=True, connect_args={"application_name": application_name()}
        )
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
        except OperationalError as exc:
            from vedana.config import redact_uri

            detail = str(exc.orig).splitlines()[0] if exc.orig else str(exc)
            if settings.uses_embedded_postgres:
                raise ServiceError(
                    f"the embedded Postgres in {settings.home / 'postgres'} does not accept connections "
                    f"({detail}); see its server.log there, or stop it with `vedana services stop`"
                ) from None
            raise ServiceError(
                f"cannot connect to Postgres at {redact_uri(url)}; check DB_CONN_URI ({detail})"
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


@migration(10, "evaluation runs")
def _m010_eval_runs(conn: Connection) -> None:
    # The tables come from `create_all`; listing a run's results in order wants this index.
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS eval_runs_started_idx ON eval_runs (started_at DESC)")


@migration(11, "conversation threads")
def _m011_threads(conn: Connection) -> None:
    # The tables come from `create_all`; reading a thread's recent messages wants this index.
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS thread_messages_thread_idx ON thread_messages (thread_id, id)"
    )


@migration(14, "sync rows stored uncompressed")
def _m014_sync_rows_storage(conn: Connection) -> None:
    # The table comes from `create_all`. Its packed rows are rewritten on every sync: compressing
    # megabytes of digests and keys costs several times what writing them does, and saves little.
    conn.exec_driver_sql(
        "ALTER TABLE sync_rows ALTER COLUMN row_keys SET STORAGE EXTERNAL,"
        " ALTER COLUMN digests SET STORAGE EXTERNAL, ALTER COLUMN outcomes SET STORAGE EXTERNAL"
    )


@migration(15, "sync rows keep CSV block checksums")
def _m015_sync_rows_blocks(conn: Connection) -> None:
    # Tables made before the column was; `create_all` gives it to new ones.
    conn.exec_driver_sql("ALTER TABLE sync_rows ADD COLUMN IF NOT EXISTS line_blocks bytea")
    conn.exec_driver_sql("ALTER TABLE sync_rows ALTER COLUMN line_blocks SET STORAGE EXTERNAL")


SCHEMA_LOCK_KEY = 0x7665_6461  # "veda": serialises concurrent first runs creating the schema


def ensure_schema(engine: Engine) -> None:
    """Create missing tables and apply pending migrations; safe to call from many processes."""
    from sqlalchemy import select

    from vedana.stores import tables

    with engine.begin() as conn:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK_KEY})")
        _ensure_pgvector(conn)
        tables.metadata.create_all(conn, checkfirst=True)
        applied = set(conn.execute(select(tables.schema_migrations.c.version)).scalars())
        for number, name, fn in sorted(MIGRATIONS, key=lambda m: m[0]):
            if number in applied:
                continue
            fn(conn)
            conn.execute(tables.schema_migrations.insert().values(version=number, name=name))


def _ensure_pgvector(conn: Connection) -> None:
    """Create the pgvector extension if the database lacks it; a one-line `ServiceError` that
    says who must do what when this user may not, or the server does not have pgvector."""
    from sqlalchemy.exc import DBAPIError

    if conn.exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'vector'").first():
        return
    try:
        with conn.begin_nested():
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
    except DBAPIError as exc:
        detail = str(exc.orig).splitlines()[0] if exc.orig else type(exc).__name__
        if "permission denied" in detail:
            raise ServiceError(
                f"the database has no pgvector extension and this user may not create it ({detail}); "
                "have a superuser run `CREATE EXTENSION vector;` in it once"
            ) from None
        raise ServiceError(
            f"cannot enable pgvector in the database ({detail}); install pgvector on the Postgres server "
            "(https://github.com/pgvector/pgvector) or leave DB_CONN_URI unset for the embedded Postgres"
        ) from None


def server_version(engine: Engine) -> str:
    """The Postgres server's version, e.g. "18.1"."""
    with engine.connect() as conn:
        return str(conn.exec_driver_sql("SHOW server_version").scalar())


def pgvector_version(engine: Engine) -> str | None:
    """The installed pgvector extension's version, or None when it is not installed."""
    with engine.connect() as conn:
        version = conn.exec_driver_sql(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).scalar()
    return str(version) if version else None
