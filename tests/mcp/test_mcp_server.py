"""`vedana mcp` through the official MCP client: over stdio as a desktop assistant launches it,
and once over streamable HTTP. Real embedded services; nothing of the protocol is mocked."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from standins.fake_llm import FakeLLM, answer, tool_calls
from vedana.datamodel import DataModel
from vedana.stores.graph import GraphStore

SECRET = "sk-mcp-test-3c2b1a0f9e8d7c6b"


def over_stdio(env: dict[str, str], session_fn: Callable[[Any], Awaitable[Any]], *args: str) -> Any:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def run() -> Any:
        params = StdioServerParameters(command=sys.executable, args=["-m", "vedana", "mcp", *args], env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await session_fn(session)

    return asyncio.run(run())


def test_tools_resources_and_prompts_are_listed_with_schemas_and_annotations(
    mcp_kb: DataModel, server_env: dict[str, str]
) -> None:
    async def listing(session: Any) -> Any:
        return await session.list_tools(), await session.list_resources(), await session.list_prompts()

    tools, resources, prompts = over_stdio(server_env, listing)
    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == {"vector_text_search", "cypher", "describe_data_model"}  # no LLM: no `ask`
    assert all(t.annotations.read_only_hint is True for t in tools.tools)
    schema = by_name["vector_text_search"].input_schema
    assert schema["properties"]["label"]["enum"] == ["Person", "Animal"]  # the embeddable attributes
    prop = schema["properties"]["property"]
    assert prop.get("enum", [prop.get("const")]) == ["name"]  # one choice is written as a const
    assert set(schema["required"]) == {"label", "property", "text"}
    assert "Person.name" in by_name["vector_text_search"].description
    assert by_name["cypher"].input_schema["required"] == ["query"]
    assert {str(r.uri) for r in resources.resources} == {
        "vedana://data-model",
        "vedana://playbook",
        "vedana://status",
    }
    playbook = {p.name: [a.name for a in p.arguments or []] for p in prompts.prompts}
    assert playbook == {"playbook-1": ["animal"], "playbook-2": ["person"]}


def test_search_query_refused_write_and_resources(
    mcp_kb: DataModel, graph: GraphStore, server_env: dict[str, str]
) -> None:
    before = graph.counts()

    async def session_calls(session: Any) -> Any:
        search = await session.call_tool(
            "vector_text_search", {"label": "Animal", "property": "name", "text": "quokka"}
        )
        query = await session.call_tool(
            "cypher",
            {"query": "MATCH (p:Person)-[:LIKES]->(a:Animal {id: 'a1'}) RETURN p.id AS id ORDER BY id"},
        )
        write = await session.call_tool("cypher", {"query": "MATCH (n) DETACH DELETE n"})
        bad = await session.call_tool(
            "vector_text_search", {"label": "Person", "property": "name", "text": "x", "expand": 3}
        )
        model = await session.read_resource("vedana://data-model")
        prompt = await session.get_prompt("playbook-1", {"animal": "quokka"})
        return search, query, write, bad, model, prompt

    search, query, write, bad, model, prompt = over_stdio(server_env, session_calls)
    assert not search.is_error
    hits = json.loads(search.content[0].text)["hits"]
    assert hits[0]["node_id"] == "a1" and hits[0]["value"] == "quokka" and hits[0]["score"] > 0.9
    assert not query.is_error and [r["id"] for r in json.loads(query.content[0].text)["rows"]] == [
        "p1",
        "p3",
        "p4",
    ]
    assert write.is_error and "refused before running" in write.content[0].text
    assert bad.is_error
    assert graph.counts() == before  # nothing was written
    assert "(:Person)" in model.contents[0].text
    assert "Who likes quokka?" in prompt.messages[0].content.text


def test_a_long_query_ends_as_a_tool_error_within_the_timeout(
    mcp_kb: DataModel, server_env: dict[str, str]
) -> None:
    env = {**server_env, "CYPHER_TIMEOUT_S": "1"}

    async def slow(session: Any) -> Any:
        started = time.monotonic()
        # Many records, little memory (a 50M-element range would meet GRAPH_QUERY_MEMORY_MB first).
        query = "UNWIND range(1, 6000) AS a UNWIND range(1, 6000) AS b RETURN count(*) AS n"
        result = await session.call_tool("cypher", {"query": query})
        return result, time.monotonic() - started

    result, seconds = over_stdio(env, slow)
    assert result.is_error and "timed out" in result.content[0].text
    assert seconds < 30


def test_ask_with_the_scripted_model_and_no_secret_in_results(
    mcp_kb: DataModel, fake_llm: FakeLLM, server_env: dict[str, str]
) -> None:
    env = {**server_env, "MODEL": fake_llm.model("agent"), "VEDANA_LLM_API_BASE": fake_llm.api_base,
           "OPENAI_API_KEY": SECRET, "ENABLE_DM_FILTERING": "false"}  # fmt: skip
    fake_llm.agent.append(
        tool_calls(("cypher", {"query": "MATCH (p:Person {id: 'p1'}) RETURN p.id AS id, p.name AS name"}))
    )
    fake_llm.agent.append(answer(f"Ada Okafor [1]. (key {SECRET})"))

    async def ask(session: Any) -> Any:
        tools = await session.list_tools()
        echoed = await session.call_tool("cypher", {"query": f"RETURN '{SECRET}' AS k"})
        return (
            [t.name for t in tools.tools],
            await session.call_tool("ask", {"question": "Who is p1?"}),
            echoed,
        )

    names, result, echoed = over_stdio(env, ask)
    assert "ask" in names
    assert not result.is_error, result.content[0].text
    data = json.loads(result.content[0].text)
    assert data["answer"].startswith("Ada Okafor [1].")
    assert [s["id"] for s in data["sources"]] == ["p1"]
    assert data["tool_calls"][0]["name"] == "cypher"
    assert SECRET not in result.content[0].text and SECRET not in echoed.content[0].text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_streamable_http_with_a_bearer_token(mcp_kb: DataModel, server_env: dict[str, str]) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    refused = subprocess.run([sys.executable, "-m", "vedana", "mcp", "--http", "0.0.0.0:1"], env=server_env,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert refused.returncode == 2 and "set VEDANA_MCP_TOKEN" in refused.stderr

    port, token = _free_port(), "tok-9a8b7c6d5e4f"
    env = {**server_env, "VEDANA_MCP_TOKEN": token}
    server = subprocess.Popen([sys.executable, "-m", "vedana", "mcp", "--http", f"127.0.0.1:{port}"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                anonymous = httpx.post(url, json={}, timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and server.poll() is None, (
                    server.stderr.read() if server.stderr else ""
                )
                time.sleep(0.3)
        assert anonymous.status_code == 401  # no token, no answer

        async def run() -> Any:
            import httpx2

            client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
            async with client, streamable_http_client(url, http_client=client) as (read, write, *_), ClientSession(read, write) as session:  # fmt: skip
                await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool("cypher", {"query": "MATCH (n:Person) RETURN count(n) AS n"})
                return [t.name for t in tools.tools], result

        names, result = asyncio.run(run())
        assert "cypher" in names and json.loads(result.content[0].text)["rows"] == [{"n": 4}]
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.parametrize("bind", ["nonsense:port", "127.0.0.1:99999"])
def test_a_bad_bind_is_a_one_line_error(server_env: dict[str, str], bind: str) -> None:
    result = subprocess.run([sys.executable, "-m", "vedana", "mcp", "--http", bind], env=server_env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (
        result.returncode == 2
        and "write HOST:PORT" in result.stderr
        and len(result.stderr.strip().splitlines()) == 1
    )
