"""`ask --json` sources: every node the tools returned, numbered; the cited ones flagged; each
with where its row lives — a CSV line, or a Grist row whose link opens that row; a made-up
marker is flagged in the trace and never listed."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import requests

from standins.fake_grist import FakeGrist
from standins.fake_llm import FakeLLM, answer, tool_calls
from support.sync_kb import API_KEY, DATA_DOC_ID, club_data, club_model, grist_settings
from vedana.agent import ask
from vedana.config import Settings
from vedana.stores.graph import GraphStore


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def test_sources_of_an_answer_on_the_people_sample_name_their_csv_lines(
    agent_settings: Settings, fake_llm: FakeLLM, people_sample: Path
) -> None:
    def agent(body: dict[str, Any]) -> dict[str, Any]:
        results = _tool_results(body)
        if not results:
            return tool_calls(
                ("vector_text_search", {"label": "interest", "property": "interest_name", "text": "quokkas"})
            )
        if len(results) == 1:
            hit = results[0]["hits"][0]
            query = (
                "MATCH (p:person)-[:PERSON_has_INTEREST]-(i:interest {id: '" + hit["node_id"] + "'}) "
                "RETURN p.id AS id, p.person_name AS name ORDER BY id"
            )
            return tool_calls(("cypher", {"query": query}))
        hit, rows = results[0]["hits"][0], results[1]["rows"]
        people = ", ".join(f"{r['name']} {r['cite']}" for r in rows)
        return answer(f"Interested in {hit['value']} {hit['cite']}: {people}. See also [99].")

    fake_llm.agent.append(agent)
    settings = agent_settings.model_copy(update={"enable_dm_filtering": False})
    result = ask(settings, "Who is interested in quokkas?").to_dict()

    sources = result["sources"]
    cited = [s for s in sources if s["cited"]]
    assert {s["label"] for s in cited} == {"interest", "person"}
    assert all(s["marker"] in result["answer"] for s in cited)
    assert not [
        s for s in sources if not s["cited"] and s["label"] == "person"
    ]  # every person shown was cited
    for source in cited:
        row = source["row"]
        path = Path(row["file"])
        assert (
            path.name == f"Anchor_{source['label']}.csv" and path.parent == (people_sample / "data").resolve()
        )
        lines = path.read_text(encoding="utf-8").splitlines()
        [record] = csv.reader([lines[row["line"] - 1]])  # the named line holds that node's row
        assert record[0] == source["id"]
    assert result["trace"]["unknown_markers"] == ["[99]"]
    assert "[99]" not in [s["marker"] for s in sources]


def test_sources_synced_from_a_grist_server_link_to_their_rows(
    agent_settings: Settings, fake_llm: FakeLLM, graph: GraphStore, pg_engine, local_embedder
) -> None:
    from vedana.etl.index import index
    from vedana.etl.sync import sync

    with FakeGrist(club_model(), club_data(), api_key=API_KEY) as grist:
        settings = grist_settings(agent_settings, grist.url).model_copy(update={"enable_dm_filtering": False})
        sync(settings, full=True, allow_deletions=True)  # replaces what other tests left in staging
        index(settings, full=True, engine=pg_engine, graph=graph, embedder=local_embedder)

        def agent(body: dict[str, Any]) -> dict[str, Any]:
            results = _tool_results(body)
            if not results:
                return tool_calls(
                    ("cypher", {"query": "MATCH (p:person) RETURN p ORDER BY p.id"}),
                    (
                        "cypher",
                        {
                            "query": "MATCH (i:interest) RETURN i.id AS id, i.interest_name AS name ORDER BY id"
                        },
                    ),
                )
            people, interests = results[0]["rows"], results[1]["rows"]
            return answer(
                f"Ada {people[0]['cite']} and Cy {people[-1]['cite']} like {interests[0]['name']} {interests[0]['cite']}."
            )

        fake_llm.agent.append(agent)
        result = ask(settings, "Who likes chess?").to_dict()
        cited = {(s["label"], s["id"]): s["row"] for s in result["sources"] if s["cited"]}
        assert set(cited) == {("person", "p1"), ("person", "p3"), ("interest", "interest:1")}
        # p1's first row wins (row 4 repeats its id); interest ids are row ids.
        assert {k: v["row_id"] for k, v in cited.items()} == {
            ("person", "p1"): 1,
            ("person", "p3"): 6,
            ("interest", "interest:1"): 1,
        }
        db = grist.sqlite(grist.docs[DATA_DOC_ID])
        headers = {"Authorization": f"Bearer {API_KEY}"}
        for (label, node_id), row in cited.items():
            assert row["document"] == DATA_DOC_ID and row["table"] == f"Anchor_{label}"
            page, anchor = row["url"].removeprefix(f"{grist.url}/doc/{DATA_DOC_ID}/p/").split("#")
            section, row_id = anchor.removeprefix("a1.s").split(".r")
            # The link's page and section show that table, and its row is the node's row.
            [(table,)] = db.execute(
                "SELECT t.tableId FROM _grist_Views_section s JOIN _grist_Tables t ON t.id = s.tableRef "
                "WHERE s.id = ? AND s.parentId = ?",
                (int(section), int(page)),
            ).fetchall()
            assert table == f"Anchor_{label}"
            records = requests.get(
                f"{grist.url}/api/docs/{DATA_DOC_ID}/tables/{table}/records", headers=headers, timeout=10
            ).json()["records"]
            record = next(r for r in records if r["id"] == int(row_id))
            if label == "person":
                assert record["fields"]["person_id"] == node_id
            else:  # Anchor_interest has no id column: the id is the row id
                assert node_id == f"interest:{record['id']}"
