"""`vedana search` (placeholder until its issue lands)."""

from __future__ import annotations

from vedana.errors import VedanaError


def search() -> None:
    """Not built yet."""
    raise VedanaError("`vedana search` is not available yet")
