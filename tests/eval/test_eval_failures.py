"""What can go wrong in a run, and is recorded instead of ending it: a question that hangs past
--timeout, a provider that rate-limits, a judge prompt from the data model; `vedana check
--eval-sample` as the smoke section; the help a CI author reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from standins.fake_llm import FakeLLM, structured
from support.agent_kb import data_model, save
from support.eval_golden import cypher_agent, judge_stand_in
from vedana.cli.app import app
from vedana.config import reset_settings
from vedana.datamodel import DataModel, Prompt


def vedana(*args: str) -> Any:
    reset_settings()
    return CliRunner().invoke(app, list(args))


def test_a_question_past_its_timeout_is_an_error_and_the_run_goes_on(
    eval_kb: DataModel, fake_llm: FakeLLM, eval_env: dict[str, str], golden_csv: Path
) -> None:
    fake_llm.agent.append(cypher_agent(slow={"How old is Bruno Silva?": 6.0}))
    result = vedana(
        "eval", "-g", str(golden_csv), "--no-judge", "--timeout", "2", "--concurrency", "3", "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    by_position = {r["position"]: r for r in data["results"]}
    assert by_position[2]["error"] == "no answer within 2 s (--timeout)" and by_position[2]["answer"] is None
    assert 2 <= by_position[2]["scores"]["latency_s"] < 5
    assert [by_position[p]["passed"] for p in (1, 3)] == [True, True]
    assert data["totals"]["errors"] == 2 and data["status"] == "done"


def test_a_rate_limited_question_is_asked_again(
    eval_kb: DataModel, fake_llm: FakeLLM, eval_env: dict[str, str], golden_csv: Path
) -> None:
    # litellm tries three times within a second or two; the fourth 429 is waited out by eval.
    fake_llm.agent.append(cypher_agent(rate_limited={"How old is Bruno Silva?": 4}))
    result = vedana("eval", "-g", str(golden_csv), "--no-judge", "--json", "-q", "Bruno Silva")
    data = json.loads(result.stdout)
    old = next(r for r in data["results"] if r["position"] == 2)
    assert old["passed"] is True and old["error"] is None and old["answer"] == "61"
    refused = [r for r in fake_llm.agent_requests if r["messages"][1]["content"] == "How old is Bruno Silva?"]
    assert len(refused) == 4 + 2  # four 429s, then the tool call and the answer


def test_the_judge_prompt_comes_from_the_prompts_table(
    graph, pg_engine, fake_llm: FakeLLM, eval_env: dict[str, str], golden_csv: Path
) -> None:
    from support.agent_kb import load_graph

    custom = "Grade it. Question: {{question}} Expected: {{golden_answer}} Given: {{answer}}"
    save(pg_engine, data_model(prompts=[Prompt("eval_judge_prompt", custom)]))
    load_graph(graph)
    fake_llm.agent.append(cypher_agent())
    fake_llm.judge.append(structured({"verdict": "pass", "rating": 7, "comment": "fine"}))
    result = vedana("eval", "-g", str(golden_csv), "--json", "--limit", "1")
    assert result.exit_code == 0, result.output
    (judged,) = fake_llm.judge_requests
    text = judged["messages"][-1]["content"]
    assert text.startswith(
        "Grade it. Question: Who likes quokkas? Expected: Ada Okafor, Chen Wei and Dana Novak"
    )
    assert judged["response_format"]["json_schema"]["schema"]["required"] == ["verdict", "rating", "comment"]
    custom_hash = json.loads(result.stdout)["config"]["judge_prompt_hash"]
    save(pg_engine, data_model())
    fake_llm.judge.append(judge_stand_in)
    builtin = json.loads(vedana("eval", "-g", str(golden_csv), "--json", "--limit", "1").stdout)
    assert builtin["config"]["judge_prompt_hash"] != custom_hash
    assert builtin["config"]["prompts_hash"] == json.loads(result.stdout)["config"]["prompts_hash"]


def test_a_judge_that_does_not_answer_with_a_verdict_is_an_error(
    eval_kb: DataModel, fake_llm: FakeLLM, eval_env: dict[str, str], golden_csv: Path
) -> None:
    fake_llm.agent.append(cypher_agent())
    fake_llm.judge.append(structured({"mood": "good"}))
    data = json.loads(vedana("eval", "-g", str(golden_csv), "--json", "--limit", "1").stdout)
    (only,) = data["results"]
    assert only["passed"] is False and only["error"].startswith(
        "judge: the judge openai/agent did not answer"
    )
    assert only["scores"]["recall"] == 1.0  # the exact scores are kept


def test_check_eval_sample_is_the_smoke_section(
    eval_kb: DataModel, fake_llm: FakeLLM, eval_env: dict[str, str], golden_csv: Path, pg_engine
) -> None:
    from sqlalchemy import text

    fake_llm.agent.append(cypher_agent())
    fake_llm.judge.append(judge_stand_in)
    with pg_engine.connect() as conn:
        runs_before = conn.execute(text("SELECT count(*) FROM eval_runs")).scalar()
    # One question of each scenario in turn: list #1, lookup #2, count #3 — all right.
    ok = vedana("check", "--only", "smoke", "--eval-sample", "3", "--golden", str(golden_csv), "--json")
    assert ok.exit_code == 0, ok.output
    smoke = json.loads(ok.stdout)["sections"]["smoke"]
    assert smoke["status"] == "ok" and smoke["details"]["sample"] == 3 and smoke["details"]["passed"] == 3
    # All five: the wrong answer and the provider's refusal fail the check.
    bad = vedana("check", "--only", "smoke", "--eval-sample", "5", "--golden", str(golden_csv), "--json")
    assert bad.exit_code == 1
    report = json.loads(bad.stdout)
    assert sorted(p["code"] for p in report["problems"]) == ["smoke.eval-error", "smoke.eval-failed"]
    assert any("names the capybara" in p["message"] for p in report["problems"])
    with pg_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM eval_runs")).scalar() == runs_before  # not stored
    both = vedana("check", "--ask", "x", "--eval-sample", "1")
    assert both.exit_code == 2


def test_help_shows_ci_and_model_comparison_examples() -> None:
    result = vedana("eval", "--help")
    assert result.exit_code == 0
    for text in ("--fail-under 0.9", "--model openai/gpt-4.1-mini", "--model openai/gpt-4.1 --compare-last",
                 "--resume", "vedana eval list", "--report"):  # fmt: skip
        assert text in result.stdout, text


def test_a_model_that_cannot_be_called_fails_the_run_before_it_starts(
    eval_kb: DataModel, fake_llm: FakeLLM, eval_env: dict[str, str], golden_csv: Path, pg_engine
) -> None:
    from sqlalchemy import text

    from vedana.errors import LLMError

    with pg_engine.connect() as conn:
        runs_before = conn.execute(text("SELECT count(*) FROM eval_runs")).scalar()
    result = vedana("eval", "-g", str(golden_csv), "--judge-model", "no-such-model-anywhere")
    assert isinstance(result.exception, LLMError)
    assert "'no-such-model-anywhere' is not a model name litellm knows" in str(result.exception)
    assert fake_llm.requests == []
    with pg_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM eval_runs")).scalar() == runs_before
