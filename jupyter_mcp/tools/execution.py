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
from collections.abc import Awaitable, Callable
from typing import Any

from fastmcp import Context
from fastmcp.tools.base import ToolResult
from mcp_types import TextContent

from ..errors import NotebookError, logs_its_error
from ..kernels.messages import Execution, OnEvent, OutputEvent
from ..kernels.sessions import Kernels
from ..notebooks import cells, outputs
from ..notebooks.activity import Activity
from ..notebooks.rooms import LiveNotebook, Rooms
from ..tasks import record_output, register_interrupt, report_status
from . import progress, stdin
from .resources import cell_resource

RUNNING_MARK_SEC = 0.05  # a cell still silent after this shows as running ([*]) at once
CANCELLED = "cancelled: no further cell was run"  # a notebook run's task was cancelled


class ClientStream:
    """Sends each output to the client as it arrives: progress notifications when the
    client gave a progress token, log messages otherwise."""

    def __init__(self, ctx: Context | None) -> None:
        self.ctx = ctx
        self.sent = 0
        self.has_token = progress.asked_for(ctx)

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
                await progress.report(self.ctx, self.sent, None, text)
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
           rest: str | None = outputs.IN_THE_NOTEBOOK, resource: str | None = None) -> ToolResult:
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
        "outputs": outputs.summarize(execution.outputs, max_chars, rest=rest, resource=resource),
    }
    if execution.message:
        structured["message"] = execution.message
    return ToolResult(content=content, structured_content=structured, is_error=execution.status != "ok")


class _PartialOutputs:
    """A run's output so far, as the result of a task that ends without the run's answer."""

    def __init__(self) -> None:
        self.outputs: list[dict[str, Any]] = []

    def recording(self, then: OnEvent | None) -> OnEvent:
        """An ``on_event`` that keeps the outputs so far, then hands the event on."""
        async def on_event(event: OutputEvent, so_far: list[dict[str, Any]]) -> None:
            self.outputs = so_far
            if then is not None:
                await then(event, so_far)
        return on_event

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


def _start(work: Callable[[_Stop], Awaitable[Execution]], stop: _Stop) -> asyncio.Future[Execution]:
    """Start ``work(stop)`` as its own task, which the stop cancels until the code is sent."""
    run = asyncio.ensure_future(work(stop))
    stop.waiting = run
    return run


async def _stoppable(work: Callable[[_Stop], Awaitable[Execution]]) -> asyncio.Future[Execution]:
    """``_start``, with the stop registered for the caller's MCP task (if any) before anything
    else can happen."""
    stop = _Stop()
    run = _start(work, stop)
    await register_interrupt(stop)
    return run


class _NotebookStop:
    """How a task's cancel stops a notebook run: the cell running now is stopped (``_Stop``) and
    no further cell starts."""

    def __init__(self) -> None:
        self.requested = False
        self.current: _Stop | None = None

    async def __call__(self) -> None:
        self.requested = True
        if self.current is not None:
            await self.current()


