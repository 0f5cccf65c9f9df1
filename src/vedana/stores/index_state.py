"""Where indexing stands: the staging version each index target has fully applied.

The watermarks live in `vedana_state` under the keys below; `index` advances them only after
it applied the rows (the staging contract in docs/architecture.md), and drops one before a step
that would leave its target half-built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Connection

GRAPH_VERSION_KEY = "index.graph.version"
VECTORS_VERSION_KEY = "index.vectors.version"
VECTORS_TARGETS_KEY = "index.vectors.targets"  # the (kind, label, attribute) list last embedded


def staging_version(conn: Connection) -> int:
    """The highest staging version: what a fully indexed knowledge base is in line with."""
    return int(
        conn.exec_driver_sql(
            "SELECT greatest((SELECT coalesce(max(version), 0) FROM nodes), "
            "(SELECT coalesce(max(version), 0) FROM edges))"
        ).scalar()
        or 0
    )


@dataclass(frozen=True)
class Watermarks:
    """The staging version each index target has fully applied (None: never indexed)."""

    graph: int | None
    vectors: int | None

    def to_dict(self) -> dict[str, int | None]:
        return {"graph": self.graph, "vectors": self.vectors}


def _as_int(value: Any) -> int | None:
    return None if value is None else int(value)


def watermarks(conn: Connection) -> Watermarks:
    from vedana.stores.staging import get_state

    return Watermarks(
        graph=_as_int(get_state(conn, GRAPH_VERSION_KEY)),
        vectors=_as_int(get_state(conn, VECTORS_VERSION_KEY)),
    )


def embedded_targets(conn: Connection) -> list[list[str]] | None:
    """The embeddable attributes the vectors were last made for (None before the first index)."""
    from vedana.stores.staging import get_state

    return get_state(conn, VECTORS_TARGETS_KEY)


def set_watermark(conn: Connection, key: str, version: int) -> None:
    """Record that a target is in line with staging `version`. Caller commits."""
    from vedana.stores.staging import set_state

    set_state(conn, key, version)


def forget_watermark(conn: Connection, key: str) -> None:
    """Drop a watermark and commit, before a step that would leave its target half-built."""
    from vedana.stores.tables import vedana_state

    conn.execute(vedana_state.delete().where(vedana_state.c.key == key))
    conn.commit()


def set_embedded_targets(conn: Connection, targets: list[tuple[str, str, str]]) -> None:
    """Record the embeddable attributes the vectors are now made for. Caller commits."""
    from vedana.stores.staging import set_state

    set_state(conn, VECTORS_TARGETS_KEY, [list(t) for t in targets])
