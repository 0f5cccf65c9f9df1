"""`vedana eval` end to end: the golden set from a CSV file, a `.grist` file and the Grist
stand-in; real tool calls through the agent; scores, the stored run, the comparison, the exit
codes, Ctrl-C and --resume."""

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

from standins.fake_grist import FakeGrist
from standins.fake_llm import FakeLLM
from standins.grist_files import build_grist_file
from support.eval_golden import cypher_agent, golden_doc, judge_stand_in
from vedana.cli.app import app
from vedana.config import Settings, reset_settings
from vedana.datamodel import DataModel
from vedana.errors import ConfigError, SourceError


def vedana(*args: str) -> Any:
    reset_settings()
    return CliRunner().invoke(app, list(args))


def stored(pg_engine, run: int) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The run's row and its results by position, as Postgres holds them."""
    from sqlalchemy import text

    with pg_engine.connect() as conn:
        row = conn.execute(text("SELECT * FROM eval_runs WHERE id = :id"), {"id": run}).mappings().one()
        results = conn.execute(text("SELECT * FROM eval_results WHERE run_id = :id"), {"id": run}).mappings()
        return dict(row), {r["position"]: dict(r) for r in results}


def test_a_run_scores_stores_and_reports(
    eval_kb: DataModel,
    fake_llm: FakeLLM,
    eval_env: dict[str, str],
    golden_csv: Path,
    tmp_path: Path,
    pg_engine,
) -> None:
    fake_llm.agent.append(cypher_agent())
    fake_llm.judge.append(judge_stand_in)
    report = tmp_path / "report.html"
    result = vedana("eval", "--golden", str(golden_csv), "--json", "--report", str(report))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    totals = data["totals"]
    assert (totals["questions"], totals["passed"], totals["errors"]) == (5, 3, 1)
    assert totals["pass_rate"] == 0.6 and totals["mean_rating"] == pytest.approx((9 * 3 + 2) / 4, abs=0.01)
    assert totals["tool_calls"] == 1.0 and totals["cypher_errors"] == 0
    assert data["by_scenario"]["count"]["questions"] == 2 and data["by_scenario"]["count"]["errors"] == 1
    failed = {f["position"]: f for f in data["failed"]}
    assert failed[4]["comment"] == "names the capybara, not the axolotl" and failed[4]["rating"] == 2
    assert "refused this one" in failed[5]["error"]

    # Postgres holds every answer with its trace and scores, and the run's config.
    run, rows = stored(pg_engine, data["run"])
    assert run["status"] == "done" and run["finished_at"] is not None
    first = rows[1]
    assert first["answer"].startswith("Ada Okafor") and first["passed"] is True
    assert first["scores"]["recall"] == 1.0 and first["scores"]["precision"] == 1.0
    assert first["scores"]["context_touched"] is True  # the query named a1
    assert first["scores"]["tools"] == ["cypher"] and first["trace"]["tool_calls"][0]["rows"] == 3
    assert first["scores"]["judge"] == {"verdict": "pass", "rating": 9, "comment": "all facts right"}
    assert first["scores"]["golden"] == {"context": "a1", "metadata": {"owner": "qa team"}}
    assert first["scores"]["tokens"] > 0 and first["scores"]["latency_s"] > 0
    assert rows[4]["scores"]["recall"] == 0.0 and rows[4]["scores"]["missing_items"] == ["axolotl"]
    assert rows[5]["answer"] is None and rows[5]["passed"] is False and "refused" in rows[5]["error"]
    config = run["config"]
    assert config["model"] == eval_env["MODEL"] and config["judge_model"] == eval_env["MODEL"]
    assert config["filter"] is False and config["filter_model"] is None
    assert config["graph"] == {"nodes": 7, "edges": 5}  # agent_kb: 4 people, 3 animals, 5 likes
    assert (
        len(config["data_model_hash"])
        == len(config["prompts_hash"])
        == len(config["judge_prompt_hash"])
        == 16
    )
    assert "sk-eval-test" not in json.dumps([run, rows], default=str)

    page = report.read_text()
    assert "<script" not in page and "http" not in page.split("</style>", 1)[1]
    assert (
        "names the capybara" in page
        and "MATCH (p:Person)-[:LIKES]-&gt;(:Animal {id: &#x27;a1&#x27;})" in page
    )

    listed = vedana("eval", "list", "--json")
    assert json.loads(listed.stdout)[0]["id"] == data["run"] and json.loads(listed.stdout)[0]["passed"] == 3
    shown = vedana("eval", "show", str(data["run"]))
    assert shown.exit_code == 0 and "#4 Which animal does Bruno Silva like?" in shown.stdout
    assert "judge (2/10): names the capybara" in shown.stdout

    # CI: below the bar exits 1, at or above it 0.
    assert vedana("eval", "--golden", str(golden_csv), "--fail-under", "0.9").exit_code == 1
    assert vedana("eval", "--golden", str(golden_csv), "--fail-under", "0.6").exit_code == 0

    # Another model that gets question 4 right: beside the first run, one flip and the model change.
    fake_llm.agent.clear()
    fake_llm.agent.append(cypher_agent(wrong={}))
    compared = vedana("eval", "--golden", str(golden_csv), "--json", "--compare", str(data["run"]),
                      "--model", "openai/other", "--report", str(tmp_path / "report.md"))  # fmt: skip
    assert compared.exit_code == 0, compared.output
    comparison = json.loads(compared.stdout)["comparison"]
    assert comparison["pass_rate"] == {"now": 0.8, "was": 0.6, "delta": 0.2}
    assert comparison["flipped"] == [
        {"position": 4, "question": "Which animal does Bruno Silva like?", "now": "pass", "was": "fail"}
    ]
    assert comparison["config_changes"] == {
        "judge_model": {"was": eval_env["MODEL"], "now": "openai/other"},
        "model": {"was": eval_env["MODEL"], "now": "openai/other"},
    }
    markdown = (tmp_path / "report.md").read_text()
    assert "## Compared with run" in markdown and "#4 fail → pass" in markdown


