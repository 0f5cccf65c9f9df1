"""Writing one sync's nodes and edges into the staging tables, incrementally.

Rows stream into transaction-temporary tables through COPY in batches, so Python holds one
batch at a time. The diff then runs in Postgres as a few set-based statements (hash joins on
the primary keys, comparing `row_hash`); duplicate edges collapse to the first one streamed: new or changed rows are upserted with a fresh `version` from
`staging_version_seq`, rows no longer in the source are tombstoned (`deleted = true`, new
`version`), and unchanged rows are not touched (see docs/architecture.md, staging contract).
Everything happens in the caller's transaction: a failure anywhere leaves staging as it was.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vedana.etl.normalize import EdgeRow, NodeRow

if TYPE_CHECKING:
    from sqlalchemy import Connection

BATCH_ROWS = 5000
_EDGE_KEY = "edge_label, from_node_type, from_node_id, to_node_type, to_node_id"


@dataclass
class Counts:
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    duplicates: int = 0


@dataclass
class WriteResult:
    nodes: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    edges: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    version: int | None = None


_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def attributes_json(attributes: dict[str, Any]) -> str:
    """Canonical JSON (sorted keys): equal attributes give equal text and so equal hashes."""
    return _ENCODER.encode(attributes) if attributes else "{}"


def row_hash(attributes_text: str) -> str:
    if attributes_text == "{}":
        return _EMPTY_HASH
    return hashlib.blake2b(attributes_text.encode("utf-8"), digest_size=16).hexdigest()


_EMPTY_HASH = hashlib.blake2b(b"{}", digest_size=16).hexdigest()


class StagingWriter:
    def __init__(self, conn: Connection, *, batch_rows: int = BATCH_ROWS) -> None:
        self.conn = conn
        self.batch_rows = batch_rows
        self._nodes: list[tuple[str, str, str, str]] = []
        self._edges: list[tuple[str, str, str, str, str, str, str]] = []
        conn.exec_driver_sql(
            "CREATE TEMP TABLE _sync_nodes (node_type text, node_id text, attributes text, row_hash text)"
            " ON COMMIT DROP"
        )
        conn.exec_driver_sql(
            "CREATE TEMP TABLE _sync_edges (seq bigserial, edge_label text, from_node_type text,"
            " from_node_id text, to_node_type text, to_node_id text, attributes text, row_hash text)"
            " ON COMMIT DROP"
        )

    def add_node(self, row: NodeRow) -> None:
        text = attributes_json(row.attributes)
        self._nodes.append((row.node_type, row.node_id, text, row_hash(text)))
        if len(self._nodes) >= self.batch_rows:
            self._flush_nodes()

    def add_edge(self, row: EdgeRow) -> None:
        text = attributes_json(row.attributes)
        self._edges.append(
            (
                row.edge_label,
                row.from_node_type,
                row.from_node_id,
                row.to_node_type,
                row.to_node_id,
                text,
                row_hash(text),
            )
        )
        if len(self._edges) >= self.batch_rows:
            self._flush_edges()

    def _copy(self, table: str, columns: str, rows: list[tuple[str, ...]]) -> None:
        if not rows:
            return
        driver = self.conn.connection.driver_connection  # the psycopg connection, same transaction
        with driver.cursor() as cursor, cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        rows.clear()

    def _flush_nodes(self) -> None:
        self._copy("_sync_nodes", "node_type, node_id, attributes, row_hash", self._nodes)

    def _flush_edges(self) -> None:
        self._copy("_sync_edges", f"{_EDGE_KEY}, attributes, row_hash", self._edges)

    def apply(self) -> WriteResult:
        """Diff the streamed rows against staging and write the difference."""
        self._flush_nodes()
        self._flush_edges()
        result = WriteResult()
        run = self.conn.exec_driver_sql
        # The incoming side holds every row of the source, so hash joins beat index probes;
        # without statistics on the temp tables the planner would pick a nested loop.
        run("SET LOCAL enable_nestloop = off")
        for kind, new, updated, unchanged in run(_UPSERT_NODES):
            result.nodes[kind] = Counts(new=new, updated=updated, unchanged=unchanged)
        for kind, deleted in run(_TOMBSTONE_NODES):
            result.nodes[kind].deleted = deleted
        for label, new, updated, unchanged in run(_UPSERT_EDGES):
            result.edges[label] = Counts(new=new, updated=updated, unchanged=unchanged)
        for label, streamed in run("SELECT edge_label, count(*) FROM _sync_edges GROUP BY edge_label"):
            counts = result.edges[label]
            counts.duplicates = streamed - (counts.new + counts.updated + counts.unchanged)
        for label, deleted in run(_TOMBSTONE_EDGES):
            result.edges[label].deleted = deleted
        result.version = run(
            "SELECT greatest((SELECT max(version) FROM nodes), (SELECT max(version) FROM edges))"
        ).scalar()
        return result


# A row is written when it is new, was tombstoned, or its hash differs; the counts come from the
# pre-statement snapshot (`incoming`), the write from the data-modifying CTE.
_UPSERT_NODES = """
WITH incoming AS (
    SELECT s.node_type, s.node_id, s.attributes, s.row_hash, n.row_hash AS old_hash, n.deleted AS was_deleted
    FROM _sync_nodes s
    LEFT JOIN nodes n ON n.node_type = s.node_type AND n.node_id = s.node_id
), written AS (
    INSERT INTO nodes (node_type, node_id, attributes, row_hash, deleted, version, updated_at)
    SELECT node_type, node_id, attributes::jsonb, row_hash, false, nextval('staging_version_seq'), now()
    FROM incoming
    WHERE old_hash IS NULL OR was_deleted OR old_hash <> row_hash
    ON CONFLICT (node_type, node_id) DO UPDATE SET
        attributes = EXCLUDED.attributes, row_hash = EXCLUDED.row_hash, deleted = false,
        version = EXCLUDED.version, updated_at = EXCLUDED.updated_at
)
SELECT node_type,
       count(*) FILTER (WHERE old_hash IS NULL OR was_deleted),
       count(*) FILTER (WHERE NOT was_deleted AND old_hash <> row_hash),
       count(*) FILTER (WHERE NOT was_deleted AND old_hash = row_hash)