class _NotebookProgress:
    """What a notebook run has done so far: the answer, the task's partial result, and the progress
    and status the client is told before each cell."""

    def __init__(self, ctx: Context | None, path: str, total: int, max_chars: int, max_image_bytes: int) -> None:
        self.ctx = ctx
        self.path = path
        self.total = total
        self.max_chars = max_chars
        self.max_image_bytes = max_image_bytes
        self.ran: list[tuple[str, int, Execution]] = []  # (cell id, index, execution)
        self.skipped: list[dict[str, Any]] = []
        self.current: tuple[str, int, _PartialOutputs] | None = None  # the cell running now

    async def starting(self, done: int, cell_id: str) -> None:
        said = f"running cell {cell_id}, {done + 1} of {self.total}"
        if self.ran:
            last_id, last_at, last = self.ran[-1]
            said = f"cell {last_at} ({last_id}): {last.status}; {said}"
        await self.say(done, said)

    async def say(self, done: int, message: str) -> None:
        await report_status(message)
        if self.ctx is not None:
            try:
                await progress.report(self.ctx, done, self.total, message)
            except Exception:  # a client that went away must not stop the run
                self.ctx = None

    def answer(self, not_run: list[str], message: str | None) -> ToolResult:
        """Each cell's status, count and outputs; a failed call if any cell did not end ok."""
        return self._result(self.ran, not_run, message, partial=False)

    def __call__(self, ending: str) -> dict[str, Any] | None:
        """The task's result, should it end without the run's answer: the cells that ran and the
        outputs so far of the one running."""
        runs = list(self.ran)
        if self.current is not None:
            cell_id, at, so_far = self.current
            runs.append((cell_id, at, Execution(status="interrupted" if ending == "cancelled" else "error",
                                                outputs=so_far.outputs, message=f"{ending} while it ran")))
        if not runs:
            return None
        result = self._result(runs, [], f"{ending}: the cells so far", partial=True)
        return {"content": [b.model_dump(by_alias=True, mode="json", exclude_none=True) for b in result.content],
                "structuredContent": result.structured_content, "isError": ending != "cancelled"}

    def _result(self, runs: list[tuple[str, int, Execution]], not_run: list[str], message: str | None,
                partial: bool) -> ToolResult:
        images = outputs.Images(self.max_image_bytes or None)
        described, lines = [], []
        for cell_id, at, execution in runs:
            note = execution.message
            summary = outputs.summarize(execution.outputs, self.max_chars, images, resource=cell_resource(self.path, cell_id))
            cell: dict[str, Any] = {"cell_id": cell_id, "index": at, "status": execution.status,
                                    "execution_count": execution.execution_count, "outputs": summary}
            if note:
                cell["message"] = note
            described.append(cell)
            count = "" if execution.execution_count is None else f" [{execution.execution_count}]"
            lines.append(f"--- cell {at} ({cell_id}): {execution.status}{count}" + (f" ({note})" if note else ""))
            lines.extend(item["text"].rstrip("\n") for item in summary if item["text"])
        status = next((c["status"] for c in described if c["status"] != "ok"), "ok")
        structured: dict[str, Any] = {"path": self.path, "status": status, "cells": described,
                                      "skipped": self.skipped, "not_run": not_run}
        for skip in self.skipped:
            lines.append(f"--- cell {skip['cell_id']}: skipped ({skip['reason']})")
        if not_run:
            lines.append(f"[{len(not_run)} cell(s) not run]")
        if message:
            structured["message"] = message
            lines.append(f"[{message}]")
        if partial:
            structured["partial"] = True
        text = "\n".join(lines) if lines else "[no code cell to run]"
        return ToolResult(content=[TextContent(type="text", text=text), *images.blocks],
                          structured_content=structured, is_error=status != "ok")


