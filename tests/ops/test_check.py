"""`vedana check`: connectivity, consistency (planted behind the tool's back), smoke with the
scripted LLM server, severities, and the CLI's exit codes and JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ops_kb import BASE_EDGES, BASE_NODES, KB, stable
from pydantic import SecretStr
from sqlalchemy import Engine
from typer.testing import CliRunner

from standins.fake_grist import FakeGrist
from standins.fake_llm import FakeLLM, answer, http_error, tool_calls
from support.sync_kb import API_KEY, club_data, club_model, grist_settings
from vedana.cli.app import app
from vedana.config import Settings
from vedana.errors import VedanaError
from vedana.etl.sync import sync
from vedana.ops.check import check
from vedana.ops.run import run
from vedana.problems import CheckReport, Problem
from vedana.stores.graph import GraphStore
from vedana.stores.vectors import MODEL_STATE_KEY, NODE_TABLE


@pytest.fixture
def indexed(ops_settings: Settings, blank_kb: Engine, kb_dirs: tuple[Path, Path]) -> Settings:
    """The base knowledge base synced and indexed with the hash embedder."""
    model, data = kb_dirs
    assert run(ops_settings, data_model=model, data=data, wait=0).status == "updated"
    return ops_settings


def problems(report: CheckReport, section: str | None = None) -> list[tuple[str, str, dict[str, str]]]:
    found: list[Problem] = report.problems if section is None else report.sections[section].problems
    return sorted(
        ((p.severity, p.code, p.where) for p in found), key=lambda f: (f[0], f[1], sorted(f[2].items()))
    )


# --- a clean knowledge base ------------------------------------------------------------------------


def test_a_synced_and_indexed_knowledge_base_passes(indexed: Settings, kb_dirs: tuple[Path, Path]) -> None:
    model, data = kb_dirs
    report = check(indexed, data_model=model, data=data)

    assert report.ok and report.problems == []
    statuses = {name: s.status() for name, s in report.sections.items()}
    assert statuses == {"connectivity": "ok", "lint": "ok", "consistency": "ok", "smoke": "skipped"}
    checks = report.sections["connectivity"].details["checks"]
    assert [c["name"] for c in checks] == ["postgres", "pgvector", "graph", "embeddings"]
    assert all(c["ok"] for c in checks)
    consistency = report.sections["consistency"].details
    assert consistency["graph"] == consistency["staging"] == {"nodes": BASE_NODES, "edges": BASE_EDGES}


def test_other_data_on_a_shared_graph_is_not_counted(indexed: Settings, graph: GraphStore) -> None:
    from vedana.ops.status import knowledge_base
    from vedana.stores.postgres import get_engine

    graph.query("CREATE (:Invoice {id: 'i1'})-[:BILLS]->(:Customer {id: 'c1'})")  # another application's

    report = check(indexed, only=["consistency"])
    assert report.ok and report.problems == []
    assert report.sections["consistency"].details["graph"] == {"nodes": BASE_NODES, "edges": BASE_EDGES}
    assert knowledge_base(indexed, get_engine(indexed), graph)["graph"] == {
        "nodes": BASE_NODES,
        "edges": BASE_EDGES,
    }


# --- consistency failures planted behind the tool's back -----------------------------------------------


def test_graph_nodes_deleted_behind_its_back(indexed: Settings, graph: GraphStore, blank_kb: Engine) -> None:
    graph.query("MATCH (p:person {id: 'p3'}) DETACH DELETE p")

    report = check(indexed, only=["consistency"])

    assert not report.ok
    assert problems(report) == [
        ("error", "consistency.graph-edges", {"link": "PERSON_lives_in_CITY"}),
        ("error", "consistency.graph-nodes", {"type": "person"}),
    ]
    [nodes] = [p for p in report.problems if p.code == "consistency.graph-nodes"]
    assert "holds 2 person nodes but staging has 3" in nodes.message
    assert "vedana index --full" in nodes.message

    # The fix the message names repairs it.
    from vedana.etl.index import index

    index(indexed, full=True, engine=blank_kb, graph=graph)
    assert check(indexed, only=["consistency"]).ok


def test_vectors_of_another_configured_model(indexed: Settings) -> None:
    report = check(indexed.model_copy(update={"embeddings_model": "hash-256"}), only=["consistency"])

    assert problems(report) == [("error", "consistency.vector-model", {"model": "hash-384"})]
    [problem] = report.problems
    assert "made with hash-384 (384 dimensions)" in problem.message
    assert "configured model is hash-256 (256 dimensions)" in problem.message


def test_vectors_recorded_as_another_model_behind_its_back(indexed: Settings, blank_kb: Engine) -> None:
    with blank_kb.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE vedana_state SET value = %(v)s WHERE key = %(k)s",
            {"v": json.dumps({"model": "text-embedding-3-small", "dim": 384}), "k": MODEL_STATE_KEY},
        )

    report = check(indexed, only=["consistency"])

    assert problems(report) == [("error", "consistency.vector-model", {"model": "text-embedding-3-small"})]


def test_a_vector_table_of_another_dimension(indexed: Settings, blank_kb: Engine) -> None:
    with blank_kb.begin() as conn:
        conn.exec_driver_sql(f"DELETE FROM {NODE_TABLE}")
        conn.exec_driver_sql(f"ALTER TABLE {NODE_TABLE} ALTER COLUMN embedding TYPE vector(8)")

    report = check(indexed, only=["consistency"])

    codes = {(code, where.get("table", where.get("type"))) for _, code, where in problems(report)}
    assert ("consistency.vector-dimension", NODE_TABLE) in codes
    assert ("consistency.vector-count", "person") in codes and ("consistency.vector-count", "city") in codes


def test_missing_orphan_and_stale_vectors(indexed: Settings, blank_kb: Engine) -> None:
    with blank_kb.begin() as conn:
        conn.exec_driver_sql(f"DELETE FROM {NODE_TABLE} WHERE node_type = 'city' AND node_id = 'porto'")
        conn.exec_driver_sql(
            f"INSERT INTO {NODE_TABLE} SELECT 'p9', node_type, attribute_name, attribute_value, embedding, "
            f"text_hash FROM {NODE_TABLE} WHERE node_id = 'p1' AND attribute_name = 'person_name'"
        )
        conn.exec_driver_sql(f"UPDATE {NODE_TABLE} SET attribute_value = 'Old Name' WHERE node_id = 'p2'")

    report = check(indexed, only=["consistency"])

    person, city = {"type": "person", "attribute": "person_name"}, {"type": "city", "attribute": "city_name"}
    assert problems(report) == [
        ("error", "consistency.orphan-vectors", person),
        ("error", "consistency.stale-vectors", person),
        ("error", "consistency.vector-count", city),
        ("error", "consistency.vector-count", person),
    ]


def test_staging_ahead_of_the_index_is_a_warning(
    indexed: Settings, kb: KB, kb_dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    kb.set_cell(kb.data, "Anchor_person", 1, "person_name", "Ada Renamed")
    model, data = kb.write(tmp_path / "kb")
    sync(indexed, data_model=model, data=data)

    report = check(indexed, only=["consistency"])

    assert problems(report) == [
        ("warning", "consistency.index-pending", {"target": "graph"}),
        ("warning", "consistency.index-pending", {"target": "vectors"}),
    ]
    assert report.ok  # warnings report...
    assert not check(indexed, only=["consistency"], strict=True).ok  # ...and fail only when strict


def test_an_index_that_keeps_failing_fails_the_check(
    ops_env: None, indexed: Settings, kb: KB, kb_dirs: tuple[Path, Path], tmp_path: Path, monkeypatch
) -> None:
    """Staging ahead because the last index failed (here: the graph was unreachable) is an error,
    not a pending update; a successful index clears it."""
    from vedana.etl.index import index

    kb.set_cell(kb.data, "Anchor_person", 1, "person_name", "Ada Renamed")
    model, data = kb.write(tmp_path / "kb")
    sync(indexed, data_model=model, data=data)
    with pytest.raises(VedanaError):
        index(indexed.model_copy(update={"memgraph_uri": "bolt://127.0.0.1:1"}))

    report = check(indexed, only=["consistency"])
    assert problems(report) == [
        ("error", "consistency.index-failing", {"target": "graph"}),
        ("error", "consistency.index-failing", {"target": "vectors"}),
    ]
    assert not report.ok
    result = invoke("check", "--only", "consistency")
    assert result.exit_code == 1, result.output
    assert "last index run failed" in result.stdout and "check failed" in result.stdout

    index(indexed)
    assert check(indexed, only=["consistency"]).ok


def test_consistency_is_skipped_before_the_first_sync(ops_settings: Settings, blank_kb: Engine) -> None:
    report = check(ops_settings, only=["consistency"])

    assert report.sections["consistency"].status() == "skipped"
    assert "vedana sync" in (report.sections["consistency"].skipped or "")
    assert report.ok


# --- connectivity ---------------------------------------------------------------------------------


def test_unreachable_postgres_is_an_error_without_its_password(ops_settings: Settings) -> None:
    settings = ops_settings.model_copy(
        update={"db_conn_uri": SecretStr("postgresql://vedana:pw-9d8c7b6a@127.0.0.1:1/kb")}
    )

    report = check(settings, only=["connectivity", "consistency"])

    assert ("error", "connectivity.postgres", {"service": "postgres"}) in problems(report)
    assert report.sections["consistency"].status() == "skipped"
    assert [p.code for p in report.problems].count("connectivity.postgres") == 1  # reported once
    assert "pw-9d8c7b6a" not in json.dumps(report.to_dict())
    assert "DB_CONN_URI" in report.problems[0].message


def test_unreachable_graph_is_an_error_and_consistency_still_compares_vectors(indexed: Settings) -> None:
    settings = indexed.model_copy(update={"memgraph_uri": "bolt://127.0.0.1:1"})

    report = check(settings, only=["connectivity", "consistency"])

    assert problems(report) == [("error", "connectivity.graph", {"service": "graph"})]  # once
    assert "MEMGRAPH_URI" in report.problems[0].message
    consistency = report.sections["consistency"].details
    assert consistency["graph"] == "not compared: the graph is not reachable"
    assert consistency["vectors"]["nodes"] == {"city.city_name": 2, "person.person_name": 3}


def test_a_broken_embedding_model_setting(ops_settings: Settings) -> None:
    report = check(ops_settings.model_copy(update={"embeddings_model": "hash-x"}), only=["connectivity"])

    assert problems(report) == [("error", "connectivity.embeddings", {"service": "embeddings"})]
    assert "hash-<dim>" in report.problems[0].message


@pytest.mark.slow
def test_the_bundled_embedding_model_embeds_one_text(settings: Settings, pg_engine: Engine) -> None:
    report = check(settings, only=["connectivity"])

    embeddings = next(
        c for c in report.sections["connectivity"].details["checks"] if c["name"] == "embeddings"
    )
    assert embeddings == {**embeddings, "ok": True, "detail": "all-MiniLM-L6-v2 embeds (384 dimensions)"}


def test_grist_is_probed_when_configured(ops_settings: Settings) -> None:
    with FakeGrist(club_model(), club_data(), api_key=API_KEY) as grist:
        good = check(grist_settings(ops_settings, grist.url), only=["connectivity"])
        bad = check(grist_settings(ops_settings, grist.url, key="wrong-key-5e6f7a8b"), only=["connectivity"])
        states = grist.paths("/states")

    grist_check = next(c for c in good.sections["connectivity"].details["checks"] if c["name"] == "grist")
    assert grist_check["ok"] and "data model, data document(s) readable" in grist_check["detail"]
    assert len(states) == 2 + 1  # one cheap GET per document, then the bad key's first one
    assert problems(bad) == [("error", "connectivity.grist", {"service": "grist"})]
    assert "GRIST_API_KEY" in bad.problems[0].message
    assert "wrong-key-5e6f7a8b" not in json.dumps(bad.to_dict())


def test_the_llm_is_called_only_when_asked(ops_settings: Settings, fake_llm: FakeLLM) -> None:
    settings = llm_settings(ops_settings, fake_llm)
    fake_llm.agent.append(answer("OK"))

    without = check(settings, only=["connectivity"])
    assert fake_llm.requests == []

    report = check(settings, only=["connectivity"], llm=True)

    llm = next(c for c in report.sections["connectivity"].details["checks"] if c["name"].startswith("llm"))
    assert llm["ok"] and "answered 'OK'" in llm["detail"]
    assert len(fake_llm.requests) == 1 and without.ok and report.ok


def test_an_llm_that_refuses_the_key_fails_the_check(ops_settings: Settings, fake_llm: FakeLLM) -> None:
    fake_llm.agent.append(http_error(401, "Incorrect API key provided"))

    report = check(llm_settings(ops_settings, fake_llm), only=["connectivity"], llm=True)

    assert problems(report) == [("error", "connectivity.llm", {"service": f"llm {fake_llm.model('agent')}"})]
    assert "rejected the API key" in report.problems[0].message


# --- smoke ----------------------------------------------------------------------------------------


def llm_settings(settings: Settings, fake_llm: FakeLLM) -> Settings:
    return settings.model_copy(
        update={
            "model": fake_llm.model("agent"),
            "llm_api_base": fake_llm.api_base,
            "enable_dm_filtering": False,
        }
    )


CITY_OF_ADA = "MATCH (:person {id: 'p1'})-[:PERSON_lives_in_CITY]->(c:city) RETURN c.city_name AS city"


def script_city_question(fake_llm: FakeLLM) -> None:
    """The model looks Ada's city up in the real graph, then answers from the tool result."""

    def from_tool_result(body: dict[str, Any]) -> dict[str, Any]:
        result = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "tool")
        city = "Lisbon" if "Lisbon" in result else "somewhere unknown"
        return answer(f"Ada Okafor lives in {city}.")

    fake_llm.agent.append(tool_calls(("cypher", {"query": CITY_OF_ADA})))
    fake_llm.agent.append(from_tool_result)


