"""Unit tests of the kernel loop and its hooks against fake kernel messages (no Jupyter, no
kernel): outputs collected as JupyterLab collects them, the run's interrupt handed to
``on_start`` before the code is sent, and the execution layer wiring both task hooks."""

from __future__ import annotations

import asyncio
import queue
from types import SimpleNamespace

import pytest

from jupyter_mcp.tools import execution
from jupyter_mcp.kernels.sessions import Kernels
from jupyter_mcp.tasks.hooks import current_task
from jupyter_mcp.tasks.state import Run
from jupyter_mcp.tasks.records import TaskRecord
from jupyter_mcp.testing import eventually

pytestmark = pytest.mark.unit

MSG_ID = "run-1"


def iopub(kind: str, parent: str = MSG_ID, **content) -> dict:
    return {"msg_type": kind, "parent_header": {"msg_id": parent}, "content": content}


def stream(text: str, name: str = "stdout") -> dict:
    return iopub("stream", name=name, text=text)


IDLE = iopub("status", execution_state="idle")


class FakeClient:
    """A kernel client whose kernel answers with ``script`` (iopub messages) and ``reply``."""

    def __init__(self, kernel: FakeKernel) -> None:
        self.kernel = kernel
        self.iopub: asyncio.Queue = asyncio.Queue()
        self.shell: asyncio.Queue = asyncio.Queue()
        self.allow_stdin = True

    def start_channels(self) -> None:
        pass

    def stop_channels(self) -> None:
        self.kernel.log.append("stop_channels")

    async def wait_for_ready(self, timeout: float) -> None:
        pass

    def execute(self, code: str, allow_stdin: bool, stop_on_error: bool) -> str:
        self.kernel.log.append(("execute", code))
        for msg in self.kernel.script:
            self.iopub.put_nowait(msg)
        self.shell.put_nowait({"parent_header": {"msg_id": MSG_ID}, "content": self.kernel.reply})
        return MSG_ID

    async def get_iopub_msg(self, timeout: float) -> dict:
        return await self._get(self.iopub, timeout)

    async def get_shell_msg(self, timeout: float) -> dict:
        return await self._get(self.shell, timeout)

    @staticmethod
    async def _get(channel: asyncio.Queue, timeout: float) -> dict:
        try:
            return await asyncio.wait_for(channel.get(), timeout)
        except asyncio.TimeoutError:
            raise queue.Empty from None


class FakeKernel:
    def __init__(self, script: list[dict], reply: dict | None = None) -> None:
        self.script = script
        self.reply = reply or {"status": "ok", "execution_count": 7}
        self.log: list = []
        self.the_client = FakeClient(self)

    def client(self) -> FakeClient:
        return self.the_client

    async def is_alive(self) -> bool:
        return True


class FakeKernelManager:
    def __init__(self, kernel: FakeKernel) -> None:
        self.kernel = kernel

    def __contains__(self, kernel_id: str) -> bool:
        return kernel_id == "k"

    def get_kernel(self, kernel_id: str) -> FakeKernel:
        return self.kernel

    async def interrupt_kernel(self, kernel_id: str) -> None:
        self.kernel.log.append("interrupt")
        client = self.kernel.the_client
        client.iopub.put_nowait(iopub("error", ename="KeyboardInterrupt", evalue="", traceback=["KeyboardInterrupt"]))
        client.iopub.put_nowait(IDLE)
        self.kernel.reply = {"status": "error", "execution_count": 8}


def kernels_with(script: list[dict], reply: dict | None = None) -> tuple[Kernels, FakeKernel]:
    """Kernels whose notebook NB has the fake kernel "k" as its session's kernel."""
    kernel = FakeKernel(script, reply)
    kernels = Kernels(SimpleNamespace(kernel_manager=FakeKernelManager(kernel)))
    kernels._by_path[NB.path] = "k"
    return kernels, kernel


NB = SimpleNamespace(path="nb.ipynb", kernelspec_name=lambda: None)


async def run_as_tool(kernels: Kernels, code: str, timeout: float = 5):
    """What code_execute does: the run started with its stop registered."""
    return await execution.Runs(None, None, kernels).scratch(NB, code, timeout, None)


async def test_on_start_gets_the_interrupt_before_the_code_is_sent():
    kernels, kernel = kernels_with([stream("hi\n"), IDLE])

    async def on_start(interrupt):
        kernel.log.append("on_start")
        await interrupt()

    await kernels.run("k", "print('hi')", timeout=5, on_start=on_start)
    assert kernel.log[:3] == ["on_start", "interrupt", ("execute", "print('hi')")]


