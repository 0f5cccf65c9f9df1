"""The MCP `cypher` tool refuses a query naming what the data model lacks, as a tool error with
the closest real names, and runs the corrected one."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from support.agent_kb import data_model, load_graph, save
from vedana.stores.graph import GraphStore


def test_the_mcp_cypher_tool_names_the_closest_real_names(
    graph: GraphStore, pg_engine, server_env: dict[str, str]
) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    save(pg_engine, data_model())
    load_graph(graph)

    async def run() -> Any:
        params = StdioServerParameters(command=sys.executable, args=["-m", "vedana", "mcp"], env=server_env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            wrong = await session.call_tool("cypher", {"query": "MATCH (a:Animal) RETURN a.nam AS name"})
            right = await session.call_tool("cypher", {"query": "MATCH (a:Animal) RETURN a.name AS name"})
            return wrong, right

    wrong, right = asyncio.run(run())
    assert wrong.is_error
    assert wrong.content[0].text.endswith(  # after the SDK's "Error executing tool cypher: "
        ": refused before running: `Animal` nodes have no property `nam` (did you mean `name`?)"
    )
    assert not right.is_error and len(json.loads(right.content[0].text)["rows"]) == 3
