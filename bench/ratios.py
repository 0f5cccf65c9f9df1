"""vedana against a same-run baseline: one ratio per measure, in the format every phase uses.

A phase's result holds a list under `"ratios"`; each item is

    {"measure": str, "vedana_s": float, "baseline": str, "baseline_s": float,
     "ratio": float, "must_reach": str}

(`ratio` = vedana ÷ baseline; `must_reach` like "≤ 1.5×" or "≤ 10 %", or "" when the issue sets
no figure), optionally with `"pairs"`: the [vedana_s, baseline_s] of each back-to-back pair, and
`"engine_busy"`: {"engine", "vedana", "baseline", "pairs"}, the engine's CPU seconds ÷ the wall
time of each side (medians, then each pair's), where the engine's process is on this machine. With
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
    measure: str,
    pairs: Sequence[tuple[float, float]],
    baseline: str,
    must_reach: str,
    *,
    busy: tuple[str, Sequence[tuple[float, float] | None]] | None = None,
) -> dict[str, Any]:
    """A ratio from back-to-back (vedana, baseline) timings; medians over the pairs. `busy`: the
    engine's name and, pair by pair, its CPU seconds while each side ran (None for a pair where
    they were not measured)."""
    kept = [k for k, (_, b) in enumerate(pairs) if b > 0]
    if not kept:
        raise ValueError(f"{measure}: no pair with a positive baseline time")
    usable = [pairs[k] for k in kept]
    entry = {
        "measure": measure,
        "vedana_s": round(median(v for v, _ in usable), 6),
        "baseline": baseline,
        "baseline_s": round(median(b for _, b in usable), 6),
        "ratio": round(median(v / b for v, b in usable), 4),
        "must_reach": must_reach,
        "pairs": [[round(v, 6), round(b, 6)] for v, b in usable],
    }
    if busy is not None:
        engine, cpu = busy
        if len(cpu) != len(pairs):
            raise ValueError(f"{measure}: {len(cpu)} engine CPU figures for {len(pairs)} pairs")
        shares: list[tuple[float, float] | None] = []
        for k in kept:
            seconds = cpu[k]
            shares.append(
                None if seconds is None else (seconds[0] / max(pairs[k][0], 1e-9), seconds[1] / pairs[k][1])
            )
        measured = [s for s in shares if s is not None]
        if measured:
            entry["engine_busy"] = {
                "engine": engine,
                "vedana": round(median(v for v, _ in measured), 3),
                "baseline": round(median(b for _, b in measured), 3),
                "pairs": [None if s is None else [round(s[0], 3), round(s[1], 3)] for s in shares],
            }
    return entry


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


def format_busy(entry: dict[str, Any]) -> str:
    """The engine's CPU share of vedana's time, then of the baseline's, as they follow the
    baseline's time in the table: " (FalkorDB busy 97% / 96%)"; "" when the entry has none."""
    busy = entry.get("engine_busy")
    if not busy:
        return ""
    return f" ({busy['engine']} busy {busy['vedana']:.0%} / {busy['baseline']:.0%})"


BUSY_NOTE = (
    "engine busy: the engine's CPU seconds ÷ the wall time, on vedana's side / the baseline's; near "
    "100 % on both, the engine bounds both sides and the ratio is within the machine's noise of 1"
)


def format_met(entry: dict[str, Any]) -> str:
    verdict = met(entry)
    return "–" if verdict is None else ("yes" if verdict else "no")
