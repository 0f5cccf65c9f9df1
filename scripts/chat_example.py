"""The README's conversation example, produced for real: samples/people synced and indexed on
the embedded services in a temporary VEDANA_HOME, a two-turn `vedana chat` over a pipe (the
follow-up only makes sense with the first turn), then `vedana ask --thread` and `vedana threads`, with the tests' OpenAI-compatible stand-in
(standins/fake_llm.py) playing the model by rule from what it is sent.

    .venv/bin/python scripts/chat_example.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from standins.fake_llm import FakeLLM, answer, tool_calls  # noqa: E402

PEOPLE_OF = "MATCH (p:person)-[:PERSON_has_INTEREST]-(i:interest {{id: '{id}'}}) RETURN p.id AS id, p.person_name AS name ORDER BY name"
IN_CITY = "MATCH (p:person)-[:PERSON_lives_in_CITY]->(c:city {{city_name: '{city}'}}) WHERE p.id IN {ids} RETURN p.id AS id, p.person_name AS name ORDER BY name"
FIRST = "Who is interested in medieval furniture?"
FOLLOW_UP = "Which of them live in Lisbon?"


def _tool_json(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def stand_in(body: dict[str, Any]) -> dict[str, Any]:
    """A model that follows the playbook: find the interest by meaning, list its people; for a
    follow-up, take the people from the previous answer and look up their cities."""
    question = [m.get("content") or "" for m in body["messages"] if m["role"] == "user"][-1]
    results = _tool_json(body)
    if asked := re.fullmatch(r"Who is interested in (.+)\?", question):
        if not results:
            search = {"label": "interest", "property": "interest_name", "text": asked.group(1)}
            return tool_calls(("vector_text_search", search))
        if len(results) == 1:
            return tool_calls(("cypher", {"query": PEOPLE_OF.format(id=results[0]["hits"][0]["node_id"])}))
        rows = results[-1]["rows"]
        names = ", ".join(f"{r['name']} ({r['id']})" for r in rows)
        return answer(f"{len(rows)} people are interested in {asked.group(1)}: {names}.")
    if city := re.fullmatch(r"Which of them live in (.+)\?", question):
        earlier = " ".join(m.get("content") or "" for m in body["messages"] if m["role"] == "assistant")
        ids = sorted(set(re.findall(r"person:\d+", earlier)))
        if not ids:
            return answer("Of whom? Ask about people first.")
        if not results:
            return tool_calls(("cypher", {"query": IN_CITY.format(city=city.group(1), ids=json.dumps(ids))}))
        rows = results[-1]["rows"]
        names = ", ".join(f"{r['name']} ({r['id']})" for r in rows) or "none of them"
        return answer(f"Of those {len(ids)}, in {city.group(1)}: {names}.")
    return answer("The stand-in only knows two questions.")


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="vedana-chat-example-"))
    vedana = [sys.executable, "-m", "vedana"]
    with FakeLLM() as llm:
        llm.agent.append(stand_in)
        env = {k: v for k, v in os.environ.items() if k not in ("DB_CONN_URI", "MEMGRAPH_URI")}
        env.update(VEDANA_HOME=str(home), MODEL=llm.model("stand-in"), VEDANA_LLM_API_BASE=llm.api_base,
                   OPENAI_API_KEY="sk-stand-in", ENABLE_DM_FILTERING="false")  # fmt: skip

        def run(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*vedana, *args], env=env, text=True, capture_output=True, check=True, **kw)

        try:
            people = REPO / "samples" / "people"
            run("sync", "--data-model", str(people / "model"), "--data", str(people / "data"))
            run("index")
            chat = run("chat", input=f"{FIRST}\n{FOLLOW_UP}\n")
            print(f"$ printf '{FIRST}\\n{FOLLOW_UP}\\n' | vedana chat")
            print(chat.stdout + chat.stderr, end="")
            thread = re.search(r"thread: (\w+)", chat.stderr).group(1)  # type: ignore[union-attr]
            follow = run("ask", "Which of them live in Kyoto?", "--thread", thread, "--no-trace")
            print(f'\n$ vedana ask "Which of them live in Kyoto?" --thread {thread} --no-trace')
            print(follow.stdout + follow.stderr, end="")
            listed = run("threads")
            print("\n$ vedana threads")
            print(listed.stdout, end="")
        finally:
            subprocess.run([*vedana, "services", "stop"], env=env, capture_output=True)


if __name__ == "__main__":
    main()
