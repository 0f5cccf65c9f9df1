"""The search probe's pairs take turns going first within each target, whatever the period of
the round-robin over targets (the second of a pair finds the pages the first read warm)."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.probes import take_turns

EDGE = ("edge", "PERSON_has_INTEREST", "note")
NODES = [
    ("node", "city", "city_name"),
    ("node", "interest", "interest_name"),
    ("node", "person", "person_name"),
]


@pytest.mark.parametrize("targets", [[EDGE, *NODES], [EDGE, *NODES[:2]], [EDGE, NODES[0]]])
def test_each_target_goes_first_on_each_side_half_the_time(targets: list[tuple[str, str, str]]) -> None:
    work = targets * 51  # round-robin, as the probe builds it
    first = take_turns(work)
    for target in targets:
        sides = Counter(f for t, f in zip(work, first, strict=True) if t == target)
        assert abs(sides[True] - sides[False]) <= 1, (target, sides)


def test_an_even_period_does_not_put_vedana_first_on_every_edge_search() -> None:
    # Turns by position alone (i % 2) did exactly that with four targets.
    work = [EDGE, *NODES] * 10
    edge_turns = [f for t, f in zip(work, take_turns(work), strict=True) if t == EDGE]
    assert edge_turns == [True, False] * 5