async def test_outputs_are_collected_as_jupyterlab_collects_them():
    script = [
        iopub("execute_input", execution_count=7, code="..."),
        stream("a"), stream("b\n"), stream("oops\n", name="stderr"),
        stream("not ours\n") | {"parent_header": {"msg_id": "the-ui's"}},  # another client's run: ignored
        iopub("display_data", data={"text/plain": "v1"}, metadata={}, transient={"display_id": "d"}),
        iopub("update_display_data", data={"text/plain": "v2"}, metadata={}, transient={"display_id": "d"}),
        iopub("update_display_data", data={"text/plain": "?"}, metadata={}, transient={"display_id": "unknown"}),
        iopub("clear_output", wait=True), stream("after the clear\n"),
        iopub("execute_result", data={"text/plain": "42"}, metadata={}, execution_count=7),
        IDLE,
    ]
    kernels, _ = kernels_with(script)
    events = []

    async def on_event(event, so_far):
        events.append((event["kind"], len(so_far)))

    result = await kernels.run("k", "code", timeout=5, on_event=on_event)
    assert result.status == "ok" and result.execution_count == 7
    assert result.outputs == [
        {"output_type": "stream", "name": "stdout", "text": "after the clear\n"},
        {"output_type": "execute_result", "data": {"text/plain": "42"}, "metadata": {}, "execution_count": 7},
    ]
    assert events == [("output", 1), ("stream", 1), ("output", 2), ("output", 3), ("update", 3),
                      ("clear", 0), ("output", 1), ("output", 2)]


async def test_a_timeout_interrupts_and_keeps_the_outputs_so_far():
    kernels, kernel = kernels_with([stream("started\n")])  # never idle on its own
    result = await kernels.run("k", "while True: pass", timeout=0.2)
    assert "interrupt" in kernel.log
    assert result.status == "timeout" and "timed out after 0.2s" in result.message
    assert result.outputs[0]["text"] == "started\n" and result.outputs[-1]["ename"] == "KeyboardInterrupt"


async def test_reply_statuses():
    kernels, _ = kernels_with([IDLE], reply={"status": "aborted"})
    aborted = await kernels.run("k", "x", timeout=5)
    assert aborted.status == "aborted" and "aborted" in aborted.message
    kernels, _ = kernels_with([iopub("error", ename="KeyboardInterrupt", evalue="", traceback=[]), IDLE],
                              reply={"status": "error", "execution_count": 2})
    interrupted = await kernels.run("k", "x", timeout=5)
    assert interrupted.status == "interrupted" and interrupted.execution_count == 2


async def test_inside_a_task_the_execution_layer_wires_both_hooks():
    kernels, kernel = kernels_with([stream("line 1\n"), stream("line 2\n"), IDLE])
    run = Run(TaskRecord(task_id="t", owner="me", tool="code_execute"))
    token = current_task.set(run)
    try:
        await run_as_tool(kernels, "code")
    finally:
        current_task.reset(token)
    assert len(run.interrupts) == 1
    await run.interrupts[0]()
    assert "interrupt" in kernel.log  # the registered interrupt is this run's kernel interrupt
    cancelled = run.partial_result("cancelled")
    assert cancelled["isError"] is False and cancelled["structuredContent"]["partial"] is True
    assert cancelled["structuredContent"]["status"] == "cancelled"
    assert cancelled["content"][0]["text"] == "line 1\nline 2\n"
    assert cancelled["content"][-1]["text"] == "[cancelled: the outputs so far]"
    failed = run.partial_result("failed")
    assert failed["isError"] is True and failed["structuredContent"]["status"] == "error"


async def test_outside_a_task_the_hooks_do_nothing_and_a_silent_run_keeps_no_partial():
    kernels, _ = kernels_with([IDLE])
    result = await run_as_tool(kernels, "pass")  # no task: nothing to register with
    assert result.status == "ok" and result.outputs == []
    run = Run(TaskRecord(task_id="t", owner="me", tool="code_execute"))
    token = current_task.set(run)
    try:
        await run_as_tool(kernels_with([IDLE])[0], "pass")
    finally:
        current_task.reset(token)
    assert run.partial_result("cancelled") is None  # nothing to keep: no result rather than an empty one


async def _now(value):
    return value


async def sent(kernel, code: str) -> None:
    """Until the kernel was sent ``code`` (the run holds the kernel from then on)."""
    await eventually(lambda: _now(("execute", code) in kernel.log), timeout=5, what=f"{code} sent")


