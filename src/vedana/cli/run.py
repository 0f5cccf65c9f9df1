"""`vedana run` (placeholder until its issue lands)."""

from __future__ import annotations

from vedana.errors import VedanaError


def run() -> None:
    """Not built yet."""
    raise VedanaError("`vedana run` is not available yet")
