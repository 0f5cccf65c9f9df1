"""The local-model sweep embeds runs of the index's own order, not texts picked across it: each
batch size must pad as it would in a full index (a 256-text batch of a 1,000-text sample spans a
quarter of the length range; of 67k sorted texts, 1/260 of it)."""

from __future__ import annotations

import pytest

from bench.local_embed import sample_windows, sweep_turns


@pytest.mark.parametrize(
    ("total", "cap", "align"),
    [
        (67_078, 1_024, 256),
        (67_078, 1_000, 256),
        (670_000, 4_096, 256),
        (2_000, 1_024, 64),
        (1_100, 1_024, 256),
    ],
)
def test_windows_are_whole_aligned_batches_spread_over_the_order(total: int, cap: int, align: int) -> None:
    windows = sample_windows(total, cap, align)
    assert 1 <= len(windows) <= 4
    assert sum(stop - start for start, stop in windows) <= cap
    assert len({stop - start for start, stop in windows}) == 1  # equal weight for each stretch
    for (start, stop), after in zip(windows, [*windows[1:], (total, total)], strict=True):
        assert start % align == 0 and (stop - start) % align == 0, (start, stop)
        assert 0 <= start < stop <= after[0] <= total  # in order, no overlap, inside the order
    if total >= 8 * cap:  # room to spread: the short and the long ends are both sampled
        assert windows[0][1] <= total // 4 and windows[-1][0] >= total * 3 // 4, windows


def test_the_default_sample_of_a_100k_index_is_four_batches_of_256_across_the_order() -> None:
    # The 67,078 distinct texts of the 100k people run: names (the shortest 28 %), then notes.
    assert sample_windows(67_078, 1_024, 256) == [
        (8192, 8448),
        (25088, 25344),
        (41728, 41984),
        (58624, 58880),
    ]


def test_all_texts_when_they_fit_and_one_middle_run_when_the_cap_is_below_a_batch() -> None:
    assert sample_windows(900, 1_024, 256) == [(0, 900)]
    assert sample_windows(1_024, 1_024, 256) == [(0, 1_024)]
    [(start, stop)] = sample_windows(67_078, 40, 256)
    assert stop - start == 40 and start % 256 == 0 and 30_000 < start < 37_000


@pytest.mark.parametrize(
    ("sizes", "windows"), [([32, 64, 128, 256], 4), ([32, 64, 128, 256], 1), ([32, 64, 96, 128, 256], 4)]
)
def test_each_size_embeds_every_window_and_takes_each_place_in_turn(sizes: list[int], windows: int) -> None:
    turns = sweep_turns(sizes, windows, rounds=2)
    assert sorted(turns) == sorted((w, s) for w in range(windows) for s in sizes for _ in range(2))
    places: dict[int, list[int]] = {s: [] for s in sizes}
    for start in range(0, len(turns), len(sizes)):
        group = turns[start : start + len(sizes)]
        assert len({w for w, _ in group}) == 1  # one window at a time: its sizes run back to back
        for place, (_, size) in enumerate(group):
            places[size].append(place)
    spread = {
        s: max(p.count(i) for i in range(len(sizes))) - min(p.count(i) for i in range(len(sizes)))
        for s, p in places.items()
    }
    assert max(spread.values()) <= 1, places  # no size always first (or always last)
