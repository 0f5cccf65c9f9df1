"""Fixtures for `vedana eval`: the agent tests' knowledge base, a golden set about it (see
support/eval_golden.py), and the OpenAI-compatible stand-in playing the agent and the judge."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from standins.fake_llm import FakeLLM
from support.agent_kb import data_model, load_graph, save
from support.eval_golden import COLUMNS, golden_rows
from vedana.datamodel import DataModel
from vedana.stores.graph import GraphStore


@pytest.fixture
def golden_csv(tmp_path: Path) -> Path:
    path = tmp_path / "golden.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(golden_rows())
    return path


@pytest.fixture
def eval_kb(graph: GraphStore, pg_engine) -> DataModel:
    dm = data_model()
    save(pg_engine, dm)
    load_graph(graph)
    return dm


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


@pytest.fixture
def eval_env(fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The agent and the judge at the stand-in, as a user would configure them."""
    values = {
        "MODEL": fake_llm.model("agent"),
        "VEDANA_LLM_API_BASE": fake_llm.api_base,
        "OPENAI_API_KEY": "sk-eval-test-0f1e2d3c4b5a",
        "ENABLE_DM_FILTERING": "false",
    }
    for name in ("DB_CONN_URI", "MEMGRAPH_URI", "JUDGE_MODEL", "GRIST_TEST_SET_DOC_ID"):
        monkeypatch.delenv(name, raising=False)
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return {**os.environ, **values}
