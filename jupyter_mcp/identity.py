"""Who is behind a call: the principal (the Jupyter user) and the agent (that user's MCP client).

The /mcp handler computes the principal once per request and puts it in the ASGI scope as
the MCP SDK's own ``AuthenticatedUser``: the SDK's session manager then binds every session
to the principal that opened it (another user's request on it answers exactly as for an
unknown session), and everything below reads the same name back from the request.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from fastmcp.server.dependencies import get_context, get_http_request
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from .permissions import UNRESTRICTED, Permissions, Unrestricted, permissions_of

LOCAL = "local"  # no HTTP request behind the call (an in-memory client)
ANONYMOUS = "anonymous"  # every client of a server with auth off
DEFAULT_CLIENT = "mcp client"
MAX_CLIENT_NAME = 64  # characters of clientInfo.name kept: it goes to every collaborator's browser


def principal_of_handler(handler: Any) -> str:
    """The principal of an authenticated Jupyter request.

    With Jupyter's shared server token every holder of the token is the same principal, and
    with auth off every client is (Jupyter would otherwise invent a new anonymous user for
    every request that carries no cookie, and a client's session would not be its own on
    the next request); any other identity is the user's own name.
    """
    provider = handler.identity_provider
    if not provider.auth_enabled:
        return ANONYMOUS  # auth off: Jupyter invents a user per cookie-less request; all are one here
    server_token = getattr(provider, "token", "")
    if server_token and handler.token_authenticated and provider.get_token(handler) == server_token:
        return "token:" + hashlib.sha256(server_token.encode()).hexdigest()[:16]
    user = handler.current_user
    return getattr(user, "username", None) or str(user)


def scope_user(principal: str) -> AuthenticatedUser:
    """The principal as the SDK's authenticated user (never the token itself)."""
    return AuthenticatedUser(AccessToken(token="", client_id=principal, subject=principal, scopes=[]))


def principal_of(request: Any) -> str:
    """The principal the /mcp handler put into this request's scope."""
    user = (getattr(request, "scope", None) or {}).get("user")
    return user.username if isinstance(user, AuthenticatedUser) else LOCAL


@dataclass(frozen=True)
class Agent:
    """One MCP client of one principal: it shows as one collaborator in a notebook. It
    carries what Jupyter's authorizer lets its user do (for the needs a tool only knows
    of as it goes, such as starting a session)."""

    principal: str
    client: str
    permissions: Permissions | Unrestricted = field(default=UNRESTRICTED, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.principal}:{self.client}"


def client_name(raw: object) -> str:
    """What of a client's self-chosen name is shown to people: printable, and short."""
    text = "".join(ch for ch in str(raw or "") if ch.isprintable()).strip()
    return text if len(text) <= MAX_CLIENT_NAME else text[:MAX_CLIENT_NAME - 1] + "…"


def calling_agent() -> Agent:
    """The agent making the current tool call (injected into the tools that act)."""
    client, principal = DEFAULT_CLIENT, LOCAL
    permissions: Permissions | Unrestricted = UNRESTRICTED
    try:
        params = get_context().session.client_params
        if params is not None and params.client_info is not None:
            client = client_name(params.client_info.name) or client
    except Exception:  # 2026-07-28 has no session: no client info either
        pass
    try:
        request = get_http_request()
        principal, permissions = principal_of(request), permissions_of(request)
    except RuntimeError:  # no HTTP request (an in-memory client)
        pass
    return Agent(principal, client, permissions)
