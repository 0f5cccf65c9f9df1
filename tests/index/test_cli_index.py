"""`vedana index` and `vedana search` through the CLI: JSON equals the library's report, plain
output for logs, and user errors as one line with the right exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from support.staging_rows import live_counts
from vedana.cli.app import app
from vedana.config import reset_settings
from vedana.etl.index import index

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def fresh_cli_settings():
    reset_settings()  # the CLI builds settings from the environment (VEDANA_HOME of the session)
    yield
    reset_settings()


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args))
    return result


def test_index_json_is_the_library_report(settings, shop, graph, local_embedder) -> None:
    planned = index(settings, engine=shop, graph=graph, embedder=local_embedder, plan=True).to_dict()
    result = invoke("index", "--plan", "--json")
    assert result.exit_code == 0, result.output
    via_cli = json.loads(result.stdout)
    for timing in ("total_seconds", "phase_seconds"):
        via_cli.pop(timing), planned.pop(timing)
    assert via_cli == planned and via_cli["nodes_upserted"] == 10

    result = invoke("index", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["texts_embedded"] == planned["texts_embedded"] and report["version"] == planned["version"]
    assert graph.counts() == live_counts(shop)


def test_index_prints_one_summary_line_when_not_on_a_terminal(settings, shop, graph) -> None:
    first = invoke("index")
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("index: nodes +10 -0, edges +4 -0; 18 texts embedded")
    again = invoke("index")
    assert again.exit_code == 0
    assert again.stdout.startswith("index: nothing to do")
    assert invoke("index", "--quiet").stdout == ""


def test_search_cli_table_and_json(settings, shop, graph, local_embedder) -> None:
    index(settings, engine=shop, graph=graph, embedder=local_embedder)
    result = invoke("search", "Product", "name", "mountain bikes", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["kind"], data["threshold"], data["top_n"], data["model"]) == (
        "node",
        0.3,
        10,
        "all-MiniLM-L6-v2",
    )
    assert data["hits"][0]["node_id"] == "p1" and data["hits"][0]["value"] == "Mountain Bike"

    plain = invoke("search", "Product", "name", "mountain bikes", "--top-n", "2", "--threshold", "-1")
    assert plain.exit_code == 0
    lines = plain.stdout.splitlines()
    assert len(lines) == 2 and lines[0].split("\t")[1:] == ["p1", "Mountain Bike"]

    nothing = invoke("search", "Product", "name", "mountain bikes", "--threshold", "0.999")
    assert nothing.exit_code == 0 and nothing.stdout == "" and "try --threshold lower" in nothing.stderr


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vedana", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )


def test_errors_are_one_line_with_exit_codes(settings, shop) -> None:
    unknown = run_cli("search", "Gadget", "name", "bike")
    assert unknown.returncode == 2
    assert (
        unknown.stderr.strip().startswith("error: unknown label 'Gadget'")
        and len(unknown.stderr.splitlines()) == 1
    )

    mismatch = run_cli("index", EMBEDDINGS_DIM="768")
    assert mismatch.returncode == 1
    assert mismatch.stderr.strip() == (
        "error: the local model all-MiniLM-L6-v2 makes 384-dimensional vectors but EMBEDDINGS_DIM is 768; "
        "set EMBEDDINGS_DIM=384 or unset it"
    )
