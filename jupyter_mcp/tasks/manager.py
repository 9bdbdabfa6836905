"""Running tool calls as tasks: create, run in the background, cancel, keep the result.

Knows nothing of notebooks or of the MCP wire: it gets a coroutine factory that
produces the tool's result (as the CallToolResult wire dict); what a tool records with
the hooks (its interrupts, how to render its partial output) it keeps without looking in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from .hooks import PartialResult, current_task
from .records import CANCELLED, COMPLETED, FAILED, WORKING, TaskRecord, TaskStore, new_task_id

log = logging.getLogger(__name__)

PARTIAL_PERSIST_SEC = 1.0  # how often recorded output is written to a shared store
CANCEL_GRACE_SEC = 2.0  # after the interrupt, how long the work may take to return its own result


class TaskError(Exception):
    """A tasks/* request that cannot be answered; ``code`` is the JSON-RPC error code."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def no_such_task(task_id: str) -> TaskError:
    # Expired and never-existed get the same answer: an invented id learns nothing.
    return TaskError(INVALID_PARAMS, f"no such task: {task_id!r}")


class _Run:
    """A task running in this process: its work, its interrupts, what it produced so far."""

    def __init__(self, record: TaskRecord) -> None:
        self.record = record
        self.work: asyncio.Task[Any] | None = None
        self.interrupts: list[Callable[[], Any]] = []  # register_interrupt
        self.partial: PartialResult | None = None  # record_output
        self.partial_saved: dict[str, Any] | None = None
        self.partial_saved_at = 0.0
        self.cancelling = False
        self.own_result: dict[str, Any] | None = None  # the tool's complete result, if it returned
        self.own_error: str | None = None
        self.done = asyncio.Event()

    def partial_result(self, ending: str) -> dict[str, Any] | None:
        """The output so far as a result, for a task that ends ``ending`` without its answer."""
        return self.partial(ending) if self.partial is not None else None


Notify = Callable[[TaskRecord], Awaitable[None]]


class TaskManager:
    def __init__(self, store: TaskStore, *, default_ttl_ms: int, max_ttl_ms: int, poll_interval_ms: int,
                 server_id: str | None = None) -> None:
        self.store = store
        self.default_ttl_ms = default_ttl_ms
        self.max_ttl_ms = max_ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.server_id = server_id or uuid.uuid4().hex
        self.runs: dict[str, _Run] = {}
        self._key_locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}  # key -> (lock, [users])

    # -- creating ----------------------------------------------------------------

    def ttl(self, requested: Any) -> int:
        if requested is None:
            return self.default_ttl_ms
        if isinstance(requested, bool) or not isinstance(requested, (int, float)) or requested < 0:
            raise TaskError(INVALID_PARAMS, f"task ttl must be a number of milliseconds >= 0, not {requested!r}")
        return int(min(requested, self.max_ttl_ms))

    async def submit(self, *, owner: str, tool: str, fingerprint: str, ttl: Any, key: str | None,
                     work: Callable[[], Awaitable[dict[str, Any]]], notify: Notify) -> TaskRecord:
        """Create the task (or answer the one this idempotency key already names) and start it."""
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
            stored = await self.store.create(record)
            if stored.task_id != record.task_id:  # another server took the key first
                return self._same_call(stored, fingerprint, key)
        run = _Run(stored)
        self.runs[stored.task_id] = run
        run.work = asyncio.create_task(self._run(run, work, notify), name=f"mcp-task-{stored.task_id}")
        return stored

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

    # -- running -------------------------------------------------------------------

    async def _run(self, run: _Run, work: Callable[[], Awaitable[dict[str, Any]]], notify: Notify) -> None:
        token = current_task.set(run)
        supervisor = asyncio.create_task(self._supervise(run)) if getattr(self.store, "shared", False) else None
        try:
            try:
                result = await work()
            except asyncio.CancelledError:
                if run.cancelling:
                    return  # the cancel path finishes the record
                raise
            except Exception as exc:  # the tool raised: a failed task, carrying the error
                run.own_error = str(exc) or type(exc).__name__
            else:
                if result.get("isError"):
                    run.own_error = _text_of(result) or "the tool reported an error"
                run.own_result = result
            if run.cancelling:
                return  # the tool's own result wins, but the cancel path sets the status
            if run.own_error is not None:
                final = await self.store.update(
                    run.record.task_id, expect_status=WORKING, status=FAILED, status_message=run.own_error,
                    error={"message": run.own_error, "partial": run.partial_result(FAILED)}, partial=None,
                    result=run.own_result)
            else:
                final = await self.store.update(run.record.task_id, expect_status=WORKING, status=COMPLETED,
                                                result=run.own_result, partial=None)
            if final is not None:
                await _notify(notify, final)
        finally:
            current_task.reset(token)
            if supervisor is not None:
                supervisor.cancel()
            run.done.set()
            if not run.cancelling:
                self.runs.pop(run.record.task_id, None)

    async def _supervise(self, run: _Run) -> None:
        """With a shared store: write partial output now and then, and obey a cancel made
        by another server (it can mark the task, only we can stop the kernel)."""
        while True:
            await asyncio.sleep(self.poll_interval_ms / 1000)
            record = await self.store.get(run.record.task_id)
            if record is None or record.status == CANCELLED:
                if not run.cancelling:
                    await self._stop(run)
                return
            if time.monotonic() - run.partial_saved_at > PARTIAL_PERSIST_SEC:
                partial = run.partial_result(CANCELLED)  # what a cancel made elsewhere will serve
                if partial is not None and partial != run.partial_saved:
                    run.partial_saved, run.partial_saved_at = partial, time.monotonic()
                    await self.store.update(run.record.task_id, expect_status=WORKING, partial=partial)

    # -- reading ---------------------------------------------------------------------

    async def get(self, owner: str, task_id: Any) -> TaskRecord:
        if not isinstance(task_id, str) or not task_id:
            raise TaskError(INVALID_PARAMS, "taskId must be a non-empty string")
        record = await self.store.get(task_id)
        if record is None or record.owner != owner:  # another user's task does not exist for you
            raise no_such_task(task_id)
        return record

    async def list(self, owner: str, cursor: str | None, limit: int = 50) -> tuple[list[TaskRecord], str | None]:
        before = _decode_cursor(cursor) if cursor else None
        records = await self.store.list(limit=limit + 1, owner=owner, before=before)
        page, more = records[:limit], len(records) > limit
        return page, (_encode_cursor(page[-1]) if more and page else None)

    async def result(self, owner: str, task_id: Any) -> dict[str, Any]:
        record = await self.get(owner, task_id)
        if not record.terminal:
            raise TaskError(INVALID_PARAMS, f"task {record.task_id!r} is still {record.status}; poll tasks/get "
                                            "until it is completed, failed or cancelled")
        if record.status == FAILED:
            error = record.error or {"message": record.status_message or "the task failed"}
            raise TaskError(INTERNAL_ERROR, f"task failed: {error.get('message')}",
                            {"taskId": record.task_id, "partial": error.get("partial")})
        if record.result is None:
            raise TaskError(INVALID_PARAMS, f"task {record.task_id!r} was cancelled before it produced any output; "
                                            "there is no result")
        return record.result

    # -- cancelling --------------------------------------------------------------------

    async def cancel(self, owner: str, task_id: Any, notify: Notify) -> TaskRecord:
        """Interrupt the work first, then stop waiting for it; answer the task."""
        record = await self.get(owner, task_id)
        if record.terminal:
            raise TaskError(INVALID_PARAMS, f"task {record.task_id!r} is already {record.status}; "
                                            "a finished task cannot be cancelled")
        run = self.runs.get(record.task_id)
        if run is None:  # running on another server: mark it, that server stops its work
            final = await self.store.update(record.task_id, expect_status=WORKING, status=CANCELLED,
                                            status_message="cancelled by request", result=record.partial)
        else:
            final = await self._stop(run)
        if final is None:  # it finished meanwhile: a finished task answers as it is
            return await self.get(owner, record.task_id)
        await _notify(notify, final)
        return final

    async def _stop(self, run: _Run) -> TaskRecord | None:
        run.cancelling = True
        for interrupt in run.interrupts:
            try:
                outcome = interrupt()
                if asyncio.iscoroutine(outcome) or isinstance(outcome, asyncio.Future):
                    await outcome
            except Exception:  # half of what was asked is better than none of it
                log.error("jupyter_mcp: interrupting the work of task %s failed; cancelling it anyway",
                          run.record.task_id, exc_info=True)
        if run.work is not None and not run.work.done():
            # An interrupted cell usually returns at once with its complete answer; give it
            # that moment, then stop waiting.
            await asyncio.wait([run.work], timeout=CANCEL_GRACE_SEC if run.interrupts else 0)
        if run.work is not None and not run.work.done():
            run.work.cancel()
            await asyncio.wait([run.work], timeout=10)
        self.runs.pop(run.record.task_id, None)
        # The tool returned while the cancel landed: its own result wins.
        result = run.own_result if run.own_result is not None else run.partial_result(CANCELLED)
        return await self.store.update(run.record.task_id, expect_status=WORKING, status=CANCELLED,
                                       status_message="cancelled by request", result=result, partial=None)

    async def start(self) -> None:
        start = getattr(self.store, "start", None)
        if start is not None:
            await start(self.server_id)

    async def stop(self) -> None:
        """Server shutdown: tasks still running here end failed ("server stopped")."""
        for run in list(self.runs.values()):
            run.cancelling = True
            if run.work is not None and not run.work.done():
                run.work.cancel()
            await self.store.update(run.record.task_id, expect_status=WORKING, status=FAILED,
                                    status_message="server stopped",
                                    error={"message": "server stopped", "partial": run.partial_result(FAILED)},
                                    partial=None)
        self.runs.clear()
        stop = getattr(self.store, "stop", None)
        if stop is not None:
            await stop()


async def _notify(notify: Notify, record: TaskRecord) -> None:
    try:
        await notify(record)
    except Exception:  # advisory: a session that cannot carry it costs latency only
        log.debug("task status notification for %s not delivered", record.task_id, exc_info=True)


def _text_of(result: dict[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text").strip()


def _encode_cursor(record: TaskRecord) -> str:
    return f"{record.created_at!r}|{record.task_id}"


def _decode_cursor(cursor: Any) -> tuple[float, str]:
    try:
        created, task_id = str(cursor).split("|", 1)
        return float(created), task_id
    except ValueError:
        raise TaskError(INVALID_PARAMS, f"invalid cursor {cursor!r}") from None
