"""Running a cell (or scratch code) and showing it live.

The kernel loop (``Kernels.run``) produces output events; a ``CellRun`` writes them into
the cell in the live document as they arrive, and a ``ClientStream`` sends them to the
client when it asked for a stream. The cell is found again by id for every write, and the
room again (through the rooms layer) when it was closed and re-created meanwhile, so
outputs always land in the document people see. Inside an MCP task, the run's interrupt
is registered for cancellation and its output so far can become the task's result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fastmcp import Context
from fastmcp.tools.base import ToolResult
from mcp_types import TextContent

from . import cells, outputs
from .activity import Activity
from .errors import NotebookError, logs_its_error
from .kernels import Execution, Kernels, OnEvent, OutputEvent
from .rooms import LiveNotebook, Rooms
from .tasks import record_output, register_interrupt

RUNNING_MARK_SEC = 0.05  # a cell still silent after this shows as running ([*]) at once


class ClientStream:
    """Sends each output to the client as it arrives: progress notifications when the
    client gave a progress token, log messages otherwise."""

    def __init__(self, ctx: Context | None) -> None:
        self.ctx = ctx
        self.sent = 0
        rc = getattr(ctx, "request_context", None) if ctx is not None else None
        meta = getattr(getattr(rc, "_srctx", None), "meta", None) or {}
        self.has_token = meta.get("progress_token") is not None

    async def send(self, event: OutputEvent) -> None:
        if self.ctx is None:
            return
        if event["kind"] == "stream":
            text = event["text"]
        elif event["kind"] in ("output", "update"):
            text = outputs.output_text(event["output"])
        else:
            return
        if not text:
            return
        self.sent += 1
        text = outputs.truncate(text, outputs.DEFAULT_MAX_CHARS, "a streamed output is cut here; the final answer "
                                                                  "shows up to max_output_chars")
        try:
            if self.has_token:
                await self.ctx.report_progress(self.sent, None, text)
            else:
                await self.ctx.info(text)
        except Exception:  # a client that went away must not stop the run
            self.ctx = None


class CellRun:
    """One run of one cell in the live document: marked running, each output written as it
    arrives, finished with its execution count, whatever happened to the room meanwhile."""

    def __init__(self, rooms: Rooms, activity: Activity, nb: LiveNotebook, cell_id: str, index: int,
                 client: ClientStream | None) -> None:
        self.rooms = rooms
        self.activity = activity
        self.nb = nb
        self.cell_id = cell_id
        self.index = index
        self.client = client
        self.outputs: list[dict[str, Any]] = []  # so far: what a re-created room is given
        self.marked = False  # the cell shows as running: outputs cleared, [*]
        self.gone = False  # the cell (or its notebook) went away: keep running, stop writing
        self.retyped: str | None = None  # the type the cell became mid-run (stop writing into it too)
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """The code was sent to the kernel (a run cancelled before that never touches the cell)."""
        # Marking is deferred to the first output (or RUNNING_MARK_SEC): one document update
        # instead of two, each of which jupyter-collaboration also writes to its SQLite store.
        self._timer = asyncio.get_running_loop().call_later(RUNNING_MARK_SEC, self._mark_if_still_there)

    async def output(self, event: OutputEvent, so_far: list[dict[str, Any]]) -> None:
        """One output event from the kernel loop (its ``on_event``)."""
        self.outputs = so_far
        at, caught_up = await self._locate()
        if at is not None:
            if not caught_up:  # a caught-up cell has this output already
                with self.nb.doc.ydoc.transaction():
                    self._mark(at)
                    cells.apply_output_event(self.nb.doc, at, event)
            self.activity.touch(self.nb.room_id)
        if self.client is not None:
            await self.client.send(event)

    async def finish(self, execution: Execution | None) -> None:
        if self._timer is None:  # never started: the cell is as it was
            return
        self._timer.cancel()
        at, _ = await self._locate()
        if at is not None:
            with self.nb.doc.ydoc.transaction():
                self._mark(at)
                cells.end_run(self.nb.doc, at, execution.execution_count if execution else None)
        if self.retyped is not None and execution is not None:
            note = (f"the cell became a {self.retyped} cell while it ran; its outputs are in this "
                    "answer only (the notebook keeps none: only a code cell has outputs)")
            execution.message = f"{execution.message}; {note}" if execution.message else note

    def _mark(self, at: int) -> None:
        if not self.marked:
            self.marked = True
            cells.begin_run(self.nb.doc, at)

    def _mark_if_still_there(self) -> None:
        if not self.marked and not self.gone and self.rooms.is_current(self.nb):
            at = self._find()
            if at is not None:
                self._mark(at)

    async def _locate(self) -> tuple[int | None, bool]:
        """The cell's index in the notebook's room now (None once it is gone), and whether the
        room was re-created meanwhile and the cell caught up with the outputs so far."""
        if self.gone:
            return None, False
        before = self.nb.room
        try:
            self.nb = await self.rooms.current(self.nb)
        except NotebookError:  # the notebook itself went away
            self.gone = True
            return None, False
        at = self._find()
        if at is None or self.nb.room is before:
            return at, False
        cells.replace_outputs(self.nb.doc, at, self.outputs)
        self.nb.doc.ycells[at]["execution_state"] = "running"
        self.marked = True
        return at, True

    def _find(self) -> int | None:
        """The cell's index, or None once it is gone or is no longer a code cell (retyped in
        place by an agent or a person): the run goes on, its outputs go to the answer only, and
        the cell keeps the valid shape of its new type (no outputs, count or running mark)."""
        at = cells.find(self.nb.doc, self.cell_id, self.index)
        if at is None:
            self.gone = True
            return None
        self.index = at
        if not cells.is_code(self.nb.doc, at):
            self.retyped = str(self.nb.doc.ycells[at].get("cell_type"))
            self.gone = True
            cells.drop_code_fields(self.nb.doc, at)
            return None
        return at


def answer(execution: Execution, extra: dict[str, Any], max_chars: int,
           rest: str | None = outputs.IN_THE_NOTEBOOK) -> ToolResult:
    """The agent's view of an execution: readable content blocks plus structured data.

    A run that did not end "ok" (the code raised, timed out, was interrupted or aborted) is
    a failed call (``isError``), its outputs and the error still in the answer: as a task
    it ends failed, the answer kept as the error's partial result."""
    content = outputs.to_content(execution.outputs, max_chars, rest)
    if execution.message:
        content.append(TextContent(type="text", text=f"[{execution.message}]"))
    if not content:
        content = [TextContent(type="text", text="[no output]")]
    structured = {
        **extra,
        "status": execution.status,
        "execution_count": execution.execution_count,
        "outputs": outputs.summarize(execution.outputs, max_chars, rest=rest),
    }
    if execution.message:
        structured["message"] = execution.message
    return ToolResult(content=content, structured_content=structured, is_error=execution.status != "ok")


