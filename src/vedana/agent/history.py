"""A conversation's earlier turns, as the agent and the data-model filter see them.

The agent gets them as chat messages (user questions and assistant answers; old tool results
are not replayed: they are large and the answers already say what mattered). The filter sees
one text: the recent turns, then the question, so "and which of them live in Lisbon?" keeps
the people of the previous answer in the selection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# The filter needs the gist of the conversation, not every word: long answers are clipped.
FILTER_TURN_CHARS = 600


@dataclass(frozen=True)
class Turn:
    role: str  # "user" or "assistant"
    text: str


def question_in_context(question: str, history: Sequence[Turn]) -> str:
    if not history:
        return question
    lines = ["Earlier in this conversation:"]
    for turn in history:
        text = " ".join(turn.text.split())
        if len(text) > FILTER_TURN_CHARS:
            text = text[: FILTER_TURN_CHARS - 1] + "…"
        lines.append(f"{turn.role}: {text}")
    lines += ["", f"The question to answer now: {question}"]
    return "\n".join(lines)
