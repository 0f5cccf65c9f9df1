"""A Grist server that accepts the connection and never answers fails `vedana sync` within
GRIST_DEADLINE_S (plus process start-up), with one line naming the server and the settings; a
refused connection says so."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from support.silent_server import refusing_url, silent_server
from support.sync_kb import DATA_DOC_ID, MODEL_DOC_ID
from vedana.config import Settings

DEADLINE_S = 4.0
TIMEOUT_S = 1.5
STARTUP_S = 15.0  # a fresh interpreter importing vedana and connecting to Postgres, on a busy machine


def _cli_sync(settings: Settings, server: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {
        **os.environ,
        "VEDANA_HOME": str(settings.home),
        "GRIST_SERVER_URL": server,
        "GRIST_API_KEY": "key-not-to-show-8d1f",
        "GRIST_DATA_MODEL_DOC_ID": MODEL_DOC_ID,
        "GRIST_DATA_DOC_ID": DATA_DOC_ID,
        "GRIST_TIMEOUT_S": str(TIMEOUT_S),
        "GRIST_DEADLINE_S": str(DEADLINE_S),
    }
    env.pop("VEDANA_DEBUG", None)
    env.pop("DB_CONN_URI", None)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "vedana", "sync"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, time.monotonic() - started


def test_hung_grist_fails_within_the_deadline(settings: Settings, tmp_path: Path) -> None:
    with silent_server() as url:
        done, seconds = _cli_sync(settings, url, tmp_path)

    assert done.returncode == 1, done.stderr
    # Retries are logged as warnings; the failure itself is one `error:` line, the last.
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and done.stderr.splitlines()[-1] == errors[0], done.stderr
    assert f"Grist at {url} did not answer within {DEADLINE_S:g} s" in done.stderr
    assert "GRIST_TIMEOUT_S" in done.stderr and "GRIST_DEADLINE_S" in done.stderr
    assert "key-not-to-show" not in done.stderr + done.stdout
    assert seconds < DEADLINE_S + STARTUP_S, seconds


def test_refused_connection_says_refused(settings: Settings, tmp_path: Path) -> None:
    url = refusing_url()
    done, _ = _cli_sync(settings, url, tmp_path)

    assert done.returncode == 1, done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith("error: ") and f"Grist at {url} refused the connection" in last, done.stderr
    assert f"Grist at {url} refused the connection" in done.stderr
    assert "did not answer" not in done.stderr


def test_default_deadline_bounds_an_unanswering_server() -> None:
    """Issue 12: with no settings, a server that never answers fails in at most a minute."""
    defaults = Settings(_env_file=None)
    assert defaults.grist_deadline_s <= 60 and defaults.grist_timeout_s <= defaults.grist_deadline_s
