"""Unit tests (pure logic) of the task manager over the in-process store."""

from __future__ import annotations

import asyncio

from jupyter_mcp.tasks.manager import TaskManager
from jupyter_mcp.tasks.stores import InMemoryTaskStore


async def test_concurrent_retries_with_one_key_make_one_task_and_leave_no_lock_behind():
    manager = TaskManager(InMemoryTaskStore(), default_ttl_ms=1000, max_ttl_ms=1000, poll_interval_ms=1000)
    started = 0

    async def work():
        nonlocal started
        started += 1
        return {"content": [{"type": "text", "text": "done"}]}

    async def notify(record):
        pass

    async def submit(key):
        return await manager.submit(owner="alice", tool="t", fingerprint="f", ttl=None, key=key,
                                    work=work, notify=notify)

    records = await asyncio.gather(*(submit("retry-1") for _ in range(10)), submit("other"), submit(None))
    assert len({r.task_id for r in records[:10]}) == 1  # ten attempts, one task
    assert len({r.task_id for r in records}) == 3
    await asyncio.sleep(0)
    await asyncio.gather(*(run.done.wait() for run in list(manager.runs.values())))
    assert started == 3
    assert manager._key_locks == {}
