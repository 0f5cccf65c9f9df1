"""`vedana runs`: the recent runs and what the knowledge base holds now."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from ops_kb import BASE_EDGES, BASE_NODES, BASE_VECTORS, HASH_MODEL, stable
from sqlalchemy import Engine
from typer.testing import CliRunner

from vedana.cli.app import app
from vedana.config import Settings
from vedana.ops.lock import file_lock
from vedana.ops.run import RunReport, run
from vedana.ops.status import status


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def ran(ops_settings: Settings, blank_kb: Engine, kb_dirs: tuple[Path, Path], tmp_path: Path) -> RunReport:
    """One failed run (a missing data folder), then one that indexed the base knowledge base."""
    model, data = kb_dirs
    with pytest.raises(Exception, match="neither a folder"):
        run(ops_settings, data_model=model, data=tmp_path / "missing", wait=0)
    return run(ops_settings, data_model=model, data=data, wait=0)


def test_json_lists_recent_runs_and_the_holdings(
    ops_env: None, ran: RunReport, ops_settings: Settings
) -> None:
    result = invoke("runs", "--json")

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert stable(data) == stable(status(ops_settings))
    kinds = [(r["kind"], r["status"]) for r in data["runs"][:4]]
    assert kinds == [("index", "ok"), ("sync", "ok"), ("run", "ok"), ("run", "failed")]
    assert data["runs"][2]["id"] == ran.run_id
    assert "neither a folder" in data["runs"][3]["error"]
    kb = data["knowledge_base"]
    assert kb["staging"]["nodes"] == kb["graph"]["nodes"] == BASE_NODES
    assert kb["staging"]["edges"] == kb["graph"]["edges"] == BASE_EDGES
    assert kb["vectors"] == BASE_VECTORS
    assert kb["up_to_date"] is True
    assert kb["indexed_version"] == {"graph": kb["staging"]["version"], "vectors": kb["staging"]["version"]}
    assert kb["last_run"]["id"] == ran.run_id and kb["last_run"]["status"] == "ok"
    assert kb["last_sync"]["id"] == ran.sync.run_id
    assert kb["embeddings"] == {
        "in_use": {"model": HASH_MODEL, "dim": 384},
        "configured": {"model": HASH_MODEL, "dim": None},
    }
    assert kb["run_lock"] == {"held": False, "holder": None}


def test_kind_and_limit_filter_the_runs(ops_env: None, ran: RunReport) -> None:
    result = invoke("runs", "--kind", "run", "--limit", "1", "--json")

    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)["runs"]
    assert (row["id"], row["kind"], row["status"]) == (ran.run_id, "run", "ok")
    assert row["counts"]["sync"]["nodes"]["loaded"] == sum(BASE_NODES.values())
    assert row["seconds"] > 0


def test_plain_output_for_logs(ops_env: None, ran: RunReport) -> None:
    result = invoke("runs", "--limit", "3")

    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert lines[2].startswith(f"#{ran.run_id} ") and " run   ok " in lines[2]
    assert "staging 5 nodes, 5 edges (written 10, deleted 0); graph +10 -0; vectors +7 -0" in lines[2]
    assert "node person: staging 3, graph 3, vectors person_name 3" in lines
    assert "edge PERSON_knows_PERSON: staging 2, graph 2, vectors how 2" in lines
    assert f"embedding model: {HASH_MODEL} (384 dimensions)" in lines
    assert any(line.startswith("knowledge base: staging version ") and "up to date" in line for line in lines)


def test_an_unchanged_source_is_not_shown_as_zero_nodes(
    ops_env: None, ran: RunReport, ops_settings: Settings, kb_dirs: tuple[Path, Path]
) -> None:
    model, data = kb_dirs
    again = run(ops_settings, data_model=model, data=data, wait=0)
    result = invoke("runs", "--limit", "3")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    run_line = next(line for line in lines if line.startswith(f"#{again.run_id} "))
    sync_line = next(line for line in lines if line.startswith(f"#{again.sync.run_id} "))
    assert "source unchanged since the last sync, nothing read; graph +0 -0; vectors +0 -0" in run_line
    assert sync_line.endswith("  source unchanged since the last sync, nothing read")
    assert "0 nodes, 0 edges" not in result.stdout


def test_an_empty_knowledge_base_says_so_instead_of_index_behind(ops_env: None, blank_kb: Engine) -> None:
    result = invoke("runs")

    assert result.exit_code == 0, result.output
    assert "knowledge base: empty, nothing synced yet: run `vedana sync`" in result.stdout.splitlines()
    assert "index behind staging" not in result.stdout


def test_a_run_in_progress_is_shown(ops_env: None, ran: RunReport, ops_settings: Settings) -> None:
    with file_lock(ops_settings.home, wait=0):
        held = status(ops_settings)["knowledge_base"]["run_lock"]

    assert held["held"] is True and held["holder"]["pid"] == os.getpid()


def test_another_configured_model_is_pointed_out(ran: RunReport, ops_settings: Settings) -> None:
    kb = status(ops_settings.model_copy(update={"embeddings_model": "hash-64"}))["knowledge_base"]

    assert kb["embeddings"] == {
        "in_use": {"model": HASH_MODEL, "dim": 384},
        "configured": {"model": "hash-64", "dim": None},
    }


def test_an_unknown_kind_is_a_usage_error(ops_env: None) -> None:
    result = invoke("runs", "--kind", "deploy")

    assert result.exit_code == 2
    assert "sync, index or run" in result.output or "sync, index, run" in result.output


def test_a_running_row_whose_lock_nobody_holds_reads_interrupted(
    ops_settings: Settings, blank_kb: Engine, first_run_id: int
) -> None:
    from vedana.ops.lock import advisory_lock
    from vedana.stores.tables import runs

    with blank_kb.begin() as conn:  # what a killed run leaves behind
        conn.execute(runs.insert().values(kind="run", source="killed"))

    def newest() -> str:
        [row] = status(ops_settings, limit=1)["runs"]
        assert row["id"] > first_run_id
        return row["status"]

    assert newest() == "interrupted"
    with advisory_lock(blank_kb, wait=0):  # a live run, possibly on another machine
        assert newest() == "running"
