"""What an evaluation run says, as data: totals overall and by scenario, the failed questions,
and a comparison with another run. `--json` prints these; the reports render them."""

from __future__ import annotations

from collections import defaultdict
from statistics import mean
from typing import Any


def _mean(values: list[float]) -> float | None:
    return round(float(mean(values)), 4) if values else None


def _scores(result: dict[str, Any]) -> dict[str, Any]:
    return result.get("scores") or {}


def totals(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts and means over `results`; a cost unknown for one question is unknown for the sum."""
    asked = len(results)
    scores = [_scores(r) for r in results]
    passed = sum(1 for r in results if r["passed"])
    answered = [s for r, s in zip(results, scores, strict=True) if not r["error"]]
    costs = [s.get("cost_usd") for s in answered]
    latencies = [s["latency_s"] for s in scores if s.get("latency_s") is not None]
    return {
        "questions": asked,
        "passed": passed,
        "pass_rate": round(passed / asked, 4) if asked else None,
        "errors": sum(1 for r in results if r["error"]),
        "mean_rating": _mean([s["judge"]["rating"] for s in scores if isinstance(s.get("judge"), dict)]),
        "recall": _mean([s["recall"] for s in scores if "recall" in s]),
        "precision": _mean([s["precision"] for s in scores if "precision" in s]),
        "context_touched": _mean(
            [1.0 if s["context_touched"] else 0.0 for s in scores if s.get("context_touched") is not None]
        ),
        "tool_calls": _mean([s["tool_calls"] for s in scores if "tool_calls" in s]),
        "cypher_errors": sum(s.get("cypher_errors", 0) for s in scores),
        "tokens": sum(s.get("tokens", 0) for s in scores),
        "cost_usd": None if not costs or None in costs else round(sum(c or 0.0 for c in costs), 6),
        "latency_s": _mean(latencies),
        "time_s": round(sum(latencies), 3),
    }


def summarize(run: dict[str, Any]) -> dict[str, Any]:
    """The run as `--json` prints it: config, totals, totals by scenario, failures, every result."""
    results = run["results"]
    by_scenario: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        by_scenario[r["scenario"] or "(none)"].append(r)
    return {
        "run": run["id"],
        "status": run["status"],
        "golden": run["golden"],
        "started_at": run["started_at"],
        "finished_at": run["finished_at"],
        "config": run["config"],
        "totals": totals(results),
        "by_scenario": {name: totals(rows) for name, rows in sorted(by_scenario.items())},
        "failed": [
            {
                "position": r["position"],
                "question": r["question"],
                "scenario": r["scenario"],
                "error": r["error"],
                "answer": r["answer"],
                "golden_answer": r["golden_answer"],
                "rating": (_scores(r).get("judge") or {}).get("rating"),
                "comment": (_scores(r).get("judge") or {}).get("comment"),
                "missing_items": _scores(r).get("missing_items"),
            }
            for r in results
            if not r["passed"]
        ],
        "results": results,
    }


def _question_key(result: dict[str, Any]) -> str:
    # By text, not position: a golden set edited between runs still lines its questions up.
    return " ".join(result["question"].split()).casefold()


def compare(current: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
    """`current` beside `earlier`: pass-rate delta, flipped questions, cost/latency deltas, config changes."""
    now, then = totals(current["results"]), totals(earlier["results"])

    def delta(key: str) -> float | None:
        a, b = now.get(key), then.get(key)
        return None if a is None or b is None else round(a - b, 6)

    before = {_question_key(r): r for r in earlier["results"]}
    after = {_question_key(r): r for r in current["results"]}
    flips = [
        {"position": r["position"], "question": r["question"], "now": "pass" if r["passed"] else "fail",
         "was": "pass" if before[key]["passed"] else "fail"}
        for key, r in after.items()
        if key in before and bool(before[key]["passed"]) != bool(r["passed"])
    ]  # fmt: skip
    config_changes = {
        key: {"was": earlier["config"].get(key), "now": current["config"].get(key)}
        for key in sorted(set(current["config"]) | set(earlier["config"]))
        if current["config"].get(key) != earlier["config"].get(key)
    }
    return {
        "run": current["id"],
        "against": earlier["id"],
        "pass_rate": {"now": now["pass_rate"], "was": then["pass_rate"], "delta": delta("pass_rate")},
        "mean_rating_delta": delta("mean_rating"),
        "cost_usd": {"now": now["cost_usd"], "was": then["cost_usd"], "delta": delta("cost_usd")},
        "latency_s": {"now": now["latency_s"], "was": then["latency_s"], "delta": delta("latency_s")},
        "flipped": flips,
        "only_now": len(set(after) - set(before)),
        "only_before": len(set(before) - set(after)),
        "config_changes": config_changes,
    }
