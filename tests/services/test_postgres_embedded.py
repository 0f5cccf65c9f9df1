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
