"""What each README example runs (used by `readme_outputs.py`, which has the machinery).

Three groups, each in its own throwaway home, in order:
- `regulations`: sync, index, search, cypher, ask, runs, check and services status on
  `samples/regulations`;
- `grist`: `samples/people` served by the Grist stand-in, synced over its REST API three times
  (first read, after a small edit, after the server's history was cut short): the `Grist:` lines;
- `people`: `make demo` as itself, then on its home the model tree, a chat, an MCP session, two
  eval runs and `vedana run` after an edit.

The language model is always the scripted stand-in of the tests (`standins/fake_llm.py`, reached
through litellm like any OpenAI-compatible server): the model's moves are scripted (by rule from
what it is sent), everything else (filter, tools, search, Cypher, scores, storage, traces) is
vedana's own.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readme_outputs import CHECKOUT, ROOT, Cli, environ

from standins.fake_llm import FakeLLM, answer, http_error, structured, tool_calls

REGULATIONS = ROOT / "samples" / "regulations"
PEOPLE = ROOT / "samples" / "people"


@dataclass(frozen=True)
class Group:
    blocks: tuple[str, ...]
    make: Callable[[Path], dict[str, str]]


def steady_length(value: Any) -> int:
    """The stand-in's measure of what it is sent: the JSON text without the tool-call ids, which
    it numbers in the order requests arrive (questions run concurrently in `vedana eval`), so its
    token counts are the same on every run."""
    return len(CALL_ID.sub("call_", json.dumps(value)))


CALL_ID = re.compile(r"call_\d+")


def stand_in() -> FakeLLM:
    return FakeLLM(measure=steady_length)


def sources(sample: Path) -> list[str]:
    return ["--data-model", str(sample / "model"), "--data", str(sample / "data")]


def llm_environ(llm: FakeLLM, model: str = "stand-in", **more: str) -> Any:
    return environ(
        MODEL=llm.model(model), VEDANA_LLM_API_BASE=llm.api_base, OPENAI_API_KEY="sk-stand-in", **more
    )


# --- samples/regulations -----------------------------------------------------------------------

SEARCH = ("document_chunk", "document_chunk_text", "fines for late reporting", "--top-n", "3")


def regulations(work: Path) -> dict[str, str]:
    cli = Cli(work / ".vedana", {work: CHECKOUT})
    try:
        return {
            "sync": cli("sync", *sources(REGULATIONS)),
            "index": cli("index"),
            "search": cli("search", *SEARCH, show=True),
            "cypher": cli(
                "cypher",
                "MATCH (d:document)-[:DOCUMENT_covers_REGULATION]->(r:regulation) "
                "RETURN r.regulation_title AS regulation, count(d) AS documents "
                "ORDER BY documents DESC, regulation",
                "--limit",
                "3",
                show=True,
            )
            + "\n"
            + cli("cypher", "MATCH (d:document)-[:COVERS]->(r:regulation) RETURN r.title", show=True)
            + "\n"
            + cli("cypher", "MATCH (d:document) SET d.document_title = 'x'", show=True),
            "ask": ask(cli),
            "runs": cli("runs"),
            "check": cli("check", *sources(REGULATIONS)),
            "services": cli("services", "status"),
        }
    finally:
        cli("services", "stop")


def ask(cli: Cli) -> str:
    """The filter keeps the paragraphs and their documents; the agent searches the paragraphs,
    looks up the best one's document with Cypher, and answers with the paragraph it found, citing it."""

    def results(body: dict) -> list[dict]:
        return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]

    def follow_up(body: dict) -> dict:
        found = results(body)
        chunk = found[0]["hits"][0]
        if len(found) == 1:
            query = (
                f"MATCH (c:document_chunk {{id: '{chunk['node_id']}'}})-[:DOCUMENT_CHUNK_part_of_DOCUMENT]->"
                "(d:document) RETURN d.document_title AS document"
            )
            return tool_calls(("cypher", {"query": query}))
        row = found[-1]["rows"][0]
        document = row["document"] if isinstance(row, dict) else row[0]
        return answer(f"{chunk['value']} {chunk['cite']} (from {document!r})")  # the marker: a cited source

    with stand_in() as llm:
        llm.filter.append(
            structured(
                {
                    "reasoning": "A duty is stated in a document's paragraphs; find the paragraph, then its document.",
                    "anchor_nouns": ["document_chunk", "document", "fine"],
                    "link_sentences": ["DOCUMENT_CHUNK_part_of_DOCUMENT"],
                    "anchor_attribute_names": ["document_chunk_text", "document_title"],
                    "link_attribute_names": [],
                    "query_ids": [],
                }
            )
        )
        search = {"label": "document_chunk", "property": "document_chunk_text", "text": "reporting injuries"}
        llm.agent.append(tool_calls(("vector_text_search", search)))
        llm.agent.append(follow_up)  # a callable answers every later request
        with llm_environ(llm, "gpt-4.1-mini", FILTER_MODEL=llm.model("gpt-4.1-nano")):
            return cli("ask", "When must an employer report a serious injury?", show=True)


