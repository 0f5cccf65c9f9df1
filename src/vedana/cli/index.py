"""`vedana index` (placeholder until its issue lands)."""

from __future__ import annotations

from vedana.errors import VedanaError


def index() -> None:
    """Not built yet."""
    raise VedanaError("`vedana index` is not available yet")
