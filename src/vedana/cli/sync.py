"""`vedana sync` (placeholder until its issue lands)."""

from __future__ import annotations

from vedana.errors import VedanaError


def sync() -> None:
    """Not built yet."""
    raise VedanaError("`vedana sync` is not available yet")
