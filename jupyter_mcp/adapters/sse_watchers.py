"""sse-starlette's internals: the shutdown watcher it starts on each event loop."""

from __future__ import annotations

import asyncio

#: The coroutine function sse-starlette's watcher task runs (``sse_starlette.sse._shutdown_watcher``).
WATCHER_QUALNAME = "_shutdown_watcher"


async def stop_shutdown_watchers() -> None:
    """End sse-starlette's shutdown-poll task of this loop. It keeps one per event loop for the
    life of the loop (it watches uvicorn, which is not running here), started by its first event
    stream, and offers no way to stop it: it is found by its coroutine's name."""
    watchers = [t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__qualname__", "") == WATCHER_QUALNAME]
    for task in watchers:
        task.cancel()
    await asyncio.gather(*watchers, return_exceptions=True)
