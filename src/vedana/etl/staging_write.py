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
        self._nodes: list[tuple[str, ...]] = []  # node_type, node_id, attributes, row_hash
        self._edges: list[tuple[str, ...]] = []  # the edge key (5), attributes, row_hash
        self._last_attributes: dict[str, Any] | None = None
        self._last_text, self._last_hash = "{}", row_hash("{}")
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
        # An undirected edge comes twice in a row with the same attributes: encode them once.
        if row.attributes is not self._last_attributes:
            self._last_attributes = row.attributes
            self._last_text = attributes_json(row.attributes)
            self._last_hash = row_hash(self._last_text)
        text, digest = self._last_text, self._last_hash
        self._edges.append(
            (
                row.edge_label,
                row.from_node_type,
                row.from_node_id,
                row.to_node_type,
                row.to_node_id,
                text,
                digest,
            )
        )
        if len(self._edges) >= self.batch_rows:
            self._flush_edges()

    def _copy(self, table: str, columns: str, rows: list[tuple[str, ...]]) -> None:
        if not rows:
            return
        driver = self.conn.connection.driver_connection  # the psycopg connection, same transaction
        assert driver is not None
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
        # The incoming side holds every row of the source: hash joins beat index probes (which
        # the planner, without statistics on the temp tables, would pick), and a little more
        # memory keeps them from spilling to disk.
        run("SET LOCAL enable_nestloop = off")
        run("SET LOCAL work_mem = '64MB'")
        for kind, new, updated, unchanged, deleted in run(_DIFF_NODES):
            result.nodes[kind] = Counts(new=new, updated=updated, unchanged=unchanged, deleted=deleted)
        for label, new, updated, unchanged, deleted in run(_DIFF_EDGES):
            result.edges[label] = Counts(new=new, updated=updated, unchanged=unchanged, deleted=deleted)
        for label, streamed in run("SELECT edge_label, count(*) FROM _sync_edges GROUP BY edge_label"):
            counts = result.edges[label]
            counts.duplicates = streamed - (counts.new + counts.updated + counts.unchanged)
        result.version = run(
            "SELECT greatest((SELECT max(version) FROM nodes), (SELECT max(version) FROM edges))"
        ).scalar()
        return result


def _diff_sql(table: str, key: list[str], incoming: str) -> str:
    """One statement per table. A full join of the incoming rows with the live staging rows (on
    the primary key, one hash join) gives every row's fate: new or changed rows are upserted with
    a fresh version, live rows the source no longer has are tombstoned (found again by `ctid`),
    unchanged rows are left alone. The counts come from the same snapshot."""
    label = key[0]
    match = " AND ".join(f"t.{k} = s.{k}" for k in key)
    columns = ", ".join(key)
    return f"""
WITH diff AS (
    SELECT coalesce(s.{label}, t.{label}) AS {label}, {", ".join(f"s.{k} AS s_{k}" for k in key)},
           s.attributes, s.row_hash, t.row_hash AS old_hash, t.deleted AS was_deleted,
           t.ctid AS old_ctid, s.{key[-1]} IS NULL AS gone
    FROM ({incoming}) s
    FULL JOIN (SELECT ctid, * FROM {table}) t ON {match}
    WHERE s.{key[-1]} IS NOT NULL OR NOT t.deleted
), written AS (
    INSERT INTO {table} ({columns}, attributes, row_hash, deleted, version, updated_at)
    SELECT {", ".join(f"s_{k}" for k in key)}, attributes::jsonb, row_hash, false,
           nextval('staging_version_seq'), now()
    FROM diff
    WHERE NOT gone AND (old_hash IS NULL OR was_deleted OR old_hash <> row_hash)
    ON CONFLICT ({columns}) DO UPDATE SET
        attributes = EXCLUDED.attributes, row_hash = EXCLUDED.row_hash, deleted = false,
        version = EXCLUDED.version, updated_at = EXCLUDED.updated_at
), tombstoned AS (
    UPDATE {table} SET deleted = true, version = nextval('staging_version_seq'), updated_at = now()
    WHERE ctid = ANY (ARRAY(SELECT old_ctid FROM diff WHERE gone))
)
SELECT {label},
       count(*) FILTER (WHERE NOT gone AND (old_hash IS NULL OR was_deleted)),
       count(*) FILTER (WHERE NOT gone AND NOT was_deleted AND old_hash <> row_hash),
       count(*) FILTER (WHERE NOT gone AND NOT was_deleted AND old_hash = row_hash),
       count(*) FILTER (WHERE gone)
FROM diff GROUP BY {label}
"""


_DIFF_NODES = _diff_sql("nodes", ["node_type", "node_id"], "SELECT * FROM _sync_nodes")
# Duplicate edges collapse to the first one streamed (lowest seq), found by hashing, not sorting.
_DIFF_EDGES = _diff_sql(
    "edges",
    [c.strip() for c in _EDGE_KEY.split(",")],
    f"SELECT * FROM _sync_edges WHERE seq IN (SELECT min(seq) FROM _sync_edges GROUP BY {_EDGE_KEY})",
)
