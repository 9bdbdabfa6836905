"""The MCP Python SDK's server internals: its session manager and its 2025-11-25 transport.

The SDK has no public way to choose JSON or a stream per request, to see a manager's transports
as it makes them, to read who opened each session, or to tell one client connection from another
across requests. These do, on private names: ``StreamableHTTPSessionManager._admit_session`` and
``._session_owners``, ``StreamableHTTPServerTransport._handle_post_request`` and
``._request_streams``, ``ServerSession._connection``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCError, JSONRPCResponse

log = logging.getLogger(__name__)

#: Whether the request being served is answered with one JSON body (set per request, in its task).
answering_json: ContextVar[bool] = ContextVar("jupyter_mcp_answer_json", default=False)


class _ResponsesOnly:
    """The send side of a JSON-answered request's stream: it takes the response, and drops
    what the request cannot carry (a notification related to it)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def send(self, event: Any) -> None:
        if isinstance(event.message, JSONRPCResponse | JSONRPCError):
            await self._stream.send(event)
        else:
            log.debug("jupyter_mcp: dropped a message related to a request answered with JSON: %s",
                      getattr(event.message, "method", None))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _RequestStreams(dict):
    """The transport's streams per request (``_request_streams``: request id -> (send, receive));
    a JSON-answered request's takes only its response."""

    def __setitem__(self, request_id: Any, streams: Any) -> None:
        if answering_json.get():
            streams = (_ResponsesOnly(streams[0]), streams[1])
        super().__setitem__(request_id, streams)


class JsonPerRequestTransport(StreamableHTTPServerTransport):
    """The SDK's 2025-11-25 transport, answering each POSTed request with one JSON body or a
    stream as ``answers_json(message)`` says. The SDK reads its mode from one attribute,
    ``is_json_response_enabled``, in the request's own task (and in its message router): here a
    per-request value, set around ``_handle_post_request``."""

    @property
    def is_json_response_enabled(self) -> bool:
        return answering_json.get()

    @is_json_response_enabled.setter
    def is_json_response_enabled(self, value: bool) -> None:
        if value:
            raise ValueError("a ChoosingTransport chooses JSON per request; it has no JSON-only mode")

    @classmethod
    def adopt(cls, transport: StreamableHTTPServerTransport) -> Any:
        """Make a transport the SDK just built (no request served yet) one of this class."""
        if transport.__dict__.pop("is_json_response_enabled", False):
            raise ValueError("the session manager answers JSON only: there is nothing to choose")
        transport.__class__ = cls
        transport._request_streams = _RequestStreams(transport._request_streams)
        return transport

    def answers_json(self, message: Any) -> bool:
        """Whether this request (its JSON, decoded; None if it is not JSON) is answered with one
        JSON body. The SDK's default: a stream."""
        return False

    async def _handle_post_request(self, scope: Any, request: Any, receive: Any, send: Any) -> None:
        try:
            message = json.loads(await request.body())  # Starlette keeps the body for the SDK to read again
        except ValueError:
            message = None  # the SDK answers the parse error
        token = answering_json.set(self.answers_json(message))
        try:
            await super()._handle_post_request(scope, request, receive, send)
        finally:
            answering_json.reset(token)


def adopt_new_transports(manager: StreamableHTTPSessionManager,
                         adopt: Callable[[StreamableHTTPServerTransport], Any]) -> None:
    """Hand every transport the manager builds for a new session to ``adopt`` before it serves a
    request: the manager builds them inside ``_admit_session``, with no hook of its own."""
    admit = manager._admit_session

    def admit_adopting(*args: Any, **kwargs: Any) -> Any:
        transport = admit(*args, **kwargs)
        return adopt(transport) if transport is not None else None

    manager._admit_session = admit_adopting  # type: ignore[method-assign]


def session_owners(manager: StreamableHTTPSessionManager) -> dict[str, Any]:
    """Who opened each session (session id -> the opener's authorization context): the SDK keeps
    it to refuse another user's requests on a session, and publishes no count per user."""
    return manager._session_owners


def connection_of(session: Any) -> Any:
    """The client connection behind a request's session object (one per MCP session): the SDK
    makes the session object anew for each request, so only this tells two requests of one client."""
    return session._connection