# --- the Grist stand-in --------------------------------------------------------------------------


def grist(work: Path) -> dict[str, str]:
    """Three syncs over the REST API of the Grist stand-in serving samples/people; then one after
    `Anchor_interest` was renamed, which the deletion guard refuses."""
    from standins.fake_grist import FakeGrist
    from standins.grist_files import Col, Doc, Table

    def folder_doc(doc_id: str, folder: Path) -> Doc:
        """A CSV folder as a Grist document of Text columns (link cells hold node ids)."""
        tables = []
        for path in sorted(folder.glob("*.csv")):
            with path.open(newline="", encoding="utf-8") as f:
                rows = list(csv.DictReader(f))
            tables.append(Table(path.stem, [Col(c) for c in (rows[0] if rows else {})], rows))
        return Doc(doc_id, tables)

    model, data = folder_doc("peopleModel01", PEOPLE / "model"), folder_doc("peopleData001", PEOPLE / "data")
    people, interests = data.table("Anchor_person"), data.table("Anchor_interest")
    assert people is not None and interests is not None
    cli = Cli(work / ".vedana", {work: CHECKOUT})
    lines = []
    with FakeGrist(model, data) as server:
        settings = {"GRIST_SERVER_URL": server.url, "GRIST_API_KEY": server.api_key or "",
                    "GRIST_DATA_MODEL_DOC_ID": model.doc_id, "GRIST_DATA_DOC_ID": data.doc_id}  # fmt: skip
        with environ(**settings):
            try:
                lines.append(cli("sync"))
                people.rows[4] = {**people.rows[4], "person_age": str(int(people.rows[4]["person_age"]) + 1)}
                interests.rows[9] = {**interests.rows[9], "interest_category": "outdoors"}
                lines.append(cli("sync"))
                people.rows[5] = {**people.rows[5], "person_age": str(int(people.rows[5]["person_age"]) + 1)}
                server.states(data)  # the server records the new state…
                server.forget_history(data.doc_id)  # …and no longer the one the last sync saw
                lines.append(cli("sync"))
                interests.id = "Interests"  # renamed in Grist
                refused = cli("sync", "--quiet")
            finally:
                cli("services", "stop")
    return {
        "grist-changes": "".join(
            line for out in lines for line in out.splitlines(True) if line.startswith("Grist:")
        ),
        "deletion-guard": refused,
    }


# --- samples/people: make demo, then model, chat, mcp, eval, run -------------------------------


def people(work: Path) -> dict[str, str]:
    clone = work / "vedana"
    blocks = {"demo": demo(clone)}
    cli = Cli(clone / ".vedana-demo", {clone: CHECKOUT})
    try:
        with environ(COLUMNS="110"):  # the width of a wide terminal, as the tree is shown
            blocks["model"] = cli("model")
        blocks["chat"] = chat(cli)
        blocks["mcp"] = mcp(cli.home)
        blocks["eval"] = evaluate(cli)
        blocks["run"], blocks["run-unchanged"] = run(cli, work / "edited")
    finally:
        cli("services", "stop")
    return blocks


