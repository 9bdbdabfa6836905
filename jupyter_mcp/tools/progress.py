"""Progress that keeps a long synchronous call alive.

Most clients call tools synchronously, with a request timeout (the TypeScript SDK's: 60 s)
that progress notifications reset when the client asks for that. So a call that runs code and
carries a progress token is told of progress at least every ``HEARTBEAT_SEC``, whether or not
it asked for a stream: a ten-minute cell is not dropped at minute one.

Every progress notification of such a call goes through ``report``, so the heartbeat knows the
last value sent: the spec wants each value greater than the one before, so a heartbeat sends a
value between the last one and the next whole step (``beat_value``), which any real report
(an output streamed, a notebook's next cell) then exceeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

from fastmcp.server.middleware import Middleware

HEARTBEAT_SEC = 10.0  # at most this long without progress; the promise is 15 s

_beat: ContextVar[Heartbeat | None] = ContextVar("jupyter_mcp_heartbeat", default=None)


def beat_value(last: float, beats: int) -> float:
    """The ``beats``-th heartbeat since the report of ``last``: above it, below ``last + 1``."""
    return last + beats / (beats + 1)


class Heartbeat:
    """The progress of one call: what was last reported, and a beat when nothing was for a while."""

    def __init__(self, ctx: Any, every: float = HEARTBEAT_SEC) -> None:
        self.ctx = ctx
        self.every = every
        self.started = time.monotonic()
        self.last = 0.0  # the last progress value sent
        self.total: float | None = None
        self.sent_at = self.started
        self.beats = 0  # heartbeats since the last real report

    def reported(self, progress: float, total: float | None) -> None:
        self.last, self.total, self.sent_at, self.beats = progress, total, time.monotonic(), 0

    async def run(self) -> None:
        while True:
            await asyncio.sleep(max(0.0, self.sent_at + self.every - time.monotonic()))
            if time.monotonic() - self.sent_at < self.every:
                continue  # something was reported meanwhile
            self.beats += 1
            value = beat_value(self.last, self.beats)
            self.sent_at = time.monotonic()
            try:
                await self.ctx.report_progress(value, self.total,
                                               f"still running ({time.monotonic() - self.started:.0f} s)")
            except Exception:  # a client that went away must not stop the run
                return


def asked_for(ctx: Any) -> bool:
    """Whether the call carries a progress token (read from the request's _meta as sent)."""
    meta = getattr(ctx.request_context if ctx is not None else None, "meta", None) or {}
    return meta.get("progressToken") is not None


async def report(ctx: Any, progress: float, total: float | None, message: str) -> None:
    """A progress notification of this call (a no-op without a progress token)."""
    beat = _beat.get()
    if beat is not None:
        beat.reported(progress, total)
    await ctx.report_progress(progress, total, message)


@contextlib.asynccontextmanager
async def kept_alive(ctx: Any) -> AsyncIterator[None]:
    """Heartbeats for the duration of the block."""
    beat = Heartbeat(ctx)
    token = _beat.set(beat)
    ticking = asyncio.create_task(beat.run(), name="mcp-progress-heartbeat")
    try:
        yield
    finally:
        ticking.cancel()
        _beat.reset(token)


class KeepAlive(Middleware):
    """Heartbeats for the calls of ``tools`` (those that run code) that carry a progress token.
    A call made a task returns at once, and its heartbeat with it."""

    def __init__(self, tools: frozenset[str]) -> None:
        self.tools = tools

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        if context.message.name not in self.tools or not asked_for(context.fastmcp_context):
            return await call_next(context)
        async with kept_alive(context.fastmcp_context):
            return await call_next(context)
