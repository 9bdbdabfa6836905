"""The /mcp handler: Jupyter authenticates, its authorizer decides, then the MCP app answers."""

from __future__ import annotations

import asyncio
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from .identity import principal_of_handler, scope_user
from .permissions import SCOPE_KEY, Permissions
from .tornado_asgi import ASGIApp, ASGIRequest

MCP_PATH = "/mcp"
AUTH_RESOURCE = "mcp"
TOKEN_HELP = ("missing or invalid token: send the header `Authorization: token <T>` with the Jupyter server's "
              "token (or a JupyterHub token with the access:servers scope)")


class Readiness:
    """Whether the extension's parts have started: requests wait for it, a failed start answers 503."""

    def __init__(self) -> None:
        self._done = asyncio.Event()
        self.error: str | None = None

    def started(self, error: str | None = None) -> None:
        self.error = error
        self._done.set()

    async def wait(self) -> str | None:
        await self._done.wait()
        return self.error


class MCPHandler(APIHandler):
    """Serves GET, POST and DELETE on /mcp through the MCP Streamable HTTP app.

    Jupyter authenticates the request and its authorizer is asked about the ``mcp``
    resource before any byte reaches MCP; each tool then asks it about what the tool does
    (``permissions``). A browser Origin that Jupyter's ``allow_origin``
    settings do not allow is refused with 403 even when a token is sent, as the MCP spec
    asks of servers (DNS-rebinding protection). The principal goes into the ASGI scope,
    where the SDK binds each session to the principal that opened it.
    """

    auth_resource = AUTH_RESOURCE

    def initialize(self, app: ASGIApp, readiness: Readiness) -> None:
        self.app = app
        self.readiness = readiness
        self._asgi: ASGIRequest | None = None

    def check_xsrf_cookie(self) -> None:
        """XSRF forges a browser's ambient credentials. A request without cookies (an MCP
        client) carries none, and with auth off there are none to forge; the Origin check
        guards /mcp against browsers in both cases. A request with a login cookie gets
        Jupyter's check. One that is not authenticated is told how to be, rather than that
        an _xsrf argument is missing."""
        if not hasattr(self, "_jupyter_current_user"):
            return  # too early: Jupyter calls this again once it knows the user
        if not self._jupyter_current_user:
            raise web.HTTPError(403, TOKEN_HELP)
        if self.request.cookies and self.identity_provider.auth_enabled:
            super().check_xsrf_cookie()

    def skip_check_origin(self) -> bool:
        # Jupyter skips the Origin check for token-authenticated requests; MCP must not.
        return self.request.method == "OPTIONS"

    async def prepare(self) -> None:  # type: ignore[override]
        if not self.check_origin():
            raise web.HTTPError(403, "Origin not allowed: %s" % self.request.headers.get("Origin"))
        await super().prepare()
        if not self.current_user and self.request.method != "OPTIONS":
            raise web.HTTPError(403, TOKEN_HELP)

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self._serve()

    @web.authenticated
    @authorized
    async def post(self) -> None:
        await self._serve()

    @web.authenticated
    @authorized
    async def delete(self) -> None:
        await self._serve()

    async def _serve(self) -> None:
        user = scope_user(principal_of_handler(self))
        error = await self.readiness.wait()
        if error:
            raise web.HTTPError(503, "jupyter_mcp failed to start: %s" % error)
        self._asgi = ASGIRequest(self, MCP_PATH, {"user": user, SCOPE_KEY: Permissions(self)})
        await self._asgi.run(self.app)

    def on_connection_close(self) -> None:
        if self._asgi is not None:
            self._asgi.connection_closed()

    def finish(self, *args: Any, **kwargs: Any):  # type: ignore[override]
        if self._asgi is not None:
            kwargs.setdefault("set_content_type", self._headers.get("Content-Type") or "application/json")
        return super().finish(*args, **kwargs)
