"""The Tornado ⇄ ASGI bridge's own choice: which clients accept gzip. Whether an event stream goes
as one JSON body is answers.py's rule (tests/test_unit_answers.py); the bridge asks it
(test_the_bridge_asks_answers_whether_a_stream_is_one_json_body there)."""

from __future__ import annotations

import pytest

from jupyter_mcp.transport.tornado_asgi import _accepts_gzip

pytestmark = pytest.mark.unit


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
