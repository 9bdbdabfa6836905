"""The operations behind the tools, one per tool.

Each resolves its notebook through the rooms layer, says that the agent acts there (its
presence and the room's activity), and does one thing through the layers below: cells,
changes, files, kernels and execution. The tools (``tools.py``) are their declarations.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastmcp import Context
from fastmcp.tools.base import ToolResult
from mcp_types import TextContent

from .. import permissions
from ..errors import NotebookError
from ..identity import Agent
from ..kernels.sessions import Kernels
from ..notebooks import cells, changes, files, memory, moves, outputs, presence, search
from ..notebooks.activity import Activity
from ..notebooks.cells import CellType
from ..notebooks.cursors import Positions
from ..notebooks.paths import canonical_path, read_real_file
from ..notebooks.presence import AgentPresence
from ..notebooks.rooms import LiveNotebook, Rooms, file_id_of
from . import execution
from .resources import cell_resource


class Notebooks:
    def __init__(self, serverapp: Any, root_dir: str, rooms: Rooms, activity: Activity, presence: AgentPresence,
                 kernels: Kernels) -> None:
        self.serverapp = serverapp
        self.root_dir = root_dir
        self.rooms = rooms
        self.activity = activity
        self.presence = presence
        self.kernels = kernels

    async def open(self, path: str, agent: Agent) -> LiveNotebook:
        """The notebook's live room, with the agent announced in it."""
        nb = await self.rooms.open(path)
        memory.keep_no_history(nb.doc)
        self.activity.touch(nb.room_id)
        self.presence.seen(agent, nb.room_id, nb.room, nb.path, self.rooms.global_awareness())
        return nb

    async def open_for_edit(self, path: str, agent: Agent) -> LiveNotebook:
        """``open``, for an operation that changes the notebook: refused, before anything
        changes, if the server cannot write the notebook's file (the edit could never be saved)."""
        self.rooms.writable(path)
        return await self.open(path, agent)

    async def edited(self, nb: LiveNotebook) -> None:
        """After an edit: let the room broadcast the update to the people watching before
        the answer to the agent is put together."""
        self.activity.touch(nb.room_id)
        for _ in range(3):
            await asyncio.sleep(0)

    # -- files -------------------------------------------------------------------------

    async def list_notebooks(self, folder: str) -> dict[str, Any]:
        """In a worker thread: a walk of a large workspace would hold the event loop."""
        folder = canonical_path(self.root_dir, folder, notebook=False)
        return {"notebooks": await asyncio.to_thread(files.list_notebooks, self.root_dir, folder)}

    async def list_files(self, folder: str, pattern: str, max_depth: int, start: int, limit: int) -> dict[str, Any]:
        folder = canonical_path(self.root_dir, folder, notebook=False)
        entries, more = await asyncio.to_thread(files.list_files, self.root_dir, folder, pattern, max_depth,
                                                start, limit)
        return {"folder": folder, "entries": entries, "next_index": start + len(entries) if more else None}

    async def create(self, path: str, kernel_name: str | None, new_cells: list[dict[str, Any]] | None) -> dict[str, Any]:
        return await files.create_notebook(self.serverapp, canonical_path(self.root_dir, path), kernel_name, new_cells)

    # -- reading -----------------------------------------------------------------------

    async def get(self, path: str, agent: Agent, include_outputs: bool, max_output_chars: int, start: int = 0,
                  max_cells: int | None = None, max_image_bytes: int = 0, outline: bool = False) -> ToolResult:
        """The notebook, ``max_cells`` cells from ``start`` at most: an answer built and sent in one
        piece holds the event loop for as long as it takes (20,000 cells: seconds)."""
        nb = await self.open(path, agent)
        every = await cells.read_all(nb.doc)
        if start and start >= len(every):
            raise NotebookError(f"start_index {start} is past the last cell: the notebook has {len(every)} cells")
        stop = len(every) if max_cells is None else min(len(every), start + max_cells)
        images = outputs.Images(max_image_bytes or None)
        if outline:
            views = [cells.outline_view(every[i], i) for i in range(start, stop)]
        else:
            views = [_agent_cell(nb.path, cells.cell_view(every[i], i), include_outputs, max_output_chars, images)
                     for i in range(start, stop)]
        return read_answer({"path": nb.path, "room_id": nb.room_id, "cell_count": len(every),
                            "metadata": nb.metadata(), "start_index": start,
                            "next_index": stop if stop < len(every) else None, "cells": views}, images)

    async def cell(self, path: str, agent: Agent, cell_id: str | None, index: int | None,
                   max_output_chars: int, max_image_bytes: int = 0) -> ToolResult:
        nb = await self.open(path, agent)
        i = cells.locate(nb.doc, cell_id, index)
        images = outputs.Images(max_image_bytes or None)
        return read_answer(_agent_cell(nb.path, cells.cell_view(nb.doc.ycells[i], i), True, max_output_chars, images),
                           images)

    async def search(self, query: str, path: str | None, folder: str, case_sensitive: bool, include_outputs: bool,
                     max_results: int) -> dict[str, Any]:
        """Each notebook as people see it now: its live document if a room is open (unsaved edits
        included), else its file. Files are listed, read and searched in worker threads."""
        if not query:
            raise NotebookError("query is empty: pass the text to find")
        if len(query) > search.MAX_QUERY_CHARS:
            raise NotebookError(f"query is {len(query)} characters long; at most {search.MAX_QUERY_CHARS}")
        if "\n" in query or "\r" in query:
            raise NotebookError("query holds a line break; the search matches within one line")
        if path is not None and folder:
            raise NotebookError("give path (one notebook) or folder, not both")
        if path is not None:
            targets = [self.rooms.existing(path)]
        else:
            folder = canonical_path(self.root_dir, folder, notebook=False)
            targets = [n["path"] for n in await asyncio.to_thread(files.list_notebooks, self.root_dir, folder)]
        live = self.rooms.open_notebooks()
        matches: list[dict[str, Any]] = []
        unreadable: list[str] = []
        more = False
        for target in targets:
            nb = live.get(target)
            try:
                every = (await cells.read_all(nb.doc) if nb is not None else
                         search.cells_of_file(await asyncio.to_thread(read_real_file, self.root_dir, target)))
            except (OSError, ValueError, NotebookError):  # gone, swapped for a link, or not a notebook's JSON
                unreadable.append(target)
                continue
            found, more = await asyncio.to_thread(search.search_cells, every, query, case_sensitive,
                                                  include_outputs, max_results - len(matches))
            matches.extend({"path": target, **match} for match in found)
            if more:
                break
        return {"query": query, "matches": matches, "truncated": more, "notebooks_searched": len(targets),
                "unreadable": unreadable}

    async def watch(self, path: str, agent: Agent, timeout: float) -> dict[str, Any]:
        nb = await self.open(path, agent)
        with self.activity.running(nb.room_id):
            return await changes.watch(nb, timeout)

    async def users(self, path: str) -> dict[str, Any]:
        """Who is in the notebook's room, and which cell each one's cursor is in; never opens one."""
        nb = self.rooms.find(path)
        people = presence.users(nb.room) if nb is not None else []
        heads = presence.cursors(nb.room) if nb is not None else {}
        cells_of = await asyncio.to_thread(Positions(nb.doc.ydoc).cells_of, heads) if heads else {}
        return {"path": self.rooms.canonical(path), "room_open": nb is not None,
                "users": [{**person, "cell_id": cells_of.get(person["client_id"])} for person in people]}

    async def room_list(self) -> dict[str, Any]:
        sessions = await self.serverapp.session_manager.list_sessions()
        with_kernel = {s.get("path") for s in sessions if s.get("kernel")}
        described = []
        for room_id, room in self.rooms.document_rooms():
            path, lost = self.rooms.whereabouts(room_id, room)
            error = lost or self.activity.save_error(room_id)
            people = presence.users(room)
            described.append({
                "room_id": room_id,
                "path": path,
                "file_id": file_id_of(room_id),
                "users": [u["display_name"] for u in people],
                "user_count": len(people),
                "clients": len(room.clients),
                "has_kernel": path in with_kernel,
                "idle_seconds": self.activity.idle_seconds(room_id),
                "saved": error is None,
                "save_error": error,
            })
        return {"rooms": described}

    # -- editing -----------------------------------------------------------------------

    async def update(self, path: str, agent: Agent, source: str, cell_id: str | None, index: int | None,
                     cell_type: CellType | None) -> dict[str, Any]:
        nb = await self.open_for_edit(path, agent)
        i = cells.locate(nb.doc, cell_id, index)
        before = str(nb.doc.ycells[i]["source"])
        cells.update(nb.doc, i, source, cell_type)
        await self.edited(nb)
        return {**cells.brief(nb.doc.ycells[i], i), "diff": await asyncio.to_thread(cells.diff, before, source)}

    async def insert(self, path: str, agent: Agent, source: str, cell_type: CellType, index: int | None,
                     after_cell_id: str | None) -> dict[str, Any]:
        nb = await self.open_for_edit(path, agent)
        new_id, position = self._insert(nb, source, cell_type, index, after_cell_id)
        await self.edited(nb)
        return {"id": new_id, "index": position, "cell_count": len(nb.doc.ycells)}

    @staticmethod
    def _insert(nb: LiveNotebook, source: str, cell_type: CellType, index: int | None,
                after_cell_id: str | None) -> tuple[str, int]:
        """A new cell at ``index`` or after ``after_cell_id`` (default: the end); its id and position."""
        if after_cell_id is not None and index is not None:
            raise NotebookError("give index or after_cell_id, not both")
        if after_cell_id is not None:
            position = cells.locate(nb.doc, after_cell_id) + 1
        else:
            position = len(nb.doc.ycells) if index is None else index
        return cells.insert(nb.doc, position, cell_type, source), position

    async def edit(self, path: str, agent: Agent, old: str, new: str, replace_all: bool, cell_id: str | None,
                   index: int | None) -> dict[str, Any]:
        nb = await self.open_for_edit(path, agent)
        i = cells.locate(nb.doc, cell_id, index)
        before = str(nb.doc.ycells[i]["source"])
        replaced = cells.edit(nb.doc, i, old, new, replace_all)
        await self.edited(nb)
        edited = cells.brief(nb.doc.ycells[i], i)
        return {**edited, "replacements": replaced,
                "diff": await asyncio.to_thread(cells.diff, before, edited["source"])}

    async def move(self, path: str, agent: Agent, cell_id: str | None, index: int | None,
                   to_index: int) -> dict[str, Any]:
        nb = await self.open_for_edit(path, agent)
        i = cells.locate(nb.doc, cell_id, index)
        moves.move(nb.room, nb.doc, i, to_index)
        await self.edited(nb)
        return {"id": cells.id_of(nb.doc.ycells[to_index]), "index": to_index, "from_index": i,
                "cell_count": len(nb.doc.ycells)}

    async def clear_outputs(self, path: str, agent: Agent, cell_id: str | None, index: int | None,
                            all_cells: bool) -> dict[str, Any]:
        if all_cells and (cell_id is not None or index is not None):
            raise NotebookError("give cell_id or index to clear one cell, or all_cells=true, not both")
        nb = await self.open_for_edit(path, agent)
        targets = range(len(nb.doc.ycells)) if all_cells else [cells.locate(nb.doc, cell_id, index)]
        cleared, running = [], []
        for i in targets:
            ycell = nb.doc.ycells[i]
            if ycell.get("execution_state") == "running" and cells.is_code(nb.doc, i):
                if not all_cells:
                    raise NotebookError(f"cell {i} is running: its run is writing its outputs; interrupt it "
                                        "(or wait for it) first")
                running.append(cells.id_of(ycell))
            elif cells.clear_outputs(nb.doc, i):
                cleared.append(cells.id_of(ycell))
        await self.edited(nb)
        return {"path": nb.path, "cleared": cleared, "running": running}

    async def delete(self, path: str, agent: Agent, cell_id: str | None, index: int | None,
                     cell_ids: list[str] | None) -> dict[str, Any]:
        """One cell (``cell_id`` or ``index``), or several (``cell_ids``): all found, or none deleted."""
        nb = await self.open_for_edit(path, agent)
        if cell_ids is None:
            indexes = [cells.locate(nb.doc, cell_id, index)]
        elif cell_id is not None or index is not None:
            raise NotebookError("pass cell_ids alone, or one cell's cell_id or index")
        elif not cell_ids:
            raise NotebookError("cell_ids is empty: name at least one cell")
        elif len(set(cell_ids)) < len(cell_ids):
            twice = sorted({i for i in cell_ids if cell_ids.count(i) > 1})
            raise NotebookError(f"cell_ids names {twice} more than once; name each cell once")
        else:
            indexes = [cells.locate(nb.doc, one) for one in cell_ids]
        gone = cells.delete(nb.doc, indexes)
        await self.edited(nb)
        return {"deleted": gone, "cell_count": len(nb.doc.ycells)}

    # -- running -----------------------------------------------------------------------

    async def run_cell(self, path: str, agent: Agent, cell_id: str | None, index: int | None, timeout: float,
                       stream: bool, ctx: Context | None, max_output_chars: int) -> ToolResult:
        nb = await self.open_for_edit(path, agent)
        await self._may_start_kernel(nb, agent)
        return await self._run_cell(nb, cell_id, index, timeout, stream, ctx, max_output_chars)

    async def insert_and_run(self, path: str, agent: Agent, source: str, index: int | None,
                             after_cell_id: str | None, timeout: float, stream: bool, ctx: Context | None,
                             max_output_chars: int) -> ToolResult:
        """A new code cell, run at once: refused before the cell is made if it could not run."""
        nb = await self.open_for_edit(path, agent)
        await self._may_start_kernel(nb, agent)
        if not source.strip():
            raise NotebookError("source is empty: pass the code the new cell runs")
        new_id, _ = self._insert(nb, source, "code", index, after_cell_id)
        await self.edited(nb)
        return await self._run_cell(nb, new_id, None, timeout, stream, ctx, max_output_chars)

    async def _run_cell(self, nb: LiveNotebook, cell_id: str | None, index: int | None, timeout: float,
                        stream: bool, ctx: Context | None, max_output_chars: int) -> ToolResult:
        return await execution.run_cell(self.rooms, self.activity, self.kernels, nb, cell_id, index, timeout,
                                        execution.ClientStream(ctx) if stream else None, max_output_chars)

    async def run_code(self, path: str, agent: Agent, code: str, timeout: float, stream: bool, ctx: Context | None,
                       max_output_chars: int) -> ToolResult:
        nb = await self.open(path, agent)
        await self._may_start_kernel(nb, agent)
        return await execution.run_code(self.kernels, nb, code, timeout,
                                        execution.ClientStream(ctx) if stream else None, max_output_chars)

    async def run_notebook(self, path: str, agent: Agent, start: int, stop: int | None, timeout: float,
                           continue_on_error: bool, ctx: Context | None, max_output_chars: int,
                           max_image_bytes: int) -> ToolResult:
        nb = await self.open_for_edit(path, agent)
        await self._may_start_kernel(nb, agent)
        return await execution.run_cells(self.rooms, self.activity, self.kernels, nb, start, stop, timeout,
                                         continue_on_error, ctx, max_output_chars, max_image_bytes)

    # -- kernels -----------------------------------------------------------------------

    async def kernel_list(self) -> dict[str, Any]:
        return await self.kernels.listing()

    async def kernel_interrupt(self, path: str) -> dict[str, Any]:
        path = self.rooms.canonical(path)
        kernel_id = await self.kernels.kernel_of(path)
        await self.kernels.interrupt(kernel_id)
        return {"path": path, **self.kernels.model(kernel_id)}

    async def kernel_restart(self, path: str) -> dict[str, Any]:
        path = self.rooms.canonical(path)
        kernel_id = await self.kernels.kernel_of(path)
        await self.kernels.restart(kernel_id)
        return {"path": path, **self.kernels.model(kernel_id)}

    async def kernel_select(self, path: str, agent: Agent, kernel_name: str) -> dict[str, Any]:
        """The notebook's session gets a kernel of ``kernel_name``, and its metadata says so (what
        JupyterLab shows, and what is saved): both, or neither."""
        nb = await self.open_for_edit(path, agent)
        kernel_id, spec = await self.kernels.select(nb.path, kernel_name)
        nb = await self.rooms.current(nb)
        nb.set_metadata("kernelspec", {"name": kernel_name, "display_name": spec.get("display_name", kernel_name),
                                       "language": spec.get("language", "")})
        await self.edited(nb)
        return {"path": nb.path, **self.kernels.model(kernel_id)}

    async def _may_start_kernel(self, nb: LiveNotebook, agent: Agent) -> None:
        """A notebook without a session gets one for its kernel: Jupyter asks for ``write``
        on ``sessions`` to make one, and so do we."""
        if not await self.kernels.has_session(nb.path):
            await agent.permissions.require(permissions.START_SESSION, "starting the notebook's kernel (a new session)")


def _agent_cell(path: str, view: dict[str, Any], include_outputs: bool, max_chars: int,
                images: outputs.Images | None = None) -> dict[str, Any]:
    """A cell view as an agent reads it: outputs summarised (their images attached to ``images``,
    what is left out named by its resource), or left out."""
    if "outputs" in view:
        if include_outputs:
            resource = cell_resource(path, view["id"]) if view.get("id") else None
            view["outputs"] = outputs.summarize(view["outputs"], max_chars, images, resource=resource)
        else:
            del view["outputs"]
    return view


def read_answer(structured: dict[str, Any], images: outputs.Images) -> ToolResult:
    """A read's answer: its data as JSON text and structured content, then the images it attached."""
    text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"), default=str)
    return ToolResult(content=[TextContent(type="text", text=text), *images.blocks], structured_content=structured)

