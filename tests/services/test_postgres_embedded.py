"""The embedded Postgres: pgvector works, with an HNSW index."""

from __future__ import annotations


def test_pgvector_with_hnsw_index(pg_engine) -> None:
    with pg_engine.begin() as conn:
        conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
        conn.exec_driver_sql("DROP TABLE IF EXISTS services_vec_probe")
        conn.exec_driver_sql("CREATE TABLE services_vec_probe (id int PRIMARY KEY, v vector(3))")
        conn.exec_driver_sql(
            "INSERT INTO services_vec_probe VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0.9,0.1,0]')"
        )
        conn.exec_driver_sql(
            "CREATE INDEX services_vec_probe_hnsw ON services_vec_probe USING hnsw (v vector_cosine_ops)"
        )
        kinds = (
            conn.exec_driver_sql(
                "SELECT am.amname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_am am ON am.oid = c.relam WHERE c.relname = 'services_vec_probe_hnsw'"
            )
            .scalars()
            .all()
        )
        assert kinds == ["hnsw"]
        nearest = (
            conn.exec_driver_sql("SELECT id FROM services_vec_probe ORDER BY v <=> '[1,0.05,0]' LIMIT 2")
            .scalars()
            .all()
        )
        assert nearest == [1, 3]
        conn.exec_driver_sql("DROP TABLE services_vec_probe")


def test_a_user_who_may_not_create_pgvector_is_told_who_must(pg_engine, settings) -> None:
    """An external database (DB_CONN_URI) whose user is not a superuser: a one-line error until
    an administrator creates the extension, then the tool creates its schema by itself."""
    import pytest
    import sqlalchemy as sa

    from vedana.config import Settings
    from vedana.errors import ServiceError
    from vedana.stores.postgres import dispose_engines, get_engine

    admin = sa.create_engine(pg_engine.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql("DROP DATABASE IF EXISTS kb_limited")
        conn.exec_driver_sql("DROP ROLE IF EXISTS kb_limited")
        conn.exec_driver_sql("CREATE ROLE kb_limited LOGIN")
        conn.exec_driver_sql("CREATE DATABASE kb_limited OWNER kb_limited")
    url = pg_engine.url.set(username="kb_limited", database="kb_limited")
    limited = Settings(_env_file=None, vedana_home=settings.vedana_home,
                       db_conn_uri=url.render_as_string(hide_password=False))  # fmt: skip
    try:
        with pytest.raises(ServiceError, match="have a superuser run `CREATE EXTENSION vector;`"):
            get_engine(limited)
        superuser_there = sa.create_engine(pg_engine.url.set(database="kb_limited"))
        with superuser_there.begin() as conn:
            conn.exec_driver_sql("CREATE EXTENSION vector")
        superuser_there.dispose()
        engine = get_engine(limited)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM schema_migrations").scalar() >= 1
    finally:
        dispose_engines()
        with admin.connect() as conn:
            conn.exec_driver_sql("DROP DATABASE IF EXISTS kb_limited WITH (FORCE)")
            conn.exec_driver_sql("DROP ROLE IF EXISTS kb_limited")
        admin.dispose()


def test_checkpoints_are_spaced_for_bulk_work(pg_engine) -> None:
    """The embedded server starts with checkpoints rarer than Postgres' defaults (1 GB, 5 min):
    a first index must not meet one, after which a small re-sync rewrites whole pages to WAL."""
    with pg_engine.connect() as conn:
        settings = dict(
            conn.exec_driver_sql(
                "SELECT name, setting || coalesce(unit, '') FROM pg_settings"
                " WHERE name IN ('max_wal_size', 'checkpoint_timeout')"
            ).all()
        )
    assert settings == {"max_wal_size": "4096MB", "checkpoint_timeout": "1800s"}


def test_shared_buffers_follow_the_memory_there_is(pg_engine) -> None:
    """A sixteenth of the memory, between Postgres' default 128 MB and 512 MB, and the running
    server has what this machine's memory gives."""
    from vedana.stores.embedded_postgres import _memory_bytes, shared_buffers_mb

    assert shared_buffers_mb(None) == 128
    assert shared_buffers_mb(1 << 30) == 128  # 1 GB: the default
    assert shared_buffers_mb(4 << 30) == 256
    assert shared_buffers_mb(64 << 30) == 512
    with pg_engine.connect() as conn:
        shown = conn.exec_driver_sql("SHOW shared_buffers").scalar_one()
    assert shown == f"{shared_buffers_mb(_memory_bytes())}MB"
