"""`vedana mcp`: serve the knowledge base to AI assistants over the Model Context Protocol."""

from __future__ import annotations

from typing import Annotated

import typer


def mcp(
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            help="Serve streamable HTTP on HOST:PORT (or PORT, on 127.0.0.1) instead of stdio (off loopback, "
            "VEDANA_MCP_TOKEN is required and every request must send it as a bearer token).",
            show_default=False,
        ),
    ] = None,
    no_ask: Annotated[
        bool, typer.Option("--no-ask", help="Do not offer the `ask` tool (the full agent).")
    ] = False,
) -> None:
    """Serve the knowledge base over MCP: tools vector_text_search, cypher, describe_data_model and
    (with a language model configured) ask, all read-only; resources vedana://data-model,
    vedana://playbook, vedana://status; the playbook queries as prompts. Logs go to stderr.

    Examples:

        vedana mcp                                  # stdio: what desktop assistants launch

        vedana mcp --http 8765                      # streamable HTTP at http://127.0.0.1:8765/mcp

        VEDANA_MCP_TOKEN=s3cret vedana mcp --http 0.0.0.0:8765
    """
    from vedana.cli.output import info
    from vedana.config import get_settings
    from vedana.mcp.server import build_server

    settings = get_settings()
    if http is None:
        build_server(settings, with_ask=False if no_ask else None).run("stdio")
        return
    from vedana.mcp.http import parse_bind, serve_http

    host, port = parse_bind(http)  # a bad --http fails before anything starts
    token = settings.mcp_token.get_secret_value() if settings.mcp_token else None

    def listening(url: str) -> None:
        auth = "; clients send Authorization: Bearer $VEDANA_MCP_TOKEN" if token else ""
        info(f"serving MCP at {url} (Ctrl-C stops{auth})")

    serve_http(build_server(settings, with_ask=False if no_ask else None), host, port, token, listening)
