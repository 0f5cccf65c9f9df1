"""Benchmark results as rich tables (one column per size) and as a JSON file."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

Row = tuple[str, Callable[[dict[str, Any]], str]]


def write_json(results: dict[str, Any], path: Path) -> None:
    """Write atomically, so a crashed run never leaves half a file where the last good one was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def size_label(rows: int) -> str:
    if rows >= 1_000_000 and rows % 1_000_000 == 0:
        return f"{rows // 1_000_000}M"
    if rows >= 1_000 and rows % 1_000 == 0:
        return f"{rows // 1_000}k"
    return f"{rows:,}"


def _get(size: dict[str, Any], *path: str) -> Any:
    value: Any = size
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _s(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.2f} s" if value < 100 else f"{value:.0f} s"


def _n(value: Any, unit: str = "") -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}{unit}"


def _pct(value: Any) -> str:
    return "–" if value is None else f"{value:.1%}"


def _vectors(counts: dict[str, int] | None) -> str:
    """Total, then per HNSW index (one per embedding table)."""
    if not counts or not sum(counts.values()):
        return "–"
    return f"{sum(counts.values()):,} (node {counts.get('node', 0):,} · edge {counts.get('edge', 0):,})"


def _ms(lat: Any) -> str:
    if not lat or not lat.get("n"):
        return "–"
    return f"{lat['p50_ms']:.1f} / {lat['p95_ms']:.1f} ms"


def _batches(entry: Any) -> str:
    if not entry or entry.get("batch_ratio") is None:
        return "–"
    by = entry["cpu_ms_per_text_by_batch"]
    ours, best = entry["batch_size"], entry["best_batch"]
    return f"{ours}: {by[str(ours)]:.2f} ms · {best}: {by[str(best)]:.2f} ms ({entry['batch_ratio']:.2f}×)"


def _ratio(search: Any) -> str:
    if not search or search.get("ratio_p50") is None:
        return "–"
    return f"{search['ratio_p50']:.2f}× · {search['ratio_p95']:.2f}×"


def _mb(value: Any) -> str:
    return "–" if value is None else f"{value:,.0f} MB"


def _phase(size: dict[str, Any], name: str) -> dict[str, Any]:
    return size["phases"].get(name) or {}


def _timed_rate(size: dict[str, Any], phase: str, rate_key: str, unit: str) -> str:
    entry = _phase(size, phase)
    if not entry:
        return "–"
    return f"{_s(entry.get('seconds'))} · {_n(entry.get(rate_key), unit)}"


def _rerun(size: dict[str, Any], phase: str) -> str:
    entry = _phase(size, phase)
    if not entry:
        return "–"
    return f"{_s(entry['seconds'])} ({_pct(entry.get('vs_full'))} of full)"


def _proof(size: dict[str, Any]) -> str:
    if "rerun_nothing_rewritten" not in size:
        return "–"
    sync = _phase(size, "rerun-sync").get("proof", {})
    index = _phase(size, "rerun-index").get("proof", {})
    verdict = "yes" if size["rerun_nothing_rewritten"] else "NO"
    how = "sync stopped early" if sync.get("stopped_early") else f"sync wrote {sync.get('written', '?')}"
    return (
        f"{verdict}: {how}, index embedded {index.get('texts_embedded', '?')}, "
        f"graph rows {index.get('graph_rows', '?')}"
    )


def _edit_total(size: dict[str, Any]) -> str:
    parts = [_phase(size, name) for name in ("sync", "index", "edit-sync", "edit-index")]
    if not all(parts):
        return "–"
    full, edit = parts[0]["seconds"] + parts[1]["seconds"], parts[2]["seconds"] + parts[3]["seconds"]
    return f"{_s(edit)} ({_pct(edit / full if full else None)} of full)"


def _append_check(size: dict[str, Any]) -> str:
    check = size.get("append_check")
    if not check:
        return "–"
    first = check["rounds"][0]
    added = first["seen"]["nodes_added"] + first["seen"]["edges_added"]
    return f"{added:,} staging rows, {len(check['rounds'])} round(s) {'ok' if check['ok'] else 'MISMATCH'}"


