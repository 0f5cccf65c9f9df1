"""The schema check where Cypher comes in: the agent's tool (an error the model reads), `vedana
cypher` (exit 1, one line), both against the whole data model and the graph's own names."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from vedana.agent.tools import Toolbox
from vedana.cli.app import app
from vedana.config import Settings, reset_settings
from vedana.datamodel import DataModel
from vedana.errors import CypherSchemaMismatch
from vedana.stores.graph import GraphStore

WRONG_CASE = "MATCH (p:person)-[:LIKES]->(a:Animal) RETURN p.name"
REFUSAL = "refused before running: unknown label `person` (did you mean `Person`?)"


def run_cypher_tool(box: Toolbox, query: str):
    return box.run("cypher", json.dumps({"query": query}), index=0, round_=1)


def test_the_agents_tool_returns_the_refusal_for_the_model_to_correct(
    settings: Settings, graph: GraphStore, kb: DataModel
) -> None:
    box = Toolbox(settings, kb, graph, vector_search=None)
    text, trace = run_cypher_tool(box, WRONG_CASE)
    assert text == f"error: {REFUSAL}"
    assert trace.error == REFUSAL and trace.rows is None

    text, trace = run_cypher_tool(box, WRONG_CASE.replace(":person", ":Person"))
    assert json.loads(text)["row_count"] == 5 and trace.error is None


def test_the_check_uses_the_whole_data_model_not_the_agents_slice(
    settings: Settings, graph: GraphStore, kb: DataModel
) -> None:
    animals_only = DataModel(anchors=[kb.anchor("Animal")])  # type: ignore[list-item]
    box = Toolbox(settings, animals_only, graph, vector_search=None, fallback_dm=kb)
    text, trace = run_cypher_tool(box, "MATCH (p:Person)-[:LIKES]->(a:Animal) RETURN count(p) AS n")
    assert trace.error is None and json.loads(text)["rows"] == [{"n": 5}]


def test_labels_only_the_graph_holds_are_known(settings: Settings, graph: GraphStore, kb: DataModel) -> None:
    graph.query("CREATE (:Visitor {id: 'v1', badge: 7})")
    box = Toolbox(settings, kb, graph, vector_search=None)
    text, trace = run_cypher_tool(box, "MATCH (v:Visitor) RETURN v.badge AS badge")
    assert trace.error is None and json.loads(text)["rows"] == [{"badge": 7}]
    _, trace = run_cypher_tool(box, "MATCH (v:visitor) RETURN v")
    assert trace.error == "refused before running: unknown label `visitor` (did you mean `Visitor`?)"


def test_a_label_the_graph_no_longer_holds_is_unknown(
    settings: Settings, graph: GraphStore, kb: DataModel
) -> None:
    """FalkorDB's db.labels() keeps every label that ever existed: only those with nodes count."""
    graph.query("CREATE (:person {id: 'gone'})-[:KNEW]->(:person {id: 'also gone'})")
    graph.query("MATCH (n:person) DETACH DELETE n")
    assert "person" in graph.names()[0]  # type: ignore[index]
    _, trace = run_cypher_tool(
        Toolbox(settings, kb, graph, vector_search=None), "MATCH (p:person)-[:KNEW]->() RETURN p"
    )
    assert trace.error is not None and "unknown label `person`" in trace.error and "`KNEW`" in trace.error


def test_with_the_check_off_a_wrong_name_runs_and_finds_nothing(
    settings: Settings, graph: GraphStore, kb: DataModel
) -> None:
    box = Toolbox(settings.model_copy(update={"cypher_schema_check": False}), kb, graph, vector_search=None)
    text, trace = run_cypher_tool(box, WRONG_CASE)
    assert trace.error is None and json.loads(text)["rows"] == []


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("DB_CONN_URI", "MEMGRAPH_URI", "VEDANA_CYPHER_SCHEMA_CHECK"):
        monkeypatch.delenv(name, raising=False)
    reset_settings()
    yield
    reset_settings()


def test_vedana_cypher_refuses_a_wrong_name_in_one_line(cli_env: None, kb: DataModel) -> None:
    result = CliRunner().invoke(app, ["cypher", WRONG_CASE])
    assert result.exit_code == 1
    assert isinstance(result.exception, CypherSchemaMismatch)  # main() prints it as one line on stderr
    assert str(result.exception) == REFUSAL and result.stdout == ""


def test_vedana_cypher_runs_unchecked_when_postgres_is_out_of_reach(
    cli_env: None, kb: DataModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DB_CONN_URI", "postgresql://vedana:secret@127.0.0.1:1/none")
    reset_settings()
    result = CliRunner().invoke(app, ["cypher", "MATCH (p:Person) RETURN count(p) AS n"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "n\n4\n"
    assert "names not checked against the data model: cannot connect to Postgres" in result.stderr
    assert "secret" not in result.stderr
