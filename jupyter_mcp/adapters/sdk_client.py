"""The MCP Python SDK's client internals: a raw request as the client would send it.

The SDK's typed calls validate every result, and refuse a task in place of a tools/call result;
the task helpers send the request themselves, stamped as the client stamps its own."""

from __future__ import annotations

from typing import Any

from mcp.shared._httpx_utils import create_mcp_http_client


def http_client(headers: dict[str, str] | None) -> Any:
    """An httpx client made as the SDK makes its own (``mcp.shared._httpx_utils``: its timeouts,
    redirects followed), so a connection behaves as the SDK's would."""
    return create_mcp_http_client(headers=headers)


def stamp_request(session: Any, data: dict[str, Any], opts: dict[str, Any]) -> None:
    """Put on a raw request what the client session puts on its own (``ClientSession._stamp``: the
    protocol version, the client's capabilities per request on 2026-07-28)."""
    session._stamp(data, opts)


async def send_raw_request(session: Any, method: str, params: Any, opts: dict[str, Any]) -> Any:
    """Send a request and get its result as a plain dict, unvalidated (the session's dispatcher,
    ``ClientSession._dispatcher.send_raw_request``)."""
    return await session._dispatcher.send_raw_request(method, params, opts)
