"""The benchmark runs end to end on a tiny size and writes a well-formed JSON file.

No timing is asserted (speed is what the benchmark reports, not what tests check); what is
checked is that every phase ran on the real services and that the proofs the benchmark prints
(no-change re-run rewrites nothing, a 1 % edit embeds exactly the changed values) hold.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.__main__ import main, parse_size
from bench.runner import PHASES, BenchConfig
from vedana.errors import ConfigError

ROWS = 300
QUERIES = 6
ASKS = 2


@pytest.fixture(scope="module")
def bench_run() -> Iterator[tuple[dict, str, Path]]:
    # Not under pytest's basetemp: concurrent pytest sessions prune old basetemps, and this run
    # takes a minute with live services in it.
    work = Path(tempfile.mkdtemp(prefix="vedana-bench-test-"))
    out = work / "results.json"
    md = work / "results.md"
    capture = pytest.MonkeyPatch()
    stdout = io.StringIO()  # the tables go to stdout; rich picks up sys.stdout when main() runs
    capture.setattr(sys, "stdout", stdout)
    try:
        code = main(
            [
                "--sizes", str(ROWS), "--grist", "--out", str(out), "--markdown", str(md),
                "--workdir", str(work / "homes"),
                "--keep", "--queries", str(QUERIES), "--asks", str(ASKS), "--local-sample", "40",
            ]
        )  # fmt: skip
    finally:
        capture.undo()
    try:
        assert code == 0
        yield json.loads(out.read_text()), stdout.getvalue() + md.read_text(), work / "homes"
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.slow
def test_every_phase_ran_and_was_measured(bench_run: tuple[dict, str, Path]) -> None:
    results, _, _ = bench_run
    assert results["config"]["phases"] == list(PHASES)
    [size] = results["sizes"]
    assert size["rows"] == ROWS
    expected = {"generate", "services", "rerun-sync", "rerun-index", "edit-files", "edit-sync", "edit-index"}
    expected |= {"sync-copy", "sync-pairs", "edit-hash", "edit-pairs"}  # the same-run baselines
    expected |= {"append-files", "append-sync", "append-index", "append-pairs"}
    expected |= set(PHASES) - {"rerun", "edit"}
    assert set(size["phases"]) == expected
    for name, phase in size["phases"].items():
        assert phase["seconds"] >= 0, name
        assert phase["python_peak_mb"] > 0, name
    assert size["phases"]["sync"]["services_peak_mb"]["postgres"] > 0
    assert size["phases"]["index"]["services_peak_mb"]["falkordb"] > 0
    assert results["machine"]["cpus"] >= 1


@pytest.mark.slow
def test_counts_and_proofs_hold(bench_run: tuple[dict, str, Path]) -> None:
    results, _, _ = bench_run
    [size] = results["sizes"]
    phases = size["phases"]
    assert phases["generate"]["rows"] == ROWS
    assert phases["sync"]["rows_read"] > 0
    assert phases["sync"]["counts_match_generator"] is True
    assert phases["sync-grist"]["rows_read"] == phases["sync"]["rows_read"]
    index = phases["index"]
    assert index["graph_rows"] == phases["sync"]["staging_rows"]
    assert index["texts_embedded"] > 0
    # No-change re-run: nothing written, embedded or deleted anywhere.
    assert size["rerun_nothing_rewritten"] is True
    assert phases["rerun-sync"]["proof"]["written"] == 0
    assert phases["rerun-index"]["proof"] == {
        "graph_rows": 0, "texts_embedded": 0, "values_written": 0, "values_deleted": 0,
    }  # fmt: skip
    # 1 % edit: what the edit must cause is what sync and index report.
    check = size["edit_check"]
    assert check["ok"] is True, check
    assert check["seen"]["texts_embedded"] == phases["edit-files"]["expected"]["texts_to_embed"] > 0
    # 1 % appended, three times: each sync added exactly those rows, on the incremental path.
    appended = size["append_check"]
    assert appended["ok"] is True and len(appended["rounds"]) == 3, appended
    assert (
        appended["rounds"][0]["seen"]["nodes_added"] == phases["append-files"]["expected"]["nodes_added"] > 0
    )


@pytest.mark.slow
def test_latency_probes_and_local_model(bench_run: tuple[dict, str, Path]) -> None:
    results, _, _ = bench_run
    size = results["sizes"][0]
    phases = size["phases"]
    assert phases["search"]["latency"]["n"] == QUERIES
    assert phases["search"]["mean_hits"] > 0
    # The searches ran on both HNSW indexes, which hold every value the generator promised
    # (the person–interest notes in the edge index, stored in both directions).
    vectors = phases["search"]["vectors"]
    assert vectors["edge"] == size["expected"]["embeddable_values"]["PERSON_has_INTEREST.note"] > 0
    assert sum(vectors.values()) == sum(size["expected"]["embeddable_values"].values())
    assert set(phases["search"]["by_kind"]) == {"node", "edge"}
    # Each target's searches went first on vedana's side and on the baseline's alike.
    for turns in phases["search"]["went_first"].values():
        assert abs(turns["vedana"] - turns["baseline"]) <= 3, phases["search"]["went_first"]
    assert phases["cypher"]["lookup"]["n"] == QUERIES
    assert phases["cypher"]["lookup_mean_rows"] > 0
    ask = phases["ask"]
    assert ask["asks"] == ASKS
    assert ask["errors"] == 0
    assert ask["llm_calls_per_ask"] == 3  # filter, tool round, answer
    assert ask["tool_calls_per_ask"] == 2
    assert ask["outside_llm"]["p50_ms"] <= ask["total"]["p50_ms"]
    local = phases["embed-local"]
    assert local["model"] == "all-MiniLM-L6-v2"
    assert 0 < local["texts"] <= 40
    assert local["texts_per_s"] > 0
    assert local["peak_rss_mb"] > 0


@pytest.mark.slow
def test_table_printed_and_services_stopped(bench_run: tuple[dict, str, Path]) -> None:
    from vedana.stores.embedded_falkordb import falkordb_status
    from vedana.stores.embedded_postgres import postgres_status

    _, output, homes = bench_run
    assert "vedana benchmark" in output
    assert "no-change index" in output
    assert "| measure | 300 |" in output  # the Markdown table
    [root] = list(homes.iterdir())
    service_homes = sorted(root.glob("rows-*/home*"))
    assert [h.name for h in service_homes] == ["home", "home-grist"]
    for home in service_homes:
        assert postgres_status(home)["running"] is False
    assert falkordb_status(service_homes[0])["running"] is False


@pytest.mark.slow
def test_ratios_to_same_run_baselines(bench_run: tuple[dict, str, Path]) -> None:
    from bench.ratios import met, size_ratios

    results, output, _ = bench_run
    [size] = results["sizes"]
    found = list(size_ratios(size))

    def one(prefix: str, per_full_sync: bool = False) -> tuple[str, dict]:
        [hit] = [
            (p, e)
            for p, e in found
            if e["measure"].startswith(prefix) and ("÷" in e["measure"]) == per_full_sync
        ]
        return hit

    wanted = {
        ("full sync, CSV folder → staging", False): "sync",
        ("1 % edit re-sync", False): "edit-sync",
        ("1 % edit re-sync", True): "edit-sync",
        ("vector search p50", False): "search",
        ("vector search p95", False): "search",
        ("local model CPU per text", False): "embed-local",
    }
    for (prefix, per_full), phase in wanted.items():
        held_by, entry = one(prefix, per_full)
        assert held_by == phase, prefix
        assert set(entry) >= {"measure", "vedana_s", "baseline", "baseline_s", "ratio", "must_reach"}
        assert entry["vedana_s"] > 0 and entry["baseline_s"] > 0 and entry["ratio"] > 0, entry
        assert isinstance(entry["baseline"], str) and entry["baseline"]
        if entry["must_reach"]:
            assert met(entry) in (True, False), entry
    assert one("1 % edit re-sync", True)[1]["must_reach"] == "≤ 10 %"
    vectors = size["phases"]["search"]["vectors"]
    assert (
        f"(node {vectors['node']:,} + edge {vectors['edge']:,} vectors)"
        in one("vector search p50")[1]["measure"]
    )
    # Back-to-back pairs, as many as asked (3 by default) where the bench repeats the work.
    for prefix in ("full sync", "1 % edit re-sync", "vector search p95"):
        assert len(one(prefix)[1]["pairs"]) == 3, prefix
    # The baselines did what they claim: COPY loaded exactly the staging rows; read + hash +
    # compare found exactly the edited rows, in every pair.
    phases = size["phases"]
    assert sum(phases["sync-copy"]["rows"].values()) == phases["sync"]["staging_rows"]
    assert phases["edit-hash"]["found_the_edit"] is True
    assert phases["edit-hash"]["changed"] == phases["edit-files"]["rows_edited"]
    assert all(r["found_the_edit"] for r in phases["edit-pairs"]["rounds"])
    # The table is printed on stdout and in the Markdown, one line per ratio.
    assert "vedana against the engines' own limits" in output
    assert "| size | measure | vedana | baseline (same run) | ratio | pairs | must reach | met? |" in output
    md_lines = [line for line in output.splitlines() if line.startswith(f"| {ROWS} | ")]
    assert len(md_lines) == len(found)


def test_sizes_and_phases_are_checked() -> None:
    assert [parse_size(s) for s in ("1000", "10k", "1.5M", "100_000")] == [1_000, 10_000, 1_500_000, 100_000]
    with pytest.raises(ConfigError):
        parse_size("lots")
    with pytest.raises(ConfigError, match="unknown phase"):
        BenchConfig(phases=["sync", "warp"]).resolved_phases()
    assert BenchConfig(phases=["edit"]).resolved_phases() == ["sync", "index", "edit"]
    assert BenchConfig(phases=["embed-local"]).resolved_phases() == ["sync", "embed-local"]
