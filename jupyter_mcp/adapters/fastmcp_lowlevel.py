"""fastmcp's internals: the low-level MCP server under a FastMCP server, and the request context
as the SDK made it."""

from __future__ import annotations

from typing import Any


def low_level_server(mcp: Any) -> Any:
    """The SDK's low-level ``Server`` a FastMCP server wraps (``FastMCP._mcp_server``): the only place
    to bind request handlers fastmcp does not route (resources/subscribe, subscriptions/listen) and
    to add a server middleware whose result is not validated (``add_server_middleware``)."""
    return mcp._mcp_server


def add_server_middleware(mcp: Any, middleware: Any) -> None:
    """Add an SDK server middleware (``Server.middleware``, ``(ctx, call_next) -> result``) to the
    low-level server under a FastMCP server, innermost: it sees the wire result the SDK's runner
    shaped and checked, and what it returns is not checked again (the tasks binding's answer swap,
    ``tasks/answer_swap.py``). fastmcp has no public way to add one."""
    low_level_server(mcp).middleware.append(middleware)


def raw_request_params(request_context: Any) -> Any:
    """The request's params as the client sent them (``FastMCPRequestContext._srctx.params``):
    fastmcp rebuilds the params it hands an extension without ``task``. Fails loudly, not quietly as
    "no task", the day an upgrade moves them."""
    try:
        return request_context._srctx.params
    except AttributeError as exc:
        raise RuntimeError("fastmcp's request context no longer carries the raw request params "
                           "(FastMCPRequestContext._srctx.params): the tasks binding cannot see params.task") from exc
