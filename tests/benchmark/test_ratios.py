"""The ratio format, its verdict, the ratios table, and the read + hash + compare baseline.

No services and no timing asserts: these check what the bench computes from timings, and that
the hash baseline finds exactly the rows an edit changed.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from bench.baselines import hash_pass
from bench.edit import edit_csv_folder
from bench.generate import generate
from bench.ratios import format_ratio, met, ratio_entry
from bench.report import markdown, ratio_rows
from support.bench_results import bench_results


def test_ratio_entry_takes_medians_over_pairs() -> None:
    entry = ratio_entry("sync", [(4.0, 1.0), (3.0, 2.0), (9.0, 1.0)], "COPY", "≤ 1.5×")
    assert entry["vedana_s"] == 4.0
    assert entry["baseline_s"] == 1.0
    assert entry["ratio"] == 4.0  # median of 4, 1.5 and 9: one slow pair does not decide it
    assert entry["pairs"] == [[4.0, 1.0], [3.0, 2.0], [9.0, 1.0]]
    assert met(entry) is False
    with pytest.raises(ValueError, match="no pair"):
        ratio_entry("sync", [(1.0, 0.0)], "COPY", "≤ 1.5×")


def test_engine_busy_is_the_engines_cpu_share_of_each_side() -> None:
    """The engine's CPU seconds over each side's wall time, medians over the pairs measured; a
    pair with no figure stays in its place as None, and the table says both shares."""
    entry = ratio_entry(
        "graph load",
        [(2.0, 1.0), (4.0, 2.0), (3.0, 1.5)],
        "GRAPH.BULK",
        "≤ 1.3×",
        busy=("FalkorDB", [None, (3.0, 1.0), (2.4, 1.5)]),
    )
    assert entry["engine_busy"] == {
        "engine": "FalkorDB",
        "vedana": 0.775,  # median of 0.75 and 0.8
        "baseline": 0.75,  # median of 0.5 and 1.0
        "pairs": [None, [0.75, 0.5], [0.8, 1.0]],
    }
    size = {"rows": 100_000, "phases": {"index": {"seconds": 1.0, "ratios": [entry]}}}
    assert ratio_rows([size])[0][3] == "GRAPH.BULK: 1.50 s (FalkorDB busy 78% / 75%)"
    text = markdown(bench_results([size]))
    assert "| GRAPH.BULK: 1.50 s (FalkorDB busy 78% / 75%) |" in text
    assert "engine busy: the engine's CPU seconds" in text
    unmeasured = ratio_entry("graph load", [(2.0, 1.0)], "GRAPH.BULK", "≤ 1.3×", busy=("FalkorDB", [None]))
    assert "engine_busy" not in unmeasured
    assert (
        ratio_rows([{"rows": 1000, "phases": {"index": {"ratios": [unmeasured]}}}])[0][3]
        == "GRAPH.BULK: 1.00 s"
    )
    with pytest.raises(ValueError, match="2 engine CPU figures for 1 pairs"):
        ratio_entry("graph load", [(2.0, 1.0)], "GRAPH.BULK", "≤ 1.3×", busy=("FalkorDB", [None, None]))


@pytest.mark.parametrize(
    ("ratio", "must_reach", "verdict"),
    [
        (1.4, "≤ 1.5×", True),
        (1.6, "≤ 1.5×", False),
        (0.08, "≤ 10 %", True),
        (0.12, "≤ 10 %", False),
        (1.3, ">= 1x", True),
        (1.0, "", None),
        (1.0, "within reason", None),
    ],
)
def test_met_reads_the_target(ratio: float, must_reach: str, verdict: bool | None) -> None:
    assert met({"ratio": ratio, "must_reach": must_reach}) is verdict


def test_table_prints_any_phase_ratios() -> None:
    # A ratio the bench itself never makes, on a phase it never puts one on: printed all the same.
    graph = {"measure": "graph load", "vedana_s": 2.6, "baseline": "GRAPH.BULK", "baseline_s": 2.0,
             "ratio": 1.3, "must_reach": "≤ 1.3×"}  # fmt: skip
    edit = ratio_entry("1 % edit re-sync ÷ full sync", [(0.5, 4.0)], "full sync", "≤ 10 %")
    size = {"rows": 100_000, "phases": {"index": {"seconds": 1.0, "ratios": [graph]},
                                        "edit-sync": {"seconds": 0.5, "ratios": [edit]}}}  # fmt: skip
    rows = ratio_rows([size])
    assert rows == [
        ["100k", "graph load", "2.60 s", "GRAPH.BULK: 2.00 s", "1.30×", "1", "≤ 1.3×", "yes"],
        [
            "100k",
            "1 % edit re-sync ÷ full sync",
            "500.0 ms",
            "full sync: 4.00 s",
            "12.5%",
            "1",
            "≤ 10 %",
            "no",
        ],
    ]
    assert format_ratio(edit) == "12.5%"
    text = markdown(bench_results([size]))
    assert "| 100k | graph load | 2.60 s | GRAPH.BULK: 2.00 s | 1.30× | 1 | ≤ 1.3× | yes |" in text


def test_hash_pass_finds_exactly_the_edited_rows(tmp_path: Path) -> None:
    generate("regulations", 400, 3, tmp_path / "kb", "csv")
    data = tmp_path / "kb" / "data"
    first = hash_pass(data)
    assert first.new == first.rows > 0 and first.changed == first.gone == 0
    assert hash_pass(data, first.hashes).changed == 0  # nothing changed: nothing found

    summary = edit_csv_folder(data, "regulations", 0.05)
    second = hash_pass(data, first.hashes)
    assert summary.edited > 0
    assert (second.changed, second.new, second.gone) == (summary.edited, 0, 0)

    # A removed row and an added one are told apart from a changed one.
    path = sorted(data.glob("Anchor_*.csv"))[0]
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    rows[1][0] = rows[1][0] + "-renamed"
    with path.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    third = hash_pass(data, second.hashes)
    assert (third.changed, third.new, third.gone) == (0, 1, 1)


def test_a_search_on_fewer_than_100k_vectors_is_pointed_out() -> None:
    from bench.report import _few_vectors_notes

    small = {"rows": 100_000, "phases": {"search": {"vectors": {"node": 20_200, "edge": 79_800}}}}
    large = {"rows": 500_000, "phases": {"search": {"vectors": {"node": 101_000, "edge": 0}}}}
    people = {"rows": 100_000, "phases": {"search": {"vectors": {"node": 20_200, "edge": 100_000}}}}
    # 100,000 vectors in all, but split over two HNSW indexes: neither holds 100k.
    [note] = _few_vectors_notes([small, large, people, {"rows": 10, "phases": {}}])
    assert "at 100k ran on indexes of at most 79,800 vectors" in note


def test_the_edit_changes_the_year_of_a_link_without_a_note(tmp_path: Path) -> None:
    """At 100k people rows only some links carry a note: every 100th link row is still edited,
    the noted ones in their note (a text to embed, stored twice), the others in `since_year`."""
    generate("people", 100_000, 1, tmp_path / "kb", "csv")
    path = tmp_path / "kb" / "data" / "Link_person_has_interest.csv"
    with path.open(encoding="utf-8", newline="") as f:
        before = list(csv.DictReader(f))
    summary = edit_csv_folder(tmp_path / "kb" / "data", "people", 0.01)
    with path.open(encoding="utf-8", newline="") as f:
        after = list(csv.DictReader(f))
    notes = sum(a["note"] != b["note"] for a, b in zip(after, before, strict=True))
    years = sum(a["since_year"] != b["since_year"] for a, b in zip(after, before, strict=True))
    assert notes > 0 and years > 0
    assert summary.rows_edited["Link_person_has_interest"] == notes + years == len(before) // 100
    nodes = summary.nodes_changed
    assert (summary.texts_changed, summary.values_changed) == (nodes + notes, nodes + 2 * notes)
    assert summary.edges_changed == 2 * (notes + years)
