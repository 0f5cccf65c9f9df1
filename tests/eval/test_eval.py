"""`vedana eval` end to end: the golden set from a CSV file, a `.grist` file and the Grist
stand-in; scores, the stored run, the comparison, the exit codes, Ctrl-C and --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from support.eval_golden import ANSWERS, agent_stand_in, golden_doc, judge_stand_in
from support.fake_grist import FakeGrist
from support.fake_llm import FakeLLM
from support.grist_files import build_grist_file
from vedana.cli.app import app
from vedana.config import Settings, reset_settings
from vedana.datamodel import DataModel
from vedana.errors import SourceError


def vedana(*args: str) -> Any:
    reset_settings()
    return CliRunner().invoke(app, list(args))


def test_a_run_scores_stores_and_reports(
    eval_kb: DataModel, fake_llm: FakeLLM, eval_env: dict[str, str], golden_csv: Path, tmp_path: Path
) -> None:
    fake_llm.agent.append(agent_stand_in())
    fake_llm.filter.append(judge_stand_in)
    report = tmp_path / "report.html"
    result = vedana("eval", "--golden", str(golden_csv), "--json", "--report", str(report))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    totals = data["totals"]
    assert (totals["questions"], totals["passed"], totals["errors"]) == (5, 3, 1)
    assert totals["pass_rate"] == 0.6 and totals["mean_rating"] == pytest.approx((9 * 3 + 2) / 4, abs=0.01)
    assert data["by_scenario"]["count"]["questions"] == 2 and data["by_scenario"]["count"]["errors"] == 1
    failed = {f["position"]: f for f in data["failed"]}
    assert failed[4]["comment"] == "names the capybara, not the axolotl"
    assert "refused this one" in failed[5]["error"]
    by_position = {r["position"]: r for r in data["results"]}
    assert by_position[1]["scores"]["recall"] == 1.0 and by_position[1]["scores"]["context_touched"] is False
    assert by_position[4]["scores"]["recall"] == 0.0 and by_position[4]["scores"]["missing_items"] == [
        "axolotl"
    ]
    assert data["config"]["judge_model"] == eval_env["MODEL"] and data["config"]["filter"] is False
    assert "<table>" in report.read_text() and "names the capybara" in report.read_text()

    listed = vedana("eval", "list", "--json")
    assert json.loads(listed.stdout)[0]["id"] == data["run"] and json.loads(listed.stdout)[0]["passed"] == 3
    shown = vedana("eval", "show", str(data["run"]))
    assert shown.exit_code == 0 and "#4 Which animal does Bruno Silva like?" in shown.stdout

    # CI: below the bar exits 1; a second run with the answer fixed flips it and is compared.
    assert vedana("eval", "--golden", str(golden_csv), "--fail-under", "0.9").exit_code == 1
    fake_llm.agent.clear()
    fake_llm.agent.append(
        agent_stand_in({**_answers(), "Which animal does Bruno Silva like?": "The axolotl."})
    )
    compared = vedana(
        "eval",
        "--golden",
        str(golden_csv),
        "--json",
        "--compare",
        str(data["run"]),
        "--model",
        "openai/other",
    )
    assert compared.exit_code == 0, compared.output
    comparison = json.loads(compared.stdout)["comparison"]
    assert comparison["pass_rate"] == {"now": 0.8, "was": 0.6, "delta": 0.2}
    assert comparison["flipped"] == [
        {"position": 4, "question": "Which animal does Bruno Silva like?", "now": "pass", "was": "fail"}
    ]
    assert comparison["config_changes"]["model"] == {"was": eval_env["MODEL"], "now": "openai/other"}


def _answers() -> dict[str, str | None]:
    return dict(ANSWERS)


def test_without_a_judge_items_decide(
    eval_kb: DataModel, fake_llm: FakeLLM, eval_env: dict[str, str], golden_csv: Path
) -> None:
    fake_llm.agent.append(agent_stand_in())
    result = vedana(
        "eval",
        "--golden",
        str(golden_csv),
        "--no-judge",
        "--json",
        "--scenario",
        "lookup",
        "--scenario",
        "list",
    )
    data = json.loads(result.stdout)
    assert [r["position"] for r in data["results"]] == [1, 2, 4]
    assert [r["passed"] for r in data["results"]] == [True, True, False]
    assert fake_llm.filter_requests == []  # no judge was asked
    assert data["config"]["judge_model"] is None


def test_the_golden_set_from_a_grist_file_and_a_grist_server(
    eval_kb: DataModel, settings: Settings, tmp_path: Path, golden_csv: Path
) -> None:
    from vedana.eval.golden import read_golden

    from_csv, _ = read_golden(golden_csv, settings)
    from_file, where = read_golden(build_grist_file(golden_doc(), tmp_path / "golden.grist"), settings)
    assert where.endswith("golden.grist")
    with FakeGrist(golden_doc(), api_key="k-0123456789") as grist:
        server = settings.model_copy(update={"grist_server_url": grist.url, "grist_api_key": SecretStr("k-0123456789"),
                                             "grist_test_set_doc_id": "goldenDoc0001"})  # fmt: skip
        from_api, _ = read_golden(None, server)
        from_export, _ = read_golden(None, server, csv_export=True)
    for questions in (from_file, from_api, from_export):
        assert [(q.question, q.answer, q.scenario, q.context) for q in questions] == [
            (q.question, q.answer, q.scenario, q.context) for q in from_csv
        ]
        assert questions[0].metadata == {"owner": "qa team"}  # extra columns kept
    bad = tmp_path / "bad.csv"
    bad.write_text("question,answer\nq,a\n")
    with pytest.raises(
        SourceError, match="has no column gds_question or gds_answer; columns found: question, answer"
    ):
        read_golden(bad, settings)


def test_ctrl_c_keeps_what_finished_and_resume_asks_only_the_rest(
    eval_kb: DataModel, fake_llm: FakeLLM, eval_env: dict[str, str], golden_csv: Path, pg_engine
) -> None:
    from sqlalchemy import text

    asked: list[str] = []
    slow = agent_stand_in(asked=asked)

    def slowly(body: dict[str, Any]) -> dict[str, Any]:
        time.sleep(1.5)
        return slow(body)

    fake_llm.agent.append(slowly)
    fake_llm.filter.append(judge_stand_in)
    process = subprocess.Popen(
        [sys.executable, "-m", "vedana", "eval", "--golden", str(golden_csv), "--concurrency", "1"],
        env=eval_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    stored = 0
    while stored < 2:
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.2)
        with pg_engine.connect() as conn:
            stored = conn.execute(text("SELECT count(*) FROM eval_results r JOIN eval_runs e ON e.id = r.run_id "
                                       "WHERE e.status = 'running'")).scalar() or 0  # fmt: skip
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    run = int(err.split("vedana eval --resume ")[1].split("`")[0])
    with pg_engine.connect() as conn:
        status = conn.execute(text("SELECT status FROM eval_runs WHERE id = :id"), {"id": run}).scalar()
        kept = (
            conn.execute(text("SELECT position FROM eval_results WHERE run_id = :id"), {"id": run})
            .scalars()
            .all()
        )
    assert status == "interrupted" and 2 <= len(kept) < 5

    before = list(asked)
    resumed = subprocess.run([sys.executable, "-m", "vedana", "eval", "--resume", str(run), "--json"],
                             env=eval_env, capture_output=True, text=True, timeout=180)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    data = json.loads(resumed.stdout)
    assert data["run"] == run and data["status"] == "done" and data["totals"]["questions"] == 5
    again = asked[len(before) :]
    finished = {r["question"] for r in data["results"] if r["position"] in kept}
    assert not finished & set(again)  # nothing that had finished was asked again
    assert os.environ.get("VEDANA_HOME")  # the session's home, shared with the subprocesses
