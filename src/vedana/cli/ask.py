"""`vedana ask` (placeholder until its issue lands)."""

from __future__ import annotations

from vedana.errors import VedanaError


def ask() -> None:
    """Not built yet."""
    raise VedanaError("`vedana ask` is not available yet")
