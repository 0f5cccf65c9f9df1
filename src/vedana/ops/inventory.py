"""What the knowledge base holds, counted per type in each store: staging, graph and vectors.

Shared by `vedana runs` (to show it) and the consistency check (to compare it). The figures
come from `vedana.stores.inventory` and `vedana.stores.index_state`; this module adds what needs
the data model (which attributes are embedded).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vedana.etl.embed_values import embed_targets
from vedana.stores.index_state import Watermarks, staging_version, watermarks
from vedana.stores.inventory import (
    Counts,
    orphan_vectors,
    stale_vectors,
    vector_column_dims,
    vector_counts,
)
from vedana.stores.inventory import expected_vector_counts as _expected

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from vedana.datamodel import DataModel

__all__ = [
    "Counts",
    "Watermarks",
    "expected_vector_counts",
    "orphan_vectors",
    "staging_version",
    "stale_vectors",
    "vector_column_dims",
    "vector_counts",
    "watermarks",
]


def expected_vector_counts(conn: Connection, dm: DataModel) -> Counts:
    """How many vectors each embeddable text attribute should have, given live staging rows."""
    return _expected(conn, embed_targets(dm))
