"""Fixtures for conversations: the hand-built knowledge base with a `/start` message, and a
scripted OpenAI-compatible model reached through litellm."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from standins.fake_llm import FakeLLM
from support.agent_kb import data_model, load_graph, save
from vedana.config import Settings
from vedana.datamodel import DataModel, LifecycleEvent
from vedana.stores.graph import GraphStore

START = "Hello from the club! Ask me who likes which animal."


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


@pytest.fixture
def chat_kb(graph: GraphStore, pg_engine) -> DataModel:
    """The agent tests' knowledge base (people, animals, LIKES) with a ConversationLifecycle
    `/start` message, saved as the synced data model and loaded into the graph."""
    dm = replace(data_model(), lifecycle=[LifecycleEvent(event="/start", text=START)])
    save(pg_engine, dm)
    load_graph(graph)
    return dm


@pytest.fixture
def chat_settings(settings: Settings, fake_llm: FakeLLM) -> Settings:
    return settings.model_copy(
        update={
            "model": fake_llm.model("agent"),
            "filter_model": fake_llm.model("filter"),
            "llm_api_base": fake_llm.api_base,
            "enable_dm_filtering": True,
            "pipeline_history_length": 20,
        }
    )
