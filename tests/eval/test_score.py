"""The exact scores, without any model: items of a golden answer found in an answer."""

from __future__ import annotations

import pytest

from vedana.eval.golden import GoldenQuestion
from vedana.eval.sample import spread
from vedana.eval.score import context_touched, item_scores, items


def test_a_golden_answer_splits_into_items() -> None:
    assert [i.shown for i in items("Ada Okafor, Chen Wei and Dana Novak")] == [
        "Ada Okafor",
        "Chen Wei",
        "Dana Novak",
    ]
    assert [i.shown for i in items("lisbon; porto\nfaro")] == ["lisbon", "porto", "faro"]
    # A comma inside a number is not a list: 1,422 is one item, the number 1422.
    assert [(i.shown, i.number) for i in items("1,422 and 3.5")] == [("1,422", 1422.0), ("3.5", 3.5)]
    assert [i.number for i in items("person:0042")] == [None]  # an id is text, not 42


@pytest.mark.parametrize(
    ("golden", "answer", "recall"),
    [
        ("61", "Bruno Silva is 61 years old.", 1.0),
        ("61", "He is 61.0.", 1.0),  # numbers compared as numbers
        ("1422", "There are 1,422 nodes.", 1.0),
        ("12", "Twelve people live in Kyoto.", 1.0),
        ("12", "112 interests", 0.0),  # not a part of a longer number
        ("42", "person:0042 is Bob", 0.0),  # nor of an id
        ("3", "p3 likes it", 0.0),
        ("Ada Okafor, Chen Wei", "ADA  okafor and chen-wei", 1.0),  # case, blanks, punctuation
        ("Aarhus, İzmir, Zürich", "Aarhus, Izmir and Zurich", 1.0),  # accents
        ("Ada Okafor, Chen Wei, Dana Novak", "Ada Okafor and Chen Wei", 2 / 3),
        ("Ann", "Annabel", 0.0),  # whole words only
        ("", "anything", 1.0),  # nothing expected, nothing missing
    ],
)
def test_recall(golden: str, answer: str, recall: float) -> None:
    assert item_scores(golden, answer).recall == pytest.approx(recall, abs=0.001)


def test_precision_counts_the_answer_items_that_carry_a_golden_one() -> None:
    score = item_scores(
        "Ada Okafor, Chen Wei and Dana Novak",
        "Ada Okafor (p1), Chen Wei (p3), Dana Novak (p4) and Bob Smith (p9).",
    )
    assert (score.recall, score.precision) == (1.0, 0.75)
    assert score.found == ["Ada Okafor", "Chen Wei", "Dana Novak"] and score.missing == []
    wrong = item_scores("axolotl", "He likes the capybara.")
    assert (wrong.recall, wrong.precision, wrong.missing) == (0.0, 0.0, ["axolotl"])
    assert item_scores("3", "").precision == 0.0


def test_context_is_touched_when_a_tool_reached_it() -> None:
    trace = {
        "tool_calls": [{"name": "cypher", "arguments": {"query": "MATCH (a:Animal {id: 'a1'}) RETURN a"}}]
    }
    sources = [{"label": "Person", "node_id": "p2"}]
    assert context_touched("a1", trace, []) is True
    assert context_touched("a1; p2", trace, sources) is True
    assert context_touched("a1; p3", trace, sources) is False
    assert context_touched("", trace, sources) is None


def test_a_sample_takes_the_scenarios_in_turn() -> None:
    qs = [GoldenQuestion(i, f"q{i}", "a", scenario=s) for i, s in enumerate("aaabbc", start=1)]
    assert [q.position for q in spread(qs, 3)] == [1, 4, 6]
    assert [q.position for q in spread(qs, 4)] == [1, 2, 4, 6]
    assert [q.position for q in spread(qs, 10)] == [1, 2, 3, 4, 5, 6]