def _edit_check(size: dict[str, Any]) -> str:
    check = size.get("edit_check")
    if not check:
        return "–"
    seen, expected = check["seen"], check["expected"]
    mark = "ok" if check["ok"] else "MISMATCH"
    return f"{seen['texts_embedded']:,} = {expected['texts_embedded']:,} {mark}"


def _local(size: dict[str, Any]) -> str:
    entry = _phase(size, "embed-local")
    if not entry:
        return "–"
    sample = (
        f"{entry['texts']:,}/{entry['texts_total']:,}" if entry.get("sampled") else f"all {entry['texts']:,}"
    )
    return f"{_n(entry.get('texts_per_s'), '/s')} ({sample})"


def _local_index_estimate(size: dict[str, Any]) -> str:
    index, local = _phase(size, "index"), _phase(size, "embed-local")
    if not index or not local or local.get("estimated_full_embed_s") is None:
        return "–"
    return _s(index["seconds"] - index.get("embed_s", 0.0) + local["estimated_full_embed_s"])


def _peak(size: dict[str, Any], key: str, phases: tuple[str, ...] = ()) -> float | None:
    values = []
    for name, entry in size["phases"].items():
        if phases and name not in phases:
            continue
        if key == "python":
            values.append(entry.get("python_peak_mb"))
        else:
            values.append((entry.get("services_peak_mb") or {}).get(key))
    values = [v for v in values if v is not None]
    return max(values) if values else None


THROUGHPUT_ROWS: list[Row] = [
    ("data rows (generated)", lambda z: _n(z["rows"])),
    ("FAILED", lambda z: z.get("error", "–")),
    ("staging rows (nodes+edges)", lambda z: _n(_get(z, "phases", "sync", "staging_rows"))),
    ("sync (CSV folder) · rows/s", lambda z: _timed_rate(z, "sync", "rows_per_s", "/s")),
    ("sync (.grist) · rows/s", lambda z: _timed_rate(z, "sync-grist", "rows_per_s", "/s")),
    ("index, fast embedder (total)", lambda z: _s(_get(z, "phases", "index", "seconds"))),
    ("  graph load · nodes+edges/s", lambda z: f"{_s(_get(z, 'phases', 'index', 'graph_s'))} · "
     f"{_n(_get(z, 'phases', 'index', 'graph_rows_per_s'), '/s')}"),
    ("  embed (hash) · texts/s", lambda z: f"{_n(_get(z, 'phases', 'index', 'texts_embedded'))} texts · "
     f"{_n(_get(z, 'phases', 'index', 'texts_per_s'), '/s')}"),
    ("  write vectors + HNSW", lambda z: _s(_get(z, "phases", "index", "vectors_s"))),
    ("local model texts/s (sample)", _local),
    ("local model CPU/text: batch · best batch", lambda z: _batches(_get(z, "phases", "embed-local"))),
    ("  est. full index, local model", _local_index_estimate),
    ("no-change sync", lambda z: _rerun(z, "rerun-sync")),
    ("no-change index", lambda z: _rerun(z, "rerun-index")),
    ("  nothing rewritten?", _proof),
    ("1 % edit: rows edited", lambda z: _n(_get(z, "phases", "edit-files", "rows_edited"))),
    ("  sync after edit", lambda z: _rerun(z, "edit-sync")),
    ("  index after edit", lambda z: _rerun(z, "edit-index")),
    ("  sync + index after edit", _edit_total),
    ("  texts embedded = changed", _edit_check),
    ("1 % rows appended", lambda z: _n(_get(z, "phases", "append-files", "rows_appended"))),
    ("  sync after append", lambda z: _rerun(z, "append-sync")),
    ("  index after append", lambda z: _rerun(z, "append-index")),
    ("  rows added = appended, incrementally", _append_check),
    ("peak RSS python: sync · index", lambda z: f"{_mb(_peak(z, 'python', ('sync',)))} · "
     f"{_mb(_peak(z, 'python', ('index',)))}"),
    ("peak RSS python: ask (litellm)", lambda z: _mb(_peak(z, "python", ("ask",)))),
    ("peak RSS local-model process", lambda z: _mb(_get(z, "phases", "embed-local", "peak_rss_mb"))),
    ("peak PSS postgres", lambda z: _mb(_peak(z, "postgres"))),
    ("peak PSS falkordb", lambda z: _mb(_peak(z, "falkordb"))),
]  # fmt: skip

