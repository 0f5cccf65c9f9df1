"""vedana against a same-run baseline: one ratio per measure, in the format every phase uses.

A phase's result holds a list under `"ratios"`; each item is

    {"measure": str, "vedana_s": float, "baseline": str, "baseline_s": float,
     "ratio": float, "must_reach": str}

(`ratio` = vedana ÷ baseline; `must_reach` like "≤ 1.5×" or "≤ 10 %", or "" when the issue sets
no figure), optionally with `"pairs"`: the [vedana_s, baseline_s] of each back-to-back pair. With
several pairs the figures are medians: `ratio` is the median of the pairs' ratios, so one noisy
pair on a shared machine does not decide it. The report prints every phase's ratios in one table,
whichever phase holds them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from statistics import median
from typing import Any

_TARGET = re.compile(r"^\s*(≤|<=|<|≥|>=|>)\s*([0-9]+(?:\.[0-9]+)?)\s*(×|x|%)?\s*$")


def ratio_entry(
    measure: str, pairs: Sequence[tuple[float, float]], baseline: str, must_reach: str
) -> dict[str, Any]:
    """A ratio from back-to-back (vedana, baseline) timings; medians over the pairs."""
    usable = [(v, b) for v, b in pairs if b > 0]
    if not usable:
        raise ValueError(f"{measure}: no pair with a positive baseline time")
    return {
        "measure": measure,
        "vedana_s": round(median(v for v, _ in usable), 6),
        "baseline": baseline,
        "baseline_s": round(median(b for _, b in usable), 6),
        "ratio": round(median(v / b for v, b in usable), 4),
        "must_reach": must_reach,
        "pairs": [[round(v, 6), round(b, 6)] for v, b in usable],
    }


def met(entry: dict[str, Any]) -> bool | None:
    """Whether `ratio` meets `must_reach` ("≤ 1.5×", "≤ 10 %", "≥ 1×"); None when there is no
    target or it cannot be read."""
    match = _TARGET.match(entry.get("must_reach") or "")
    ratio = entry.get("ratio")
    if match is None or ratio is None:
        return None
    op, number, unit = match.groups()
    limit = float(number) / 100 if unit == "%" else float(number)
    return {
        "≤": ratio <= limit,
        "<=": ratio <= limit,
        "<": ratio < limit,
        "≥": ratio >= limit,
        ">=": ratio >= limit,
        ">": ratio > limit,
    }[op]


def size_ratios(size: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(phase name, ratio) for every ratio any phase of this size's result holds."""
    for name, phase in (size.get("phases") or {}).items():
        for entry in phase.get("ratios") or []:
            yield name, entry


def format_ratio(entry: dict[str, Any]) -> str:
    ratio = entry.get("ratio")
    if ratio is None:
        return "–"
    if "%" in (entry.get("must_reach") or "") or "÷ full" in entry.get("measure", ""):
        return f"{ratio:.1%}"  # a share of a full run
    return f"{ratio:.2f}×"


def format_seconds(seconds: Any) -> str:
    if seconds is None:
        return "–"
    if seconds >= 100:
        return f"{seconds:.0f} s"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 0.001:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def format_met(entry: dict[str, Any]) -> str:
    verdict = met(entry)
    return "–" if verdict is None else ("yes" if verdict else "no")