def test_compare_last_prefers_the_same_golden_set(
    eval_kb: DataModel, fake_llm: FakeLLM, eval_env: dict[str, str], golden_csv: Path, tmp_path: Path
) -> None:
    fake_llm.agent.append(cypher_agent())
    first = json.loads(vedana("eval", "-g", str(golden_csv), "--no-judge", "--json").stdout)["run"]
    other = tmp_path / "other.csv"
    other.write_text("gds_question,gds_answer\nWho likes quokkas?,Ada Okafor\n")
    vedana("eval", "-g", str(other), "--no-judge")
    result = vedana("eval", "-g", str(golden_csv), "--no-judge", "--compare-last")
    assert result.exit_code == 0, result.output
    assert f"vs run {first}: pass rate 0.60 → 0.60 (+0.00)" in result.stdout
    assert "no question flipped" in result.stdout


def test_without_a_judge_items_decide(
    eval_kb: DataModel, fake_llm: FakeLLM, eval_env: dict[str, str], golden_csv: Path
) -> None:
    fake_llm.agent.append(cypher_agent())
    args = [
        "eval",
        "--golden",
        str(golden_csv),
        "--no-judge",
        "--json",
        "--scenario",
        "lookup",
        "--scenario",
        "list",
    ]
    data = json.loads(vedana(*args).stdout)
    assert [r["position"] for r in data["results"]] == [1, 2, 4]
    assert [r["passed"] for r in data["results"]] == [True, True, False]
    assert fake_llm.judge_requests == []  # no judge was asked
    assert data["config"]["judge_model"] is None and data["config"]["judge_prompt_hash"] is None
    # Partial credit: with --min-recall 0.5 an answer naming two of three people passes.
    fake_llm.agent.clear()
    fake_llm.agent.append(cypher_agent(wrong={"Who likes quokkas?": "Ada Okafor and Chen Wei."}))
    strict = json.loads(vedana("eval", "-g", str(golden_csv), "--no-judge", "--json", "--limit", "1").stdout)
    lenient = json.loads(
        vedana(
            "eval", "-g", str(golden_csv), "--no-judge", "--json", "--limit", "1", "--min-recall", "0.5"
        ).stdout
    )
    assert strict["results"][0]["scores"]["recall"] == pytest.approx(2 / 3, abs=0.001)
    assert (strict["results"][0]["passed"], lenient["results"][0]["passed"]) == (False, True)
    # --question picks by text; a selection that matches nothing is a one-line error naming the groups.
    one = json.loads(vedana("eval", "-g", str(golden_csv), "--no-judge", "--json", "-q", "OLD IS").stdout)
    assert [r["question"] for r in one["results"]] == ["How old is Bruno Silva?"]
    none = vedana("eval", "-g", str(golden_csv), "--scenario", "nope")
    assert isinstance(none.exception, ConfigError) and "scenarios: count, list, lookup" in str(none.exception)


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
    assert len(from_csv) == 5
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
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "Other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(SourceError, match="has no table Gds; tables found: Other"):
        read_golden(folder, settings)


