"""`vedana ask "question"`: the answer on stdout, then the technical trace on stderr."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer


def ask(
    question: Annotated[str, typer.Argument(help="The question, in quotes.", show_default=False)],
    json_: Annotated[
        bool, typer.Option("--json", help="Print one JSON document with the answer and the trace.")
    ] = False,
    no_trace: Annotated[bool, typer.Option("--no-trace", help="Print only the answer.")] = False,
    no_filter: Annotated[
        bool,
        typer.Option("--no-filter", help="Skip the data-model filter step (ENABLE_DM_FILTERING=false)."),
    ] = False,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="litellm model for the agent (MODEL).", show_default=False),
    ] = None,
    filter_model: Annotated[
        str | None,
        typer.Option(
            "--filter-model", help="litellm model for the filter step (FILTER_MODEL).", show_default=False
        ),
    ] = None,
    thread: Annotated[
        str | None,
        typer.Option(
            "--thread",
            "-t",
            help="Continue a stored conversation (its id), or `new` to start one; the agent sees the "
            "thread's last PIPELINE_HISTORY_LENGTH messages. The id goes to stderr (and into --json).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Answer a question from the knowledge base, then show how: the filter's selection, every
    tool call, tokens, cost and timings.

    Examples:

        vedana ask "Who likes quokkas?"

        vedana ask "How many people live in Lisbon?" --json

        vedana ask "Which regulations cite document 4?" --model openrouter/openai/gpt-4.1-mini --no-filter

        vedana ask "Who likes quokkas?" --thread new          # prints e.g. "thread: 3f9c2a7b1d04" on stderr

        vedana ask "And which of them live in Lisbon?" --thread 3f9c2a7b1d04
    """
    from vedana.agent import ask as answer_question
    from vedana.cli.output import activity, print_json
    from vedana.config import get_settings, override_settings
    from vedana.redaction import redact

    override_settings(model=model, filter_model=filter_model)
    use_filter = False if no_filter else None
    with activity(not json_ and sys.stderr.isatty()) as on_step:
        if thread is None:
            result = answer_question(get_settings(), question, use_filter=use_filter, on_step=on_step)
            data = result.to_dict()
        else:
            from vedana.ops.conversation import ask_in_thread

            turn = ask_in_thread(
                get_settings(), question, thread.strip(), use_filter=use_filter, on_step=on_step
            )
            result, data = turn.result, turn.to_dict()
    if thread is not None:
        sys.stderr.write(f"thread: {data['thread']}\n")
        sys.stderr.flush()
    if json_:
        if no_trace:
            data.pop("trace")
        print_json(data)
        return
    sys.stdout.write(redact(result.answer).rstrip() + "\n")
    cited = source_lines(data["sources"])
    if cited:
        sys.stdout.write("\nSources:\n" + "\n".join(cited) + "\n")
    sys.stdout.flush()
    if not no_trace:
        if sys.stderr.isatty():
            _print_rich_trace(data["trace"])
        else:
            sys.stderr.write(redact(plain_trace(data["trace"])) + "\n")


def row_place(row: dict[str, Any] | None) -> str:
    """Where a source's row lives, in a few words (a link when the server gave one)."""
    if not row:
        return "row not located"
    if row.get("url"):
        return f"{row['table']} row {row['row_id']}: {row['url']}"
    if row.get("line") is not None:
        return f"{row['file']} line {row['line']}"
    return f"{row['file']}, table {row['table']}, row {row['row_id']}"


def source_lines(sources: list[dict[str, Any]]) -> list[str]:
    """The cited sources under the answer: marker, type and id, what was shown, where the row is."""
    lines = []
    for s in sources:
        if s["cited"]:
            shown = f" {s['shown']}" if s.get("shown") else ""
            lines.append(f"{s['marker']} {s['label']} {s['id']}{shown} · {row_place(s.get('row'))}")
    return lines


# -- trace rendering (from the trace dict, so --json and the screen show the same data) ----------

# A table cell wraps, so a terminal can show a whole query; the one-line plain trace clips at 90.
RICH_ARGUMENTS_WIDTH = 600


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _clip(text: str, width: int = 90) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


FILTER_COUNTS = ("anchors", "links", "anchor_attributes", "link_attributes", "queries")


def filter_summary(f: dict[str, Any]) -> list[str]:
    if not f["enabled"]:
        return ["off: the agent saw the full data model"]
    kept, total = f["kept"], f["total"]
    # In this order, not the dict's: a stored trace comes back from jsonb with its keys reordered.
    names = [k for k in FILTER_COUNTS if k in total] + [k for k in total if k not in FILTER_COUNTS]
    parts = ", ".join(f"{kept.get(k, 0)}/{total.get(k, 0)} {k.replace('_', ' ')}" for k in names)
    lines = [f"{f.get('model') or '?'}: kept {parts} in {_seconds(f.get('elapsed_s'))}"]
    if f["fallback"]:
        lines.append(f"FALLBACK to the full data model: {f.get('error')}")
    if f.get("reasoning"):
        lines.append(f"reasoning: {_clip(f['reasoning'], 200)}")
    for kind, names in (f.get("ignored") or {}).items():
        lines.append(f"ignored (not in the data model) {kind}: {', '.join(map(str, names))}")
    if f.get("dropped_links"):
        lines.append(f"dropped links (an end was not kept): {', '.join(f['dropped_links'])}")
    return lines


def tool_arguments(call: dict[str, Any], width: int = 90) -> str:
    args = call["arguments"]
    if call["name"] == "cypher":
        return _clip(args.get("query", args), width)
    if call["name"] == "vector_text_search":
        extra = f" (threshold {call.get('threshold')}, top {call.get('top_n')})" if call.get("top_n") else ""
        return _clip(f"{args.get('label')}.{args.get('property')} ≈ {args.get('text')!r}{extra}", width)
    return _clip(str(args), width)