async def test_a_run_stopped_while_it_waits_behind_another_never_sends_its_code():
    kernels, kernel = kernels_with([stream("first\n")])  # the first run never goes idle by itself
    first = asyncio.create_task(kernels.run("k", "first()", timeout=30))
    await sent(kernel, "first()")
    run = Run(TaskRecord(task_id="t", owner="me", tool="code_execute"))
    token = current_task.set(run)
    try:
        second = asyncio.create_task(run_as_tool(kernels, "second()"))
        await eventually(lambda: _now(run.interrupts), timeout=5, what="the waiting run's stop registered")
    finally:
        current_task.reset(token)
    assert len(run.interrupts) == 1  # registered while still waiting: the stop, not an interrupt yet
    await run.interrupts[0]()  # what a task's cancel does first
    done, _ = await asyncio.wait([second], timeout=2)
    assert done and second.cancelled()
    assert "interrupt" not in kernel.log  # the first run, someone else's, was not interrupted
    await kernels.interrupt("k")
    await first
    assert ("execute", "second()") not in kernel.log


async def test_every_wait_counts_against_the_timeout_and_a_late_run_is_not_sent():
    kernels, kernel = kernels_with([stream("first\n")])
    first = asyncio.create_task(kernels.run("k", "first()", timeout=30))
    await sent(kernel, "first()")
    late = await run_as_tool(kernels, "second()", timeout=0.3)
    assert late.status == "timeout" and "this code was not run" in late.message
    await kernels.interrupt("k")
    await first
    assert ("execute", "second()") not in kernel.log


def _valid_output(output: dict) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=[output])])
    nbformat.validate(nb)


def test_odd_kernel_messages_become_valid_nbformat_outputs():
    from jupyter_mcp.kernels.messages import _output_from_msg

    five = _output_from_msg("display_data", {"data": {"text/plain": 5, "text/html": ["<b>", 7, None],
                                                      "application/json": {"a": [1]},
                                                      "application/vnd.x+json": 3, "image/png": {"no": 1}},
                                             "metadata": "not a dict", "transient": {"display_id": ["a"]}})
    assert five["data"] == {"text/plain": "5", "text/html": ["<b>", "7", "null"], "application/json": {"a": [1]},
                            "application/vnd.x+json": 3, "image/png": '{"no": 1}'}
    assert five["metadata"] == {} and "transient" not in five
    result = _output_from_msg("execute_result", {"data": None, "execution_count": "3"})
    stream_ = _output_from_msg("stream", {"name": 1, "text": ["a", 2]})
    error = _output_from_msg("error", {"ename": 1, "evalue": None, "traceback": "one line"})
    for output in (five, result, stream_, error):
        _valid_output(output)
    assert result["data"] == {} and result["execution_count"] is None
    assert stream_ == {"output_type": "stream", "name": "stdout", "text": "a2"}
    assert error["ename"] == "1" and error["evalue"] == "null" and error["traceback"] == ["one line"]


async def test_a_display_id_that_is_not_a_string_is_not_tracked_and_the_output_is_kept():
    kernels, _ = kernels_with([
        iopub("display_data", data={"text/plain": "x"}, metadata={}, transient={"display_id": ["a"]}),
        iopub("update_display_data", data={"text/plain": "y"}, metadata={}, transient={"display_id": ["a"]}),
        iopub("display_data", data={"text/plain": 5}, metadata={}, transient={"display_id": "d"}),
        iopub("update_display_data", data={"text/plain": 6}, metadata={}, transient={"display_id": "d"}),
        IDLE])
    result = await kernels.run("k", "display(...)", timeout=5)
    assert result.status == "ok"
    assert [o["data"] for o in result.outputs] == [{"text/plain": "x"}, {"text/plain": "6"}]
    for output in result.outputs:
        _valid_output(output)


async def test_a_wait_for_the_run_lock_gives_up_in_time_and_never_leaves_it_held():
    """The wait behind another run (Python 3.10 has no asyncio.timeout): it gives up after its
    time, and neither giving up nor being cancelled leaves the lock held."""
    from jupyter_mcp.kernels.runs import acquire_within

    lock = asyncio.Lock()
    assert await acquire_within(lock, 0.1) and lock.locked()
    assert not await acquire_within(lock, 0.05)  # held by the first: gives up
    waiter = asyncio.ensure_future(acquire_within(lock, 10))
    await asyncio.sleep(0.01)
    waiter.cancel()
    lock.release()  # the lock is free the moment the waiter is cancelled
    await asyncio.gather(waiter, return_exceptions=True)
    await asyncio.sleep(0)
    assert not lock.locked()
    assert await acquire_within(lock, 0.1)