FROM incoming GROUP BY node_type
"""

_TOMBSTONE_NODES = """
WITH gone AS (
    UPDATE nodes n SET deleted = true, version = nextval('staging_version_seq'), updated_at = now()
    WHERE NOT n.deleted
      AND NOT EXISTS (SELECT 1 FROM _sync_nodes s WHERE s.node_type = n.node_type AND s.node_id = n.node_id)
    RETURNING n.node_type
)
SELECT node_type, count(*) FROM gone GROUP BY node_type
"""

_EDGE_MATCH = (
    "e.edge_label = s.edge_label AND e.from_node_type = s.from_node_type AND e.from_node_id = s.from_node_id"
    " AND e.to_node_type = s.to_node_type AND e.to_node_id = s.to_node_id"
)

# Duplicate edges collapse to the first one streamed (lowest seq), found by hashing, not sorting.
_UPSERT_EDGES = f"""
WITH first_seen AS (
    SELECT min(seq) AS seq FROM _sync_edges GROUP BY {_EDGE_KEY}
), incoming AS (
    SELECT s.{_EDGE_KEY.replace(", ", ", s.")}, s.attributes, s.row_hash,
           e.row_hash AS old_hash, e.deleted AS was_deleted
    FROM _sync_edges s
    JOIN first_seen USING (seq)
    LEFT JOIN edges e ON {_EDGE_MATCH}
), written AS (
    INSERT INTO edges ({_EDGE_KEY}, attributes, row_hash, deleted, version, updated_at)
    SELECT {_EDGE_KEY}, attributes::jsonb, row_hash, false, nextval('staging_version_seq'), now()
    FROM incoming
    WHERE old_hash IS NULL OR was_deleted OR old_hash <> row_hash
    ON CONFLICT ({_EDGE_KEY}) DO UPDATE SET
        attributes = EXCLUDED.attributes, row_hash = EXCLUDED.row_hash, deleted = false,
        version = EXCLUDED.version, updated_at = EXCLUDED.updated_at
)
SELECT edge_label,
       count(*) FILTER (WHERE old_hash IS NULL OR was_deleted),
       count(*) FILTER (WHERE NOT was_deleted AND old_hash <> row_hash),
       count(*) FILTER (WHERE NOT was_deleted AND old_hash = row_hash)
FROM incoming GROUP BY edge_label
"""

_TOMBSTONE_EDGES = f"""
WITH gone AS (
    UPDATE edges e SET deleted = true, version = nextval('staging_version_seq'), updated_at = now()
    WHERE NOT e.deleted AND NOT EXISTS (SELECT 1 FROM _sync_edges s WHERE {_EDGE_MATCH})
    RETURNING e.edge_label
)
SELECT edge_label, count(*) FROM gone GROUP BY edge_label
"""
