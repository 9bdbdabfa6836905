"""How an answer goes on the wire: one JSON body or an event stream. The one place that decides.

Streamable HTTP lets a server answer a POSTed request with one ``application/json`` body
or with a ``text/event-stream``, per response. The SDK's 2025-11-25 transport chooses once
for all its sessions (``json_response``), and streams by default: every answer then pays
for an SSE response (a task group, memory streams, sse-starlette's event source) on the
server and an SSE parser on the client, a third of a ping's server CPU. Two rules decide here,
one before the SDK's transport runs and one after it answered; both exist because each sees
what the other cannot:

- **Before** (``needs_stream``, applied by ``ChoosingTransport`` inside the SDK's transport):
  a 2025-11-25 request is answered with JSON unless it *may* need its stream. The transport
  sees only what the request *asks*, and must choose before the handler runs:

  - it carries a progress token (progress notifications, the heartbeat of a long run);
  - it is ``tasks/result`` (it waits, and puts the task's questions on its stream);
  - it is a ``tools/call`` with ``stream: true`` (the outputs as log messages as they come);
  - it is a synchronous ``tools/call`` of a tool that runs code: the code's ``input()`` may ask
    with an elicitation on the stream, and a long run needs the stream's keep-alive comments
    (every 15 s), or a proxy that closes a silent connection (nginx's default read timeout is
    60 s) would cut it. As a task, the call answers at once.

  Anything else related to a request answered with JSON has no wire, as in the SDK's JSON
  mode: a notification is dropped, a request to the client raises ``NoBackChannelError``.

- **After** (``holds_first_event`` and ``answer_alone``, asked by the Tornado bridge,
  ``tornado_asgi.py``): a POST's event stream is held until its first event, and when that
  event is the request's answer alone, the answer goes as one JSON body (the stream would carry
  nothing else). The bridge sees what the request *did*: a request that may need its stream
  and turned out not to (a quick ``cell_execute`` whose code never asked, a ``tasks/result`` of
  a task already done, a ``stream: true`` call that logged nothing) still gets one JSON body.
  No rule before the handler runs can know that, so this rule cannot be folded into the first
  (``tests/test_http.py::test_a_stream_whose_first_event_is_its_answer_goes_as_one_json_body``);
  and the first cannot be dropped for it, as only the first keeps a JSON-answered request from
  paying for the stream at all.

The 2026-07-28 transport makes the before-choice itself (it answers JSON when the handler
finishes without a notification within its deferral window, and commits to a stream otherwise),
so ``ChoosingTransport`` serves only the older protocol versions; the after-rule applies to every
POST's stream, whichever transport made it.

The SDK has no supported hook for the before-rule: its transport reads its mode from one
attribute, ``is_json_response_enabled``, in the request's own task (and in its message router,
which files messages related to a request); ``ChoosingTransport`` makes it a per-request value,
through the SDK's private surfaces held in ``adapters/sdk_server.py`` (``tests/test_adapters.py``
fails loudly if an upgrade moves them). The after-rule reads only the bytes on the wire (the
SSE framing of the WHATWG spec, JSON-RPC 2.0): it stands on nothing private.
"""

from __future__ import annotations

import json
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


def holds_first_event(method: str | None, status: int, content_type: str) -> bool:
    """Whether a response starting with this status and content type is held until its first event
    (the after-rule): a POST's successful event stream. A GET's stream (the standalone one, a
    replay) is never an answer to hold; an error status is no stream to turn into JSON."""
    return method == "POST" and status == 200 and content_type.startswith("text/event-stream")


def answer_alone(first_event: bytes) -> bytes | None:
    """The JSON-RPC response an event stream's first chunk holds, if the chunk is exactly one
    ``message`` event carrying a response (not a notification, not a request to the client, not a
    keep-alive comment, not two events): then the stream would carry nothing else, and the bytes
    returned go as one JSON body. None: the stream goes as it is."""
    event, data = "message", []
    try:
        lines = first_event.decode().replace("\r\n", "\n").replace("\r", "\n").split("\n")
    except UnicodeDecodeError:
        return None
    while lines and not lines[-1]:
        lines.pop()
    for line in lines:
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
        elif field != "id":  # a comment, a blank line between two events, a retry
            return None
    if event != "message" or not data:
        return None
    text = "\n".join(data)
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    if not isinstance(answer, dict) or "id" not in answer or "method" in answer or not (
            "result" in answer or "error" in answer):
        return None
    return text.encode()


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
