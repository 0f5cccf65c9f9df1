"""An evaluation run rendered for people: the terminal summary, and a report file (Markdown, or
one self-contained HTML page without scripts or network) with a row per question."""

from __future__ import annotations

import html
import json
from typing import Any

from vedana.redaction import redact


def fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _signed(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:+.{digits}f}"


def _verdict(result: dict[str, Any]) -> str:
    return "error" if result["error"] else ("pass" if result["passed"] else "fail")


def _note(result: dict[str, Any]) -> str:
    """Why a result is what it is: the error, the judge's rating and comment, or missing items."""
    scores = result.get("scores") or {}
    judge = scores.get("judge") or {}
    if result["error"]:
        return str(result["error"])
    if judge:
        return f"{judge['rating']}/10: {judge.get('comment', '')}"
    missing = scores.get("missing_items") or []
    return f"missing: {', '.join(missing)}" if missing else ""


def _tools(result: dict[str, Any]) -> list[dict[str, Any]]:
    return list((result.get("trace") or {}).get("tool_calls") or [])


def _why(failure: dict[str, Any]) -> str:
    if failure["error"]:
        return str(failure["error"])
    if failure.get("comment"):
        return f"judge ({fmt(failure.get('rating'))}/10): {failure['comment']}"
    return f"missing: {', '.join(failure.get('missing_items') or []) or '-'}"


SUMMARY_COLUMNS = (
    "scenario",
    "questions",
    "pass",
    "rating",
    "recall",
    "precision",
    "errors",
    "cost $",
    "s/q",
)


