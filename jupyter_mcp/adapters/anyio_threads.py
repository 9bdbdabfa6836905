"""anyio's internals: the worker threads of its asyncio backend."""

from __future__ import annotations

import threading


def end_idle_worker_threads() -> None:
    """Tell every idle anyio worker thread of the process to end (anyio's own shutdown command, a
    ``None`` on the thread's queue); a thread still busy ends when its work is done. anyio ends a
    worker thread only when the task that first used it ends, and has no public way to end one
    sooner (``anyio._backends._asyncio.WorkerThread``)."""
    from anyio._backends._asyncio import WorkerThread

    for thread in threading.enumerate():
        if isinstance(thread, WorkerThread):
            try:
                thread.queue.put_nowait(None)
            except Exception:  # busy with a queue full: it ends when its work is done
                pass
