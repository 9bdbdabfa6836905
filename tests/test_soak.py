"""The soak's short form (benchmarks/soak.py, about 2 minutes) on a real `jupyter lab`: every
kind of MCP call on five notebooks while two people type. What a user would check: no call
erred, every keystroke arrived, every room closed once idle, and no document outlived its room
(the live objects counted by the server itself). Its figures (RSS per 1,000 calls of each kind,
what stays, GET /api/status's p99) are the benchmark's to report, not asserted here."""

from __future__ import annotations

import pytest

from benchmarks import soak

pytestmark = [pytest.mark.live, pytest.mark.slow]  # about two minutes of a real `jupyter lab`


async def test_a_two_minute_soak_loses_nothing_and_leaves_no_document_behind(tmp_path):
    report = await soak.run(soak.SHORT_SEC, base=tmp_path)
    print(report.note())
    assert not report.errors, f"calls erred: {dict(report.errors)}: {report.first_errors}"
    assert all(report.calls[kind] for kind in soak.KINDS), f"a kind of call never ran: {dict(report.calls)}"
    assert report.typed and all(report.typed), "the people typed nothing"
    assert report.arrived and all(report.arrived), f"keystrokes lost: {report.typed} typed, arrived {report.arrived}"
    assert report.rooms_left == 0, f"{report.rooms_left} room(s) still open once idle"
    assert report.documents_back(), f"documents outlived their rooms: {report.stays()}"
