"""Running a cell (or scratch code) and showing it live.

The kernel loop (``Kernels.run``) produces output events; here they go into the
cell in the live document as they arrive, and to the client when it asked for a
stream. The cell is found again by id for every write, and the room again when it
was closed and re-created meanwhile, so outputs always land in the document
people see.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from fastmcp.tools.base import ToolResult
from mcp_types import TextContent

from . import cells, outputs
from .errors import NotebookError
from .kernels import Execution, OutputEvent

log = logging.getLogger(__name__)

RUNNING_MARK_SEC = 0.05  # a cell still silent after this shows as running ([*]) at once

if TYPE_CHECKING:
    from fastmcp import Context

    from .kernels import Kernels
    from .rtc_adapter import LiveNotebook, Rooms


class CellTarget:
    """Where a running cell's outputs go: re-resolved whenever the room or index moved."""

    def __init__(self, rooms: Rooms, nb: LiveNotebook, cell_id: str) -> None:
        self.rooms = rooms
        self.nb = nb
        self.cell_id = cell_id
        self.index = cells.locate(nb.doc, cell_id)
        self.gone = False  # the cell was deleted while it ran: keep collecting, stop writing

    async def locate(self, outputs_so_far: list[dict[str, Any]]) -> int | None:
        if self.gone:
            return None
        if self.rooms.ydoc.ywebsocket_server.rooms.get(self.nb.room_id) is not self.nb.room:
            self.nb = await self.rooms.open(self.nb.path)  # the room was closed: write into its successor
            index = self._find()
            if index is not None:
                cells.replace_outputs(self.nb.doc, index, outputs_so_far)
                self.nb.doc.ycells[index]["execution_state"] = "running"
            return index
        return self._find()

    def _find(self) -> int | None:
        index = cells.find(self.nb.doc, self.cell_id, self.index)
        if index is None:
            self.gone = True
        else:
            self.index = index
        return index


class ClientStream:
    """Sends each output to the client as it arrives: progress notifications when the
    client gave a progress token, log messages otherwise."""

    def __init__(self, ctx: Context | None) -> None:
        self.ctx = ctx
        self.sent = 0
        rc = getattr(ctx, "request_context", None) if ctx is not None else None
        meta = getattr(getattr(rc, "_srctx", None), "meta", None) or {}
        self.has_token = meta.get("progress_token") is not None

    async def send(self, event: OutputEvent, outputs_so_far: list[dict[str, Any]] | None = None) -> None:
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
        text = outputs.truncate(text, outputs.DEFAULT_MAX_CHARS)
        try:
            if self.has_token:
                await self.ctx.report_progress(self.sent, None, text)
            else:
                await self.ctx.info(text)
        except Exception:  # a client that went away must not stop the run
            self.ctx = None


def answer(execution: Execution, extra: dict[str, Any], max_chars: int) -> ToolResult:
    """The agent's view of an execution: readable content blocks plus structured data."""
    content = outputs.to_content(execution.outputs, max_chars)
    if execution.message:
        content.append(TextContent(type="text", text=f"[{execution.message}]"))
    if not content:
        content = [TextContent(type="text", text="[no output]")]
    structured = {
        **extra,
        "status": execution.status,
        "execution_count": execution.execution_count,
        "outputs": outputs.summarize(execution.outputs, max_chars),
    }
    if execution.message:
        structured["message"] = execution.message
    return ToolResult(content=content, structured_content=structured)


async def execute_cell(rooms: Rooms, kernels: Kernels, path: str, cell_id: str | None, index: int | None,
                       timeout: float, stream: bool, ctx: Context | None, max_chars: int) -> ToolResult:
    nb = await rooms.open(path)
    ynb = nb.doc
    i = cells.locate(ynb, cell_id, index)
    ycell = ynb.ycells[i]
    if ycell.get("cell_type") != "code":
        raise NotebookError(f"cell {i} is a {ycell.get('cell_type')} cell; only code cells run")
    source = str(ycell.get("source", ""))
    target = CellTarget(rooms, nb, str(ycell.get("id")))
    kernel_id = await kernels.for_notebook(nb.path, cells.kernelspec_name(ynb))
    client = ClientStream(ctx) if stream else None
    outputs_so_far: list[dict[str, Any]] = []
    marked = False  # the cell shows as running: outputs cleared, [*]

    def mark_running() -> None:
        # Deferred to the first output (or RUNNING_MARK_SEC): one document update instead
        # of two, each of which jupyter-collaboration also writes to its SQLite store.
        nonlocal marked
        if not marked:
            marked = True
            at = target._find()
            if at is not None:
                cells.begin_run(target.nb.doc, at)

    async def on_event(event: OutputEvent, current: list[dict[str, Any]]) -> None:
        nonlocal outputs_so_far, marked
        outputs_so_far = current
        room_before = target.nb.room
        try:
            at = await target.locate(current)
        except NotebookError:  # the notebook itself went away: keep running, stop writing
            target.gone, at = True, None
        if at is not None:
            if target.nb.room is room_before:
                with target.nb.doc.ydoc.transaction():
                    mark_running()
                    cells.apply_output_event(target.nb.doc, at, event)
            else:  # re-created room: locate rebuilt the outputs and marked it running
                marked = True
            rooms.touch(target.nb.room_id, target.nb.room)
        if client is not None:
            await client.send(event)

    async def run() -> Execution:
        execution: Execution | None = None
        with rooms.running(nb.room_id):
            timer = asyncio.get_running_loop().call_later(RUNNING_MARK_SEC, mark_running)
            try:
                execution = await kernels.run(kernel_id, source, timeout=timeout, on_event=on_event)
            finally:
                timer.cancel()
                try:
                    at = await target.locate(outputs_so_far)
                except NotebookError:
                    at = None
                if at is not None:
                    with target.nb.doc.ydoc.transaction():
                        mark_running()
                        cells.end_run(target.nb.doc, at, execution.execution_count if execution else None)
        return execution

    # Shielded: a client that disconnects mid-call does not stop the cell; it runs to its
    # end and its outputs land in the document. (A task's cancel interrupts the kernel
    # first, so the run ends at once and the cell still ends up complete.)
    inner = asyncio.ensure_future(run())
    inner.add_done_callback(_retrieve)
    execution = await asyncio.shield(inner)
    return answer(execution, {"path": nb.path, "cell_id": target.cell_id}, max_chars)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """A run nobody waits for any more (its caller left) still has its error looked at."""
    if not task.cancelled() and task.exception() is not None:
        log.info("a cell run whose caller had left ended with: %s", task.exception())


async def execute_code(rooms: Rooms, kernels: Kernels, path: str, code: str, timeout: float, stream: bool,
                       ctx: Context | None, max_chars: int) -> ToolResult:
    if not isinstance(code, str) or not code.strip():
        raise NotebookError("code is empty: pass the code to run")
    nb = await rooms.open(path)
    kernel_id = await kernels.for_notebook(nb.path, cells.kernelspec_name(nb.doc))
    client = ClientStream(ctx) if stream else None
    execution = await kernels.run(kernel_id, code, timeout=timeout,
                                  on_event=client.send if client is not None else None)
    return answer(execution, {"path": nb.path}, max_chars)
