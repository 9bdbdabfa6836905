"""Unit tests (pure logic) of the session → user map: who may use a session, and when a
session the client never closed is forgotten."""

from __future__ import annotations

import pytest

from jupyter_mcp import app
from jupyter_mcp.app import SessionOwners


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(app.time, "monotonic", lambda: now[0])
    return now


def test_only_the_owner_may_use_a_session(clock):
    owners = SessionOwners(forget_after=100)
    owners.claim("s1", "alice")
    owners.claim("s1", "bob")  # a later response naming the session does not change its owner
    assert owners.allows("s1", "alice") and not owners.allows("s1", "bob")
    assert owners.allows("unknown", "bob") and owners.allows(None, "bob")
    owners.end("s1")
    assert len(owners) == 0


def test_idle_sessions_are_forgotten_but_not_while_a_request_is_in_flight(clock):
    owners = SessionOwners(forget_after=100)
    owners.claim("idle", "alice")
    owners.claim("streaming", "alice")
    with owners.request("streaming"):  # e.g. a standalone SSE stream held open for hours
        clock[0] += 500
        owners.claim("new", "bob")  # claims prune: "idle" is forgotten (the SDK reaped it long ago)
        assert owners.allows("idle", "bob")
        assert not owners.allows("streaming", "bob")  # in flight: kept however long
    assert len(owners) == 2  # streaming, new
    clock[0] += 50
    owners.claim("newer", "bob")  # under a minute since the last prune: nothing is scanned
    assert len(owners) == 3
    clock[0] += SessionOwners.PRUNE_EVERY_SEC
    owners.claim("newest", "bob")  # "streaming" and "new" now idle for 110 s > 100 s
    assert owners.allows("streaming", "bob")
    assert len(owners) == 2
