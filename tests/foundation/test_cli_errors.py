"""The CLI's contract for failures (DESIGN §2): exit code 0/1/2/130, one line on stderr saying
what to fix, a traceback only with --debug, secrets masked. Each case runs `vedana.cli.app.main`
in a real subprocess, with a throwaway command registered there to raise what is being tested."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vedana import __version__

SECRET = "sk-cli-errors-5f4e3d2c1b"

# Registers `boom` (raising what argv[1] names) and runs the real entry point on argv[2:].
_RUNNER = """
import sys
import vedana.cli.app as cli
from vedana.errors import NotSynced

WHAT = sys.argv[1]

def boom() -> None:
    what = WHAT
    if what == "interrupt":
        raise KeyboardInterrupt
    if what == "user-error":
        raise NotSynced()
    if what == "bug":
        raise RuntimeError("driver said: token " + __import__("os").environ["OPENAI_API_KEY"])

cli.app.command("boom")(boom)
sys.argv = ["vedana", *sys.argv[2:]]
cli.main()
"""


def _run(tmp_path: Path, what: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("VEDANA_DEBUG", "VEDANA_RAISE_ERRORS")}
    environ.update(OPENAI_API_KEY=SECRET, VEDANA_HOME=str(tmp_path / "home"), **env)
    return subprocess.run(
        [sys.executable, "-c", _RUNNER, what, *args],
        capture_output=True, text=True, env=environ, cwd=tmp_path, timeout=60,
    )  # fmt: skip


def test_interrupt_exits_130_quietly(tmp_path: Path) -> None:
    out = _run(tmp_path, "interrupt", "boom")
    assert out.returncode == 130
    assert "Traceback" not in out.stderr


def test_a_user_error_is_one_line_exit_1_and_a_traceback_only_with_debug(tmp_path: Path) -> None:
    out = _run(tmp_path, "user-error", "boom")
    assert out.returncode == 1
    assert out.stderr == "error: no data model found; run `vedana sync` first\n"
    debug = _run(tmp_path, "user-error", "--debug", "boom")
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "NotSynced" in debug.stderr


def test_debug_keeps_the_exit_code_and_masks_secrets_in_the_traceback(tmp_path: Path) -> None:
    config = _run(tmp_path, "none", "--debug", "cypher", "RETURN 1", CYPHER_ROWS_LIMIT="lots")
    assert config.returncode == 2 and "ConfigError" in config.stderr
    bug = _run(tmp_path, "bug", "--debug", "boom")
    assert bug.returncode == 1 and "RuntimeError: driver said: token ***" in bug.stderr
    assert SECRET not in bug.stderr


def test_an_unexpected_error_is_one_masked_line_pointing_at_debug(tmp_path: Path) -> None:
    out = _run(tmp_path, "bug", "boom")
    assert out.returncode == 1
    [line] = out.stderr.splitlines()
    assert line.startswith("error: unexpected error: RuntimeError") and "--debug" in line
    assert SECRET not in out.stderr and "***" in line


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (["boom", "--no-such-option"], {}, "No such option"),
        (["no-such-command"], {}, "No such command"),
        (["cypher", "RETURN 1"], {"CYPHER_ROWS_LIMIT": "lots"}, "invalid setting CYPHER_ROWS_LIMIT"),
        (["runs"], {"DB_CONN_URI": "mysql://app:db-pw-778899@db/kb"}, "must point at Postgres"),
        (["runs"], {"DB_CONN_URI": "postgresql://app:db-pw-778899@db:port/kb"}, "not a valid URL"),
        (["cypher", "RETURN 1"], {"MEMGRAPH_URI": "http://graph:7687"}, "not a Bolt URI"),
    ],
)
def test_usage_and_configuration_errors_exit_2(
    tmp_path: Path, args: list[str], env: dict[str, str], needle: str
) -> None:
    out = _run(tmp_path, "none", *args, **env)
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr and "Traceback" not in out.stderr
    assert "db-pw-778899" not in out.stderr
    assert not (tmp_path / "home").exists(), "a configuration error must not start any service"


def test_version(tmp_path: Path) -> None:
    out = _run(tmp_path, "none", "--version")
    assert out.returncode == 0 and out.stdout == f"vedana {__version__}\n"