LATENCY_ROWS: list[Row] = [
    ("vector search (DB) p50 / p95", lambda z: _ms(_get(z, "phases", "search", "latency"))),
    ("  baseline: same SQL, bare psycopg", lambda z: _ms(_get(z, "phases", "search", "baseline_latency"))),
    ("  vedana ÷ baseline p50 · p95", lambda z: _ratio(_get(z, "phases", "search"))),
    ("  vectors in the index", lambda z: _vectors(_get(z, "phases", "search", "vectors"))),
    ("  node index p50 / p95", lambda z: _ms(_get(z, "phases", "search", "by_kind", "node"))),
    ("  edge index p50 / p95", lambda z: _ms(_get(z, "phases", "search", "by_kind", "edge"))),
    ("query embedding, local model", lambda z: _ms(_get(z, "phases", "embed-local", "query_embed"))),
    ("Cypher lookup p50 / p95", lambda z: _ms(_get(z, "phases", "cypher", "lookup"))),
    ("Cypher aggregate p50 / p95", lambda z: _ms(_get(z, "phases", "cypher", "aggregate"))),
    ("first ask in a process", lambda z: _s(_get(z, "phases", "ask", "first_ask_s"))),
    ("ask total p50 / p95", lambda z: _ms(_get(z, "phases", "ask", "total"))),
    ("  in LLM calls (3 per ask)", lambda z: _ms(_get(z, "phases", "ask", "in_llm"))),
    ("  outside the LLM", lambda z: _ms(_get(z, "phases", "ask", "outside_llm"))),
    ("  of which tools", lambda z: _ms(_get(z, "phases", "ask", "tools"))),
]  # fmt: skip


def _table(title: str, sizes: list[dict[str, Any]], rows: list[Row]) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("measure", style="bold")
    for size in sizes:
        table.add_column(size_label(size["rows"]), justify="right")
    for label, cell in rows:
        cells = [cell(size) for size in sizes]
        if all(c in ("–", "– · –", "– · – texts · –") for c in cells):
            continue
        table.add_row(label, *cells)
    return table


def _cpu(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}"


