"""Running tool calls as tasks. ``TaskManager`` is the one object the rest of the server holds:
it submits a task (here: the bounds of each user, the idempotency key that names a call), and
runs it (``running.Running``: the work, its final state, cancel and stop), puts its questions to
its client (``questions.Questions``) and reads tasks (``state.TaskState.get``,
``reading.Reading``), all over one state (``state.TaskState``).

Knows nothing of notebooks or of the MCP wire: it gets a coroutine factory that
produces the tool's result (as the CallToolResult wire dict); what a tool records with
the hooks (its interrupts, how to render its partial output) it keeps without looking in.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from .errors import INVALID_PARAMS, LIMIT_REACHED, TaskError
from .reading import Reading
from .records import TaskRecord, new_task_id
from .running import Running
from .state import Notify, Run


class TaskManager(Running, Reading):
    """Creates tasks and runs them; cancels, answers and reads them."""

    # -- submitting ----------------------------------------------------------------

    def ttl(self, requested: Any) -> int:
        if requested is None:
            return self.default_ttl_ms
        if isinstance(requested, bool) or not isinstance(requested, (int, float)) or requested < 0:
            raise TaskError(INVALID_PARAMS, f"task ttl must be a number of milliseconds >= 0, not {requested!r}")
        return int(min(requested, self.max_ttl_ms))

    async def submit(self, *, owner: str, tool: str, fingerprint: str, ttl: Any, key: str | None,
                     work: Callable[[], Awaitable[dict[str, Any]]], notify: Notify,
                     can_ask: bool = False) -> TaskRecord:
        """Create the task (or answer the one this idempotency key already names) and start it.
        ``can_ask``: its client can answer input requests (a prompt of the running code)."""
        ttl_ms = self.ttl(ttl)
        scoped = f"{owner}\x00{key}" if key is not None else None
        async with self._key_lock(scoped):
            if scoped is not None:
                existing = await self.store.find_by_key(scoped)
                if existing is not None:
                    return self._same_call(existing, fingerprint, key)
            record = TaskRecord(task_id=new_task_id(), owner=owner, tool=tool, ttl_ms=ttl_ms,
                                poll_interval_ms=self.poll_interval_ms, idempotency_key=scoped,
                                fingerprint=fingerprint, server_id=self.server_id)
            self._submitting[owner] += 1  # counted from here on, so concurrent submits cannot all slip past
            try:
                await self._within_limits(owner)
                stored = await self.store.create(record)
            finally:
                self._submitting[owner] -= 1
                if not self._submitting[owner]:
                    del self._submitting[owner]
            if stored.task_id != record.task_id:  # another server took the key first
                return self._same_call(stored, fingerprint, key)
        run = Run(stored)
        run.can_ask = can_ask
        self.runs[stored.task_id] = run
        run.work = asyncio.create_task(self._run(run, work, notify), name=f"mcp-task-{stored.task_id}")
        return stored

    async def _within_limits(self, owner: str) -> None:
        """Refuse a new task past the owner's bounds (a retry naming an existing task is not new)."""
        others = self._submitting[owner] - 1  # submits of this owner ahead of this one
        running = sum(1 for run in self.runs.values() if run.record.owner == owner and not run.cancelling) + others
        if running >= self.limits.running_per_owner:
            raise TaskError(LIMIT_REACHED, f"you have {running} tasks running on this server, the most one user may "
                                           f"(JupyterMCPApp.max_running_tasks_per_user = "
                                           f"{self.limits.running_per_owner}); wait for one to finish or cancel one")
        kept = await self.store.count(owner) + others
        if kept >= self.limits.kept_per_owner:
            raise TaskError(LIMIT_REACHED, f"you have {kept} tasks kept (running, or finished and within their ttl), "
                                           f"the most one user may (JupyterMCPApp.max_tasks_per_user = "
                                           f"{self.limits.kept_per_owner}); a finished task is dropped when its ttl "
                                           "ends: ask for a shorter ttl when you read results at once, or call "
                                           "without a task")

    @contextlib.asynccontextmanager
    async def _key_lock(self, scoped: str | None) -> AsyncIterator[None]:
        """One submit at a time per idempotency key; the lock goes when nobody holds or
        waits for it, so the map does not grow with every key ever used."""
        if scoped is None:
            yield
            return
        lock, users = self._key_locks.setdefault(scoped, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._key_locks[scoped]

    @staticmethod
    def _same_call(existing: TaskRecord, fingerprint: str, key: str | None) -> TaskRecord:
        if existing.fingerprint != fingerprint:
            raise TaskError(INVALID_PARAMS, f"idempotency key {key!r} already names a different call "
                                            "(another tool or other arguments); use a new key")
        return existing
