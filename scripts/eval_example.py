"""The README's `vedana eval` example, produced for real on samples/people and its 22-question
golden set (samples/people/golden.csv).

The tests' OpenAI-compatible stand-in (standins/fake_llm.py) plays the models, by rule: for
each question it makes the moves a careful model would — a vector search for the name it was
given, then one Cypher query anchored on the hit's id — and answers with the rows that came
back. Everything between is vedana's own: the agent loop, the local embeddings, pgvector,
FalkorDB, scoring, storage and the summary. Model A makes three realistic mistakes (a LIMIT
that cuts a list short, a query FalkorDB cannot run, a miscounted answer) and one question is
refused by its provider; model B makes none of them. The judge passes an answer that has every
golden item.

    .venv/bin/python scripts/eval_example.py      # prints both runs as the README shows them
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))

from standins.fake_llm import FakeLLM, answer, http_error, structured, tool_calls  # noqa: E402

PEOPLE_OF = "MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest {{id: '{id}'}}) RETURN p.person_name AS name ORDER BY name"
COUNT_OF = "MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest {{id: '{id}'}}) RETURN count(p) AS people"
LIVING_IN = "MATCH (p:person)-[:PERSON_lives_in_CITY]->(c:city {{id: '{id}'}}) RETURN count(p) AS people"
AGE = "MATCH (p:person {{id: '{id}'}}) RETURN p.person_age AS age"
BOTH = (
    "MATCH (c:city)<-[:PERSON_lives_in_CITY]-(p:person)-[:PERSON_has_INTEREST]->(i:interest {{id: '{id}'}}) "
    "WHERE c.city_name = '{city}' RETURN p.person_name AS name ORDER BY name"
)


def person(name: str) -> tuple[str, str, str]:
    return ("person", "person_name", name)


def interest(name: str) -> tuple[str, str, str]:
    return ("interest", "interest_name", name)


def city(name: str) -> tuple[str, str, str]:
    return ("city", "city_name", name)


# question -> (what to search first, or None; the Cypher query, `{id}` being the best hit's id)
PLAN: dict[str, tuple[tuple[str, str, str] | None, str]] = {
    "How old is Leon Castell?": (person("Leon Castell"), AGE),
    "How old is Sanna Chowdhury?": (person("Sanna Chowdhury"), AGE),
    "How old is Jonas Park?": (person("Jonas Park"), AGE),
    "In which city does Jonas Park live?": (
        person("Jonas Park"),
        "MATCH (p:person {{id: '{id}'}})-[:PERSON_lives_in_CITY]->(c:city) RETURN c.city_name AS city",
    ),
    "Which country is Porto in?": (
        city("Porto"),
        "MATCH (c:city {{id: '{id}'}}) RETURN c.city_country AS country",
    ),
    "Who is interested in medieval furniture?": (interest("medieval furniture"), PEOPLE_OF),
    "Who is interested in georgian cooking?": (interest("georgian cooking"), PEOPLE_OF),
    "Who is interested in viking age coins?": (interest("viking age coins"), PEOPLE_OF),
    "Which cities are in Portugal?": (
        None,
        "MATCH (c:city) WHERE c.city_country = 'Portugal' RETURN c.city_name AS city ORDER BY city",
    ),
    "Which interests does Leon Castell have?": (
        person("Leon Castell"),
        "MATCH (p:person {{id: '{id}'}})-[:PERSON_has_INTEREST]->(i:interest) RETURN i.interest_name AS interest",
    ),
    "How many people are interested in dominoes?": (interest("dominoes"), COUNT_OF),
    "How many people are interested in meteorology?": (interest("meteorology"), COUNT_OF),
    "How many people are interested in genetics?": (interest("genetics"), COUNT_OF),
    "How many people live in Lisbon?": (city("Lisbon"), LIVING_IN),
    "How many people live in Bologna?": (city("Bologna"), LIVING_IN),
    "How many people live in Kyoto?": (city("Kyoto"), LIVING_IN),
    "How many interests are in the science category?": (
        None,
        "MATCH (i:interest {interest_category: 'science'}) RETURN count(i) AS interests",
    ),
    "How many people are mentors?": (
        None,
        "MATCH (p:person {person_is_mentor: true}) RETURN count(p) AS mentors",
    ),
    "Which people interested in storm chasing live in Bologna?": (
        interest("storm chasing"),
        BOTH.replace("{city}", "Bologna"),
    ),
    "Which people interested in medieval furniture live in Lisbon?": (
        interest("medieval furniture"),
        BOTH.replace("{city}", "Lisbon"),
    ),
    "Which people interested in conservation of koalas live in Tartu?": (
        interest("conservation of koalas"),
        BOTH.replace("{city}", "Tartu"),
    ),
    "In which cities do people interested in viking age coins live?": (
        interest("viking age coins"),
        "MATCH (c:city)<-[:PERSON_lives_in_CITY]-(p:person)-[:PERSON_has_INTEREST]->(i:interest {{id: '{id}'}}) "
        "RETURN DISTINCT c.city_name AS city ORDER BY city",
    ),
}

# Model A's mistakes: a query that cuts the list short, one FalkorDB refuses (no `=~`), a
# miscounted answer; and the question its provider refuses.
A_QUERIES = {
    "Who is interested in viking age coins?": PEOPLE_OF + " LIMIT 3",
    "In which cities do people interested in viking age coins live?": (
        "MATCH (c:city)<-[:PERSON_lives_in_CITY]-(p:person)-[:PERSON_has_INTEREST]->(i:interest) "
        "WHERE i.interest_name =~ '(?i)viking.*' RETURN DISTINCT c.city_name AS city"
    ),
}
A_ANSWERS = {"How many people live in Kyoto?": "11 people live in Kyoto."}
A_REFUSED = "How many people are mentors?"


def _results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) if m["content"].startswith("{") else {"error": m["content"]}
            for m in body["messages"] if m["role"] == "tool"]  # fmt: skip


def _from_rows(result: dict[str, Any]) -> str:
    if "error" in result:
        return "I could not look that up: the query failed."
    rows = result.get("rows") or []
    if not rows:
        return "I found nothing."
    values = [" ".join(str(row[c]) for c in result["columns"]) for row in rows]
    if len(values) == 1:
        return f"{values[0]}."
    return ", ".join(values[:-1]) + f" and {values[-1]}."


def agent(mistakes: bool) -> Any:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        question = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if mistakes and question == A_REFUSED:
            return http_error(400, "the provider refused this request")
        search, query = PLAN[question]
        if mistakes:
            query = A_QUERIES.get(question, query)
        found = _results(body)
        if search is not None and not found:
            label, prop, text = search
            return tool_calls(("vector_text_search", {"label": label, "property": prop, "text": text}))
        if len(found) == (search is not None):
            hit = found[0]["hits"][0]["node_id"] if search is not None else ""
            return tool_calls(("cypher", {"query": query.format(id=hit) if search is not None else query}))
        return answer((mistakes and A_ANSWERS.get(question)) or _from_rows(found[-1]))

    return reply


def judge(body: dict[str, Any]) -> dict[str, Any]:
    from vedana.eval.score import item_scores

    prompt = body["messages"][-1]["content"]
    expected = (
        prompt.split("Expected answer (the facts that must be there):", 1)[1].split("\n\n", 1)[0].strip()
    )
    given = prompt.split("The assistant's answer:", 1)[1].split("\n\nPass it when", 1)[0].strip()
    score = item_scores(expected, given)
    comment = f"misses {', '.join(score.missing)}" if score.missing else "every expected item is there"
    return structured({"verdict": "fail" if score.missing else "pass",
                       "rating": round(10 * score.recall), "comment": comment})  # fmt: skip


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="vedana-eval-example-"))
    with FakeLLM() as llm:
        llm.judge.append(judge)
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        for name in ("DB_CONN_URI", "MEMGRAPH_URI", "JUDGE_MODEL", "FILTER_MODEL", "EMBEDDINGS_MODEL"):
            env.pop(name, None)
        env.update(VEDANA_HOME=str(home), VEDANA_LLM_API_BASE=llm.api_base, OPENAI_API_KEY="sk-stand-in",
                   ENABLE_DM_FILTERING="false", JUDGE_MODEL=llm.model("judge"), PYTHONPATH=str(REPO / "src"))  # fmt: skip
        vedana = [sys.executable, "-m", "vedana"]
        people = REPO / "samples" / "people"
        try:
            subprocess.run([*vedana, "sync", "--data-model", str(people / "model"), "--data", str(people / "data")],
                           env=env, check=True, capture_output=True)  # fmt: skip
            subprocess.run([*vedana, "index"], env=env, check=True, capture_output=True)
            for model, extra, mistakes in (("model-a", [], True), ("model-b", ["--compare-last"], False)):
                llm.agent.clear()
                llm.agent.append(agent(mistakes))
                args = ["eval", "--golden", "samples/people/golden.csv", "--model", f"openai/{model}", *extra]
                run = subprocess.run([*vedana, *args], env=env, capture_output=True, text=True, cwd=REPO)
                print(f"$ vedana {' '.join(args)}")
                print(run.stdout, end="")
                if run.returncode:
                    print(run.stderr, end="", file=sys.stderr)
                print()
        finally:
            subprocess.run([*vedana, "services", "stop"], env=env, capture_output=True)


if __name__ == "__main__":
    main()
