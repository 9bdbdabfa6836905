"""The FastMCP server and its tools.

Tools are thin: validate, call one layer, shape the answer. Their docstrings are
the descriptions an agent reads, so they say what the tool does, what it returns
and what its errors mean.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastmcp import Context, FastMCP
from fastmcp.server.dependencies import get_http_request
from fastmcp.server.middleware import Middleware
from fastmcp.tools.base import ToolResult
from mcp_types import TextContent
from pydantic import Field

from . import __version__, cells, execution, files, outputs
from .tasks import TasksExtension
from .errors import NotebookError
from .presence import current_agent
from .paths import canonical_path

if TYPE_CHECKING:
    from .app import JupyterMCPApp

INSTRUCTIONS = """\
Tools for the live Jupyter notebooks of this server. Every notebook and cell tool
works on the same collaborative document the people in JupyterLab are editing:
your edits appear in their browsers as you make them, and theirs in your reads.
Paths are relative to the workspace root ("analysis/report.ipynb"). Name cells by
their id (from notebook_get) rather than by index: indexes shift when anyone
inserts or deletes a cell, ids never change.
"""

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
EDIT = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}

Path = Annotated[str, Field(description="Notebook path in the workspace, e.g. 'analysis/report.ipynb'.")]
CellId = Annotated[str | None, Field(description="The cell's id (stable; preferred). Give this or index.")]
Index = Annotated[int | None, Field(description="The cell's 0-based position, if no cell_id is given.")]
MaxChars = Annotated[int, Field(description="Longest text shown per output; longer ones are cut with a note.", ge=0)]
Timeout = Annotated[float, Field(description="Seconds before the kernel is interrupted.", gt=0, le=86400)]
Stream = Annotated[bool, Field(description="Also send each output to you as it arrives (progress "
                                           "notifications if you gave a progress token, log messages otherwise).")]


def build_server(ext: JupyterMCPApp) -> FastMCP:
    """The MCP server of one extension instance, with every tool bound to it."""
    mcp = FastMCP(ext.server_name, instructions=INSTRUCTIONS, version=__version__, mask_error_details=False)
    rooms = ext.rooms
    kernels = ext.kernels

    def agent_cell(view: dict[str, Any], max_chars: int) -> dict[str, Any]:
        if "outputs" in view:
            view["outputs"] = outputs.summarize(view["outputs"], max_chars)
        return view

    @mcp.tool(annotations=READ_ONLY)
    async def notebook_list(
        folder: Annotated[str, Field(description="Workspace sub-folder to list; empty for the whole workspace.")] = "",
    ) -> dict[str, Any]:
        """List every notebook (.ipynb) in the workspace, or under one sub-folder.

        Hidden folders and .ipynb_checkpoints are skipped. Returns
        {"notebooks": [{"path", "size", "last_modified"}, ...]} sorted by path; each
        path can be passed to any other tool as is. Reads the files on disk.
        """
        folder_path = canonical_path(ext.root_dir, folder, notebook=False)
        return {"notebooks": files.list_notebooks(ext.root_dir, folder_path)}

    @mcp.tool(annotations=EDIT)
    async def notebook_create(
        path: Path,
        kernel_name: Annotated[
            str | None, Field(description="Kernelspec name (e.g. 'python3'); default: the server's default kernel.")
        ] = None,
        cells: Annotated[
            list[dict[str, str]] | None,
            Field(description="Initial cells, e.g. [{'cell_type': 'markdown', 'source': '# Title'}, "
                              "{'cell_type': 'code', 'source': 'import pandas'}]."),
        ] = None,
    ) -> dict[str, Any]:
        """Create a new notebook (nbformat 4.5) at `path` on disk.

        Without `cells` it has one empty code cell (a notebook always shows at least
        one); with `cells` it has exactly those. The folder must exist, and an
        existing file is never overwritten: creating a path that exists is an error.
        Returns {"path", "kernel_name", "cell_ids"}.
        """
        return await files.create_notebook(ext.serverapp, canonical_path(ext.root_dir, path), kernel_name, cells)

    @mcp.tool(annotations=READ_ONLY)
    async def notebook_get(
        path: Path,
        include_outputs: Annotated[bool, Field(description="Include each code cell's outputs.")] = True,
        max_output_chars: MaxChars = 2000,
    ) -> dict[str, Any]:
        """Read a notebook from its live collaborative document (what JupyterLab shows now,
        including unsaved edits by people and agents).

        Returns {"path", "room_id", "cell_count", "metadata", "cells": [{"id", "index",
        "cell_type", "source", "execution_count", "outputs", "metadata"}]}. Outputs are
        summarised for reading (text, error name/value/traceback, mime types of rich
        data) and long texts are cut; the document itself is never changed.
        """
        nb = await rooms.open(path)
        ynb = nb.doc
        views = [cells.cell_view(cell, i) for i, cell in enumerate(cells.snapshot(ynb))]
        for view in views:
            if include_outputs:
                agent_cell(view, max_output_chars)
            else:
                view.pop("outputs", None)
        meta = ynb._ymeta.to_py() or {}
        return {"path": nb.path, "room_id": nb.room_id, "cell_count": len(views),
                "metadata": meta.get("metadata", {}), "cells": views}

    @mcp.tool(annotations=READ_ONLY)
    async def notebook_watch(
        path: Path,
        timeout: Annotated[float, Field(description="Seconds to wait for a change (max 300).", gt=0, le=300)] = 30,
    ) -> dict[str, Any]:
        """Wait until the notebook's live document changes, then say what changed.

        Returns on the FIRST change made after the call started (by a person in
        JupyterLab, another agent, or a running cell), or when `timeout` passes.
        Returns {"changed": bool, "changes": [{"kind", "cell_id", "cell_index", ...}],
        "waited_seconds"}; kinds are "source", "outputs", "execution_count",
        "cell_type", "metadata", "cells_inserted", "cells_deleted",
        "notebook_metadata". Pair with notebook_get to read the new state.
        """
        return await rooms.watch(path, timeout)

    @mcp.tool(annotations=READ_ONLY)
    async def notebook_list_users(path: Path) -> dict[str, Any]:
        """List who is connected to a notebook right now (its collaborative awareness).

        Returns {"path", "room_open", "users": [{"name", "display_name", "username",
        "initials", "color", "is_agent"}]}. If nobody has the notebook open there is
        no room, and "users" is [] (this call never opens one).
        """
        canonical = rooms.canonical(path)
        nb = rooms.find(canonical)
        return {"path": canonical, "room_open": nb is not None, "users": rooms.users(nb.room) if nb else []}

    @mcp.tool(annotations=READ_ONLY)
    async def cell_get(
        path: Path, cell_id: CellId = None, index: Index = None, max_output_chars: MaxChars = 20000
    ) -> dict[str, Any]:
        """Read one cell from the live document.

        Returns {"id", "index", "cell_type", "source", "execution_count", "outputs",
        "metadata"}, outputs summarised for reading as in notebook_get. An unknown
        cell_id or an out-of-range index is an error.
        """
        nb = await rooms.open(path)
        i = cells.locate(nb.doc, cell_id, index)
        return agent_cell(cells.cell_view(nb.doc.ycells[i], i), max_output_chars)

    @mcp.tool(annotations=EDIT)
    async def cell_update(
        path: Path,
        source: Annotated[str, Field(description="The cell's complete new source.")],
        cell_id: CellId = None,
        index: Index = None,
        cell_type: Annotated[
            str | None, Field(description="Also change the type: 'code', 'markdown' or 'raw'.")
        ] = None,
    ) -> dict[str, Any]:
        """Replace one cell's source in the live document, in place.

        The cell keeps its id and position; people watching see the text change
        where they are. Outputs are left as they are (run it with cell_execute).
        Returns {"id", "index", "cell_type", "source"}. Unknown cell_id, bad index or
        bad cell_type: an error, and nothing is changed.
        """
        nb = await rooms.open(path)
        ynb = nb.doc
        if cell_type is not None:
            cells.check_type(cell_type)
        i = cells.locate(ynb, cell_id, index)
        with ynb.ydoc.transaction():
            cells.set_source(ynb, i, source)
            if cell_type is not None:
                cells.set_type(ynb, i, cell_type)
        await rooms.edited(nb)
        return cells.brief(ynb.ycells[i], i)

    @mcp.tool(annotations=EDIT)
    async def cell_insert(
        path: Path,
        source: Annotated[str, Field(description="The new cell's source.")] = "",
        cell_type: Annotated[str, Field(description="'code', 'markdown' or 'raw'.")] = "code",
        index: Annotated[int | None, Field(description="Position of the new cell (0 = first); default: the end.")] = None,
        after_cell_id: Annotated[
            str | None, Field(description="Insert right after this cell instead of at an index.")
        ] = None,
    ) -> dict[str, Any]:
        """Insert one new cell into the live document.

        Put it at `index`, right after `after_cell_id`, or (neither given) at the end.
        Returns {"id", "index", "cell_count"}: keep the id to address the cell later.
        """
        nb = await rooms.open(path)
        ynb = nb.doc
        if after_cell_id is not None and index is not None:
            raise NotebookError("give index or after_cell_id, not both")
        if after_cell_id is not None:
            position = cells.locate(ynb, after_cell_id) + 1
        else:
            position = len(ynb.ycells) if index is None else index
        new_id = cells.insert(ynb, position, cell_type, source)
        await rooms.edited(nb)
        return {"id": new_id, "index": position, "cell_count": len(ynb.ycells)}

    @mcp.tool(annotations={**EDIT, "destructiveHint": True})
    async def cell_delete(path: Path, cell_id: CellId = None, index: Index = None) -> dict[str, Any]:
        """Delete one cell from the live document.

        Returns {"deleted": {"id", "index", "cell_type", "source"}, "cell_count"}.
        People see it disappear; JupyterLab's undo can bring it back.
        """
        nb = await rooms.open(path)
        i = cells.locate(nb.doc, cell_id, index)
        gone = cells.delete(nb.doc, i)
        await rooms.edited(nb)
        return {"deleted": gone, "cell_count": len(nb.doc.ycells)}

    @mcp.tool(annotations={**EDIT, "openWorldHint": True})
    async def cell_execute(
        path: Path,
        cell_id: CellId = None,
        index: Index = None,
        timeout: Timeout = 300,
        stream: Stream = False,
        max_output_chars: MaxChars = outputs.DEFAULT_MAX_CHARS,
        ctx: Context | None = None,
    ) -> ToolResult:
        """Run one code cell in the notebook's kernel, live, and return its outputs.

        Runs the cell's current source in the kernel of the notebook's Jupyter
        session (the one a person's JupyterLab tab uses; started if there is none).
        While it runs the cell shows [*] and every output appears in the document as
        it arrives; at the end the execution count and outputs are in the notebook
        and are saved with it. Returns text (ANSI stripped), errors (name, value,
        traceback) and images (PNG/JPEG) as content, plus structured {"status":
        "ok"|"error"|"timeout"|"interrupted", "execution_count", "outputs"}. On
        timeout the kernel is interrupted and the outputs so far are returned.
        input() is not supported (it fails at once). For long runs, call as a task.
        """
        return await execution.execute_cell(rooms, kernels, path, cell_id, index, timeout, stream, ctx,
                                            max_output_chars)

    @mcp.tool(annotations={**EDIT, "openWorldHint": True})
    async def code_execute(
        path: Path,
        code: Annotated[str, Field(description="Code to run in the notebook's kernel.")],
        timeout: Timeout = 300,
        stream: Stream = False,
        max_output_chars: MaxChars = outputs.DEFAULT_MAX_CHARS,
        ctx: Context | None = None,
    ) -> ToolResult:
        """Run code in the notebook's kernel without touching any cell.

        For scratch work: inspect a variable, check a shape, pip install. The code
        shares the notebook's variables (same kernel as its cells and as the
        person's JupyterLab tab) but nothing is written into the notebook. Same
        answer shape as cell_execute.
        """
        return await execution.execute_code(rooms, kernels, path, code, timeout, stream, ctx, max_output_chars)

    @mcp.tool(annotations=READ_ONLY)
    async def room_list() -> dict[str, Any]:
        """List every open collaborative document room (diagnostic, read-only).

        Returns {"rooms": [{"room_id", "path", "file_id", "users", "user_count",
        "clients", "has_kernel", "idle_seconds"}]}. One notebook never has two rooms;
        idle_seconds is the time since MCP last used the room (null if it never did).
        """
        return {"rooms": await rooms.describe()}

    mcp.add_middleware(_AgentIdentity())
    TasksExtension(ext.tasks, principal_of).install(mcp)
    return mcp


class _AgentIdentity(Middleware):
    """Names the agent behind each tool call (its user and MCP client), for its presence
    in the rooms it works on."""

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        ctx = context.fastmcp_context
        client = "mcp client"
        owner = "local"
        try:
            params = ctx.session.client_params
            if params is not None and params.client_info is not None:
                client = params.client_info.name or client
            owner = principal_of(get_http_request())
        except Exception:  # no HTTP request (in-memory tests): a generic agent
            pass
        token = current_agent.set((f"{owner}:{client}", client))
        try:
            return await call_next(context)
        finally:
            current_agent.reset(token)


def principal_of(request: Any) -> str:
    """Who made an MCP request: the principal the /mcp handler put in the ASGI scope."""
    scope = getattr(request, "scope", None) or {}
    return scope.get("jupyter_user") or "local"


def partial_result(recorded: Any) -> dict[str, Any]:
    """A cancelled execution's outputs so far, as its task's result."""
    items = recorded if isinstance(recorded, list) else [recorded]
    blocks = outputs.to_content(items) + [TextContent(type="text", text="[cancelled: the outputs so far]")]
    return {"content": [b.model_dump(by_alias=True, mode="json", exclude_none=True) for b in blocks],
            "structuredContent": {"status": "cancelled", "partial": True,
                                  "outputs": outputs.summarize(items, outputs.DEFAULT_MAX_CHARS)},
            "isError": False}
