"""THE loop that waits on a kernel: ``RunLoop.run`` is the only place that sends code and waits
for it. Timeouts, interrupts, dead kernels, restarts and the code's input requests are handled
here once for every tool that executes. It knows nothing of documents or tasks: its caller
passes hooks (``on_start`` gets the way to interrupt this run, ``on_event`` each output as it
arrives, ``on_input`` how the code's ``input()`` is answered)."""

from __future__ import annotations

import asyncio
import queue
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from .clients import ConnectionClosed, is_remote
from .messages import Collector, Execution, OnEvent
from .state import KernelDied, KernelState, NotStarted

IDLE_CHECK_SEC = 1.0  # how often a silent kernel is checked for being alive
INTERRUPT_GRACE_SEC = 5.0  # how long to wait for the kernel to settle after an interrupt

#: Called once the run holds its kernel, just before the code is sent, with the run's interrupt.
OnStart = Callable[[Callable[[], Awaitable[None]]], Awaitable[None]]
OnInput = Callable[[str, bool], Awaitable[str]]  # (prompt, password) -> the line to send; raises Refused


class Refused(Exception):
    """The code gets no answer; the message says why (the run is interrupted)."""


async def acquire_within(lock: asyncio.Lock, seconds: float) -> bool:
    """Whether ``lock`` was acquired within ``seconds``. A wait that gives up, or is cancelled,
    never leaves the lock held (Python 3.10 has no ``asyncio.timeout``, and its ``wait_for``
    can time out an acquire that had just won)."""
    acquiring = asyncio.ensure_future(lock.acquire())
    try:
        done, _ = await asyncio.wait({acquiring}, timeout=seconds)
    except BaseException:
        _abandon(lock, acquiring)
        raise
    if not done:
        _abandon(lock, acquiring)
    return bool(done)


def _abandon(lock: asyncio.Lock, acquiring: asyncio.Future[Literal[True]]) -> None:
    """Stop waiting for ``lock``; should the acquire have won meanwhile, release it."""
    acquiring.cancel()
    acquiring.add_done_callback(lambda task: lock.release() if not task.cancelled() and task.exception() is None
                                else None)