def tool_result(call: dict[str, Any]) -> str:
    if call.get("error"):
        prefix = "REFUSED" if call.get("refused") else "error"
        return f"{prefix}: {_clip(call['error'], 70)}"
    if call["name"] == "cypher" and call.get("rows") is not None:
        return _count(call["rows"], "row") + (" (TRUNCATED)" if call.get("truncated") else "")
    if call.get("hits") is not None:
        hits = call["hits"]
        shown = ", ".join(f"{_hit_id(h)} {h.get('score')}" for h in hits[:3])
        return _count(len(hits), "hit") + (f": {shown}" if shown else "") + (" …" if len(hits) > 3 else "")
    return f"{call.get('result_chars', 0)} chars"


def _hit_id(hit: dict[str, Any]) -> str:
    if hit.get("node_id") is not None:
        return str(hit["node_id"])
    return f"{hit.get('from_node_id')}->{hit.get('to_node_id')}"


def usage_rows(trace: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for model, u in trace["usage"].items():
        cost = "unknown" if u["cost_usd"] is None else f"${u['cost_usd']:.5f}"
        rows.append((model, str(u["calls"]), str(u["prompt_tokens"]), str(u["completion_tokens"]), cost))
    return rows


def timing_line(trace: dict[str, Any]) -> str:
    t = trace["timings"]
    rounds = f"{trace['rounds']} tool round(s)"
    if trace["finalized"]:
        rounds += ", round limit reached: finalised"
    if trace["no_answer"]:
        rounds += ", no answer found"
    return (
        f"total {_seconds(t['total_s'])} · in the LLM {_seconds(t['llm_s'])} · "
        f"outside the LLM {_seconds(t['outside_llm_s'])} (of which importing litellm "
        f"{_seconds(t.get('import_s', 0.0))}) · {rounds}"
    )


def plain_trace(trace: dict[str, Any]) -> str:
    lines = ["", "--- trace ---", "filter:"]
    lines += [f"  {line}" for line in filter_summary(trace["filter"])]
    lines.append(f"tool calls: {len(trace['tool_calls'])}")
    for call in trace["tool_calls"]:
        lines.append(
            f"  {call['index'] + 1}. [round {call['round']}] {call['name']} {tool_arguments(call)} -> "
            f"{tool_result(call)} in {_seconds(call['elapsed_s'])}"
        )
    lines.append("models:")
    for model, calls, prompt, completion, cost in usage_rows(trace):
        lines.append(
            f"  {model}: {_count(int(calls), 'call')}, {prompt} prompt + {completion} completion tokens, cost {cost}"
        )
    if trace.get("prompts_overridden"):
        lines.append(f"prompts from the Prompts table: {', '.join(trace['prompts_overridden'])}")
    if trace.get("unknown_markers"):
        lines.append(f"markers naming no source (not shown as sources): {' '.join(trace['unknown_markers'])}")
    if trace.get("sources_error"):
        lines.append(trace["sources_error"])
    lines.append(f"time: {timing_line(trace)}")
    return "\n".join(lines)


def _print_rich_trace(trace: dict[str, Any]) -> None:
    """The trace as rich tables. Every value from the data or a model (queries, reasoning,
    errors) goes in as `Text`, never as markup: `[r:KNOWS]` in a query must show as written."""
    from rich.table import Table
    from rich.text import Text

    from vedana.cli.output import stderr_console
    from vedana.redaction import redact

    def text(value: str, style: str = "") -> Text:
        return Text(redact(value), style=style)

    console = stderr_console()
    console.rule("[dim]trace[/]", style="dim")
    for i, line in enumerate(filter_summary(trace["filter"])):
        style = (
            "bold red" if line.startswith("FALLBACK") else ("yellow" if line.startswith("ignored") else "")
        )
        console.print(
            Text.assemble(Text("filter  " if i == 0 else "        ", style="bold"), text(line, style))
        )
    tools = Table(show_edge=False, header_style="bold", expand=True)
    tools.add_column("#", justify="right")
    tools.add_column("round", justify="right")
    tools.add_column("tool", no_wrap=True)
    tools.add_column("arguments", ratio=3, overflow="fold")
    tools.add_column("result", ratio=2, overflow="fold")
    tools.add_column("time", justify="right", no_wrap=True)
    for call in trace["tool_calls"]:
        tools.add_row(
            str(call["index"] + 1),
            str(call["round"]),
            call["name"],
            text(tool_arguments(call, width=RICH_ARGUMENTS_WIDTH)),
            text(tool_result(call), "red" if call.get("error") else ""),
            _seconds(call["elapsed_s"]),
        )
    if trace["tool_calls"]:
        console.print(tools)
    usage = Table(show_edge=False, header_style="bold")
    for column in ("model", "calls", "prompt tokens", "completion tokens", "cost"):
        usage.add_column(column)
    for row in usage_rows(trace):
        usage.add_row(*(Text(cell) for cell in row))
    console.print(usage)
    if trace.get("prompts_overridden"):
        console.print(Text(f"prompts from the Prompts table: {', '.join(trace['prompts_overridden'])}"))
    if trace.get("unknown_markers"):
        console.print(
            Text(
                f"markers naming no source (not shown as sources): {' '.join(trace['unknown_markers'])}",
                "yellow",
            )
        )
    if trace.get("sources_error"):
        console.print(text(trace["sources_error"], "yellow"))
    console.print(Text(timing_line(trace), style="dim"))