def _memory_table(size: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(
        title=f"Per phase at {size_label(size['rows'])} rows: wall time, CPU seconds by process, peak memory "
        "(python: this process's RSS; services: PSS; child: the local-model process)",
        title_justify="left",
    )
    columns = ("phase", "wall", "cpu py", "cpu pg", "cpu falkor", "py peak", "py growth", "pg peak",
               "falkor peak", "child peak")  # fmt: skip
    for name in columns:
        if name == "phase":
            table.add_column(name, no_wrap=True)
        else:
            table.add_column(name, justify="right")
    for phase, entry in size["phases"].items():
        services = entry.get("services_peak_mb") or {}
        cpu = entry.get("cpu_s") or {}
        table.add_row(
            phase,
            _s(entry["seconds"]),
            _cpu(cpu.get("python")),
            _cpu(cpu.get("postgres")),
            _cpu(cpu.get("falkordb")),
            _mb(entry.get("python_peak_mb")),
            _mb(entry.get("python_growth_mb")),
            _mb(services.get("postgres")),
            _mb(services.get("falkordb")),
            _mb(entry.get("peak_rss_mb")),  # the local-model child process
        )
        for stage, part in (entry.get("stages") or {}).items():
            cpu = part.get("cpu_s") or {}
            table.add_row(
                f"  › {stage}", _s(part["seconds"]), _cpu(cpu.get("python")), _cpu(cpu.get("postgres")),
                _cpu(cpu.get("falkordb")), "", "", "", "", "", style="dim",
            )  # fmt: skip
    return table


RATIO_HEADER = ["size", "measure", "vedana", "baseline (same run)", "ratio", "pairs", "must reach", "met?"]


def ratio_rows(sizes: list[dict[str, Any]]) -> list[list[str]]:
    """One row per ratio held by any phase of any size: vedana ÷ its same-run baseline."""
    from bench.ratios import format_busy, format_met, format_ratio, format_seconds, size_ratios

    rows = []
    for size in sizes:
        for _, entry in size_ratios(size):
            pairs = len(entry.get("pairs") or []) or 1
            baseline = (
                f"{entry.get('baseline', '')}: {format_seconds(entry.get('baseline_s'))}{format_busy(entry)}"
            )
            rows.append([
                size_label(size["rows"]), entry["measure"], format_seconds(entry.get("vedana_s")), baseline,
                format_ratio(entry), str(pairs), entry.get("must_reach") or "–", format_met(entry),
            ])  # fmt: skip
    return rows


def _ratio_table(sizes: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(
        title="vedana against the engines' own limits, same run, same rows (ratio = vedana ÷ baseline; "
        "median over back-to-back pairs)",
        title_justify="left",
    )
    for name in RATIO_HEADER:
        table.add_column(name, justify="right" if name in ("size", "vedana", "ratio", "pairs") else "left")
    for row in ratio_rows(sizes):
        table.add_row(*row)
    return table


def render(results: dict[str, Any], console: Any) -> None:
    """Print the tables of `results` on `console` (a rich Console)."""
    sizes = results["sizes"]
    if not sizes:
        return
    config, machine = results["config"], results["machine"]
    console.print(_table(f"vedana benchmark · shape {config['shape']} · fast embedder {config['fast_embedder']}",
                         sizes, THROUGHPUT_ROWS))  # fmt: skip
    latency = [z for z in sizes if any(p in z["phases"] for p in ("search", "cypher", "ask"))]
    if latency:
        console.print(_table("Latency (p50 / p95)", latency, LATENCY_ROWS))
    console.print(_memory_table(sizes[-1]))
    if ratio_rows(sizes):
        console.print(_ratio_table(sizes))
    busy = machine.get("busy_processes_start") or []
    console.print(
        f"machine: {machine['cpus']} cpus ({machine['cpu_model']}), {machine['memory_gb']} GB; "
        f"load {machine['load_avg_start']} → {machine.get('load_avg_end')}; "
        f"whole machine {machine.get('cpu_busy_percent_during_run')} % busy during the run; "
        f"other busy processes at start: {', '.join(b['name'] for b in busy) or 'none'}",
        highlight=False,
    )
    notes = [
        "index: graph/DB work measured with the hash fake embedder; the local model's texts/s comes "
        f"from at most {config['local_sample']:,} texts per size (runs of the index's shortest-first order), "
        "embedded in a child process.",
        "vector search: database time of VectorStore.search with pre-embedded queries (top 10, threshold 0); "
        "add the local query-embedding time for the agent's tool.",
        f"wall time {results.get('wall_s')} s",
    ]
    notes[-1:-1] = _few_vectors_notes(sizes) + _busy_notes(sizes)
    for note in notes:
        console.print(f"· {note}", highlight=False)


def _busy_notes(sizes: list[dict[str, Any]]) -> list[str]:
    """What "engine busy" in the ratios table means, once, when a ratio shows it."""
    from bench.ratios import BUSY_NOTE, size_ratios

    shown = any(entry.get("engine_busy") for size in sizes for _, entry in size_ratios(size))
    return [BUSY_NOTE] if shown else []


SEARCH_AT_VECTORS = 100_000  # issue 13: search latency must hold at this many vectors


def _few_vectors_notes(sizes: list[dict[str, Any]]) -> list[str]:
    """Say so when no index the search probe ran on held as many vectors as the issue's figure
    needs. Node and edge vectors are separate HNSW indexes, so the largest one counts, not the
    sum (people at 100k rows: node 20,200, edge 100,000)."""
    notes = []
    for size in sizes:
        vectors = _get(size, "phases", "search", "vectors")
        if vectors is None:
            continue
        largest = max(vectors.values(), default=0)
        if largest < SEARCH_AT_VECTORS:
            notes.append(
                f"vector search at {size_label(size['rows'])} ran on indexes of at most {largest:,} vectors, "
                f"fewer than {SEARCH_AT_VECTORS:,}: for that figure use a larger size (people: 100k rows "
                "and up) with --phases search"
            )
    return notes


def _md_table(header: list[str], rows: list[list[str]], align_left: tuple[int, ...] = ()) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    align = ["---"] + ["---" if i in align_left else "---:" for i in range(1, len(header))]
    return "\n".join([line(header), "| " + " | ".join(align) + " |", *(line(r) for r in rows)])


def _md_rows(sizes: list[dict[str, Any]], rows: list[Row]) -> list[list[str]]:
    out = []
    for label, cell in rows:
        cells = [cell(size) for size in sizes]
        if all(c in ("–", "– · –", "– · – texts · –") for c in cells):
            continue
        out.append(
            [label.strip().replace("  ", "") if not label.startswith("  ") else "↳ " + label.strip(), *cells]
        )
    return out


def markdown(results: dict[str, Any]) -> str:
    """The same tables as `render`, as Markdown (for the benchmark's README)."""
    sizes = results["sizes"]
    if not sizes:
        return ""
    config, machine = results["config"], results["machine"]
    header = ["measure", *(size_label(z["rows"]) for z in sizes)]
    parts = [
        f"Shape `{config['shape']}`, fast embedder `{config['fast_embedder']}`, run {results['started_at']}, "
        f"wall {results.get('wall_s')} s. Machine: {machine['cpus']} cpus ({machine['cpu_model']}), "
        f"{machine['memory_gb']} GB; whole machine {machine.get('cpu_busy_percent_during_run')} % busy during "
        f"the run; load {machine['load_avg_start']} → {machine.get('load_avg_end')}.",
        "",
        _md_table(header, _md_rows(sizes, THROUGHPUT_ROWS)),
    ]
    latency = [z for z in sizes if any(p in z["phases"] for p in ("search", "cypher", "ask"))]
    if latency:
        parts += [
            "",
            _md_table(
                ["latency", *(size_label(z["rows"]) for z in latency)], _md_rows(latency, LATENCY_ROWS)
            ),
        ]
    last = sizes[-1]
    rows = []
    for phase, entry in last["phases"].items():
        cpu = entry.get("cpu_s") or {}
        services = entry.get("services_peak_mb") or {}
        rows.append([phase, _s(entry["seconds"]), _cpu(cpu.get("python")), _cpu(cpu.get("postgres")),
                     _cpu(cpu.get("falkordb")), _mb(entry.get("python_peak_mb")), _mb(services.get("postgres")),
                     _mb(services.get("falkordb"))])  # fmt: skip
        for stage, part in (entry.get("stages") or {}).items():
            c = part.get("cpu_s") or {}
            rows.append([f"↳ {stage}", _s(part["seconds"]), _cpu(c.get("python")), _cpu(c.get("postgres")),
                         _cpu(c.get("falkordb")), "", "", ""])  # fmt: skip
    parts += [
        "",
        f"Per phase at {size_label(last['rows'])} rows (CPU seconds by process; peak memory: python RSS, services PSS):",
        "",
        _md_table(
            ["phase", "wall", "cpu py", "cpu pg", "cpu falkor", "py peak", "pg peak", "falkor peak"], rows
        ),
    ]
    ratios = ratio_rows(sizes)
    if ratios:
        parts += [
            "",
            "vedana against the engines' own limits, same run, same rows (ratio = vedana ÷ baseline; "
            "median over back-to-back pairs):",
            "",
            _md_table(RATIO_HEADER, ratios, align_left=(1, 3, 6, 7)),
            *(f"\n{note}" for note in _busy_notes(sizes)),
        ]
    return "\n".join(parts) + "\n"