def test_smoke_passes_when_the_answer_contains_the_expected_text(
    indexed: Settings, fake_llm: FakeLLM
) -> None:
    script_city_question(fake_llm)

    report = check(
        llm_settings(indexed, fake_llm), only=["smoke"], ask="Where does Ada live?", expect="LISBON"
    )

    assert report.ok, report.problems
    details = report.sections["smoke"].details
    assert details["answer"] == "Ada Okafor lives in Lisbon." and details["tool_calls"] == 1


def test_smoke_fails_when_the_answer_lacks_the_expected_text(
    indexed: Settings, fake_llm: FakeLLM, graph: GraphStore
) -> None:
    graph.query("MATCH (:person {id: 'p1'})-[r:PERSON_lives_in_CITY]->() DELETE r")
    script_city_question(fake_llm)

    report = check(
        llm_settings(indexed, fake_llm), only=["smoke"], ask="Where does Ada live?", expect="Lisbon"
    )

    assert problems(report) == [("error", "smoke.unexpected-answer", {"question": "Where does Ada live?"})]
    assert "somewhere unknown" in report.problems[0].message


def test_smoke_fails_when_the_agent_fails(indexed: Settings, fake_llm: FakeLLM) -> None:
    fake_llm.agent.append(http_error(500, "model overloaded"))

    report = check(llm_settings(indexed, fake_llm), only=["smoke"], ask="Where does Ada live?")

    assert problems(report) == [("error", "smoke.failed", {"question": "Where does Ada live?"})]


