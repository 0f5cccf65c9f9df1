"""The README's `vedana eval` example, produced for real on samples/people and its 22-question
golden set (samples/people/golden.csv), with the tests' OpenAI-compatible stand-in playing the
models: it answers from a fixed table (three answers deliberately wrong or incomplete, one
question left to fail at the provider) and judges by the golden answer's items. Everything
else — the agent loop, scoring, storage, the summary — is vedana's own.

    .venv/bin/python scripts/eval_example.py
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.fake_llm import FakeLLM, answer, http_error, structured  # noqa: E402

GOLDEN = REPO / "samples" / "people" / "golden.csv"
SPOILED = {  # what the stand-in gets wrong, to show failures in the summary
    "How many people live in Kyoto?": "11 people live in Kyoto.",
    "Who is interested in viking age coins?": "Aroha Barros, Bongani Bianchi and Chidi Schmidt (the list is incomplete).",
    "In which cities do people interested in viking age coins live?": "Aarhus, Bergen and Tartu.",
}
FAILS_AT_PROVIDER = "How many people are mentors?"


def main() -> None:
    with GOLDEN.open(encoding="utf-8") as f:
        golden = {row["gds_question"]: row["gds_answer"] for row in csv.DictReader(f)}

    def agent(body: dict[str, Any]) -> dict[str, Any]:
        question = [m.get("content") or "" for m in body["messages"] if m["role"] == "user"][-1]
        if question == FAILS_AT_PROVIDER:
            return http_error(400, "the provider refused this request")
        return answer(SPOILED.get(question) or f"{golden.get(question, 'I do not know')}.")

    def judge(body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["messages"][-1]["content"]
        expected = prompt.split("Expected answer (the facts that must be there):", 1)[1].split("\n\n", 1)[0].strip()
        given = prompt.split("The assistant's answer:", 1)[1].split("\n\nPass it when", 1)[0]
        items = [i.strip().lower() for i in re.split(r",|\band\b", expected) if i.strip()]
        missing = [i for i in items if i not in given.lower()]
        verdict = "fail" if missing else "pass"
        comment = f"misses {', '.join(missing)}" if missing else "every expected fact is there"
        return structured({"verdict": verdict, "rating": 3 if missing else 9, "comment": comment})

    home = Path(tempfile.mkdtemp(prefix="vedana-eval-example-"))
    with FakeLLM() as llm:
        llm.agent.append(agent)
        llm.filter.append(judge)
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.pop("DB_CONN_URI", None), env.pop("MEMGRAPH_URI", None)
        env.update(VEDANA_HOME=str(home), MODEL=llm.model("stand-in"), VEDANA_LLM_API_BASE=llm.api_base,
                   OPENAI_API_KEY="sk-stand-in", ENABLE_DM_FILTERING="false")  # fmt: skip
        vedana = [sys.executable, "-m", "vedana"]
        people = REPO / "samples" / "people"
        try:
            subprocess.run([*vedana, "sync", "--data-model", str(people / "model"), "--data", str(people / "data")],
                           env=env, check=True, capture_output=True)  # fmt: skip
            subprocess.run([*vedana, "index"], env=env, check=True, capture_output=True)
            run = subprocess.run([*vedana, "eval", "--golden", "samples/people/golden.csv", "--concurrency", "4"],
                                 env=env, capture_output=True, text=True, cwd=REPO)  # fmt: skip
            print("$ vedana eval --golden samples/people/golden.csv --concurrency 4")
            print(run.stdout, end="")
            print(f"(exit {run.returncode})")
        finally:
            subprocess.run([*vedana, "services", "stop"], env=env, capture_output=True)


if __name__ == "__main__":
    main()