def demo(clone: Path) -> str:
    """`make demo` as itself: scripts/demo.sh in a copy of its layout (the scripts, the samples and
    `.venv/bin/vedana`), so its state goes to the copy's `.vedana-demo`, not the checkout's."""
    (clone / "scripts").mkdir(parents=True)
    for script in ("demo.sh", "demo_model.py"):
        shutil.copy(ROOT / "scripts" / script, clone / "scripts" / script)
    (clone / "samples").mkdir()
    (clone / "samples" / "people").symlink_to(PEOPLE)
    vedana = clone / ".venv" / "bin" / "vedana"
    vedana.parent.mkdir(parents=True)
    vedana.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m vedana "$@"\n')
    vedana.chmod(0o755)
    run = subprocess.run(
        ["bash", str(clone / "scripts" / "demo.sh")],
        env=demo_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # as a terminal interleaves them
        text=True,
    )
    if run.returncode:
        raise SystemExit(f"make demo failed:\n{run.stdout}")
    return Cli(clone, {clone: CHECKOUT}).shown(run.stdout.lstrip("\n"))


def demo_env() -> dict[str, str]:
    """The environment of a first `make demo`: no model configured and no Ollama to find, so the
    output shows the demo without `vedana ask`, whatever this machine has."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_AUTH_TOKEN"))}
    for name in ("MODEL", "FILTER_MODEL", "VEDANA_LLM_API_BASE"):
        env.pop(name, None)
    return {
        **env,
        "VEDANA": ".venv/bin/vedana",
        "VEDANA_PYTHON": sys.executable,
        "OLLAMA_API_BASE": "http://127.0.0.1:9",
    }


PEOPLE_OF = "MATCH (p:person)-[:PERSON_has_INTEREST]-(i:interest {{id: '{id}'}}) RETURN p.id AS id, p.person_name AS name ORDER BY name"
IN_CITY = "MATCH (p:person)-[:PERSON_lives_in_CITY]->(c:city {{city_name: '{city}'}}) WHERE p.id IN {ids} RETURN p.id AS id, p.person_name AS name ORDER BY name"
FIRST = "Who is interested in medieval furniture?"
FOLLOW_UP = "Which of them live in Lisbon?"


def _tool_json(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def chat_model(body: dict[str, Any]) -> dict[str, Any]:
    """Follows the playbook: find the interest by meaning, list its people; for a follow-up, take
    the people from the previous answer (only the thread's history has them) and look up their city."""
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


def chat(cli: Cli) -> str:
    with stand_in() as llm, llm_environ(llm, ENABLE_DM_FILTERING="false"):
        llm.agent.append(chat_model)
        out = cli("chat", input=f"{FIRST}\n{FOLLOW_UP}\n")
        thread = re.search(r"thread: (\w+)", out)
        assert thread is not None, out
        follow = cli(
            "ask", "Which of them live in Kyoto?", "--thread", thread.group(1), "--no-trace", show=True
        )
        listed = cli("threads", show=True)
    text = f"$ printf '{FIRST}\\n{FOLLOW_UP}\\n' | vedana chat\n{out}\n{follow}\n{listed}"
    return text.replace(thread.group(1), "<thread>")  # a random id


def mcp(home: Path) -> str:
    """`vedana mcp` over stdio, launched by the official MCP client as a desktop assistant does:
    initialize → tools/list → vector_text_search → cypher → a refused write."""
    lines: list[str] = []

    async def session() -> None:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        env = {**os.environ, "VEDANA_HOME": str(home)}
        params = StdioServerParameters(command=sys.executable, args=["-m", "vedana", "mcp"], env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            init = await client.initialize()
            lines.append(f"initialize → {init.server_info.name} {init.server_info.version}")
            tools = await client.list_tools()
            lines.append("tools/list →")
            for tool in tools.tools:
                schema = tool.input_schema["properties"]
                args = ", ".join(
                    f"{k}: {'|'.join(v['enum']) if 'enum' in v else v.get('type', 'any')}"
                    for k, v in schema.items()
                )
                lines.append(f"  {tool.name}({args})  readOnlyHint={tool.annotations.read_only_hint}")
            search = {"label": "interest", "property": "interest_name", "text": "quokkas"}
            result = await client.call_tool("vector_text_search", search)
            hits = json.loads(result.content[0].text)["hits"]
            lines.append(f"vector_text_search({json.dumps(search)}) →")
            lines.extend(f"  {hit['score']:.3f}  {hit['node_id']}  {hit['value']}" for hit in hits[:3])
            query = (
                f"MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest {{id: '{hits[0]['node_id']}'}}) "
                "RETURN p.id AS id, p.person_name AS name ORDER BY name"
            )
            result = await client.call_tool("cypher", {"query": query})
            lines.append(f"cypher({query!r}) →")
            lines.append("  " + result.content[0].text)
            refused = await client.call_tool("cypher", {"query": "MATCH (n) DETACH DELETE n"})
            lines.append(
                f"cypher('MATCH (n) DETACH DELETE n') → isError={refused.is_error}: {refused.content[0].text}"
            )

    asyncio.run(session())
    return "\n".join(lines) + "\n"


# `vedana eval`: question -> (what to search first, or None; the Cypher query, `{id}` the best hit's id)
EVAL_PEOPLE_OF = "MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest {{id: '{id}'}}) RETURN p.person_name AS name ORDER BY name"
COUNT_OF = "MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest {{id: '{id}'}}) RETURN count(p) AS people"
LIVING_IN = "MATCH (p:person)-[:PERSON_lives_in_CITY]->(c:city {{id: '{id}'}}) RETURN count(p) AS people"
AGE = "MATCH (p:person {{id: '{id}'}}) RETURN p.person_age AS age"
BOTH = (
    "MATCH (c:city)<-[:PERSON_lives_in_CITY]-(p:person)-[:PERSON_has_INTEREST]->(i:interest {{id: '{id}'}}) "
    "WHERE c.city_name = '{city}' RETURN p.person_name AS name ORDER BY name"
)


def _person(name: str) -> tuple[str, str, str]:
    return ("person", "person_name", name)


def _interest(name: str) -> tuple[str, str, str]:
    return ("interest", "interest_name", name)


def _city(name: str) -> tuple[str, str, str]:
    return ("city", "city_name", name)


PLAN: dict[str, tuple[tuple[str, str, str] | None, str]] = {
    "How old is Leon Castell?": (_person("Leon Castell"), AGE),
    "How old is Sanna Chowdhury?": (_person("Sanna Chowdhury"), AGE),
    "How old is Jonas Park?": (_person("Jonas Park"), AGE),
    "In which city does Jonas Park live?": (
        _person("Jonas Park"),
        "MATCH (p:person {{id: '{id}'}})-[:PERSON_lives_in_CITY]->(c:city) RETURN c.city_name AS city",
    ),
    "Which country is Porto in?": (
        _city("Porto"),
        "MATCH (c:city {{id: '{id}'}}) RETURN c.city_country AS country",
    ),
    "Who is interested in medieval furniture?": (_interest("medieval furniture"), EVAL_PEOPLE_OF),
    "Who is interested in georgian cooking?": (_interest("georgian cooking"), EVAL_PEOPLE_OF),
    "Who is interested in viking age coins?": (_interest("viking age coins"), EVAL_PEOPLE_OF),
    "Which cities are in Portugal?": (
        None,
        "MATCH (c:city) WHERE c.city_country = 'Portugal' RETURN c.city_name AS city ORDER BY city",
    ),
    "Which interests does Leon Castell have?": (
        _person("Leon Castell"),
        "MATCH (p:person {{id: '{id}'}})-[:PERSON_has_INTEREST]->(i:interest) RETURN i.interest_name AS interest",
    ),
    "How many people are interested in dominoes?": (_interest("dominoes"), COUNT_OF),
    "How many people are interested in meteorology?": (_interest("meteorology"), COUNT_OF),
    "How many people are interested in genetics?": (_interest("genetics"), COUNT_OF),
    "How many people live in Lisbon?": (_city("Lisbon"), LIVING_IN),
    "How many people live in Bologna?": (_city("Bologna"), LIVING_IN),
    "How many people live in Kyoto?": (_city("Kyoto"), LIVING_IN),
    "How many interests are in the science category?": (
        None,
        "MATCH (i:interest {interest_category: 'science'}) RETURN count(i) AS interests",
    ),
    "How many people are mentors?": (
        None,
        "MATCH (p:person {person_is_mentor: true}) RETURN count(p) AS mentors",
    ),
    "Which people interested in storm chasing live in Bologna?": (
        _interest("storm chasing"),
        BOTH.replace("{city}", "Bologna"),
    ),
    "Which people interested in medieval furniture live in Lisbon?": (
        _interest("medieval furniture"),
        BOTH.replace("{city}", "Lisbon"),
    ),
    "Which people interested in conservation of koalas live in Tartu?": (
        _interest("conservation of koalas"),
        BOTH.replace("{city}", "Tartu"),
    ),
    "In which cities do people interested in viking age coins live?": (
        _interest("viking age coins"),
        "MATCH (c:city)<-[:PERSON_lives_in_CITY]-(p:person)-[:PERSON_has_INTEREST]->(i:interest {{id: '{id}'}}) "
        "RETURN DISTINCT c.city_name AS city ORDER BY city",
    ),
}

# Model A's mistakes: a query that cuts the list short, one FalkorDB refuses (no `=~`), a
# miscounted answer; and the question its provider refuses.
A_QUERIES = {
    "Who is interested in viking age coins?": EVAL_PEOPLE_OF + " LIMIT 3",
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


def eval_model(mistakes: bool) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """For each question what a careful model does: a vector search for the name it was given,
    then one Cypher query on the hit's id; it answers with the rows that came back."""

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
    """Passes an answer that holds every golden item (vedana's own item scores decide)."""
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


def evaluate(cli: Cli) -> str:
    out = []
    with stand_in() as llm, llm_environ(llm, ENABLE_DM_FILTERING="false", JUDGE_MODEL=llm.model("judge")):
        llm.judge.append(judge)
        for model, extra, mistakes in (("model-a", [], True), ("model-b", ["--compare-last"], False)):
            llm.agent.clear()
            llm.agent.append(eval_model(mistakes))
            golden = str(PEOPLE / "golden.csv")
            # The summary (stdout); the progress on stderr comes in the order the answers do.
            args = ["--golden", golden, "--model", f"openai/{model}", *extra]
            out.append(cli("eval", *args, show=True, stderr=False))
    return "\n".join(out)


def run(cli: Cli, edited: Path) -> tuple[str, str]:
    """`vedana run` on a copy of samples/people with one member added (with an interest), one
    changed (a year older) and one removed (with their interests)."""
    shutil.copytree(PEOPLE, edited)
    data = edited / "data"
    _edit_csv(data / "Anchor_person.csv", lambda rows: [
        {**r, "person_age": str(int(r["person_age"]) + 1)} if r["person_id"] == "person:0299" else r
        for r in rows if r["person_id"] != "person:0300"
    ] + [{"person_id": "person:0301", "person_name": "Ada Okafor", "person_age": "36", "person_joined": "2026-01-15",
          "person_city": "lisbon", "person_is_mentor": "false"}])  # fmt: skip
    _edit_csv(data / "Link_person_has_interest.csv", lambda rows: [
        r for r in rows if r["from_node_id"] != "person:0300"
    ] + [{"from_node_id": "person:0301", "to_node_id": "interest:0608", "edge_label": "PERSON_has_INTEREST",
          "skill_level": "beginner", "since_year": "2026"}])  # fmt: skip
    return cli("run", *sources(edited)), cli("run", *sources(edited))


def _edit_csv(path: Path, edit: Callable[[list[dict[str, str]]], list[dict[str, str]]]) -> None:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields, rows = list(reader.fieldnames or []), list(reader)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(edit(rows))


GROUPS = {
    "regulations": Group(
        ("sync", "index", "search", "cypher", "ask", "runs", "check", "services"), regulations
    ),
    "grist": Group(("grist-changes", "deletion-guard"), grist),
    "people": Group(("demo", "model", "chat", "mcp", "eval", "run", "run-unchanged"), people),
}
