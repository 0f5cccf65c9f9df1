"""`vedana run`: sync then index under the run lock; exit codes, output, the run log."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from ops_kb import BASE_EDGES, BASE_NODES, BASE_VECTORS, KB, cli_env, run_vedana, stable, vedana_command
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from support.staging_rows import live_counts
from support.sync_kb import staging_rows
from vedana.cli.app import app
from vedana.config import Settings
from vedana.errors import LockBusy
from vedana.ops import inventory
from vedana.ops.lock import advisory_lock, file_lock
from vedana.ops.run import run
from vedana.stores import tables as t
from vedana.stores.graph import GraphStore


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def run_rows(engine: Engine, after: int) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(t.runs).where(t.runs.c.id > after).order_by(t.runs.c.id))
        return [dict(r._mapping) for r in rows]


def vector_counts(engine: Engine) -> dict[str, dict[str, int]]:
    with engine.connect() as conn:
        return inventory.vector_counts(conn)


def source_args(model: Path, data: Path) -> list[str]:
    return ["--data-model", str(model), "--data", str(data)]


# --- in process -------------------------------------------------------------------------------


def test_a_first_run_updates_everything_and_a_second_is_up_to_date(
    ops_env: None, blank_kb: Engine, graph: GraphStore, kb_dirs: tuple[Path, Path], first_run_id: int
) -> None:
    first = invoke("run", *source_args(*kb_dirs), "--json")

    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert report["status"] == "updated" and report["changed"] is True
    assert report["sync"]["totals"]["nodes"]["written"] == sum(BASE_NODES.values())
    assert report["index"]["nodes_upserted"] == sum(BASE_NODES.values())
    assert live_counts(blank_kb) == {"nodes": BASE_NODES, "edges": BASE_EDGES}
    assert graph.counts() == {"nodes": BASE_NODES, "edges": BASE_EDGES}
    assert vector_counts(blank_kb) == BASE_VECTORS

    second = invoke("run", *source_args(*kb_dirs), "--json")

    assert second.exit_code == 0, second.output
    again = json.loads(second.stdout)
    assert again["status"] == "up to date" and again["changed"] is False
    assert again["index"]["graph_rows"] == 0 and again["index"]["values_written"] == 0

    rows = run_rows(blank_kb, first_run_id)
    assert [(r["kind"], r["status"]) for r in rows if r["kind"] == "run"] == [
        ("run", "ok"),
        ("run", "unchanged"),
    ]
    assert [r["kind"] for r in rows] == ["run", "sync", "index", "run", "sync", "index"]
    first_row = rows[0]
    assert first_row["id"] == report["run_id"] and first_row["finished_at"] is not None
    assert first_row["error"] is None
    assert first_row["counts"]["sync"]["nodes"] == {"loaded": 5, "written": 5, "deleted": 0}
    assert first_row["counts"]["index"]["values_written"] == 7
    assert first_row["counts"]["sync"]["run_id"] == rows[1]["id"]  # points at sync's own row
    assert "CSV folder" not in first_row["source"] and str(kb_dirs[0]) in first_row["source"]


def test_json_is_the_library_report(
    ops_env: None, ops_settings: Settings, blank_kb: Engine, kb_dirs: tuple[Path, Path]
) -> None:
    model, data = kb_dirs
    assert invoke("run", *source_args(model, data), "--quiet").exit_code == 0  # now up to date

    cli = invoke("run", *source_args(model, data), "--json")
    library = run(ops_settings, data_model=str(model), data=str(data), wait=0).to_dict()

    assert cli.exit_code == 0, cli.output
    assert stable(json.loads(cli.stdout)) == stable(library)
    assert library["status"] == "up to date"


def test_off_a_terminal_it_prints_one_line_per_phase(
    ops_env: None, blank_kb: Engine, kb_dirs: tuple[Path, Path]
) -> None:
    result = invoke("run", *source_args(*kb_dirs))

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split(":")[0].split()[0] for line in lines] == ["sync", "index", "run"]
    assert lines[0].startswith(
        "sync: data model changed; nodes 5 (+5 new, 0 updated, -0 deleted); edges 5 (+5"
    )
    assert lines[1].startswith(
        "index (from scratch): graph nodes +5 -0, edges +5 -0; vectors +7 -0 (6 texts embedded"
    )
    assert lines[2].startswith("run ") and ": updated in " in lines[2]
    assert re.search(r"\(started \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\)$", lines[2])

    again = invoke("run", *source_args(*kb_dirs))
    assert again.stdout.splitlines()[0].startswith("sync: up to date (the sources did not change")
    assert again.stdout.splitlines()[1].startswith("index: up to date (staging version")
    assert ": up to date in " in again.stdout.splitlines()[2]

    compared = invoke("run", *source_args(*kb_dirs), "--full")
    assert compared.stdout.splitlines()[0].startswith("sync: up to date (5 nodes, 5 edges;")
    assert again.stdout.splitlines()[1].startswith("index: up to date (staging version")
    assert ": up to date in " in again.stdout.splitlines()[2]


def test_quiet_prints_nothing_on_success(ops_env: None, blank_kb: Engine, kb_dirs: tuple[Path, Path]) -> None:
    result = invoke("run", *source_args(*kb_dirs), "--quiet")

    assert result.exit_code == 0, result.output
    assert result.stdout == "" and result.stderr == ""
    assert live_counts(blank_kb)["nodes"] == BASE_NODES


def test_a_held_lock_makes_the_library_raise_lock_busy_and_log_it(
    ops_settings: Settings, blank_kb: Engine, kb_dirs: tuple[Path, Path], first_run_id: int
) -> None:
    model, data = kb_dirs
    with file_lock(ops_settings.home, wait=0), pytest.raises(LockBusy) as busy:
        run(ops_settings, data_model=model, data=data, wait=0.3)

    assert busy.value.exit_code == 75
    assert "after waiting 0.3 s" in str(busy.value)
    [row] = run_rows(blank_kb, first_run_id)
    assert (row["kind"], row["status"]) == ("run", "busy")
    assert row["error"] == str(busy.value)
    assert live_counts(blank_kb) == {"nodes": {}, "edges": {}}  # nothing was written


def test_the_lock_is_free_again_after_a_failed_run(
    ops_settings: Settings, blank_kb: Engine, kb_dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    model, _ = kb_dirs
    with pytest.raises(Exception, match="neither a folder"):
        run(ops_settings, data_model=model, data=tmp_path / "no" / "such", wait=0)

    report = run(ops_settings, data_model=model, data=kb_dirs[1], wait=0)

    assert report.status == "updated"


# --- the real executable: exit codes and concurrent runs ---------------------------------------------


def test_exit_code_1_on_a_bad_data_folder_with_one_line_and_a_failed_row(
    blank_kb: Engine, kb_dirs: tuple[Path, Path], tmp_path: Path, first_run_id: int
) -> None:
    model, _ = kb_dirs
    missing = tmp_path / "not-there"

    result = run_vedana("run", "--data-model", str(model), "--data", str(missing), cwd=tmp_path)

    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and str(missing) in line and "Traceback" not in result.stderr
    run_row = next(r for r in run_rows(blank_kb, first_run_id) if r["kind"] == "run")
    assert run_row["status"] == "failed" and str(missing) in run_row["error"]


def test_exit_code_2_when_no_source_is_given_or_configured(blank_kb: Engine, tmp_path: Path) -> None:
    result = run_vedana("run", cwd=tmp_path)

    assert result.returncode == 2, result.stderr
    assert "--data-model" in result.stderr and "GRIST_DATA_MODEL_DOC_ID" in result.stderr


def test_exit_code_75_while_another_process_holds_the_file_lock(
    ops_settings: Settings, blank_kb: Engine, kb: KB, tmp_path: Path, first_run_id: int
) -> None:
    model, data = kb.write(tmp_path / "kb")
    run(ops_settings, data_model=model, data=data, wait=0)
    kb.set_cell(kb.data, "Anchor_person", 1, "person_name", "Ada Changed")
    kb.write(tmp_path / "kb")
    before = staging_rows(blank_kb)
    after_first = run_rows(blank_kb, first_run_id)[-1]["id"]

    with file_lock(ops_settings.home, wait=0):
        result = run_vedana("run", *source_args(model, data), "--wait", "0.5", cwd=tmp_path)

    assert result.returncode == 75, result.stderr
    [line] = result.stderr.splitlines()
    assert "another `vedana run` is in progress" in line
    assert "this one stopped after waiting 0.5 s and changed nothing" in line
    assert staging_rows(blank_kb) == before  # not one row written
    [busy] = run_rows(blank_kb, after_first)
    assert (busy["kind"], busy["status"]) == ("run", "busy")


def test_exit_code_75_while_another_machine_holds_the_database_lock(
    ops_settings: Settings, blank_kb: Engine, kb_dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    """Runs on two hosts share only the database: the advisory lock keeps them apart."""
    with advisory_lock(blank_kb, wait=0):
        result = run_vedana("run", *source_args(*kb_dirs), "--wait", "0", cwd=tmp_path)

    assert result.returncode == 75, result.stderr
    assert "holds the database's run lock" in result.stderr
    assert live_counts(blank_kb) == {"nodes": {}, "edges": {}}


def _start_together(n: int, args: list[str], cwd: Path) -> list[subprocess.CompletedProcess[str]]:
    procs = [
        subprocess.Popen(
            vedana_command(*args),
            cwd=cwd,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_two_runs_started_together_one_writes_the_other_exits_75(
    blank_kb: Engine, graph: GraphStore, tmp_path: Path
) -> None:
    people = SAMPLES / "people"
    expected = json.loads((people / "expected.json").read_text())

    results = _start_together(
        2, ["run", *source_args(people / "model", people / "data"), "--wait", "0"], tmp_path
    )

    codes = sorted(r.returncode for r in results)
    assert codes == [0, 75], [r.stderr for r in results]
    busy = next(r for r in results if r.returncode == 75)
    assert "another `vedana run` is in progress" in busy.stderr
    assert live_counts(blank_kb) == {"nodes": expected["nodes"], "edges": expected["edges"]}
    assert graph.counts() == {"nodes": expected["nodes"], "edges": expected["edges"]}


def test_with_wait_the_second_run_waits_and_then_finds_everything_up_to_date(
    blank_kb: Engine, kb_dirs: tuple[Path, Path], tmp_path: Path, first_run_id: int
) -> None:
    results = _start_together(2, ["run", *source_args(*kb_dirs), "--wait", "120", "--json"], tmp_path)

    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    statuses = sorted(json.loads(r.stdout)["status"] for r in results)
    assert statuses == ["up to date", "updated"]
    runs = [r for r in run_rows(blank_kb, first_run_id) if r["kind"] == "run"]
    assert sorted(r["status"] for r in runs) == ["ok", "unchanged"]
    # The runs did not overlap: the second started its sync after the first had finished.
    ok, unchanged = sorted(runs, key=lambda r: r["status"])
    assert unchanged["started_at"] >= ok["finished_at"]
    assert live_counts(blank_kb) == {"nodes": BASE_NODES, "edges": BASE_EDGES}


def test_a_run_killed_mid_index_leaves_nothing_a_next_run_cannot_repair(
    ops_settings: Settings, blank_kb: Engine, graph: GraphStore, tmp_path: Path, first_run_id: int
) -> None:
    """kill -9 once its index has started: the locks die with the process, the next run takes
    them at once and brings everything in line; the log shows the killed run."""
    from vedana.ops.status import status

    people = SAMPLES / "people"
    expected = json.loads((people / "expected.json").read_text())
    args = ["run", *source_args(people / "model", people / "data"), "--wait", "0"]
    proc = subprocess.Popen(vedana_command(*args), cwd=tmp_path, env=cli_env(), stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not any(r["kind"] == "index" for r in run_rows(blank_kb, first_run_id)):
            assert proc.poll() is None, "the run ended before its index started"
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    report = run(ops_settings, data_model=people / "model", data=people / "data", wait=5)

    assert report.status == "updated"
    full = {"nodes": expected["nodes"], "edges": expected["edges"]}
    assert live_counts(blank_kb) == full
    assert graph.counts() == full
    killed = [r for r in status(ops_settings, limit=20)["runs"] if r["id"] < report.run_id]
    assert [(r["kind"], r["status"]) for r in killed if r["id"] > first_run_id] == [
        ("index", "interrupted"),
        ("sync", "ok"),
        ("run", "interrupted"),
    ]
