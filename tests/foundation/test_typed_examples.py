"""A data example is shown with its attribute's type: an int's example is 34, not "34", in
`model --json-schema`, in the agent's prompt (`model --prompt`) and in MCP's vedana://data-model,
so nothing invites `person_age = '34'` in Cypher."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PEOPLE = Path(__file__).resolve().parents[2] / "samples" / "people"


@pytest.fixture
def people_env(fresh_home: Path) -> dict[str, str]:
    """A home with samples/people synced (its data model is what is shown here)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    env.update(VEDANA_HOME=str(fresh_home))
    for name in ("DB_CONN_URI", "MEMGRAPH_URI", "MODEL"):
        env.pop(name, None)
    synced = _vedana(env, "sync", "--data-model", str(PEOPLE / "model"), "--data", str(PEOPLE / "data"))
    assert synced.returncode == 0, synced.stderr
    return env


def _vedana(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vedana", *args], env=env, capture_output=True, text=True, timeout=180
    )


def test_json_schema_examples_have_the_attributes_type(people_env: dict[str, str]) -> None:
    out = _vedana(people_env, "model", "--json-schema")
    assert out.returncode == 0, out.stderr
    person = json.loads(out.stdout)["nodes"]["person"]["properties"]
    assert person["person_age"] == {"type": "integer", "description": "Age in whole years.", "examples": [34]}
    assert person["person_is_mentor"]["examples"] == [True]
    assert person["person_joined"]["examples"] == ["2019-04-12"]  # a date is ISO text, as staged
    assert person["person_name"]["examples"] == ["Ada Okafor"]
    since = json.loads(out.stdout)["edges"]["PERSON_has_INTEREST"]["properties"]["since_year"]
    assert since["type"] == "integer" and all(isinstance(e, int) for e in since["examples"])


def test_the_prompt_and_the_mcp_resource_write_examples_as_cypher_literals(
    people_env: dict[str, str],
) -> None:
    prompt = _vedana(people_env, "model", "--prompt")
    assert prompt.returncode == 0, prompt.stderr
    resource = _read_data_model_over_mcp(people_env)
    for text in (prompt.stdout, resource):
        assert ".person_age (int): Age in whole years. e.g. 34 |" in text
        assert ".person_is_mentor (bool): Whether the person mentors newcomers. e.g. true |" in text
        assert (
            ".person_name (str, searchable by meaning): Full name, first name then family name. e.g. 'Ada Okafor'"
            in text
        )
        assert "e.g. '34'" not in text and "e.g. 'true'" not in text


def _read_data_model_over_mcp(env: dict[str, str]) -> str:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def run() -> Any:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "vedana", "mcp", "--no-ask"], env=env
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await session.read_resource("vedana://data-model")

    return str(asyncio.run(run()).contents[0].text)
