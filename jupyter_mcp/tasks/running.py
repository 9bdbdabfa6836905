"""Running a task and seeing it to its end: its work in the background, the final state written
whatever the store goes through meanwhile, a supervisor that (with a shared store) keeps the
output so far and obeys a cancel made on another server, and the cancel and the server's stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .errors import INVALID_PARAMS, TaskError
from .hooks import current_task
from .questions import Questions
from .records import CANCELLED, COMPLETED, FAILED, TaskRecord
from .state import Notify, Run, notify_quietly

log = logging.getLogger(__name__)

PARTIAL_PERSIST_SEC = 1.0  # how often recorded output is written to a shared store
CANCEL_GRACE_SEC = 2.0  # after the interrupt, how long the work may take to return its own result
FINAL_WRITE_RETRY_SEC = (0.25, 5.0)  # first and longest wait between two tries of a final state's write
FINAL_WRITE_PATIENCE_SEC = 600.0  # how long a final state is tried while the store cannot be reached


class Running(Questions):
    """A task's run, from its start to its final state; its cancel; the server's stop."""

    async def _run(self, run: Run, work: Callable[[], Awaitable[dict[str, Any]]], notify: Notify) -> None:
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
                await notify_quietly(notify, final)
        finally:
            current_task.reset(token)
            if supervisor is not None:
                supervisor.cancel()
            run.done.set()
            if not run.cancelling:
                self.runs.pop(run.record.task_id, None)

    async def _say(self, run: Run, message: str, notify: Notify) -> None:
        """A working task's new status message (advisory: a store that is away costs it only)."""
        try:
            record = await self.store.update(run.record.task_id, status_message=message)
        except Exception:
            log.debug("task %s: status message not stored", run.record.task_id, exc_info=True)
            return
        if record is not None:
            await notify_quietly(notify, record)

    async def _write_final(self, run: Run, **changes: Any) -> TaskRecord | None:
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

    async def _supervise(self, run: Run) -> None:
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
        await notify_quietly(notify, final)
        return final

    async def _stop(self, run: Run) -> TaskRecord | None:
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


def _text_of(result: dict[str, Any], limit: int = 2000) -> str:
    """A result's text, as a task's status message: its end when long (where a traceback says what
    went wrong)."""
    text = "\n".join(c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text").strip()
    return text if len(text) <= limit else "…" + text[-limit:]
