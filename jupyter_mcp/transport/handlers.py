"""The /mcp handler: Jupyter authenticates, its authorizer decides, then the MCP app answers."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import pydantic_core

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    authorization_context,
)
from tornado import web

from ..adapters.jupyter_server_internals import NOT_LOOKED_YET, user_found_so_far
from ..adapters.jupyterhub_auth import hub_user_of_request
from ..adapters.sdk_server import session_owners
from ..adapters.tornado_handler import response_header
from ..identity import principal_of_handler, scope_user
from ..permissions import SCOPE_KEY, Permissions
from .answers import session_manager_of
from .tornado_asgi import ASGIApp, ASGIRequest

MCP_PATH = "/mcp"
AUTH_RESOURCE = "mcp"
TOKEN_HELP = ("missing or invalid token: send the header `Authorization: token <T>` with the Jupyter server's "
              "token (or a JupyterHub token with the access:servers scope)")


def hub_refusal(access_scopes: set[str], hub_user: dict | None, *, sent_header: bool, sent_in_url: bool) -> str:
    """Why JupyterHub's single-user auth let a request in as nobody, and what to send instead:
    its own answer is a bare 403 or, for a POST, Jupyter's "'_xsrf' argument missing"."""
    needs = " or ".join(sorted(access_scopes)) or "access:servers"
    header = "`Authorization: token <T>`"
    if hub_user:  # the hub knows the token (or login), but not for this server
        return (f"JupyterHub token refused: the token of {hub_user.get('kind', 'user')} {hub_user.get('name')!r} "
                f"does not have the scope {needs}, which this server needs (another user's token, or one made "
                "without access:servers for this server)")
    if sent_header:
        return f"JupyterHub token refused: the hub does not know it (wrong, expired or revoked); send {header} " \
               f"with a JupyterHub token that has the {needs} scope"
    if sent_in_url:
        return f"no token: JupyterHub ignores a token in the URL (?token=); send it in the header {header}, " \
               f"a JupyterHub token with the {needs} scope"
    return f"no token: send the header {header} with a JupyterHub token that has the {needs} scope"


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


class SessionLimit:
    """At most ``per_user`` open MCP sessions per principal, so one client cannot use up the
    SDK's server-wide cap (10,000, then 503 for everyone until sessions expire).

    The SDK keeps who opened each session (``_session_owners``, session id -> the owner's
    authorization context); this is the one place that reads it (``adapters.sdk_server``). One user's session openings
    are served one at a time, so that the count read before one is the count it adds to: at
    once, each would read the count from before any of them."""

    def __init__(self, app: Any, per_user: int) -> None:
        self.app = app
        self.per_user = per_user
        self._opening: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def _owners(self) -> dict[str, Any]:
        """The SDK session manager's table of who opened each session."""
        return session_owners(session_manager_of(self.app))

    def held_by(self, user: AuthenticatedUser) -> int:
        owners = self._owners()
        mine = authorization_context(user)
        return sum(1 for owner in list(owners.values()) if owner == mine)

    @staticmethod
    def may_open(request: Any) -> bool:
        """Whether a request may open a session: a POST without ``Mcp-Session-Id`` whose message,
        or any message of a batch, is an ``initialize``. Decided on the JSON as the SDK parses it,
        never on its bytes: ``"\\u0069nitialize"`` is the same initialize."""
        if request.method != "POST" or request.headers.get("Mcp-Session-Id") is not None:
            return False
        try:
            message = pydantic_core.from_json(request.body or b"")
        except ValueError:
            return False  # not JSON: the SDK answers it, and opens nothing
        messages = message if isinstance(message, list) else [message]
        return any(isinstance(m, dict) and m.get("method") == "initialize" for m in messages)

    def one_at_a_time(self, user: AuthenticatedUser) -> asyncio.Lock:
        """The lock one user's session openings are served under."""
        lock = self._opening.get(user.username)
        if lock is None:
            lock = self._opening[user.username] = asyncio.Lock()
        return lock

    def refusal(self, user: AuthenticatedUser) -> str | None:
        """Why this user may not open one more session now, or None."""
        if self.held_by(user) < self.per_user:
            return None
        return (f"too many open MCP sessions: user {user.username!r} already holds {self.per_user} "
                "(JupyterMCPApp.max_sessions_per_user); end one (DELETE /mcp with its Mcp-Session-Id) "
                "or let idle ones expire, then initialize again")


