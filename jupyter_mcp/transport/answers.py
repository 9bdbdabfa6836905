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
``ChoosingTransport`` makes it a per-request value, through the SDK's private surfaces held in
``adapters/sdk_server.py`` (``tests/test_adapters.py`` fails loudly if an upgrade moves them).
"""

from __future__ import annotations

from typing import Any

from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from ..adapters.sdk_server import JsonPerRequestTransport, adopt_new_transports


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


class ChoosingTransport(JsonPerRequestTransport):
    """The SDK's 2025-11-25 transport, choosing JSON or a stream for each request (``needs_stream``)."""

    runs_code: frozenset[str] = frozenset()

    @classmethod
    def adopt(cls, transport: StreamableHTTPServerTransport,  # type: ignore[override]
              runs_code: frozenset[str]) -> StreamableHTTPServerTransport:
        """Make a transport the SDK just built (no request served yet) choose per request."""
        chooser = super().adopt(transport)
        chooser.runs_code = runs_code
        return chooser

    def answers_json(self, message: Any) -> bool:
        return not needs_stream(message, self.runs_code)


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
    adopt_new_transports(session_manager_of(app), lambda transport: ChoosingTransport.adopt(transport, runs_code))