class Runs:
    """Code run in a notebook's kernel, live in its document: a cell, a range of cells, or
    scratch code. Holds what every run needs (the rooms, the activity, the kernels)."""

    def __init__(self, rooms: Rooms, activity: Activity, kernels: Kernels) -> None:
        self.rooms = rooms
        self.activity = activity
        self.kernels = kernels

    async def cell(self, nb: LiveNotebook, *, cell_id: str | None, index: int | None, timeout: float,
                   client: ClientStream | None, max_chars: int) -> ToolResult:
        """Run the code cell ``cell_id`` (or at ``index``), live in the document."""
        i = cells.locate(nb.doc, cell_id, index)
        if not cells.is_code(nb.doc, i):
            raise NotebookError(f"cell {i} is a {nb.doc.ycells[i].get('cell_type')} cell; only code cells run")
        partial = _PartialOutputs()
        record_output(partial)
        run, live = self._in_cell(nb, i, timeout, client, partial)
        # Shielded: a client that disconnects mid-call does not stop the cell; it runs to its
        # end and its outputs land in the document. A task's cancel goes through the run's
        # stop instead: a run that has not sent its code yet never sends it, a running one is
        # interrupted and ends at once with the cell complete.
        inner = await _stoppable(live)
        inner.add_done_callback(logs_its_error("a cell run whose caller had left"))
        execution = await asyncio.shield(inner)
        resource = cell_resource(nb.path, run.cell_id)
        return answer(execution, {"path": nb.path, "cell_id": run.cell_id}, max_chars,
                      rest=f"{outputs.IN_THE_NOTEBOOK}: resource {resource}", resource=resource)

    async def code(self, nb: LiveNotebook, *, code: str, timeout: float, client: ClientStream | None,
                   max_chars: int) -> ToolResult:
        """Run ``code`` in the notebook's kernel, outside any cell."""
        if not code.strip():
            raise NotebookError("code is empty: pass the code to run")
        execution = await self.scratch(nb, code, timeout, client)
        return answer(execution, {"path": nb.path}, max_chars, rest=None)  # scratch code: nothing else keeps its outputs

    async def scratch(self, nb: LiveNotebook, code: str, timeout: float, client: ClientStream | None) -> Execution:
        """Code run in the notebook's kernel outside any cell, with the task hooks wired."""
        partial = _PartialOutputs()
        record_output(partial)
        on_output = partial.recording((lambda event, so_far: client.send(event)) if client is not None else None)
        return await (await _stoppable(lambda stop: self._run(nb, code, timeout, on_output, stop)))

    async def cells(self, nb: LiveNotebook, *, start: int, stop: int | None, timeout: float,
                    continue_on_error: bool, ctx: Context | None, max_chars: int, max_image_bytes: int) -> ToolResult:
        """Run the code cells from ``start`` to ``stop`` (exclusive) one after the other, each live in
        the document as ``cell`` runs it. The cells are those there when the call began, found
        again by id before each run (people may edit, move or delete cells meanwhile): a cell that is
        gone, or is no longer a code cell, is skipped. Stops at the first cell that does not end ok
        unless ``continue_on_error``. A task's cancel stops the running cell and starts no other; a
        call its client cancels lets the running cell finish (shielded, as ``cell``'s), and
        starts no other."""
        every = cells.snapshot(nb.doc)
        count = len(every)
        end = count if stop is None else stop
        if not 0 <= start <= count or not start <= end <= count:
            raise NotebookError(f"the range [{start}, {end}) is not within the notebook's {count} cells "
                                f"(start_index from 0 to {count}, stop_index from start_index to {count})")
        targets = [(str(c.get("id")), i) for i, c in enumerate(every[start:end], start)
                   if isinstance(c, dict) and c.get("cell_type") == "code"]
        halt = _NotebookStop()
        await register_interrupt(halt)
        progress = _NotebookProgress(ctx, nb.path, len(targets), max_chars, max_image_bytes)
        record_output(progress)
        message = None
        for done, (cell_id, hint) in enumerate(targets):
            await progress.starting(done, cell_id)
            try:
                nb = await self.rooms.current(nb)
            except NotebookError as exc:
                message = f"stopped: {exc}"
                break
            at = cells.find(nb.doc, cell_id, hint)  # from here to the run's start, no await: it stays at
            if at is None or not cells.is_code(nb.doc, at):
                reason = "deleted" if at is None else f"it became a {nb.doc.ycells[at].get('cell_type')} cell"
                progress.skipped.append({"cell_id": cell_id, "reason": reason})
                continue
            if halt.requested:
                message = CANCELLED
                break
            partial = _PartialOutputs()
            run, live = self._in_cell(nb, at, timeout, None, partial, stop_on_error=not continue_on_error)
            progress.current = (cell_id, at, partial)
            halt.current = _Stop()
            inner = _start(live, halt.current)
            inner.add_done_callback(logs_its_error("a cell run whose caller had left"))
            try:
                execution = await asyncio.shield(inner)  # a caller that leaves lets this cell finish
            except asyncio.CancelledError:
                if not inner.cancelled():
                    raise  # the caller went away: no further cell starts
                message = "cancelled before this cell's code reached the kernel: no further cell was run"
                break
            except NotebookError as exc:  # the kernel died: what ran so far is still the answer
                execution = Execution(status="error", outputs=partial.outputs, message=str(exc))
            finally:
                progress.current = None
                halt.current = None
            progress.ran.append((cell_id, run.index, execution))
            if halt.requested:
                message = CANCELLED
                break
            if execution.status != "ok" and not continue_on_error:
                message = f"stopped at cell {run.index}, which ended {execution.status} (continue_on_error runs on)"
                break
        ran = {cell_id for cell_id, _, _ in progress.ran} | {s["cell_id"] for s in progress.skipped}
        not_run = [cell_id for cell_id, _ in targets if cell_id not in ran]
        if not not_run:
            await progress.say(len(targets), "done")
        return progress.answer(not_run, message if not_run or halt.requested else None)

    def _in_cell(self, nb: LiveNotebook, at: int, timeout: float, client: ClientStream | None, partial: _PartialOutputs,
                 stop_on_error: bool = True) -> tuple[CellRun, Callable[[_Stop], Awaitable[Execution]]]:
        """The run of the code cell at ``at``, live in the document: its ``CellRun`` and its work."""
        ycell = nb.doc.ycells[at]
        source = str(ycell.get("source", ""))
        run = CellRun(self.rooms, self.activity, nb, str(ycell.get("id")), at, client)

        async def live(stop: _Stop) -> Execution:
            execution: Execution | None = None
            with self.activity.running(nb.room_id):
                try:
                    execution = await self._run(nb, source, timeout, partial.recording(run.output), stop,
                                                on_sent=run.start, stop_on_error=stop_on_error)
                finally:
                    await run.finish(execution)
            return execution

        return run, live

    async def _run(self, nb: LiveNotebook, code: str, timeout: float, on_output: OnEvent | None, stop: _Stop,
                   on_sent: Callable[[], None] | None = None, stop_on_error: bool = True) -> Execution:
        """``Kernels.run_for`` with the stop told when the code is sent."""
        async def on_start(interrupt: Any) -> None:
            stop.sent(interrupt)
            if on_sent is not None:
                on_sent()

        return await self.kernels.run_for(nb.path, nb.kernelspec_name(), code, timeout=timeout, on_start=on_start,
                                          on_event=on_output, stop_on_error=stop_on_error, on_input=stdin.on_input())
