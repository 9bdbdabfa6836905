"""What the tools share: the collaborators, and the steps every tool is built from.

A tool (``declarations``) resolves its notebook here, which says that the agent acts there
(its presence and the room's activity), then does one thing through the layers below.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from fastmcp.tools.base import ToolResult
from mcp_types import TextContent

from .. import permissions
from ..errors import NotebookError
from ..identity import Agent
from ..kernels.sessions import Kernels
from ..notebooks import cells, outputs
from ..notebooks.activity import Activity
from ..notebooks.cells import CellType
from ..notebooks.presence import AgentPresence
from ..notebooks.rooms import LiveNotebook, Rooms
from .execution import Runs
from .resources import cell_resource


BROADCAST_TURNS = 3  # loop turns the room's broadcast of an edit takes (2) and one of margin


class Notebooks:
    """The server's notebooks as the tools reach them (injected into every tool)."""

    def __init__(self, serverapp: Any, root_dir: str, rooms: Rooms, activity: Activity, presence: AgentPresence,
                 kernels: Kernels) -> None:
        self.serverapp = serverapp
        self.root_dir = root_dir
        self.rooms = rooms
        self.activity = activity
        self.presence = presence
        self.kernels = kernels
        self.runs = Runs(rooms, activity, kernels)

    async def open(self, path: str, agent: Agent) -> LiveNotebook:
        """The notebook's live room, with the agent announced in it."""
        nb = await self.rooms.open(path)
        self.activity.touch(nb.room_id)
        self.presence.seen(agent, nb.room_id, nb.room, nb.path, self.rooms.global_awareness())
        return nb

    async def open_for_edit(self, path: str, agent: Agent) -> LiveNotebook:
        """``open``, for a tool that changes the notebook: refused, before anything changes, if
        the server cannot write the notebook's file (the edit could never be saved)."""
        self.rooms.writable(path)
        return await self.open(path, agent)

    async def open_to_run(self, path: str, agent: Agent) -> LiveNotebook:
        """``open_for_edit``, for a tool that runs cells: refused before anything changes if the
        agent may not start the kernel the run needs."""
        nb = await self.open_for_edit(path, agent)
        await self.may_start_kernel(nb, agent)
        return nb

    async def edited(self, nb: LiveNotebook) -> None:
        """After an edit: let the room broadcast the update to the people watching before
        the answer to the agent is put together. The room's broadcast loop takes the update a
        loop turn after the transaction and writes it to each tab's websocket a turn later;
        one more turn is margin. tests/test_broadcast.py fails if that stops sufficing (it
        fails with 0 or 1 turn)."""
        self.activity.touch(nb.room_id)
        for _ in range(BROADCAST_TURNS):
            await asyncio.sleep(0)

    async def may_start_kernel(self, nb: LiveNotebook, agent: Agent) -> None:
        """A notebook without a session gets one for its kernel: Jupyter asks for ``write``
        on ``sessions`` to make one, and so do we."""
        if not await self.kernels.has_session(nb.path):
            await agent.permissions.require(permissions.START_SESSION, "starting the notebook's kernel (a new session)")


def insert_cell(nb: LiveNotebook, source: str, cell_type: CellType, index: int | None,
                after_cell_id: str | None) -> tuple[str, int]:
    """A new cell at ``index`` or after ``after_cell_id`` (default: the end); its id and position."""
    if after_cell_id is not None and index is not None:
        raise NotebookError("give index or after_cell_id, not both")
    if after_cell_id is not None:
        position = cells.locate(nb.doc, after_cell_id) + 1
    else:
        position = len(nb.doc.ycells) if index is None else index
    return cells.insert(nb.doc, position, cell_type, source), position


def agent_cell(path: str, view: dict[str, Any], include_outputs: bool, max_chars: int,
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


def read_answer(structured: Mapping[str, Any], images: outputs.Images) -> ToolResult:
    """A read's answer: its data as JSON text and structured content, then the images it attached."""
    text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"), default=str)
    return ToolResult(content=[TextContent(type="text", text=text), *images.blocks],
                      structured_content=dict(structured))

