"""Shared session fixtures: one temporary VEDANA_HOME per test session with the real embedded
Postgres (+pgvector) and FalkorDB started on first use and stopped explicitly at the end."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from vedana.config import Settings, reset_settings
from vedana.stores.graph import GraphStore


def _reset_caches() -> None:
    from vedana.stores.postgres import dispose_engines

    dispose_engines()
    reset_settings()


def _stop_services(home: Path) -> None:
    from vedana.embeddings.service import stop_model_service
    from vedana.stores.embedded_falkordb import stop_falkordb
    from vedana.stores.embedded_postgres import stop_postgres

    stop_model_service(home)
    stop_falkordb(home)
    stop_postgres(home)


@pytest.fixture(scope="session")
def homes_root() -> Iterator[Path]:
    """A private temp dir for this session's VEDANA_HOMEs. Not under pytest's basetemp: as
    root, Postgres runs as another user that must traverse the path, and every new pytest
    session resets /tmp/pytest-of-<user> to 0700."""
    root = Path(tempfile.mkdtemp(prefix="vedana-test-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def vedana_home(homes_root: Path) -> Iterator[Path]:
    """The session's VEDANA_HOME (also exported, so `get_settings()` and subprocesses use it),
    with the session running in an empty working directory."""
    home = homes_root / "home"
    previous = os.environ.get("VEDANA_HOME")
    previous_cwd = os.getcwd()
    os.environ["VEDANA_HOME"] = str(home)
    # Settings and the CLI read `.env` in the working directory: a developer's own `.env` (with a
    # real DB_CONN_URI or keys) must not reach the tests, so they run from an empty directory.
    os.chdir(homes_root)
    _reset_caches()
    try:
        yield home
    finally:
        _reset_caches()
        os.chdir(previous_cwd)
        # Explicitly: servers are detached and would otherwise outlive the session.
        _stop_services(home)
        if previous is None:
            os.environ.pop("VEDANA_HOME", None)
        else:
            os.environ["VEDANA_HOME"] = previous


@pytest.fixture
def fresh_home(homes_root: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """Another, empty VEDANA_HOME (not created yet) for one test; its services are stopped after."""
    home = homes_root / f"fresh-{request.node.name[:40]}-{uuid.uuid4().hex[:6]}"
    try:
        yield home
    finally:
        _stop_services(home)


@pytest.fixture(scope="session")
def settings(vedana_home: Path) -> Settings:
    """Settings on the embedded services in `vedana_home`, ignoring any `.env` or service URIs
    of the developer's environment."""
    return Settings(_env_file=None, vedana_home=vedana_home, db_conn_uri=None, memgraph_uri=None)


@pytest.fixture(scope="session")
def pg_engine(settings: Settings):  # -> sqlalchemy.Engine
    """An engine on the embedded Postgres with the schema created."""
    from vedana.stores.postgres import get_engine

    return get_engine(settings)


@pytest.fixture(scope="session")
def session_graph(settings: Settings) -> Iterator[GraphStore]:
    """The embedded FalkorDB graph, shared by the whole session and never cleared."""
    from vedana.stores.graph_factory import open_graph

    store = open_graph(settings)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def graph(session_graph: GraphStore) -> GraphStore:
    """The embedded FalkorDB graph, emptied before the test."""
    session_graph.query("MATCH (n) DETACH DELETE n")
    return session_graph
