"""What an evaluation run says: a summary (overall and by scenario), the failed questions, a
comparison with another run, and a report file (Markdown or self-contained HTML)."""

from __future__ import annotations

import html
from collections import defaultdict
from statistics import mean
from typing import Any


def _mean(values: list[float]) -> float | None:
    return round(float(mean(values)), 4) if values else None


def _totals(results: list[dict[str, Any]]) -> dict[str, Any]:
    asked = len(results)
    scores = [r["scores"] or {} for r in results]
    costs = [s["cost_usd"] for s in scores if "cost_usd" in s]  # unknown for one means unknown in all
    ratings = [s["judge"]["rating"] for s in scores if isinstance(s.get("judge"), dict)]
    return {
        "questions": asked,
        "passed": sum(1 for r in results if r["passed"]),
        "pass_rate": round(sum(1 for r in results if r["passed"]) / asked, 4) if asked else None,
        "errors": sum(1 for r in results if r["error"]),
        "mean_rating": _mean(ratings),
        "recall": _mean([s["recall"] for s in scores if "recall" in s]),
        "precision": _mean([s["precision"] for s in scores if "precision" in s]),
        "tool_calls": _mean([s["tool_calls"] for s in scores if "tool_calls" in s]),
        "cost_usd": None if not costs or any(c is None for c in costs) else round(sum(costs), 6),
        "latency_s": _mean([s["latency_s"] for s in scores if "latency_s" in s]),
    }


def summarize(run: dict[str, Any]) -> dict[str, Any]:
    """The run as `--json` prints it: config, totals, totals by scenario, failed questions."""
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
        "totals": _totals(results),
        "by_scenario": {name: _totals(rows) for name, rows in sorted(by_scenario.items())},
        "failed": [
            {
                "position": r["position"],
                "question": r["question"],
                "scenario": r["scenario"],
                "error": r["error"],
                "answer": r["answer"],
                "golden_answer": r["golden_answer"],
                "comment": ((r["scores"] or {}).get("judge") or {}).get("comment"),
                "missing_items": (r["scores"] or {}).get("missing_items"),
            }
            for r in results
            if not r["passed"]
        ],
        "results": results,
    }


def compare(current: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
    """`current` beside `earlier`: pass-rate delta, flipped questions, cost/latency deltas, config changes."""
    now, then = summarize(current)["totals"], summarize(earlier)["totals"]

    def delta(key: str) -> float | None:
        a, b = now.get(key), then.get(key)
        return None if a is None or b is None else round(a - b, 6)

    before = {r["position"]: r for r in earlier["results"]}
    flips = []
    for r in current["results"]:
        old = before.get(r["position"])
        if old is not None and bool(old["passed"]) != bool(r["passed"]):
            flips.append({"position": r["position"], "question": r["question"],
                          "now": "pass" if r["passed"] else "fail", "was": "pass" if old["passed"] else "fail"})  # fmt: skip
    config_changes = {
        key: {"was": earlier["config"].get(key), "now": current["config"].get(key)}
        for key in sorted(set(current["config"]) | set(earlier["config"]))
        if current["config"].get(key) != earlier["config"].get(key)
    }
    return {
        "run": current["id"],
        "against": earlier["id"],
        "pass_rate": {"now": now["pass_rate"], "was": then["pass_rate"], "delta": delta("pass_rate")},
        "cost_usd_delta": delta("cost_usd"),
        "latency_s_delta": delta("latency_s"),
        "flipped": flips,
        "config_changes": config_changes,
    }


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown_report(summary: dict[str, Any]) -> str:
    t = summary["totals"]
    lines = [
        f"# vedana eval · run {summary['run']} ({summary['status']})", "",
        f"Golden set: `{summary['golden']}` · model `{summary['config'].get('model')}` · judge "
        f"`{summary['config'].get('judge_model') or 'none (item recall)'}`", "",
        "| scenario | questions | pass rate | mean rating | recall | precision | errors | cost $ |",
        "|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for name, s in [("all", t), *summary["by_scenario"].items()]:
        lines.append(f"| {name} | {s['questions']} | {_fmt(s['pass_rate'])} | {_fmt(s['mean_rating'], 1)} | "
                     f"{_fmt(s['recall'])} | {_fmt(s['precision'])} | {s['errors']} | {_fmt(s['cost_usd'], 4)} |")  # fmt: skip
    lines += [
        "",
        "## Questions",
        "",
        "| # | question | answer | golden answer | verdict | tools |",
        "|---|---|---|---|---|---|",
    ]
    for r in summary["results"]:
        scores = r["scores"] or {}
        verdict = "error: " + r["error"] if r["error"] else ("pass" if r["passed"] else "fail")
        judge = scores.get("judge") or {}
        if judge.get("comment"):
            verdict += f" — {judge['comment']}"
        tools = ", ".join(c["name"] for c in ((r["trace"] or {}).get("tool_calls") or []))
        cells = [str(r["position"]), r["question"], r["answer"] or "", r["golden_answer"], verdict, tools]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def html_report(summary: dict[str, Any]) -> str:
    """A self-contained page (no scripts, no network): the same tables as the Markdown report."""
    t = summary["totals"]
    rows = []
    for r in summary["results"]:
        judge = (r["scores"] or {}).get("judge") or {}
        verdict = "error" if r["error"] else ("pass" if r["passed"] else "fail")
        tools = ", ".join(c["name"] for c in ((r["trace"] or {}).get("tool_calls") or []))
        rows.append(
            f"<tr class='{verdict}'><td>{r['position']}</td><td>{html.escape(r['question'])}</td>"
            f"<td>{html.escape(r['answer'] or r['error'] or '')}</td><td>{html.escape(r['golden_answer'])}</td>"
            f"<td>{verdict}<br><small>{html.escape(judge.get('comment') or '')}</small></td><td>{html.escape(tools)}</td></tr>"
        )
    style = ("body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
             "padding:4px 8px;vertical-align:top}tr.pass td:nth-child(5){color:#070}tr.fail td:nth-child(5),tr.error "
             "td:nth-child(5){color:#b00}")  # fmt: skip
    return (
        f"<!doctype html><meta charset='utf-8'><title>vedana eval run {summary['run']}</title><style>{style}</style>"
        f"<h1>vedana eval · run {summary['run']}</h1><p>{t['passed']}/{t['questions']} passed "
        f"({_fmt(t['pass_rate'])}), {t['errors']} errors, mean rating {_fmt(t['mean_rating'], 1)}, "
        f"recall {_fmt(t['recall'])}, precision {_fmt(t['precision'])}</p>"
        "<table><tr><th>#</th><th>question</th><th>answer</th><th>golden answer</th><th>verdict</th><th>tools</th></tr>"
        + "".join(rows)
        + "</table>"
    )