def summary_rows(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    return [
        (name, str(s["questions"]), fmt(s["pass_rate"]), fmt(s["mean_rating"], 1), fmt(s["recall"]),
         fmt(s["precision"]), str(s["errors"]), fmt(s["cost_usd"], 4), fmt(s["latency_s"], 1))
        for name, s in [("all", summary["totals"]), *summary["by_scenario"].items()]
    ]  # fmt: skip


def headline(summary: dict[str, Any]) -> str:
    c, t = summary["config"], summary["totals"]
    return (
        f"run {summary['run']} ({summary['status']}) · golden {summary['golden']} · model {c.get('model')} · "
        f"judge {c.get('judge_model') or 'none (item recall)'} · {t['passed']}/{t['questions']} passed"
    )


def totals_line(t: dict[str, Any]) -> str:
    """What the table leaves out: time, tools, Cypher errors, tokens, retrieval context."""
    cost = "cost unknown (no price for the model)" if t["cost_usd"] is None else f"${t['cost_usd']:.4f}"
    parts = [
        f"{t['time_s']:.1f} s answering ({fmt(t['latency_s'])} s a question)",
        f"{fmt(t['tool_calls'], 1)} tool calls a question, {t['cypher_errors']} Cypher error(s)",
        f"{t['tokens']:,} tokens, {cost}",
    ]
    if t["context_touched"] is not None:
        parts.append(f"retrieval reached the expected context in {t['context_touched']:.0%}")
    return " · ".join(parts)


def comparison_lines(comparison: dict[str, Any]) -> list[str]:
    pr, cost, latency = comparison["pass_rate"], comparison["cost_usd"], comparison["latency_s"]
    costs = (
        "cost unknown"
        if cost["was"] is None and cost["now"] is None
        else f"cost ${fmt(cost['was'], 4)} → ${fmt(cost['now'], 4)} ({_signed(cost['delta'], 4)})"
    )
    lines = [
        f"vs run {comparison['against']}: pass rate {fmt(pr['was'])} → {fmt(pr['now'])} ({_signed(pr['delta'])}), "
        f"rating {_signed(comparison['mean_rating_delta'], 1)}, {costs}, latency {fmt(latency['was'])} → "
        f"{fmt(latency['now'])} s/q ({_signed(latency['delta'])})"
    ]
    if not comparison["flipped"]:
        lines.append("  no question flipped")
    for flip in comparison["flipped"]:
        lines.append(f"  #{flip['position']} {flip['was']} → {flip['now']}: {flip['question']}")
    if comparison["only_now"] or comparison["only_before"]:
        lines.append(f"  questions only in this run: {comparison['only_now']}, only in run "
                     f"{comparison['against']}: {comparison['only_before']}")  # fmt: skip
    for key, change in comparison["config_changes"].items():
        lines.append(f"  config {key}: {_compact(change['was'])} → {_compact(change['now'])}")
    return lines


def _compact(value: Any) -> str:
    return json.dumps(value, default=str) if isinstance(value, dict | list) else str(value)


def text_summary(summary: dict[str, Any], comparison: dict[str, Any] | None = None) -> str:
    """The plain-text summary (terminal and logs): table by scenario, failures, comparison."""
    widths = (16, 9, 6, 6, 6, 9, 6, 8, 6)
    lines = [headline(summary), ""]
    for row in [SUMMARY_COLUMNS, *summary_rows(summary)]:
        cells = [row[0][: widths[0]].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append(" ".join(cells))
    lines += ["", totals_line(summary["totals"])]
    if summary["failed"]:
        lines += ["", f"failed ({len(summary['failed'])}):"]
        for f in summary["failed"]:
            answer = " ".join((f["answer"] or "").split())
            lines.append(f"  #{f['position']} {f['question']}")
            if answer:
                lines.append(f"      → {answer[:160]}{'…' if len(answer) > 160 else ''}")
            lines.append(f"      {_why(f)}")
    if comparison is not None:
        lines += ["", *comparison_lines(comparison)]
    return redact("\n".join(lines)) + "\n"


# -- report files ------------------------------------------------------------------------------


def _md(text: Any) -> str:
    return str(text or "").replace("|", "\\|").replace("\n", " ")


def _tool_text(call: dict[str, Any]) -> str:
    args = call.get("arguments") or {}
    if call["name"] == "cypher":
        detail = args.get("query", "")
    elif call["name"] == "vector_text_search":
        detail = f"{args.get('label')}.{args.get('property')} ≈ {args.get('text') or args.get('texts')}"
    else:
        detail = json.dumps(args, ensure_ascii=False)
    result = f"error: {call['error']}" if call.get("error") else (
        f"{call['rows']} rows" if call.get("rows") is not None else f"{len(call.get('hits') or [])} hits")  # fmt: skip
    return f"{call['name']}({' '.join(str(detail).split())}) → {result}"


def markdown_report(summary: dict[str, Any], comparison: dict[str, Any] | None = None) -> str:
    lines = [f"# vedana eval · run {summary['run']}", "", headline(summary), "", "## Summary", "",
             "| " + " | ".join(SUMMARY_COLUMNS) + " |", "|" + "---|" * len(SUMMARY_COLUMNS)]  # fmt: skip
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in summary_rows(summary)]
    if comparison is not None:
        lines += ["", "## Compared with run " + str(comparison["against"]), "", "```",
                  *comparison_lines(comparison), "```"]  # fmt: skip
    lines += ["", "## Questions", "", "| # | scenario | question | answer | golden answer | verdict | tools |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in summary["results"]:
        note = _note(r)
        verdict = _verdict(r) + (f": {note}" if note else "")
        tools = "<br>".join(_md(_tool_text(c)) for c in _tools(r))
        cells = [str(r["position"]), _md(r["scenario"]), _md(r["question"]), _md(r["answer"]),
                 _md(r["golden_answer"]), _md(verdict), tools]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Configuration", ""]
    lines += [f"- `{key}`: {_compact(value)}" for key, value in summary["config"].items()]
    return redact("\n".join(lines)) + "\n"


_STYLE = (
    "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}th{background:#f4f4f4}"
    ".pass{color:#070}.fail,.error{color:#b00}code,pre{font-size:12px;white-space:pre-wrap}"
    "td.num{text-align:right}details summary{cursor:pointer}"
)


def _e(value: Any) -> str:
    return html.escape(str(value if value is not None else ""))


def html_report(summary: dict[str, Any], comparison: dict[str, Any] | None = None) -> str:
    """One page, inline style, no scripts or links: it opens the same anywhere, offline."""
    head = "".join(f"<th>{_e(c)}</th>" for c in SUMMARY_COLUMNS)
    table = "".join(
        "<tr>"
        + "".join(f"<td{'' if i == 0 else ' class=num'}>{_e(c)}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in summary_rows(summary)
    )
    rows = []
    for r in summary["results"]:
        verdict, why = _verdict(r), _e(_note(r))
        tools = "".join(f"<li><code>{_e(_tool_text(c))}</code></li>" for c in _tools(r))
        tools_cell = (
            f"<details><summary>{len(_tools(r))}</summary><ol>{tools}</ol></details>" if tools else "0"
        )
        rows.append(
            f"<tr><td class=num>{r['position']}</td><td>{_e(r['scenario'])}</td><td>{_e(r['question'])}</td>"
            f"<td>{_e(r['answer'])}</td><td>{_e(r['golden_answer'])}</td>"
            f"<td><b class={verdict}>{verdict}</b><br><small>{why}</small></td><td>{tools_cell}</td></tr>"
        )
    compared = ""
    if comparison is not None:
        compared = f"<h2>Compared with run {comparison['against']}</h2><pre>{_e(chr(10).join(comparison_lines(comparison)))}</pre>"
    config = "".join(
        f"<tr><th>{_e(k)}</th><td><code>{_e(_compact(v))}</code></td></tr>"
        for k, v in summary["config"].items()
    )
    page = (
        f"<!doctype html><html lang=en><meta charset=utf-8><title>vedana eval run {summary['run']}</title>"
        f"<style>{_STYLE}</style><h1>vedana eval · run {summary['run']}</h1><p>{_e(headline(summary))}</p>"
        f"<h2>Summary</h2><table><tr>{head}</tr>{table}</table>{compared}"
        "<h2>Questions</h2><table><tr><th>#</th><th>scenario</th><th>question</th><th>answer</th>"
        f"<th>golden answer</th><th>verdict</th><th>tools</th></tr>{''.join(rows)}</table>"
        f"<h2>Configuration</h2><table>{config}</table></html>"
    )
    return redact(page)
