"""`vedana cypher` (placeholder until its issue lands)."""

from __future__ import annotations

from vedana.errors import VedanaError


def cypher() -> None:
    """Not built yet."""
    raise VedanaError("`vedana cypher` is not available yet")
