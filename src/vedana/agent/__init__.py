"""The agent behind `vedana ask`: data-model filter, tools, loop, prompts and trace."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vedana.agent.trace import AskResult


def ask(*args: Any, **kwargs: Any) -> AskResult:
    """Answer a question; see `vedana.agent.loop.ask`."""
    from vedana.agent.loop import ask as _ask

    return _ask(*args, **kwargs)


__all__ = ["ask"]