class RunLoop(KernelState):
    """Code sent to a kernel and waited for, one run at a time per kernel."""

    async def run(self, kernel_id: str, code: str, *, timeout: float, deadline: float | None = None,
                  on_start: OnStart | None = None, on_event: OnEvent | None = None,
                  stop_on_error: bool = True, on_input: OnInput | None = None) -> Execution:
        """Run ``code`` and wait for it: the one loop that waits on a kernel.

        Every output message becomes an event for ``on_event`` as it arrives (so a
        document and a client can show it live) and is collected in the result. Every wait
        counts against ``timeout`` (which ends at ``deadline``, if the call began earlier):
        behind another run on the kernel, for the kernel to be ready, for the code. When it
        runs out before the code is sent, nothing is run; after, the kernel is interrupted
        and the outputs so far are returned. ``stop_on_error``: whether an error makes the
        kernel abort the requests queued behind it (a person's queued cells). ``on_input``: how
        the code's input() is answered; without it the kernel is told there is no stdin.
        """
        deadline = time.monotonic() + timeout if deadline is None else deadline
        lock = self._run_locks[kernel_id]
        if not await acquire_within(lock, max(0.0, deadline - time.monotonic())):
            return Execution(status="timeout", message=f"timed out after {timeout:g}s waiting behind another "
                                                       "run on this kernel; this code was not run")
        try:
            return await self._run_locked(kernel_id, code, timeout, deadline, on_start, on_event, stop_on_error,
                                          on_input)
        finally:
            self._touch(kernel_id)
            lock.release()

    async def _run_locked(self, kernel_id: str, code: str, timeout: float, deadline: float,
                          on_start: OnStart | None, on_event: OnEvent | None, stop_on_error: bool,
                          on_input: OnInput | None) -> Execution:
        if kernel_id not in self.km:
            raise KernelDied("the notebook's kernel was shut down before this code was sent (it was not run); "
                             "the next call starts a fresh kernel")
        if not await self._alive(kernel_id):
            self.forget(kernel_id)
            if is_remote(self.km.get_kernel(kernel_id)):
                await self._forget_gone_remote()
                raise KernelDied("the notebook's kernel is gone from its gateway (the gateway restarted, or culled "
                                 "it); this code was not run; the next call starts a fresh kernel")
            await self.km.restart_kernel(kernel_id, now=True)
        try:
            client = await self._client(kernel_id, timeout=max(0.1, deadline - time.monotonic()))
        except NotStarted:
            return Execution(status="timeout", message=f"timed out after {timeout:g}s: the kernel was not "
                                                       "ready by then; this code was not run")
        result = Execution()
        collector = Collector(result, on_event)
        restarts = self._restarts[kernel_id]
        if on_start is not None:
            await on_start(lambda: self.interrupt(kernel_id))
        msg_id = client.execute(code, allow_stdin=on_input is not None, stop_on_error=stop_on_error)
        answering = (asyncio.create_task(self._answer_input(kernel_id, client, msg_id, on_input, collector),
                                         name=f"mcp-stdin-{msg_id}") if on_input is not None else None)
        try:
            settled = await self._wait(kernel_id, client, msg_id, result, collector, timeout, deadline, restarts)
        except asyncio.CancelledError:
            # Cancelled (a task's cancel interrupts first): let the kernel settle before
            # the next run, or it aborts requests that arrive right after the error.
            await self._settle(client, msg_id)
            raise
        finally:
            if answering is not None:  # the code ended: a question still open is withdrawn
                answering.cancel()
                await asyncio.gather(answering, return_exceptions=True)
                if not answering.cancelled() and answering.exception() is not None:
                    self.log.error("jupyter_mcp: answering the code's input requests failed", exc_info=answering.exception())
        reply = await self._reply(client, msg_id) if settled else None
        content = reply.get("content", {}) if reply else {}
        count = content.get("execution_count")
        if isinstance(count, (int, float)):
            result.execution_count = int(count)
        if result.status == "ok" and content.get("status") in ("error", "aborted"):
            result.status = content["status"]
        if result.status == "ok" and reply is None and any(o.get("output_type") == "error" for o in result.outputs):
            result.status = "error"  # no reply (the kernel went down after the error): its outputs tell
        if result.status == "aborted":
            result.message = "the kernel aborted this execution: an earlier one failed just before it"
        if result.status == "error" and any(o.get("ename") == "KeyboardInterrupt" for o in result.outputs):
            result.status = "interrupted"
        return result

    async def _wait(self, kernel_id: str, client: Any, msg_id: str, result: Execution, collector: Collector,
                    timeout: float, deadline: float, restarts: int) -> bool:
        """Collect the execution's output until it is idle (True), or give up after the
        call's ``timeout`` (its ``deadline``) once the kernel ignored the interrupt (False).
        A restart of the kernel (``restarts`` counted when the code was sent) ends it."""
        interrupted_at: float | None = None
        while True:
            if self._restarts[kernel_id] != restarts:
                raise KernelDied("the kernel was restarted while this code ran (kernel_restart, or a person's "
                                 "Restart): its variables are gone; outputs so far are kept")
            now = time.monotonic()
            if interrupted_at is None and now >= deadline:
                result.status = "timeout"
                result.message = f"timed out after {timeout:g}s; the kernel was interrupted"
                interrupted_at = now
                await self.interrupt(kernel_id)
            if interrupted_at is not None and now - interrupted_at > INTERRUPT_GRACE_SEC:
                result.message = (f"timed out after {timeout:g}s; the kernel did not stop after an "
                                  "interrupt and may still be busy")
                return False
            limit = deadline if interrupted_at is None else interrupted_at + INTERRUPT_GRACE_SEC
            try:
                msg = await client.get_iopub_msg(timeout=max(0.01, min(IDLE_CHECK_SEC, limit - now)))
            except ConnectionClosed:
                self.forget(kernel_id)
                raise KernelDied("the connection to the kernel's gateway closed while this code ran; outputs so "
                                 "far are kept; the next call connects again") from None
            except queue.Empty:
                if self._restarts[kernel_id] != restarts:
                    continue  # said above
                if not await self._alive(kernel_id):
                    self.forget(kernel_id)
                    raise KernelDied("the kernel died while running this code (out of memory, or killed); "
                                     "outputs so far are kept; the next call starts a fresh kernel") from None
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue  # another client's execution (the UI's) on the same kernel
            if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                return True
            await collector.handle(msg)

    async def _answer_input(self, kernel_id: str, client: Any, msg_id: str, on_input: OnInput,
                            collector: Collector) -> None:
        """Answer the execution's input requests (the kernel's stdin channel) until cancelled.
        The prompt and the line typed are shown in the outputs as a terminal shows them (a
        password is not); a refusal is said in the result and interrupts the kernel."""
        while True:
            try:
                msg = await client.get_stdin_msg(timeout=IDLE_CHECK_SEC)
            except queue.Empty:
                continue
            except ConnectionClosed:
                return
            if msg.get("msg_type") != "input_request" or msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            prompt, password = str(msg["content"].get("prompt", "")), bool(msg["content"].get("password"))
            if prompt:
                await collector.handle({"msg_type": "stream", "content": {"name": "stdout", "text": prompt}})
            try:
                line = await on_input(prompt, password)
            except Refused as exc:
                collector.result.message = str(exc)
                await self.interrupt(kernel_id)
                continue
            client.input(line)
            if not password:
                await collector.handle({"msg_type": "stream", "content": {"name": "stdout", "text": line + "\n"}})

    async def _settle(self, client: Any, msg_id: str) -> None:
        """Read until the execution ``msg_id`` is idle (bounded), discarding its output."""
        deadline = time.monotonic() + INTERRUPT_GRACE_SEC
        while time.monotonic() < deadline:
            try:
                msg = await client.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
            except (queue.Empty, ConnectionClosed):
                return
            if (msg.get("parent_header", {}).get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"].get("execution_state") == "idle"):
                return

    async def _reply(self, client: Any, msg_id: str) -> dict[str, Any] | None:
        """The shell reply to ``msg_id`` (it arrives around the idle status)."""
        deadline = time.monotonic() + INTERRUPT_GRACE_SEC
        while time.monotonic() < deadline:
            try:
                msg = await client.get_shell_msg(timeout=max(0.01, deadline - time.monotonic()))
            except (queue.Empty, ConnectionClosed):
                return None
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                return msg
        return None