class MCPHandler(APIHandler):
    """Serves GET, POST and DELETE on /mcp through the MCP Streamable HTTP app.

    Jupyter authenticates the request and its authorizer is asked for ``read`` on the ``mcp``
    resource (may this user use MCP at all) before any byte reaches MCP, whatever the method:
    a POST is how a client asks anything, a read included, so asking ``write`` there would shut
    out a user the authorizer lets read (JupyterHub's read-only role, ``read:*``). Each tool
    then asks for what it does (``permissions``). A browser Origin that Jupyter's ``allow_origin``
    settings do not allow is refused with 403 even when a token is sent, as the MCP spec
    asks of servers (DNS-rebinding protection). The principal goes into the ASGI scope,
    where the SDK binds each session to the principal that opened it.
    """

    auth_resource = AUTH_RESOURCE

    def initialize(self, app: ASGIApp, readiness: Readiness, sessions: SessionLimit) -> None:
        self.app = app
        self.readiness = readiness
        self.sessions = sessions
        self._asgi: ASGIRequest | None = None

    def check_xsrf_cookie(self) -> None:
        """XSRF forges a browser's ambient credentials. A request without cookies (an MCP
        client) carries none, and with auth off there are none to forge; the Origin check
        guards /mcp against browsers in both cases. A request with a login cookie gets
        Jupyter's check. One that is not authenticated is told how to be, rather than that
        an _xsrf argument is missing."""
        user = user_found_so_far(self)
        if user is NOT_LOOKED_YET:
            return  # too early: Jupyter calls this again once it knows the user
        if not user:
            raise web.HTTPError(403, self.refusal())
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
            raise web.HTTPError(403, self.refusal())

    def refusal(self) -> str:
        """What to send to be let in: under JupyterHub, which scope and what was wrong with the token."""
        hub_auth = getattr(self.identity_provider, "hub_auth", None)
        if hub_auth is None:
            return TOKEN_HELP
        return hub_refusal(hub_auth.access_scopes, hub_user_of_request(self),
                           sent_header=bool(self.request.headers.get("Authorization")),
                           sent_in_url=bool(self.get_query_argument("token", "")))

    @web.authenticated
    @authorized(action="read")
    async def get(self) -> None:
        await self._serve()

    @web.authenticated
    @authorized(action="read")
    async def post(self) -> None:
        await self._serve()

    @web.authenticated
    @authorized(action="read")
    async def delete(self) -> None:
        await self._serve()

    async def _serve(self) -> None:
        user = scope_user(principal_of_handler(self))
        error = await self.readiness.wait()
        if error:
            raise web.HTTPError(503, "jupyter_mcp failed to start: %s" % error)
        if not self.sessions.may_open(self.request):
            await self._run(user)
            return
        async with self.sessions.one_at_a_time(user):
            refusal = self.sessions.refusal(user)
            if refusal is not None:
                raise web.HTTPError(429, refusal)
            await self._run(user)

    async def _run(self, user: AuthenticatedUser) -> None:
        self._asgi = ASGIRequest(self, MCP_PATH, {"user": user, SCOPE_KEY: Permissions(self)})
        await self._asgi.run(self.app)

    def on_connection_close(self) -> None:
        if self._asgi is not None:
            self._asgi.connection_closed()

    def finish(self, *args: Any, **kwargs: Any) -> Any:
        if self._asgi is not None:
            kwargs.setdefault("set_content_type", response_header(self, "Content-Type") or "application/json")
        return super().finish(*args, **kwargs)
