"""`vedana runs` (placeholder until its issue lands)."""

from __future__ import annotations

from vedana.errors import VedanaError


def runs() -> None:
    """Not built yet."""
    raise VedanaError("`vedana runs` is not available yet")
