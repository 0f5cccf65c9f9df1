"""The README's MCP session, produced for real: samples/people synced and indexed on the
embedded services in a temporary VEDANA_HOME, then `vedana mcp` launched over stdio by the
official MCP client, as a desktop assistant launches it: initialize → tools/list →
vector_text_search → cypher.

    .venv/bin/python scripts/mcp_example.py
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


async def session(env: dict[str, str]) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "vedana", "mcp"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        init = await client.initialize()
        print(f"initialize → {init.server_info.name} {init.server_info.version}")
        tools = await client.list_tools()
        print("tools/list →")
        for tool in tools.tools:
            schema = tool.input_schema["properties"]
            args = ", ".join(f"{k}: {'|'.join(v['enum']) if 'enum' in v else v.get('type', 'any')}" for k, v in schema.items())
            print(f"  {tool.name}({args})  readOnlyHint={tool.annotations.read_only_hint}")
        search = {"label": "interest", "property": "interest_name", "text": "quokkas"}
        result = await client.call_tool("vector_text_search", search)
        hits = json.loads(result.content[0].text)["hits"]
        print(f"vector_text_search({json.dumps(search)}) →")
        for hit in hits[:3]:
            print(f"  {hit['score']:.3f}  {hit['node_id']}  {hit['value']}")
        query = (
            f"MATCH (p:person)-[:PERSON_has_INTEREST]->(i:interest {{id: '{hits[0]['node_id']}'}}) "
            "RETURN p.id AS id, p.person_name AS name ORDER BY name"
        )
        result = await client.call_tool("cypher", {"query": query})
        print(f"cypher({query!r}) →")
        print("  " + result.content[0].text)
        refused = await client.call_tool("cypher", {"query": "MATCH (n) DETACH DELETE n"})
        print(f"cypher('MATCH (n) DETACH DELETE n') → isError={refused.is_error}: {refused.content[0].text}")


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="vedana-mcp-example-"))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("DB_CONN_URI", None), env.pop("MEMGRAPH_URI", None)
    env["VEDANA_HOME"] = str(home)
    vedana = [sys.executable, "-m", "vedana"]
    people = REPO / "samples" / "people"
    try:
        subprocess.run([*vedana, "sync", "--data-model", str(people / "model"), "--data", str(people / "data")],
                       env=env, check=True, capture_output=True)  # fmt: skip
        subprocess.run([*vedana, "index"], env=env, check=True, capture_output=True)
        asyncio.run(session(env))
    finally:
        subprocess.run([*vedana, "services", "stop"], env=env, capture_output=True)


if __name__ == "__main__":
    main()