class _PartialOutputs:
    """A run's output so far, as the result of a task that ends without the run's answer."""

    def __init__(self) -> None:
        self.outputs: list[dict[str, Any]] = []

    def __call__(self, ending: str) -> dict[str, Any] | None:
        if not self.outputs:  # nothing to keep: no result, rather than an empty one
            return None
        blocks = outputs.to_content(self.outputs) + [TextContent(type="text", text=f"[{ending}: the outputs so far]")]
        return {"content": [b.model_dump(by_alias=True, mode="json", exclude_none=True) for b in blocks],
                "structuredContent": {"status": "cancelled" if ending == "cancelled" else "error", "partial": True,
                                      "outputs": outputs.summarize(self.outputs, outputs.DEFAULT_MAX_CHARS)},
                "isError": ending != "cancelled"}


class _Stop:
    """How a task's cancel stops one run, whatever stage it is in: before the code reaches
    the kernel (waiting for the kernel to start, or behind another run) the run is cancelled
    and never sends it; once sent, the kernel is interrupted."""

    def __init__(self) -> None:
        self.requested = False
        self.waiting: asyncio.Future[Any] | None = None  # the run, until its code is sent
        self.kernel_interrupt: Any = None

    async def __call__(self) -> None:
        self.requested = True
        if self.kernel_interrupt is not None:
            await self.kernel_interrupt()
        elif self.waiting is not None:
            self.waiting.cancel()

    def sent(self, interrupt: Any) -> None:
        """The code is about to be sent: from now on a cancel interrupts the kernel."""
        if self.requested:
            raise asyncio.CancelledError("cancelled before the code reached the kernel")
        self.waiting = None
        self.kernel_interrupt = interrupt