def test_smoke_fails_when_the_agent_finds_nothing(indexed: Settings, fake_llm: FakeLLM) -> None:
    fake_llm.agent.append(answer(""))

    report = check(llm_settings(indexed, fake_llm), only=["smoke"], ask="Where does Ada live?")

    assert problems(report) == [("error", "smoke.no-answer", {"question": "Where does Ada live?"})]


# --- the CLI --------------------------------------------------------------------------------------


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_cli_json_is_the_library_report(ops_env: None, indexed: Settings, kb_dirs: tuple[Path, Path]) -> None:
    model, data = kb_dirs
    cli = invoke("check", "--data-model", str(model), "--data", str(data), "--json")
    library = check(indexed, data_model=str(model), data=str(data))

    assert cli.exit_code == 0, cli.output
    assert stable(json.loads(cli.stdout)) == stable(library.to_dict())


def test_cli_exit_codes_follow_severity(ops_env: None, indexed: Settings, kb: KB, tmp_path: Path) -> None:
    kb.add_column(kb.data, "Anchor_person", "person_nickname", ["ada", "bo", "cy"])  # a warning
    model, data = kb.write(tmp_path / "warn")
    args = ["check", "--only", "lint", "--data-model", str(model), "--data", str(data)]

    warned = invoke(*args)
    strict = invoke(*args, "--strict")

    assert warned.exit_code == 0, warned.output
    assert strict.exit_code == 1
    kb.model["Anchor_attributes"].append(["person", "person_email", "", "", "false", "", "str"])  # an error
    model, data = kb.write(tmp_path / "error")
    failed = invoke("check", "--only", "lint", "--data-model", str(model), "--data", str(data))
    assert failed.exit_code == 1
    assert failed.stdout.splitlines() == [
        "lint: failed",
        "  error lint.missing-attribute-column [Anchor_person.person_email] attribute person_email of person "
        "is described but Anchor_person has no such column; add the column or delete the attribute from "
        "Anchor_attributes",
        "  warning lint.undescribed-column [Anchor_person.person_nickname] Anchor_person.person_nickname is "
        "not described in Anchor_attributes, so it never reaches the graph; describe it or delete the column",
        failed.stdout.splitlines()[-1],
    ]
    assert failed.stdout.splitlines()[-1].startswith("check failed: 1 error(s), 1 warning(s) in ")


def test_cli_graph_deleted_behind_its_back_exits_1(
    ops_env: None, indexed: Settings, graph: GraphStore
) -> None:
    graph.query("MATCH (c:city {id: 'porto'}) DETACH DELETE c")

    result = invoke("check", "--only", "consistency", "--json")

    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert [p["code"] for p in report["problems"]] == ["consistency.graph-nodes", "consistency.graph-edges"]
    assert report["problems"][0]["where"] == {"type": "city"}


def test_cli_expect_needs_a_question(ops_env: None) -> None:
    result = invoke("check", "--expect", "Lisbon")

    assert result.exit_code == 2
    assert "--ask" in result.output


def test_cli_lint_without_a_source_says_what_to_give_once(ops_env: None) -> None:
    result = invoke("check", "--only", "lint")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (
        "lint: skipped: no data model source: pass --data-model (a folder, a .grist file or a document id) "
        "or set GRIST_DATA_MODEL_DOC_ID and GRIST_SERVER_URL"
    )
