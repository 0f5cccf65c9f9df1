"""After `make demo`, the README's commands run in the default home, `.vedana`, which holds
nothing: every command that finds it empty says so in one line, and where the demo's knowledge
base is, instead of answering from an empty one (`cypher` printing 0, exit 0, was the trap)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PEOPLE = REPO / "samples" / "people"
HINT = "this home (.vedana) is empty; the demo's knowledge base is in .vedana-demo: export VEDANA_HOME=.vedana-demo"


def _vedana(cwd: Path, *args: str, home: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VEDANA_HOME", "DB_CONN_URI", "MEMGRAPH_URI")}
    if home is not None:
        env["VEDANA_HOME"] = home
    return subprocess.run(
        [sys.executable, "-m", "vedana", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180
    )


@pytest.fixture
def after_the_demo(homes_root: Path) -> Iterator[Path]:
    """A checkout where the demo has synced its sample into `.vedana-demo` (the graph and the
    vectors are not needed for what is shown here); the services of both homes stop after."""
    checkout = homes_root / f"checkout-{uuid.uuid4().hex[:6]}"
    checkout.mkdir()
    try:
        synced = _vedana(
            checkout,
            "sync",
            "--data-model",
            str(PEOPLE / "model"),
            "--data",
            str(PEOPLE / "data"),
            home=".vedana-demo",
        )
        assert synced.returncode == 0, synced.stderr
        yield checkout
    finally:
        for home in (".vedana", ".vedana-demo"):
            if (checkout / home).exists():
                _vedana(checkout, "services", "stop", home=home)


def test_commands_in_the_empty_default_home_point_at_the_demos(after_the_demo: Path) -> None:
    count = _vedana(after_the_demo, "cypher", "MATCH (n) RETURN count(n) AS n")
    assert count.returncode == 0
    assert count.stdout == "n\n0\n"
    assert f"warning: {HINT}\n" in count.stderr

    for args in (("search", "interest", "interest_name", "koalas"), ("model",)):
        failed = _vedana(after_the_demo, *args)
        assert failed.returncode == 1
        assert failed.stderr == f"error: {HINT}\n"

    runs = _vedana(after_the_demo, "runs")
    assert runs.returncode == 0
    assert f"knowledge base: {HINT}\n" in runs.stdout


def test_the_demos_home_itself_answers_without_a_note(after_the_demo: Path) -> None:
    people = _vedana(after_the_demo, "cypher", "MATCH (p:person) RETURN count(p) AS n", home=".vedana-demo")
    assert people.returncode == 0
    assert "warning" not in people.stderr
    # The graph is empty (no index yet) but the knowledge base is synced: no "empty" claim either.
    assert people.stdout == "n\n0\n"


def test_an_empty_home_without_a_demo_beside_it_says_to_sync(homes_root: Path) -> None:
    checkout = homes_root / f"bare-{uuid.uuid4().hex[:6]}"
    checkout.mkdir()
    try:
        count = _vedana(checkout, "cypher", "MATCH (n) RETURN n")
        assert count.returncode == 0
        assert "warning: the knowledge base in .vedana is empty: run `vedana sync` first\n" in count.stderr
        search = _vedana(checkout, "search", "interest", "interest_name", "koalas")
        assert search.stderr == "error: no data model found; run `vedana sync` first\n"
    finally:
        _vedana(checkout, "services", "stop")
