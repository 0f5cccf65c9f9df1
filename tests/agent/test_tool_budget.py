"""The token budget on tool results: a result over VEDANA_TOOL_RESULT_MAX_TOKENS keeps its first
rows (or hits), cut at a row boundary, and tells the model how to narrow the request."""

from __future__ import annotations

import json

from support.agent_kb import data_model
from vedana.agent.budget import estimated_tokens, fit_result
from vedana.agent.tools import Toolbox
from vedana.config import Settings
from vedana.stores.graph import GraphStore


def cypher_text(n: int, *, truncated: bool = False) -> str:
    payload = {
        "columns": ["i", "pad"],
        "rows": [{"i": i, "pad": "x" * 100} for i in range(n)],
        "row_count": n,
    }
    if truncated:
        payload |= {"truncated": True, "note": "Truncated: only the first 200 rows are shown and more exist."}
    return json.dumps(payload)


def test_a_result_within_the_budget_is_left_as_it_is() -> None:
    text = cypher_text(10)
    assert fit_result(text, 1_000) == (text, None)


def test_a_long_result_keeps_its_first_whole_rows_and_says_how_to_narrow_the_query() -> None:
    text, kept = fit_result(cypher_text(500), 2_000)

    payload = json.loads(text)
    assert estimated_tokens(text) <= 2_000 and kept is not None
    assert payload["rows"] == [{"i": i, "pad": "x" * 100} for i in range(kept)]  # whole rows, in order
    assert payload["row_count"] == kept and payload["truncated"] is True
    assert payload["note"].startswith(
        f"only the first {kept} of the 500 rows returned fit in the tool-result budget"
    )
    assert "add LIMIT" in payload["note"] and "RETURN fewer" in payload["note"] and "WHERE" in payload["note"]
    # the most rows that fit: one more would not
    assert estimated_tokens(json.dumps({**payload, "rows": payload["rows"] + [payload["rows"][0]]})) > 1_990


def test_a_result_already_capped_by_rows_says_more_exist() -> None:
    text, _ = fit_result(cypher_text(200, truncated=True), 1_000)
    assert "; more exist beyond those" in json.loads(text)["note"]


def test_search_hits_are_cut_the_same_way_with_advice_for_searching() -> None:
    hits = [{"node_id": f"n{i}", "value": "word " * 40, "score": 0.5} for i in range(100)]
    text, kept = fit_result(json.dumps({"label": "Person", "property": "name", "hits": hits}), 500)
    payload = json.loads(text)
    assert payload["hits"] == hits[:kept] and payload["label"] == "Person"
    assert "without expand, with where" in payload["note"] and estimated_tokens(text) <= 500


def test_text_that_is_not_a_result_is_cut_at_the_budget() -> None:
    text, kept = fit_result("error: " + "x" * 10_000, 200)
    assert kept is None and estimated_tokens(text) <= 200 and text.endswith("(cut: too long to read)")


def test_tokens_are_estimated_from_utf8_bytes() -> None:
    assert estimated_tokens("abcd" * 10) == 10
    assert estimated_tokens("жд" * 10) == 10  # two bytes a letter: about half as many letters a token


def test_the_toolbox_holds_search_results_to_the_budget(settings: Settings, graph: GraphStore) -> None:
    hits = [{"node_id": f"a{i}", "value": "quokka " * 30, "score": 0.9, "kind": "node"} for i in range(200)]
    box = Toolbox(
        settings.model_copy(update={"tool_result_max_tokens": 1_000}), data_model(), graph, lambda *a: hits
    )
    text, trace = box.run(
        "vector_text_search",
        json.dumps({"label": "Animal", "property": "name", "text": "x"}),
        index=0,
        round_=1,
    )
    payload = json.loads(text)
    assert estimated_tokens(text) <= 1_000 and 0 < len(payload["hits"]) < 200
    assert payload["truncated"] is True and trace.result_chars == len(text)
