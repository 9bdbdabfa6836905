"""Reading tasks: an owner's tasks listed a page at a time (a cursor names the last one read),
and ``tasks/result``'s wait for a task's end, each of its questions delivered to the asker
meanwhile. One record is read with ``TaskState.get``."""

from __future__ import annotations

import asyncio
from typing import Any

from .errors import INVALID_PARAMS, TaskError
from .questions import Questions
from .records import INPUT_REQUIRED, TaskRecord
from .state import Deliver


class Reading(Questions):
    """The list of an owner's tasks, and a task once it is finished."""

    async def list(self, owner: str, cursor: str | None, limit: int = 50) -> tuple[list[TaskRecord], str | None]:
        before = _decode_cursor(cursor) if cursor else None
        records = await self.store.list(limit=limit + 1, owner=owner, before=before)
        page, more = records[:limit], len(records) > limit
        page = [await self._settled(record) for record in page]
        return page, (_encode_cursor(page[-1]) if more and page else None)

    async def finished(self, owner: str, task_id: Any, *, wait: bool, deliver: Deliver | None = None) -> TaskRecord:
        """The task once it is terminal. ``wait``: until it is (a run here is awaited, one on
        another server polled at the poll interval); otherwise a working task is refused.
        ``deliver``: how to put an input request to the asker and get its answer; while the
        task waits on input, each request is delivered once, and then the end is waited for."""
        delivered: set[str] = set()
        record = await self.get(owner, task_id)
        if not record.terminal and not wait and not (record.status == INPUT_REQUIRED and deliver is not None):
            raise TaskError(INVALID_PARAMS, f"task {record.task_id!r} is still {record.status}; poll tasks/get "
                                            "until it is completed, failed or cancelled")
        while not record.terminal:
            run = self.runs.get(record.task_id)
            changed = run.changed if run is not None else None
            if deliver is not None:
                requests = ({key: request for key, (request, _) in run.asks.items()} if run is not None
                            else record.input_requests or {})
                fresh = {key: request for key, request in requests.items() if key not in delivered}
                if fresh:
                    for key, request in fresh.items():
                        delivered.add(key)
                        await self._deliver(owner, record.task_id, run, key, request, deliver)
                    record = await self.get(owner, task_id)
                    continue
            if run is not None and not run.done.is_set():
                assert changed is not None
                waits = [asyncio.ensure_future(run.done.wait()), asyncio.ensure_future(changed.wait())]
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiting in waits:
                        waiting.cancel()
            else:  # another server's run, or this one's final state being written
                await asyncio.sleep(self.poll_interval_ms / 1000 if run is None else 0.05)
            record = await self.get(owner, task_id)
        return record


def _encode_cursor(record: TaskRecord) -> str:
    return f"{record.created_at!r}|{record.task_id}"


def _decode_cursor(cursor: Any) -> tuple[float, str]:
    try:
        created, task_id = str(cursor).split("|", 1)
        return float(created), task_id
    except ValueError:
        raise TaskError(INVALID_PARAMS, f"invalid cursor {cursor!r}") from None
