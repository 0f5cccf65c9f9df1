"""Serving the MCP server over streamable HTTP: loopback by default; anywhere else only with a
bearer token, which every request must carry."""

from __future__ import annotations

import hmac
import ipaddress
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vedana.errors import ConfigError, ServiceError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

DEFAULT_PORT = 8765


def parse_bind(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT`, `PORT` (on 127.0.0.1) or `HOST` (port 8765) → (host, port); a
    one-line error otherwise."""
    text = text.strip()
    if text.isdigit():
        text = f":{text}"
    host, sep, port = text.rpartition(":") if ":" in text else (text, "", "")
    host = (host or "127.0.0.1").strip("[]")
    try:
        number = int(port) if sep else DEFAULT_PORT
    except ValueError:
        number = -1
    if not 0 < number < 65536:
        raise ConfigError(f"--http {text!r}: write HOST:PORT, e.g. 127.0.0.1:{DEFAULT_PORT}")
    return host, number


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, so a port in use fails here, in one line, before serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        raise ServiceError(
            f"cannot serve on {host}:{port} ({os.strerror(exc.errno) if exc.errno else exc}); "
            "pick another with --http HOST:PORT"
        ) from None


def url_of(host: str, port: int) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/mcp"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """ASGI middleware: refuse (401) any HTTP request without `Authorization: Bearer <token>`."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            sent = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(sent, self.expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})  # fmt: skip
                await send(
                    {"type": "http.response.body", "body": b'{"error": "missing or wrong bearer token"}'}
                )
                return
        await self.app(scope, receive, send)


def serve_http(
    server: MCPServer,
    host: str,
    port: int,
    token: str | None,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Serve until interrupted. Off loopback a token is required (VEDANA_MCP_TOKEN).
    `on_listening(url)` is called once the port is bound."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    if not is_loopback(host) and not token:
        raise ConfigError(
            f"vedana mcp --http {host}:{port} is reachable from other machines: set VEDANA_MCP_TOKEN to the "
            "bearer token clients must send (or bind 127.0.0.1)"
        )
    # The SDK's DNS-rebinding guard allows loopback hosts only; a bind elsewhere is allowed by the token.
    security = None if is_loopback(host) else TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app: Any = server.streamable_http_app(host=host, transport_security=security)
    if token:
        app = BearerAuth(app, token)
    sock = listen(host, port)
    if on_listening is not None:
        on_listening(url_of(host, port))
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
