"""Running tool calls as tasks: create, run in the background, cancel, keep the result.

Knows nothing of notebooks or of the MCP wire: it gets a coroutine factory that
produces the tool's result (as the CallToolResult wire dict); what a tool records with
the hooks (its interrupts, how to render its partial output) it keeps without looking in.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .hooks import PartialResult, current_task
from .records import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, WORKING, TaskRecord, TaskStore, new_task_id

log = logging.getLogger(__name__)

PARTIAL_PERSIST_SEC = 1.0  # how often recorded output is written to a shared store
CANCEL_GRACE_SEC = 2.0  # after the interrupt, how long the work may take to return its own result
FINAL_WRITE_RETRY_SEC = (0.25, 5.0)  # first and longest wait between two tries of a final state's write
FINAL_WRITE_PATIENCE_SEC = 600.0  # how long a final state is tried while the store cannot be reached


class TaskError(Exception):
    """A tasks/* request that cannot be answered; ``code`` is the JSON-RPC error code."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
LIMIT_REACHED = -32000  # JSON-RPC's implementation-defined server error: a per-user bound of tasks


@dataclass(frozen=True)
class Limits:
    """What one user may hold: tasks running on this server, tasks kept in the store (running
    or finished within their ttl), and the size of one kept result (its JSON, in bytes)."""

    running_per_owner: int = 20
    kept_per_owner: int = 500
    result_bytes: int = 1 << 20


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


class TaskManager:
    def __init__(self, store: TaskStore, *, default_ttl_ms: int, max_ttl_ms: int, poll_interval_ms: int,
                 server_id: str | None = None, limits: Limits = Limits()) -> None:
        self.store = store
        self.default_ttl_ms = default_ttl_ms
        self.max_ttl_ms = max_ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.server_id = server_id or uuid.uuid4().hex
        self.limits = limits
        self.runs: dict[str, _Run] = {}
        self._submitting: Counter[str] = Counter()  # owner -> submits past the limit check, not yet running
        self._key_locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}  # key -> (lock, [users])

    # -- creating ----------------------------------------------------------------

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
        run = _Run(stored)
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
        run.say = lambda message: self._say(run, message, notify)
        run.ask = lambda request: self._ask(run, request, notify)
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
                oversize = self._oversize(result)
                if oversize is not None:
                    run.own_result = None
                    run.own_error = (f"the tool finished, but {oversize}, so it was not kept. What the call changed "
                                     "stays (a run's outputs are in the notebook: read them with cell_get and a "
                                     "smaller max_output_chars), or call without a task")
            if run.cancelling:
                return  # the tool's own result wins, but the cancel path sets the status
            if supervisor is not None:  # from here on the final state is ours to write
                supervisor.cancel()
            if run.own_error is not None:
                final = await self._write_final(
                    run, status=FAILED, status_message=run.own_error,
                    # the tool's own answer (an error cell's outputs and traceback) is the result;
                    # a tool that raised leaves its output so far
                    error={"message": run.own_error,
                           "partial": None if run.own_result else self._keepable(run.partial_result(FAILED))},
                    partial=None, result=run.own_result)
            else:
                final = await self._write_final(run, status=COMPLETED, result=run.own_result, partial=None)
            if final is not None:
                await _notify(notify, final)
        finally:
            current_task.reset(token)
            if supervisor is not None:
                supervisor.cancel()
            run.done.set()
            if not run.cancelling:
                self.runs.pop(run.record.task_id, None)

    async def _ask(self, run: _Run, request: dict[str, Any], notify: Notify) -> dict[str, Any]:
        """Ask the task's client ``request`` (an elicitation/create): the task is input_required,
        the request listed under a key of its own, until an answer comes (``answer``). A request
        the work stops waiting for (its run interrupted, cancelled) is withdrawn."""
        run.asked += 1
        key = f"input-{run.asked}"
        answered: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        run.asks[key] = (request, answered)
        try:
            await self._show_requests(run, notify)
            return await answered
        finally:
            del run.asks[key]
            answered.cancel()  # a deliverer still waiting on its client stops (no-op once answered)
            await asyncio.shield(self._show_requests(run, notify))

    async def _show_requests(self, run: _Run, notify: Notify) -> None:
        """The run's outstanding input requests, into its record (status input_required while any)."""
        requests = {key: request for key, (request, _) in run.asks.items()}
        changed, run.changed = run.changed, asyncio.Event()
        changed.set()
        try:
            record = await self.store.update(run.record.task_id, status=INPUT_REQUIRED if requests else WORKING,
                                             input_requests=requests or None)
        except Exception:  # this server's clients still see them (finished reads the run)
            log.warning("jupyter_mcp: task %s: its input requests could not be stored", run.record.task_id,
                        exc_info=True)
            return
        if record is not None:
            await _notify(notify, record)

    async def answer(self, owner: str, task_id: Any, responses: dict[str, Any]) -> None:
        """Answers to a task's input requests, by key; a key that is not outstanding is ignored.
        A run on another server is handed them through the store (its supervisor reads them)."""
        record = await self.get(owner, task_id)
        run = self.runs.get(record.task_id)
        if run is not None:
            self._hand(run, responses)
            return
        outstanding = {k: v for k, v in responses.items() if k in (record.input_requests or {})}
        if outstanding and not record.terminal:
            await self.store.update(record.task_id, input_responses={**(record.input_responses or {}), **outstanding})

    @staticmethod
    def _hand(run: _Run, responses: dict[str, Any]) -> None:
        for key, response in responses.items():
            pending = run.asks.get(key)
            if pending is not None and not pending[1].done():
                pending[1].set_result(response)

    async def _say(self, run: _Run, message: str, notify: Notify) -> None:
        """A working task's new status message (advisory: a store that is away costs it only)."""
        try:
            record = await self.store.update(run.record.task_id, status_message=message)
        except Exception:
            log.debug("task %s: status message not stored", run.record.task_id, exc_info=True)
            return
        if record is not None:
            await _notify(notify, record)

    async def _write_final(self, run: _Run, **changes: Any) -> TaskRecord | None:
        """Write a run's final state, whatever the store goes through meanwhile.

        A store that cannot be reached (Redis restarting) is tried again, waiting longer each
        time, for up to FINAL_WRITE_PATIENCE_SEC: the state lands once it is back. A store that
        answers but refuses this write gets a small failed state instead, naming why. If neither
        lands, the run ends anyway, and the record of a run this server no longer has answers
        failed when next read (``_settled``): a task never stays working for a run that ended."""
        task_id = run.record.task_id
        changes.setdefault("input_requests", None)  # nothing is asked of a task that ended
        wait, longest = FINAL_WRITE_RETRY_SEC
        give_up = time.monotonic() + FINAL_WRITE_PATIENCE_SEC
        warned = fallback = answered = False  # answered: the store answered a read just before this write
        while True:
            try:
                return await self.store.update(task_id, **changes)
            except Exception as exc:
                failure = exc
            if not fallback and await self._answers(task_id):
                if not answered:  # it may just be back: try the state again at once
                    answered = True
                    continue
                # it answered before this write and after it: it refuses this state
                message = f"the task's final state could not be stored: {type(failure).__name__}: {failure}"
                log.error("jupyter_mcp: task %s: %s", task_id, message)
                changes = {"status": FAILED, "status_message": message, "result": None, "partial": None,
                           "input_requests": None, "error": {"message": message, "partial": None}}
                fallback = True
                continue
            answered = False
            if not warned:
                log.warning("jupyter_mcp: task %s ended but its state cannot be stored yet (%s: %s); trying again "
                            "until the task store answers", task_id, type(failure).__name__, failure)
                warned = True
            if time.monotonic() > give_up:
                log.error("jupyter_mcp: task %s: the task store did not answer for %gs; its final state is lost, and "
                          "it answers failed once the store is back", task_id, FINAL_WRITE_PATIENCE_SEC)
                return None
            await asyncio.sleep(wait)
            wait = min(wait * 2, longest)

    async def _answers(self, task_id: str) -> bool:
        """Whether the store answers a read now."""
        try:
            await self.store.get(task_id)
        except Exception:
            return False
        return True

    async def _supervise(self, run: _Run) -> None:
        """With a shared store: write partial output now and then, and obey a cancel made
        by another server (it can mark the task, only we can stop the kernel)."""
        while True:
            await asyncio.sleep(self.poll_interval_ms / 1000)
            try:
                record = await self.store.get(run.record.task_id)
            except Exception:  # the store is away for now: the run goes on, and so does this
                log.debug("task %s: the task store did not answer", run.record.task_id, exc_info=True)
                continue
            if record is not None and record.input_responses:
                self._hand(run, record.input_responses)  # answered on another server
            if record is None or record.status == CANCELLED:
                if not run.cancelling:
                    # In a task of its own: the run's end cancels this supervisor, which must
                    # not cut the stop short (it forgets the run at its end).
                    run.stopping = asyncio.create_task(self._stop(run), name=f"mcp-task-stop-{run.record.task_id}")
                return
            if time.monotonic() - run.partial_saved_at > PARTIAL_PERSIST_SEC:
                partial = self._keepable(run.partial_result(CANCELLED))  # what a cancel made elsewhere serves
                if partial is not None and partial != run.partial_saved:
                    run.partial_saved, run.partial_saved_at = partial, time.monotonic()
                    with contextlib.suppress(Exception):  # the next round writes it
                        await self.store.update(run.record.task_id, partial=partial)

    # -- reading ---------------------------------------------------------------------

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

    async def _deliver(self, owner: str, task_id: str, run: _Run | None, key: str, request: dict[str, Any],
                       deliver: Deliver) -> None:
        """Put one input request to the asker and hand its answer over; given up when the run
        withdraws the request first (interrupted, timed out, cancelled)."""
        asking = asyncio.ensure_future(deliver(request))
        pending = run.asks.get(key) if run is not None else None
        if pending is not None:
            await asyncio.wait([asking, pending[1]], return_when=asyncio.FIRST_COMPLETED)
            if not asking.done():
                asking.cancel()
                await asyncio.gather(asking, return_exceptions=True)
                return
        response = await asking
        await self.answer(owner, task_id, {key: response})

    # -- cancelling --------------------------------------------------------------------

    async def cancel(self, owner: str, task_id: Any, notify: Notify) -> TaskRecord:
        """Interrupt the work first, then stop waiting for it; answer the task."""
        record = await self.get(owner, task_id)
        if record.terminal:
            raise TaskError(INVALID_PARAMS, f"task {record.task_id!r} is already {record.status}; "
                                            "a finished task cannot be cancelled")
        run = self.runs.get(record.task_id)
        if run is None:  # running on another server: mark it, that server stops its work
            final = await self.store.update(record.task_id, status=CANCELLED, input_requests=None,
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
        # The tool returned while the cancel landed: its own result wins.
        result = run.own_result if run.own_result is not None else self._keepable(run.partial_result(CANCELLED))
        try:
            return await self._write_final(run, status=CANCELLED, status_message="cancelled by request",
                                           result=result, partial=None)
        finally:
            self.runs.pop(run.record.task_id, None)

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
            try:  # once: a store that is away now cannot hold the stop up (its lease ends these tasks)
                await self.store.update(run.record.task_id, status=FAILED, input_requests=None,
                                        status_message="server stopped", partial=None,
                                        error={"message": "server stopped",
                                               "partial": self._keepable(run.partial_result(FAILED))})
            except Exception as exc:
                log.warning("jupyter_mcp: task %s: could not mark it stopped: %s", run.record.task_id, exc)
        self.runs.clear()
        stop = getattr(self.store, "stop", None)
        if stop is not None:
            await stop()


async def _notify(notify: Notify, record: TaskRecord) -> None:
    try:
        await notify(record)
    except Exception:  # advisory: a session that cannot carry it costs latency only
        log.debug("task status notification for %s not delivered", record.task_id, exc_info=True)


def _text_of(result: dict[str, Any], limit: int = 2000) -> str:
    """A result's text, as a task's status message: its end when long (where a traceback says what
    went wrong)."""
    text = "\n".join(c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text").strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def _encode_cursor(record: TaskRecord) -> str:
    return f"{record.created_at!r}|{record.task_id}"


def _decode_cursor(cursor: Any) -> tuple[float, str]:
    try:
        created, task_id = str(cursor).split("|", 1)
        return float(created), task_id
    except ValueError:
        raise TaskError(INVALID_PARAMS, f"invalid cursor {cursor!r}") from None
