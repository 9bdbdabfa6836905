"""Each answer as one JSON body or as a stream, whichever the request can need.

Streamable HTTP lets a server answer a POSTed request with one ``application/json`` body
or with a ``text/event-stream``, per response. The SDK's 2025-11-25 transport chooses once
for all its sessions (``json_response``), and streams by default: every answer then pays
for an SSE response (a task group, memory streams, sse-starlette's event source) on the
server and an SSE parser on the client, a third of a ping's server CPU. Here a 2025-11-25
request is answered with JSON unless it may need its stream:

- it carries a progress token (progress notifications, the heartbeat of a long run);
- it is ``tasks/result`` (it waits, and puts the task's questions on its stream);
- it is a ``tools/call`` with ``stream: true`` (the outputs as log messages as they come);
- it is a synchronous ``tools/call`` of a tool that runs code: the code's ``input()`` may ask
  with an elicitation on the stream, and a long run needs the stream's keep-alive comments
  (every 15 s), or a proxy that closes a silent connection (nginx's default read timeout is
  60 s) would cut it. As a task, the call answers at once.

Anything else related to a request answered with JSON has no wire, as in the SDK's JSON
mode: a notification is dropped, a request to the client raises ``NoBackChannelError``.
(The 2026-07-28 transport makes the same choice itself: it answers JSON when the handler
finishes without a notification within its deferral window.)

The SDK's transport reads its mode from one attribute, ``is_json_response_enabled``, in the
request's own task (and in its message router, which files messages related to a request);
``ChoosingTransport`` makes it a per-request value. These are private surfaces of the SDK
(the manager's ``_admit_session``, the transport's ``_handle_post_request`` and
``_request_streams``), used here only; ``tests/test_unit_answers.py`` fails loudly if an
upgrade moves them.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from typing import Any

from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCError, JSONRPCResponse

log = logging.getLogger(__name__)

_answer_json: ContextVar[bool] = ContextVar("jupyter_mcp_answer_json", default=False)


def needs_stream(message: Any, runs_code: frozenset[str]) -> bool:
    """Whether a JSON-RPC message (decoded) may need its answer's stream (see the module);
    ``runs_code`` names the tools whose synchronous call may need it."""
    if not isinstance(message, dict) or "id" not in message or not isinstance(message.get("method"), str):
        return True  # not one request: the SDK answers it as it always does
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    if isinstance(meta, dict) and meta.get("progressToken") is not None:
        return True
    method = message["method"]
    if method == "tasks/result":
        return True
    if method != "tools/call":
        return False
    arguments = params.get("arguments")
    if isinstance(arguments, dict) and arguments.get("stream") not in (None, False):
        return True
    return params.get("name") in runs_code and "task" not in params


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
    """The transport's streams per request; a JSON-answered request's takes only its response."""

    def __setitem__(self, request_id: Any, streams: Any) -> None:
        if _answer_json.get():
            streams = (_ResponsesOnly(streams[0]), streams[1])
        super().__setitem__(request_id, streams)


class ChoosingTransport(StreamableHTTPServerTransport):
    """The SDK's 2025-11-25 transport, choosing JSON or a stream for each request."""

    @property  # type: ignore[override]
    def is_json_response_enabled(self) -> bool:
        return _answer_json.get()

    @is_json_response_enabled.setter
    def is_json_response_enabled(self, value: bool) -> None:
        if value:
            raise ValueError("a ChoosingTransport chooses JSON per request; it has no JSON-only mode")

    @classmethod
    def adopt(cls, transport: StreamableHTTPServerTransport, runs_code: frozenset[str]) -> StreamableHTTPServerTransport:
        """Make a transport the SDK just built (no request served yet) choose per request."""
        if transport.__dict__.pop("is_json_response_enabled", False):
            raise ValueError("the session manager answers JSON only: there is nothing to choose")
        transport.__class__ = cls
        transport._runs_code = runs_code
        transport._request_streams = _RequestStreams(transport._request_streams)
        return transport

    async def _handle_post_request(self, scope: Any, request: Any, receive: Any, send: Any) -> None:
        try:
            message = json.loads(await request.body())  # Starlette keeps the body for the SDK to read again
        except ValueError:
            message = None  # the SDK answers the parse error
        token = _answer_json.set(not needs_stream(message, self._runs_code))
        try:
            await super()._handle_post_request(scope, request, receive, send)
        finally:
            _answer_json.reset(token)


def session_manager_of(app: Any) -> StreamableHTTPSessionManager:
    """The SDK session manager of fastmcp's /mcp app (it exists once the app's lifespan started)."""
    for route in app.routes:
        manager = getattr(getattr(route, "endpoint", None), "session_manager", None)
        if manager is not None:
            return manager
    raise RuntimeError("the MCP app has no session manager: its lifespan has not started")


def choose_per_request(app: Any, runs_code: frozenset[str]) -> None:
    """Every 2025-11-25 session the app opens from now on answers JSON where it can
    (``runs_code``: the tools whose synchronous call keeps its stream)."""
    manager = session_manager_of(app)
    admit = manager._admit_session

    def admit_choosing(*args: Any, **kwargs: Any) -> StreamableHTTPServerTransport | None:
        transport = admit(*args, **kwargs)
        return ChoosingTransport.adopt(transport, runs_code) if transport is not None else None

    manager._admit_session = admit_choosing
