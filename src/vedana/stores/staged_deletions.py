"""What a sync's open transaction is about to delete: per type, its tombstones and the live rows before it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vedana.stores.index_state import staging_version

if TYPE_CHECKING:
    from sqlalchemy import Connection

# (kind, the table, its type column)
_TABLES = (("node", "nodes", "node_type"), ("edge", "edges", "edge_label"))


@dataclass(frozen=True)
class StagedDeletion:
    """Rows of one node type or edge label that the uncommitted sync tombstoned."""

    kind: str  # "node" | "edge"
    name: str  # the node type or edge label
    deleted: int  # tombstoned by the open transaction
    before: int  # live rows as the last committed sync left them


def staged_deletions(conn: Connection) -> list[StagedDeletion]:
    """Per type, what `conn`'s open transaction tombstoned, beside the live rows it had before.

    The committed state is read on a connection of its own (the transaction's writes are not
    visible there); the writer lock the sync holds keeps anyone else from committing meanwhile.
    Types with no tombstones are left out."""
    with conn.engine.connect() as committed:
        since = staging_version(committed)
        found: list[StagedDeletion] = []
        if since == 0:
            return found  # staging held nothing: a first sync tombstones nothing
        for kind, table, column in _TABLES:
            tombstoned: dict[str, int] = dict(
                conn.exec_driver_sql(
                    f"SELECT {column}, count(*) FROM {table} WHERE deleted AND version > %s GROUP BY {column}",
                    (since,),
                ).all()
            )
            if not tombstoned:
                continue
            live: dict[str, int] = dict(
                committed.exec_driver_sql(
                    f"SELECT {column}, count(*) FROM {table} WHERE NOT deleted AND {column} = ANY(%s) "
                    f"GROUP BY {column}",
                    (list(tombstoned),),
                ).all()
            )
            found += [
                StagedDeletion(kind, name, int(n), int(live.get(name, 0)))
                for name, n in sorted(tombstoned.items())
            ]
    return found