async def _run(kernels: Kernels, nb: LiveNotebook, code: str, timeout: float, on_output: OnEvent | None,
               stop: _Stop, on_sent: Callable[[], None] | None = None) -> Execution:
    """``Kernels.run`` with the task hooks wired: the stop told when the code is sent, the
    output kept for the task's partial result."""
    partial = _PartialOutputs()
    record_output(partial)

    async def on_start(interrupt: Any) -> None:
        stop.sent(interrupt)
        if on_sent is not None:
            on_sent()

    async def on_event(event: OutputEvent, so_far: list[dict[str, Any]]) -> None:
        partial.outputs = so_far
        if on_output is not None:
            await on_output(event, so_far)

    return await kernels.run_for(nb.path, nb.kernelspec_name(), code, timeout=timeout, on_start=on_start,
                                 on_event=on_event)


async def _stoppable(work: Any) -> asyncio.Future[Any]:
    """Start ``work(stop)`` as its own task, with its stop registered for the caller's MCP
    task (if any) before anything else can happen."""
    stop = _Stop()
    run = asyncio.ensure_future(work(stop))
    stop.waiting = run
    await register_interrupt(stop)
    return run


async def run_cell(rooms: Rooms, activity: Activity, kernels: Kernels, nb: LiveNotebook, cell_id: str | None,
                   index: int | None, timeout: float, client: ClientStream | None, max_chars: int) -> ToolResult:
    ynb = nb.doc
    i = cells.locate(ynb, cell_id, index)
    ycell = ynb.ycells[i]
    if ycell.get("cell_type") != "code":
        raise NotebookError(f"cell {i} is a {ycell.get('cell_type')} cell; only code cells run")
    source = str(ycell.get("source", ""))
    run = CellRun(rooms, activity, nb, str(ycell.get("id")), i, client)

    async def live(stop: _Stop) -> Execution:
        execution: Execution | None = None
        with activity.running(nb.room_id):
            try:
                execution = await _run(kernels, nb, source, timeout, run.output, stop, on_sent=run.start)
            finally:
                await run.finish(execution)
        return execution

    # Shielded: a client that disconnects mid-call does not stop the cell; it runs to its
    # end and its outputs land in the document. A task's cancel goes through the run's
    # stop instead: a run that has not sent its code yet never sends it, a running one is
    # interrupted and ends at once with the cell complete.
    inner = await _stoppable(live)
    inner.add_done_callback(logs_its_error("a cell run whose caller had left"))
    execution = await asyncio.shield(inner)
    return answer(execution, {"path": nb.path, "cell_id": run.cell_id}, max_chars)


async def run_code(kernels: Kernels, nb: LiveNotebook, code: str, timeout: float, client: ClientStream | None,
                   max_chars: int) -> ToolResult:
    if not code.strip():
        raise NotebookError("code is empty: pass the code to run")
    on_output = (lambda event, so_far: client.send(event)) if client is not None else None
    execution = await (await _stoppable(lambda stop: _run(kernels, nb, code, timeout, on_output, stop)))
    return answer(execution, {"path": nb.path}, max_chars, rest=None)  # scratch code: nothing else keeps its outputs
