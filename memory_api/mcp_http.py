"""The MCP server over streamable HTTP: stateless, bearer keys checked before MCP, and
Host/Origin checks against DNS rebinding."""

from __future__ import annotations

from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from memory_api.mcp_server import bearer, create_mcp
from memory_core.errors import Unauthorized
from memory_core.serve.service import MemoryService


class BearerGate:
    """401 for an MCP request without a valid key (the tools then check scopes)."""

    def __init__(self, app: ASGIApp, *, service: MemoryService) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            try:
                self.service.authenticate(bearer(headers))
            except Unauthorized as exc:
                response = JSONResponse(
                    {"detail": str(exc)}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def mcp_http_app(service: MemoryService) -> ASGIApp:
    """The ASGI app serving MCP at /mcp (start the service's use writer alongside it)."""
    serve = service.settings.serve
    mcp = create_mcp(service, write_tools=serve.mcp_write_tools)
    app = mcp.streamable_http_app(
        stateless_http=True,
        json_response=True,
        max_request_body_size=serve.max_body_bytes,
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=serve.allowed_hosts,
            allowed_origins=serve.allowed_origins,
        ),
    )
    return BearerGate(app, service=service)
