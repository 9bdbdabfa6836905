"""fastmcp's internals: the low-level MCP server under a FastMCP server, and the request context
as the SDK made it."""

from __future__ import annotations

from typing import Any


def low_level_server(mcp: Any) -> Any:
    """The SDK's low-level ``Server`` a FastMCP server wraps (``FastMCP._mcp_server``): the only place
    to bind request handlers fastmcp does not route (resources/subscribe, subscriptions/listen) and
    to add a server middleware whose result is not validated (the tasks binding's)."""
    return mcp._mcp_server


def raw_request_params(request_context: Any) -> Any:
    """The request's params as the client sent them (``FastMCPRequestContext._srctx.params``):
    fastmcp rebuilds the params it hands an extension without ``task``. Fails loudly, not quietly as
    "no task", the day an upgrade moves them."""
    try:
        return request_context._srctx.params
    except AttributeError as exc:
        raise RuntimeError("fastmcp's request context no longer carries the raw request params "
                           "(FastMCPRequestContext._srctx.params): the tasks binding cannot see params.task") from exc
