"""The Tornado ⇄ ASGI bridge's pure parts: which event-stream chunk is an answer alone (sent as
one JSON body), and which clients accept gzip."""

from __future__ import annotations

import pytest

from jupyter_mcp.transport.tornado_asgi import _accepts_gzip, _only_answer

pytestmark = pytest.mark.unit

RESPONSE = b'{"jsonrpc":"2.0","id":7,"result":{"content":[]}}'


@pytest.mark.parametrize("chunk", [
    b"event: message\r\ndata: " + RESPONSE + b"\r\n\r\n",  # sse-starlette's framing
    b"id: 12\nevent: message\ndata: " + RESPONSE + b"\n\n",
    b"data:" + RESPONSE + b"\n\n",  # no event name means "message"
    b'event: message\r\ndata: {"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"no"}}\r\n\r\n',
])
def test_a_chunk_that_is_only_the_answer_gives_it(chunk):
    assert _only_answer(chunk) in (RESPONSE, b'{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"no"}}')


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
    assert _only_answer(chunk) is None


@pytest.mark.parametrize("header, accepts", [
    ("gzip, deflate", True), ("br, gzip;q=0.5", True), ("*", True), ("identity", False), ("", False),
    ("gzip;q=0", False), ("deflate, gzip; q=0.0", False), (None, False),
    # RFC 9110, 12.5.3: a qvalue has at most three decimals; anything else is no weight to trust
    ("gzip;q=0.0000", False), ("gzip;q=0.000", False), ("gzip;q=0.001", True), ("gzip;q=1.000", True),
    ("gzip;q=1.5", False), ("gzip;q=", False), ("gzip;q=abc", False), ("gzip;q=-1", False),
    # "*" stands for every coding not listed; a coding listed says for itself
    ("*;q=0, gzip", True), ("*;q=0", False), ("gzip;q=0, *", False), ("br, *;q=0.1", True),
    # case-insensitive, and x-gzip is gzip
    ("GZIP", True), ("Gzip;Q=0", False), ("x-gzip", True),
    # no coding (identity) wanted more than gzip: none
    ("gzip;q=0.5, identity", False), ("gzip;q=0.5, *;q=0.9", False), ("identity;q=0, gzip;q=0.1", True),
    ("gzip, identity;q=0.5", True),
])
def test_which_clients_accept_gzip(header, accepts):
    assert _accepts_gzip(header) is accepts
