"""What the task manager keeps, and what every part of it reads: the store, the runs going on in
this process (``Run``), the bounds a user's tasks keep to (``Limits``), and a task's record as
its owner may see it (``TaskState.get``)."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .errors import INVALID_PARAMS, TaskError, no_such_task
from .hooks import PartialResult
from .records import FAILED, TaskRecord, TaskStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """What one user may hold: tasks running on this server, tasks kept in the store (running
    or finished within their ttl), and the size of one kept result (its JSON, in bytes)."""

    running_per_owner: int = 20
    kept_per_owner: int = 500
    result_bytes: int = 1 << 20


class Run:
    """A task running in this process: its work, its interrupts, what it produced so far."""

    def __init__(self, record: TaskRecord) -> None:
        self.record = record
        self.work: asyncio.Task[Any] | None = None
        self.interrupts: list[Callable[[], Any]] = []  # register_interrupt
        self.partial: PartialResult | None = None  # record_output
        self.say: Callable[[str], Awaitable[None]] | None = None  # report_status
        self.can_ask = False  # whether its client can answer input requests (ask_input)
        self.ask: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None  # ask_input
        self.asks: dict[str, tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = {}  # key -> request, answer
        self.asked = 0
        self.changed = asyncio.Event()  # set (and replaced) whenever its input requests change
        self.partial_saved: dict[str, Any] | None = None
        self.partial_saved_at = 0.0
        self.cancelling = False
        self.stopping: asyncio.Task[Any] | None = None  # a stop asked for by another server
        self.own_result: dict[str, Any] | None = None  # the tool's complete result, if it returned
        self.own_error: str | None = None
        self.done = asyncio.Event()

    def partial_result(self, ending: str) -> dict[str, Any] | None:
        """The output so far as a result, for a task that ends ``ending`` without its answer."""
        return self.partial(ending) if self.partial is not None else None


Notify = Callable[[TaskRecord], Awaitable[None]]
Deliver = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]  # an input request -> its answer


async def notify_quietly(notify: Notify, record: TaskRecord) -> None:
    """Tell the client the task's new status; a notification that cannot go is let go."""
    try:
        await notify(record)
    except Exception:  # advisory: a session that cannot carry it costs latency only
        log.debug("task status notification for %s not delivered", record.task_id, exc_info=True)


class TaskState:
    """The state submitting, running, the questions and the reads share."""

    def __init__(self, store: TaskStore, *, default_ttl_ms: int, max_ttl_ms: int, poll_interval_ms: int,
                 server_id: str | None = None, limits: Limits = Limits()) -> None:
        self.store = store
        self.default_ttl_ms = default_ttl_ms
        self.max_ttl_ms = max_ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.server_id = server_id or uuid.uuid4().hex
        self.limits = limits
        self.runs: dict[str, Run] = {}
        self._submitting: Counter[str] = Counter()  # owner -> submits past the limit check, not yet running
        self._key_locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}  # key -> (lock, [users])

    async def get(self, owner: str, task_id: Any) -> TaskRecord:
        if not isinstance(task_id, str) or not task_id:
            raise TaskError(INVALID_PARAMS, "taskId must be a non-empty string")
        record = await self.store.get(task_id)
        if record is None or record.owner != owner:  # another user's task does not exist for you
            raise no_such_task(task_id)
        return await self._settled(record)

    async def _settled(self, record: TaskRecord) -> TaskRecord:
        """A record working for a run this server no longer has (its final state never landed)
        answers failed: working means a run is going on."""
        if record.terminal or record.server_id != self.server_id or record.task_id in self.runs:
            return record
        message = "its run ended, but its final state could not be stored (the task store was unreachable)"
        failed = await self.store.update(record.task_id, status=FAILED, status_message=message, input_requests=None,
                                         error={"message": message, "partial": record.partial}, partial=None)
        return failed or await self.store.get(record.task_id) or record

    def _oversize(self, result: dict[str, Any] | None) -> str | None:
        """Why ``result`` is too large to keep, or None."""
        if result is None:
            return None
        size = len(json.dumps(result, separators=(",", ":"), ensure_ascii=False, default=str).encode())
        if size <= self.limits.result_bytes:
            return None
        return (f"its result is {size:,} bytes, more than the {self.limits.result_bytes:,} a task keeps "
                "(JupyterMCPApp.max_task_result_bytes)")

    def _keepable(self, result: dict[str, Any] | None) -> dict[str, Any] | None:
        """A partial result as kept: none, rather than one past the size bound."""
        return None if self._oversize(result) else result