def test_ctrl_c_keeps_what_finished_and_resume_asks_only_the_rest(
    eval_kb: DataModel, fake_llm: FakeLLM, eval_env: dict[str, str], golden_csv: Path, pg_engine
) -> None:
    asked: list[str] = []
    # Every question answers after 1.5 s, one at a time: there is time to interrupt halfway.
    fake_llm.agent.append(cypher_agent(asked=asked, slow={q: 1.5 for q in _questions()}))
    fake_llm.judge.append(judge_stand_in)
    process = subprocess.Popen(
        [sys.executable, "-m", "vedana", "eval", "--golden", str(golden_csv), "--concurrency", "1"],
        env=eval_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    done = 0
    while done < 2:
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.2)
        done = _stored_while_running(pg_engine)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    run = int(err.split("vedana eval --resume ")[1].split("`")[0])
    row, kept = stored(pg_engine, run)
    assert row["status"] == "interrupted" and 2 <= len(kept) < 5
    assert "answer(s) kept in run" in err and "Traceback" not in err

    # Resumed under another MODEL: the run keeps its own model and asks only what it lacks.
    before = len(asked)
    requests_before = len(fake_llm.agent_requests)
    env = {**eval_env, "MODEL": "openai/something-else"}
    resumed = subprocess.run([sys.executable, "-m", "vedana", "eval", "--resume", str(run), "--json"],
                             env=env, capture_output=True, text=True, timeout=180)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    data = json.loads(resumed.stdout)
    assert data["run"] == run and data["status"] == "done" and data["totals"]["questions"] == 5
    again = asked[before:]
    assert sorted(again) == sorted(r["question"] for r in data["results"] if r["position"] not in kept)
    assert {r["model"] for r in fake_llm.agent_requests[requests_before:]} == {"agent"}
    assert data["totals"]["passed"] == 3  # the same outcome as an uninterrupted run
    assert os.environ.get("VEDANA_HOME")  # the session's home, shared with the subprocesses

    # Settings that shape a run cannot change on resume.
    conflict = vedana("eval", "--resume", str(run), "--model", "openai/x", "--scenario", "list")
    words = " ".join(conflict.output.replace("│", " ").split())
    assert conflict.exit_code == 2 and "keeps its own settings; drop --scenario, --model" in words


def _questions() -> list[str]:
    from support.eval_golden import GOLDEN

    return [q for q, *_ in GOLDEN]


def _stored_while_running(pg_engine) -> int:
    from sqlalchemy import text

    with pg_engine.connect() as conn:
        return (
            conn.execute(
                text(
                    "SELECT count(*) FROM eval_results r JOIN eval_runs e ON e.id = r.run_id WHERE e.status = 'running'"
                )
            ).scalar()
            or 0
        )
