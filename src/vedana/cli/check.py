"""`vedana check` (placeholder until its issue lands)."""

from __future__ import annotations

from vedana.errors import VedanaError


def check() -> None:
    """Not built yet."""
    raise VedanaError("`vedana check` is not available yet")
