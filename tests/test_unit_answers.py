"""Which requests are answered with one JSON body and which with a stream (jupyter_mcp/transport/answers.py):
the rule before the SDK's transport runs (``needs_stream``), the rule after (``holds_first_event``,
``answer_alone``, asked by the bridge), and the SDK surfaces the first stands on: if an upgrade moves
them, these fail first. The live paths are tests/test_http.py::test_each_answer_is_json_unless_it_may_need_its_stream
and ::test_a_stream_whose_first_event_is_its_answer_goes_as_one_json_body."""

from __future__ import annotations

import inspect

import anyio
import pytest
from mcp.server.streamable_http import EventMessage, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCNotification, JSONRPCResponse

from jupyter_mcp.tools.declarations import RUNS_CODE
from jupyter_mcp.adapters.sdk_server import answering_json as _answer_json
from jupyter_mcp.transport import tornado_asgi
from jupyter_mcp.transport.answers import ChoosingTransport, answer_alone, holds_first_event, needs_stream

pytestmark = pytest.mark.unit


def request(method, params=None):
    return {"jsonrpc": "2.0", "id": 7, "method": method, **({"params": params} if params is not None else {})}


@pytest.mark.parametrize("message, stream", [
    (request("ping"), False),
    (request("initialize", {"capabilities": {"elicitation": {}}}), False),
    (request("tools/list"), False),
    (request("tasks/get", {"taskId": "t"}), False),
    (request("tools/call", {"name": "cell_update", "arguments": {"source": "x"}}), False),
    # code may run long (keep-alive comments) and its input() may ask on the call's stream
    (request("tools/call", {"name": "cell_execute", "arguments": {}}), True),
    (request("tools/call", {"name": "code_execute", "arguments": {"code": "1"}}), True),
    # as a task it answers at once; the question goes another way
    (request("tools/call", {"name": "cell_execute", "arguments": {}, "task": {}}), False),
    (request("tools/call", {"name": "notebook_get", "arguments": {"stream": True}}), True),
    (request("tools/call", {"name": "notebook_list", "arguments": {}, "_meta": {"progressToken": 1}}), True),
    (request("tools/list", {"_meta": {"progressToken": "p"}}), True),
    (request("tasks/result", {"taskId": "t"}), True),
    # not one request: the SDK answers it as it always did
    ({"jsonrpc": "2.0", "method": "notifications/initialized"}, True),
    ([request("ping")], True),
    (None, True),
])
def test_which_requests_need_their_stream(message, stream):
    assert needs_stream(message, RUNS_CODE) is stream


def test_the_sdk_surfaces_the_choice_stands_on():
    assert callable(StreamableHTTPSessionManager._admit_session)
    assert callable(StreamableHTTPServerTransport._handle_post_request)
    transport = StreamableHTTPServerTransport("s1")
    assert transport.__dict__["is_json_response_enabled"] is False and transport._request_streams == {}
    ChoosingTransport.adopt(transport, RUNS_CODE)
    assert type(transport) is ChoosingTransport and transport.is_json_response_enabled is False
    token = _answer_json.set(True)
    try:
        assert transport.is_json_response_enabled is True
        # the SDK's own choice point reads it per request: no back channel when answering JSON
        assert transport._message_metadata(None).can_send_request is False
    finally:
        _answer_json.reset(token)
    assert transport._message_metadata(None).can_send_request is True
    with pytest.raises(ValueError, match="JSON only"):
        ChoosingTransport.adopt(StreamableHTTPServerTransport("s2", is_json_response_enabled=True), RUNS_CODE)


async def test_a_json_answered_request_takes_only_its_response():
    transport = ChoosingTransport.adopt(StreamableHTTPServerTransport("s3"), RUNS_CODE)
    token = _answer_json.set(True)
    try:
        transport._request_streams["7"] = anyio.create_memory_object_stream(10)
    finally:
        _answer_json.reset(token)
    transport._request_streams["8"] = anyio.create_memory_object_stream(10)  # a streamed request's
    log = JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"level": "info", "data": "x"})
    answer = JSONRPCResponse(jsonrpc="2.0", id=7, result={})
    for request_id in ("7", "8"):
        await transport._request_streams[request_id][0].send(EventMessage(log))
        await transport._request_streams[request_id][0].send(EventMessage(answer))
    assert (await transport._request_streams["7"][1].receive()).message is answer
    assert (await transport._request_streams["8"][1].receive()).message is log
    await transport._clean_up_memory_streams("7")
    assert "7" not in transport._request_streams


# -- the rule after: a stream whose first event is the answer alone goes as one JSON body -----------

RESPONSE = b'{"jsonrpc":"2.0","id":7,"result":{"content":[]}}'


@pytest.mark.parametrize("chunk", [
    b"event: message\r\ndata: " + RESPONSE + b"\r\n\r\n",  # sse-starlette's framing
    b"id: 12\nevent: message\ndata: " + RESPONSE + b"\n\n",
    b"data:" + RESPONSE + b"\n\n",  # no event name means "message"
    b'event: message\r\ndata: {"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"no"}}\r\n\r\n',
])
def test_a_chunk_that_is_only_the_answer_gives_it(chunk):
    assert answer_alone(chunk) in (RESPONSE, b'{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"no"}}')


@pytest.mark.parametrize("chunk", [
    b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\r\n\r\n',
    b'event: message\r\ndata: {"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{}}\r\n\r\n',
    b": ping - 2026-12-06 21:00:00\r\n\r\n",  # a keep-alive comment
    b"event: message\r\ndata: " + RESPONSE + b"\r\n\r\nevent: message\r\ndata: " + RESPONSE + b"\r\n\r\n",
    b"event: other\r\ndata: " + RESPONSE + b"\r\n\r\n",
    b"event: message\r\ndata: {not json\r\n\r\n",
    b"retry: 1000\r\ndata: " + RESPONSE + b"\r\n\r\n",
    b"event: message\r\ndata: \xff\xfe\r\n\r\n",
])
def test_any_other_chunk_keeps_the_stream(chunk):
    assert answer_alone(chunk) is None


@pytest.mark.parametrize("method, status, content_type, held", [
    ("POST", 200, "text/event-stream", True),
    ("POST", 200, "text/event-stream; charset=utf-8", True),
    ("GET", 200, "text/event-stream", False),  # the standalone stream: never one answer
    ("POST", 202, "text/event-stream", False),
    ("POST", 200, "application/json", False),
    ("DELETE", 200, "text/event-stream", False),
])
def test_which_streams_are_held_until_their_first_event(method, status, content_type, held):
    assert holds_first_event(method, status, content_type) is held


def test_the_bridge_asks_answers_whether_a_stream_is_one_json_body():
    """The bridge holds no rule of its own: it names answers.py's two, and parses no SSE itself."""
    assert tornado_asgi.holds_first_event is holds_first_event and tornado_asgi.answer_alone is answer_alone
    assert not hasattr(tornado_asgi, "_only_answer") and "import json" not in inspect.getsource(tornado_asgi)
