"""The heartbeat that keeps a long synchronous call alive (jupyter_mcp/tools/progress.py), as logic."""

from __future__ import annotations

import asyncio

import pytest

from jupyter_mcp.tools import progress
from jupyter_mcp.tools.progress import Heartbeat, beat_value, kept_alive, report

pytestmark = pytest.mark.unit


def test_beats_climb_between_one_report_and_the_next():
    values = [beat_value(3, k) for k in range(1, 5000)]
    assert all(3 < a < b < 4 for a, b in zip(values, values[1:]))


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[float, float | None, str]] = []

    async def report_progress(self, progress, total=None, message=None):
        self.sent.append((progress, total, message))


async def test_a_silent_call_gets_beats_and_a_real_report_resets_them():
    ctx = Recorder()
    async with kept_alive(ctx):
        beat = Heartbeat(ctx, every=0.05)  # the same logic, quicker
        ticking = asyncio.create_task(beat.run())
        await asyncio.sleep(0.18)
        beat.reported(1, 5)
        ctx.sent.append((1, 5, "cell 2 of 5"))
        await asyncio.sleep(0.12)
        ticking.cancel()
    values = [p for p, _, _ in ctx.sent]
    assert len(values) >= 4 and values == sorted(set(values))  # beats, the report, beats: always rising
    assert all(total == 5 for _, total, message in ctx.sent[ctx.sent.index((1, 5, "cell 2 of 5")):])
    assert any("still running" in message for _, _, message in ctx.sent)


async def test_report_tells_the_calls_heartbeat():
    ctx = Recorder()
    async with kept_alive(ctx):
        await report(ctx, 7, None, "tick")
        assert progress._beat.get().last == 7  # the next beat climbs from there
    assert ctx.sent == [(7, None, "tick")] and progress._beat.get() is None
