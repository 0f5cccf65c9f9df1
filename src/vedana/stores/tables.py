"""The one schema of vedana's Postgres database (SQLAlchemy Core).

Every part reads table definitions from here. `vedana.stores.postgres.ensure_schema` creates
and migrates it. Staging rows carry `version` (from one sequence, bumped on every insert,
change and tombstone) so an indexer can ask "what changed since version N".
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Sequence,
    Table,
    Text,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

metadata = MetaData()

# Every staging write takes its `version` from here: a global, monotonic change counter.
staging_version_seq = Sequence("staging_version_seq", metadata=metadata)


def _now() -> Column:
    return Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now())


# --- the data model, as synced -------------------------------------------------------------

dm_anchors = Table(
    "dm_anchors",
    metadata,
    Column("noun", Text, primary_key=True),
    Column("description", Text, nullable=False, server_default=""),
    Column("id_example", Text, nullable=False, server_default=""),
    Column("query", Text, nullable=False, server_default=""),
    Column("position", Integer, nullable=False, server_default="0"),
)

_attribute_columns = (
    ("attribute_name", Text),
    ("description", Text),
    ("data_example", Text),
    ("dtype", Text),
    ("query", Text),
)


def _attribute_table(name: str, owner: str) -> Table:
    return Table(
        name,
        metadata,
        Column(owner, Text, nullable=False),
        *(Column(col, typ, nullable=False, server_default="") for col, typ in _attribute_columns),
        Column("embeddable", Boolean, nullable=False, server_default="false"),
        Column("embed_threshold", Float),
        Column("embed_top_n", Integer),
        Column("position", Integer, nullable=False, server_default="0"),
        PrimaryKeyConstraint(owner, "attribute_name"),
    )


dm_anchor_attributes = _attribute_table("dm_anchor_attributes", "anchor")

dm_links = Table(
    "dm_links",
    metadata,
    Column("sentence", Text, primary_key=True),
    Column("anchor1", Text, nullable=False),
    Column("anchor2", Text, nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    Column("query", Text, nullable=False, server_default=""),
    Column("anchor1_link_column_name", Text, nullable=False, server_default=""),
    Column("anchor2_link_column_name", Text, nullable=False, server_default=""),
    Column("has_direction", Boolean, nullable=False, server_default="false"),
    Column("position", Integer, nullable=False, server_default="0"),
)

dm_link_attributes = _attribute_table("dm_link_attributes", "link")

dm_queries = Table(
    "dm_queries",
    metadata,
    Column("position", Integer, primary_key=True),
    Column("query_name", Text, nullable=False),
    Column("query_example", Text, nullable=False, server_default=""),
)

dm_prompts = Table(
    "dm_prompts",
    metadata,
    Column("name", Text, primary_key=True),
    Column("text", Text, nullable=False),
)

dm_conversation_lifecycle = Table(
    "dm_conversation_lifecycle",
    metadata,
    Column("event", Text, primary_key=True),
    Column("text", Text, nullable=False, server_default=""),
)

# --- normalised data ---------------------------------------------------------------------

nodes = Table(
    "nodes",
    metadata,
    Column("node_type", Text, nullable=False),
    Column("node_id", Text, nullable=False),
    Column("attributes", JSONB, nullable=False, server_default="{}"),
    Column("row_hash", Text, nullable=False),
    Column("deleted", Boolean, nullable=False, server_default="false"),
    Column("version", BigInteger, nullable=False),
    _now(),
    PrimaryKeyConstraint("node_type", "node_id"),
)

edges = Table(
    "edges",
    metadata,
    Column("edge_label", Text, nullable=False),
    Column("from_node_type", Text, nullable=False),
    Column("from_node_id", Text, nullable=False),
    Column("to_node_type", Text, nullable=False),
    Column("to_node_id", Text, nullable=False),
    Column("attributes", JSONB, nullable=False, server_default="{}"),
    Column("row_hash", Text, nullable=False),
    Column("deleted", Boolean, nullable=False, server_default="false"),
    Column("version", BigInteger, nullable=False),
    _now(),
    PrimaryKeyConstraint("edge_label", "from_node_type", "from_node_id", "to_node_type", "to_node_id"),
)

# --- a copy of a Grist document's data tables, as `/sql` sent them ---------------------------

# Kept so that a later sync fetches only the rows Grist says changed (`etl/grist_mirror.py`).
# `source` names the server and document; `record` is the raw row (column id → stored value).
grist_rows = Table(
    "grist_rows",
    metadata,
    Column("source", Text, nullable=False),
    Column("table_id", Text, nullable=False),
    Column("row_id", BigInteger, nullable=False),
    Column("record", JSONB, nullable=False),
    PrimaryKeyConstraint("source", "table_id", "row_id"),
)

# What the last data sync read and made of each source row, so the next one can normalise only
# the rows that changed (`stores/sync_rows.py`). One row per data table: the source rows' keys,
# 64-bit digests and outcomes, packed (reading 100k digests row by row would cost more than the
# comparison they serve).
sync_rows = Table(
    "sync_rows",
    metadata,
    Column("source", Text, nullable=False),
    Column("table_name", Text, nullable=False),
    Column("row_keys", LargeBinary, nullable=False),
    Column("digests", LargeBinary, nullable=False),
    Column("outcomes", Text, nullable=False),
    Column("patch", Text),  # JSON [[position, low, high, outcome], ...] over the packed rows
    Column("line_blocks", LargeBinary),  # a CSV file's block checksums (`sources.base.KeptLines`)
    PrimaryKeyConstraint("source", "table_name"),
)

# --- state and history ---------------------------------------------------------------------

# Small key/value state: Grist action hashes of the last sync, the indexed version watermark,
# the embedding model in use, ...
vedana_state = Table(
    "vedana_state",
    metadata,
    Column("key", Text, primary_key=True),
    Column("value", JSONB, nullable=False),
    _now(),
)

runs = Table(
    "runs",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("kind", Text, nullable=False),  # sync | index | run | check
    Column("started_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("finished_at", DateTime(timezone=True)),
    Column("status", Text, nullable=False, server_default="running"),  # running | ok | failed
    Column("source", Text, nullable=False, server_default=""),
    Column("counts", JSONB, nullable=False, server_default="{}"),
    Column("error", Text),
)

# --- conversations (`vedana ask --thread`, `vedana chat`) ------------------------------------

threads = Table(
    "threads",
    metadata,
    Column("id", Text, primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# One row per message, in order of `id`. An assistant message carries its trace (what
# `ask --json` prints), the model usage and the cost; a user message carries none of them.
thread_messages = Table(
    "thread_messages",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("thread_id", Text, ForeignKey("threads.id", ondelete="CASCADE"), nullable=False),
    Column("role", Text, nullable=False),  # user | assistant
    Column("text", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("trace", JSONB),
    Column("usage", JSONB),
    Column("cost_usd", Float),
)

# --- evaluation runs (`vedana eval`) ---------------------------------------------------------

eval_runs = Table(
    "eval_runs",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("started_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("finished_at", DateTime(timezone=True)),
    Column("status", Text, nullable=False, server_default="running"),  # running | done | interrupted
    Column("golden", Text, nullable=False, server_default=""),  # where the golden set came from
    Column("config", JSONB, nullable=False, server_default="{}"),  # models, hashes, counts, version
    Column("selection", JSONB, nullable=False, server_default="{}"),  # scenarios, limit, question
)

# One row per question of a run; `position` is the question's place in the golden set.
eval_results = Table(
    "eval_results",
    metadata,
    Column("run_id", BigInteger, ForeignKey("eval_runs.id", ondelete="CASCADE"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("question", Text, nullable=False),
    Column("scenario", Text, nullable=False, server_default=""),
    Column("golden_answer", Text, nullable=False, server_default=""),
    Column("answer", Text),
    Column("passed", Boolean),
    Column("error", Text),
    Column("scores", JSONB, nullable=False, server_default="{}"),  # recall, precision, judge, tools, cost…
    Column("trace", JSONB),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("run_id", "position"),
)

schema_migrations = Table(
    "schema_migrations",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("name", Text, nullable=False),
    Column("applied_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
