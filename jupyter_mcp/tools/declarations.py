"""The tools, as declarations: a typed signature, the description an agent reads, one call.

Each tool's docstring says what it does, what it returns and what its errors mean; its
parameters are the input schema and its return type (``views``) the output schema. The
collaborators arrive injected: the operations (``Notebooks``) and the agent making the call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastmcp import Context
from fastmcp.dependencies import Depends
from fastmcp.server.dependencies import get_context
from fastmcp.tools.base import ToolResult
from fastmcp.utilities.json_schema import compress_schema
from pydantic import Field, TypeAdapter

from .. import permissions
from ..errors import NotebookError
from ..identity import Agent, calling_agent
from ..notebooks import cells, changes, files, moves, outputs, presence, search
from ..notebooks.cells import CellType
from ..notebooks.cursors import Positions
from ..notebooks.paths import canonical_path, read_real_file
from ..notebooks.room_table import file_id_of
from . import views
from .execution import ClientStream
from .operations import Notebooks, agent_cell, insert_cell, read_answer

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
EDIT = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
DELETE = {**EDIT, "destructiveHint": True}
RUN = {**EDIT, "openWorldHint": True}

#: Every tool: (function, keyword arguments for FastMCP.tool), in the order they are listed.
TOOLS: list[tuple[Callable[..., Any], dict[str, Any]]] = []
#: What each tool needs of Jupyter's authorizer (``permissions``), by tool name.
NEEDS: dict[str, tuple[permissions.Need, ...]] = {}
#: The tools that run code, which takes as long as it takes: a client speaking the official
#: tasks extension (io.modelcontextprotocol/tasks) is answered with a task for these, where the
#: server is the one to decide.
RUNS_CODE = frozenset({"cell_execute", "cell_insert_execute", "notebook_execute", "code_execute"})


def tool(annotations: dict[str, Any], needs: tuple[permissions.Need, ...],
         output: Any = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a tool and what it needs of the authorizer; ``output`` gives the schema of a
    tool that answers a ToolResult."""
    options: dict[str, Any] = {"annotations": annotations}
    if output is not None:
        options["output_schema"] = compress_schema(TypeAdapter(output).json_schema(mode="serialization"),
                                                   prune_titles=True)

    def declare(fn: Callable[..., Any]) -> Callable[..., Any]:
        TOOLS.append((fn, options))
        NEEDS[fn.__name__] = needs
        return fn

    return declare


def _notebooks() -> Notebooks:
    return get_context().lifespan_context["notebooks"]


NOTEBOOKS: Notebooks = Depends(_notebooks)
AGENT: Agent = Depends(calling_agent)

Path = Annotated[str, Field(description="Notebook path in the workspace, e.g. 'analysis/report.ipynb'.")]
CellId = Annotated[str | None, Field(description="The cell's id (stable; preferred). Give this or index.")]
Index = Annotated[int | None, Field(description="The cell's 0-based position, if no cell_id is given.")]
InsertAt = Annotated[int | None, Field(description="Position of the new cell (0 = first); default: the end.")]
AfterCellId = Annotated[str | None, Field(description="Insert right after this cell instead of at an index.")]
MaxChars = Annotated[int, Field(description="Longest text shown per output; longer ones are cut with a note.", ge=0)]
MAX_CELLS = 1000  # the most cells one notebook_get answers: one answer stays small enough to send at once
MAX_OUTLINE_CELLS = 5000  # the same, in outline mode (a cell is ~100 bytes there)
MaxImageBytes = Annotated[int, Field(description="Attach stored images as image content, up to this many bytes "
                                                 "in all (0: attach none, only name them).", ge=0)]
Timeout = Annotated[float, Field(description="Seconds before the kernel is interrupted.", gt=0, le=86400)]
Stream = Annotated[bool, Field(description="Also send each output to you as it arrives (progress "
                                           "notifications if you gave a progress token, log messages otherwise). "
                                           "A progress token alone already brings progress at least every 15 s "
                                           "while the code runs.")]


@tool(READ_ONLY, permissions.READ)
async def notebook_list(
    folder: Annotated[str, Field(description="Workspace sub-folder to list; empty for the whole workspace.")] = "",
    nbs: Notebooks = NOTEBOOKS,
) -> views.NotebookList:
    """List every notebook (.ipynb) in the workspace, or under one sub-folder.

    Lists exactly what the other tools open, each notebook once by its own path: a
    symlink to a notebook in the workspace is listed as that notebook; hidden folders
    and files, .ipynb_checkpoints, symlinks leading out of the workspace and files
    with more than one hard link are left out. Returns
    {"notebooks": [{"path", "size", "last_modified"}, ...]} sorted by path; each
    path can be passed to any other tool as is. Reads the files on disk.
    """
    folder = canonical_path(nbs.root_dir, folder, notebook=False)  # a walk of a large workspace: in a thread
    return views.NotebookList(notebooks=await asyncio.to_thread(files.list_notebooks, nbs.root_dir, folder))


MAX_FILES = 1000  # the most entries one file_list answers


@tool(READ_ONLY, permissions.READ)
async def file_list(
    folder: Annotated[str, Field(description="Workspace sub-folder to list; empty for the whole workspace.")] = "",
    pattern: Annotated[str, Field(description="Only paths matching this glob, e.g. '*.csv' or 'data/*/raw/*' "
                                              "('*' also crosses folders); empty: all.")] = "",
    max_depth: Annotated[int, Field(description="How many levels down to go: 1 lists the folder itself.",
                                    ge=1, le=10)] = 1,
    start_index: Annotated[int, Field(description="Skip this many entries (the next_index of a previous page).",
                                      ge=0)] = 0,
    max_entries: Annotated[int, Field(description=f"At most this many entries (max {MAX_FILES}).",
                                      ge=1, le=MAX_FILES)] = 200,
    nbs: Notebooks = NOTEBOOKS,
) -> views.FileList:
    """List the files and folders in the workspace (data, scripts, notebooks), as the file browser shows them.

    Goes `max_depth` levels down, folders in name order, each entry once by its own
    path (a symlink inside the workspace is what it points to); hidden files and
    folders and symlinks leading out of the workspace are left out. Returns
    {"folder", "entries": [{"path", "type": "directory"|"notebook"|"file",
    "last_modified", "size" (files)}], "next_index"}: when next_index is not null
    there are more entries; pass it as start_index for the next page. Each path is
    relative to the workspace root, ready for other tools. An unknown folder is an
    error. Reads the files on disk.
    """
    folder = canonical_path(nbs.root_dir, folder, notebook=False)
    entries, more = await asyncio.to_thread(files.list_files, nbs.root_dir, folder, pattern, max_depth,
                                            start_index, max_entries)
    return views.FileList(folder=folder, entries=entries, next_index=start_index + len(entries) if more else None)


@tool(EDIT, permissions.CREATE)
async def notebook_create(
    path: Path,
    kernel_name: Annotated[
        str | None, Field(description="Kernelspec name (e.g. 'python3'); default: the server's default kernel.")
    ] = None,
    cells: Annotated[
        list[views.NewCell] | None,
        Field(description="Initial cells, e.g. [{'cell_type': 'markdown', 'source': '# Title'}, "
                          "{'cell_type': 'code', 'source': 'import pandas'}]."),
    ] = None,
    nbs: Notebooks = NOTEBOOKS,
) -> views.CreatedNotebook:
    """Create a new notebook (nbformat 4.5) at `path` on disk.

    Without `cells` it has one empty code cell (a notebook always shows at least
    one); with `cells` it has exactly those. The folder must exist, and an
    existing file is never overwritten: creating a path that exists is an error.
    Returns {"path", "kernel_name", "cell_ids"}.
    """
    return await files.create_notebook(nbs.serverapp, canonical_path(nbs.root_dir, path), kernel_name, cells)


@tool(READ_ONLY, permissions.READ, output=views.Notebook)
async def notebook_get(
    path: Path,
    include_outputs: Annotated[bool, Field(description="Include each code cell's outputs.")] = True,
    max_output_chars: MaxChars = 2000,
    start_index: Annotated[int, Field(description="The first cell to return (0-based).", ge=0)] = 0,
    max_cells: Annotated[int, Field(description=f"At most this many cells (max {MAX_CELLS}; "
                                                f"{MAX_OUTLINE_CELLS} in outline mode).", ge=1,
                                    le=MAX_OUTLINE_CELLS)] = MAX_CELLS,
    mode: Annotated[Literal["full", "outline"], Field(
        description="'full': every cell whole; 'outline': ids, types, first lines and output sizes only "
                    "(cheap, for finding your way in a large notebook).")] = "full",
    max_image_bytes: MaxImageBytes = outputs.DEFAULT_MAX_IMAGE_BYTES,
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = AGENT,
) -> ToolResult:
    """Read a notebook from its live collaborative document (what JupyterLab shows now,
    including unsaved edits by people and agents).

    Returns {"path", "room_id", "cell_count", "metadata", "start_index", "next_index",
    "cells": [{"id", "index", "cell_type", "source", "execution_count", "outputs",
    "attachments", "metadata"}]}. At most `max_cells` cells (1000) from `start_index`:
    `cell_count` is the whole notebook's, and `next_index` is the start_index that reads
    on (null: this answer ends at the last cell). Outputs are summarised for reading:
    text, error name/value/traceback, rich output (HTML as text, markdown, LaTeX, JSON)
    where there is no plain text, and the mime types each carries; long texts are cut.
    Stored images (PNG, JPEG, GIF, WebP) are attached as image content after the JSON,
    up to `max_image_bytes` in all, each output's text naming its image ("image 2
    attached") or saying why it is not. A markdown cell's `attachments` names its
    attached files. In outline mode each cell is {"id", "index", "cell_type",
    "first_line", "line_count", "execution_count", "output_count", "output_chars"}
    (up to 5000 cells a call). The document itself is never changed.
    """
    if mode == "full" and max_cells > MAX_CELLS:
        raise NotebookError(f"max_cells is at most {MAX_CELLS} in full mode ({MAX_OUTLINE_CELLS} in outline mode); "
                            f"got {max_cells}")
    # At most max_cells cells: an answer built and sent in one piece holds the event loop for as
    # long as it takes (20,000 cells: seconds).
    nb = await nbs.open(path, agent)
    every = await cells.read_all(nb.doc)
    if start_index and start_index >= len(every):
        raise NotebookError(f"start_index {start_index} is past the last cell: the notebook has {len(every)} cells")
    stop = min(len(every), start_index + max_cells)
    images = outputs.Images(max_image_bytes or None)
    if mode == "outline":
        shown: list[Any] = [cells.outline_view(every[i], i) for i in range(start_index, stop)]
    else:
        shown = [agent_cell(nb.path, cells.cell_view(every[i], i), include_outputs, max_output_chars, images)
                 for i in range(start_index, stop)]
    return read_answer(views.Notebook(path=nb.path, room_id=nb.room_id, cell_count=len(every), metadata=nb.metadata(),
                                      start_index=start_index, next_index=stop if stop < len(every) else None,
                                      cells=shown), images)


@tool(READ_ONLY, permissions.READ)
async def notebook_search(
    query: Annotated[str, Field(description="The text to find, literally, within one line (not a regular expression).")],
    path: Annotated[str | None, Field(description="Search only this notebook.")] = None,
    folder: Annotated[str, Field(description="Search the notebooks under this workspace sub-folder; empty for the "
                                             "whole workspace.")] = "",
    case_sensitive: Annotated[bool, Field(description="Match case exactly (default: ignore case).")] = False,
    include_outputs: Annotated[bool, Field(description="Also search the cells' outputs (their text forms).")] = False,
    max_results: Annotated[int, Field(description="At most this many matches (max 500).", ge=1, le=500)] = 100,
    nbs: Notebooks = NOTEBOOKS,
) -> views.SearchResult:
    """Find text in the cell sources (and, with include_outputs, the outputs) of every notebook
    in the workspace, of the notebooks under `folder`, or of one notebook (`path`).

    Each notebook is searched as people see it now: its live document when it is open in
    JupyterLab or by an agent (unsaved edits included), else its file; the same notebooks as
    notebook_list. Returns {"query", "matches": [{"path", "cell_id", "index", "cell_type",
    "where": "source"|"output", "line", "excerpt"}], "truncated", "notebooks_searched",
    "unreadable"}: matches in path order, then cell order, then line order; `line` counts
    from 1 within the source or the output's text; `truncated` says there were more than
    max_results (narrow the query, the folder or the notebook). Opens no room.
    """
    if not query:
        raise NotebookError("query is empty: pass the text to find")
    if len(query) > search.MAX_QUERY_CHARS:
        raise NotebookError(f"query is {len(query)} characters long; at most {search.MAX_QUERY_CHARS}")
    if "\n" in query or "\r" in query:
        raise NotebookError("query holds a line break; the search matches within one line")
    if path is not None and folder:
        raise NotebookError("give path (one notebook) or folder, not both")
    if path is not None:
        targets = [nbs.rooms.existing(path)]
    else:
        folder = canonical_path(nbs.root_dir, folder, notebook=False)
        targets = [n["path"] for n in await asyncio.to_thread(files.list_notebooks, nbs.root_dir, folder)]
    # Each notebook as people see it now: its live document if a room is open (unsaved edits
    # included), else its file. Files are read and searched in worker threads.
    live = nbs.rooms.open_notebooks()
    matches: list[views.SearchMatch] = []
    unreadable: list[str] = []
    more = False
    for target in targets:
        nb = live.get(target)
        try:
            every = (await cells.read_all(nb.doc) if nb is not None else
                     search.cells_of_file(await asyncio.to_thread(read_real_file, nbs.root_dir, target)))
        except (OSError, ValueError, NotebookError):  # gone, swapped for a link, or not a notebook's JSON
            unreadable.append(target)
            continue
        found, more = await asyncio.to_thread(search.search_cells, every, query, case_sensitive,
                                              include_outputs, max_results - len(matches))
        matches.extend(views.SearchMatch(**match, path=target) for match in found)
        if more:
            break
    return views.SearchResult(query=query, matches=matches, truncated=more, notebooks_searched=len(targets),
                              unreadable=unreadable)


@tool(READ_ONLY, permissions.READ)
async def notebook_watch(
    path: Path,
    timeout: Annotated[float, Field(description="Seconds to wait for a change (max 300).", gt=0, le=300)] = 30,
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = AGENT,
) -> views.Watched:
    """Wait until the notebook's live document changes, then say what changed.

    Returns on the FIRST change made after the call started (by a person in
    JupyterLab, another agent, or a running cell), or when `timeout` passes.
    Returns {"changed": bool, "changes": [{"kind", "cell_id", "cell_index", ...}],
    "waited_seconds"}; kinds are "source", "outputs", "execution_count",
    "cell_type", "metadata", "cells_inserted", "cells_deleted",
    "notebook_metadata". Pair with notebook_get to read the new state.
    """
    nb = await nbs.open(path, agent)
    with nbs.activity.running(nb.room_id):
        return await changes.watch(nb, timeout)


@tool(READ_ONLY, permissions.READ)
async def notebook_list_users(path: Path, nbs: Notebooks = NOTEBOOKS) -> views.Users:
    """List who is connected to a notebook right now (its collaborative awareness).

    Returns {"path", "room_open", "users": [{"name", "display_name", "username",
    "initials", "color", "is_agent", "cell_id"}]}: cell_id is the cell the
    person's text cursor is in (JupyterLab shares it once they click or type in a
    cell, and keeps it there until they do so in another), or null. "The cell I am
    on" is that cell. If nobody has the notebook open there is no room, and
    "users" is [] (this call never opens one).
    """
    nb = nbs.rooms.find(path)  # never opens a room
    people = presence.users(nb.room) if nb is not None else []
    heads = presence.cursors(nb.room) if nb is not None else {}
    cells_of = await asyncio.to_thread(Positions(nb.doc.ydoc).cells_of, heads) if nb is not None and heads else {}
    return views.Users(path=nbs.rooms.canonical(path), room_open=nb is not None,
                       users=[{**person, "cell_id": cells_of.get(person["client_id"])} for person in people])


@tool(READ_ONLY, permissions.READ, output=views.Cell)
async def cell_get(
    path: Path, cell_id: CellId = None, index: Index = None, max_output_chars: MaxChars = 20000,
    max_image_bytes: MaxImageBytes = outputs.DEFAULT_MAX_IMAGE_BYTES,
    nbs: Notebooks = NOTEBOOKS, agent: Agent = AGENT,
) -> ToolResult:
    """Read one cell from the live document.

    Returns {"id", "index", "cell_type", "source", "execution_count", "outputs",
    "attachments", "metadata"}, outputs summarised for reading and images attached as
    in notebook_get. An unknown cell_id or an out-of-range index is an error.
    """
    nb = await nbs.open(path, agent)
    i = cells.locate(nb.doc, cell_id, index)
    images = outputs.Images(max_image_bytes or None)
    return read_answer(agent_cell(nb.path, cells.cell_view(nb.doc.ycells[i], i), True, max_output_chars, images), images)


@tool(EDIT, permissions.EDIT)
async def cell_update(
    path: Path,
    source: Annotated[str, Field(description="The cell's complete new source.")],
    cell_id: CellId = None,
    index: Index = None,
    cell_type: Annotated[CellType | None, Field(description="Also change the type.")] = None,
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = AGENT,
) -> views.UpdatedCell:
    """Replace one cell's source in the live document, in place.

    The cell keeps its id and position; people watching see the text change
    where they are. Outputs are left as they are (run it with cell_execute).
    Returns {"id", "index", "cell_type", "source", "diff"}: diff is a unified
    diff of what the source was just before (a person's edit you had not read
    included) to what it is now. Unknown cell_id, bad index or bad cell_type:
    an error, and nothing is changed.
    """
    nb = await nbs.open_for_edit(path, agent)
    i = cells.locate(nb.doc, cell_id, index)
    before = str(nb.doc.ycells[i]["source"])
    cells.update(nb.doc, i, source, cell_type)
    await nbs.edited(nb)
    return views.UpdatedCell(**cells.brief(nb.doc.ycells[i], i), diff=await asyncio.to_thread(cells.diff, before, source))


@tool(EDIT, permissions.EDIT)
async def cell_insert(
    path: Path,
    source: Annotated[str, Field(description="The new cell's source.")] = "",
    cell_type: Annotated[CellType, Field(description="The new cell's type.")] = "code",
    index: InsertAt = None,
    after_cell_id: AfterCellId = None,
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = AGENT,
) -> views.InsertedCell:
    """Insert one new cell into the live document.

    Put it at `index`, right after `after_cell_id`, or (neither given) at the end.
    Returns {"id", "index", "cell_count"}: keep the id to address the cell later.
    """
    nb = await nbs.open_for_edit(path, agent)
    new_id, position = insert_cell(nb, source, cell_type, index, after_cell_id)
    await nbs.edited(nb)
    return views.InsertedCell(id=new_id, index=position, cell_count=len(nb.doc.ycells))


@tool(EDIT, permissions.EDIT)
async def cell_edit(
    path: Path,
    old: Annotated[str, Field(description="The exact text to replace, as it is in the cell's source now "
                                          "(whitespace and line breaks included).")],
    new: Annotated[str, Field(description="The text to put in its place ('' deletes it).")],
    cell_id: CellId = None,
    index: Index = None,
    replace_all: Annotated[bool, Field(description="Replace every occurrence, not just the only one.")] = False,
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = AGENT,
) -> views.EditedCell:
    """Patch one cell's source in the live document: replace the exact text `old` with `new`.

    Only the replaced text changes in the collaborative document: a person typing
    elsewhere in the same cell keeps their text and cursor (cell_update, which sends the
    whole source, would rewrite what lies between the first and last change). `old`
    must occur exactly once, unless replace_all is true. Returns {"id", "index",
    "cell_type", "source", "replacements", "diff"} (a unified diff of the source). `old` absent or ambiguous: an error that says
    so, and nothing is changed.
    """
    nb = await nbs.open_for_edit(path, agent)
    i = cells.locate(nb.doc, cell_id, index)
    before = str(nb.doc.ycells[i]["source"])
    replaced = cells.edit(nb.doc, i, old, new, replace_all)
    await nbs.edited(nb)
    edited = cells.brief(nb.doc.ycells[i], i)
    return views.EditedCell(**edited, replacements=replaced,
                            diff=await asyncio.to_thread(cells.diff, before, edited["source"]))


@tool(EDIT, permissions.EDIT)
async def cell_move(
    path: Path,
    to_index: Annotated[int, Field(description="The cell's position after the move (0 = first; the last is "
                                               "cell_count - 1).")],
    cell_id: CellId = None,
    index: Index = None,
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = AGENT,
) -> views.MovedCell:
    """Move one cell to another position in the live document, as JupyterLab moves it.

    The cell keeps its id, source, outputs and metadata; a running cell goes on running
    and its outputs follow it. Something a person did to the cell just before the move
    reached them (typing in it, deleting or moving it) is not lost: their text is carried
    into the moved cell, and their delete or move wins. Returns {"id", "index",
    "from_index", "cell_count"}.
    """
    nb = await nbs.open_for_edit(path, agent)
    i = cells.locate(nb.doc, cell_id, index)
    moves.move(nb.room, nb.doc, i, to_index)
    await nbs.edited(nb)
    return views.MovedCell(id=cells.id_of(nb.doc.ycells[to_index]), index=to_index, from_index=i,
                           cell_count=len(nb.doc.ycells))


@tool(DELETE, permissions.EDIT)
async def cell_clear_outputs(
    path: Path,
    cell_id: CellId = None,
    index: Index = None,
    all_cells: Annotated[bool, Field(description="Clear every code cell of the notebook instead of one.")] = False,
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = AGENT,
) -> views.ClearedOutputs:
    """Clear the outputs and execution count of one code cell, or of every one with
    all_cells=true, in the live document (as JupyterLab's Clear Outputs does).

    Returns {"path", "cleared": [ids of cells that had something to clear], "running":
    [ids left as they are]}. A running cell is not cleared (its run is writing its
    outputs): naming one is an error; all_cells lists it under "running".
    """
    if all_cells and (cell_id is not None or index is not None):
        raise NotebookError("give cell_id or index to clear one cell, or all_cells=true, not both")
    nb = await nbs.open_for_edit(path, agent)
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
    await nbs.edited(nb)
    return views.ClearedOutputs(path=nb.path, cleared=cleared, running=running)


@tool(DELETE, permissions.EDIT)
async def cell_delete(
    path: Path, cell_id: CellId = None, index: Index = None,
    cell_ids: Annotated[list[str] | None, Field(description=f"Several cells to delete at once, by id "
                                                            f"(instead of cell_id or index; max {MAX_CELLS}).",
                                                max_length=MAX_CELLS)] = None,
    nbs: Notebooks = NOTEBOOKS, agent: Agent = AGENT,
) -> views.DeletedCells:
    """Delete one cell, or several (`cell_ids`), from the live document.

    Several are deleted together in one change, and only if every id is found:
    an unknown or repeated id is an error and deletes nothing. Returns
    {"deleted": [{"id", "index", "cell_type", "source"}, ...], "cell_count"},
    in notebook order, each with the index it had. People see the cells
    disappear, and JupyterLab's undo (Ctrl+Z, or Z on a cell) does not bring
    them back: it undoes only the person's own edits. To restore a cell,
    insert it again from this answer (cell_insert with its source and type at
    its index); its outputs are not kept.
    """
    nb = await nbs.open_for_edit(path, agent)
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
    await nbs.edited(nb)
    return views.DeletedCells(deleted=gone, cell_count=len(nb.doc.ycells))


@tool(RUN, permissions.RUN_CELL, output=views.Execution)
async def cell_execute(
    path: Path,
    cell_id: CellId = None,
    index: Index = None,
    timeout: Timeout = 300,
    stream: Stream = False,
    max_output_chars: MaxChars = outputs.DEFAULT_MAX_CHARS,
    ctx: Context | None = None,
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = AGENT,
) -> ToolResult:
    """Run one code cell in the notebook's kernel, live, and return its outputs.

    Runs the cell's current source in the kernel of the notebook's Jupyter
    session (the one a person's JupyterLab tab uses; started if there is none).
    While it runs the cell shows [*] and every output appears in the document as
    it arrives; at the end the execution count and outputs are in the notebook
    and are saved with it. Returns text (ANSI stripped), errors (name, value,
    traceback) and images (PNG/JPEG) as content, plus structured {"status":
    "ok"|"error"|"timeout"|"interrupted"|"aborted", "execution_count", "outputs"}
    ("aborted": the kernel refused to run it because the execution just before
    it failed). On timeout the kernel is interrupted and the outputs so far are
    returned. input() asks you for the line (an elicitation, or the task's
    input_required) when your client can answer; otherwise it fails at once.
    For long runs, call as a task.
    """
    nb = await nbs.open_to_run(path, agent)
    return await nbs.runs.cell(nb, cell_id=cell_id, index=index, timeout=timeout,
                               client=ClientStream(ctx) if stream else None, max_chars=max_output_chars)


@tool(RUN, permissions.RUN_CELL, output=views.Execution)
async def cell_insert_execute(
    path: Path,
    source: Annotated[str, Field(description="The new code cell's source.")],
    index: InsertAt = None,
    after_cell_id: AfterCellId = None,
    timeout: Timeout = 300,
    stream: Stream = False,
    max_output_chars: MaxChars = outputs.DEFAULT_MAX_CHARS,
    ctx: Context | None = None,
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = AGENT,
) -> ToolResult:
    """Insert a new code cell and run it, in one call: cell_insert, then cell_execute.

    The cell goes at `index` or right after `after_cell_id` (default: the end) and
    runs at once, live, as cell_execute runs a cell; it stays in the notebook with
    its outputs. Returns what cell_execute returns, its "cell_id" being the new
    cell's. Refused before any cell is made if the source is empty, the position is
    bad or you may not run code; a cell that raised is a failed call (isError) whose
    cell stays. For long runs, call as a task.
    """
    nb = await nbs.open_to_run(path, agent)  # refused before the cell is made if it could not run
    if not source.strip():
        raise NotebookError("source is empty: pass the code the new cell runs")
    new_id, _ = insert_cell(nb, source, "code", index, after_cell_id)
    await nbs.edited(nb)
    return await nbs.runs.cell(nb, cell_id=new_id, index=None, timeout=timeout,
                               client=ClientStream(ctx) if stream else None, max_chars=max_output_chars)


@tool(RUN, permissions.RUN_CELL, output=views.NotebookRun)
async def notebook_execute(
    path: Path,
    start_index: Annotated[int, Field(description="The first cell of the range (0-based).", ge=0)] = 0,
    stop_index: Annotated[int | None, Field(description="The cell the range stops before (exclusive); "
                                                        "default: the end of the notebook.", ge=0)] = None,
    continue_on_error: Annotated[bool, Field(description="Run on after a cell that did not end ok (by default "
                                                         "the run stops there).")] = False,
    timeout: Annotated[float, Field(description="Seconds each cell may run before the kernel is interrupted.",
                                    gt=0, le=86400)] = 300,
    max_output_chars: MaxChars = 2000,
    max_image_bytes: MaxImageBytes = outputs.DEFAULT_MAX_IMAGE_BYTES,
    ctx: Context | None = None,
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = AGENT,
) -> ToolResult:
    """Run every code cell of the notebook, or of the range [start_index, stop_index), in order,
    each live in the document as cell_execute runs it (Run All in JupyterLab).

    Markdown and raw cells are passed over. The cells are those in the range when the call
    starts, each found again by id when its turn comes: a cell deleted (or turned into
    markdown) meanwhile is skipped, an edited one runs its source as it is then. Stops at the
    first cell that does not end ok, unless continue_on_error. Reports progress before each
    cell (progress notifications with a progress token; the task's statusMessage as a task).
    Returns text with each cell's status, count and outputs, images attached within
    max_image_bytes, and structured {"path", "status", "cells": [{"cell_id", "index",
    "status", "execution_count", "outputs"}], "skipped", "not_run", "message"}; a failed call
    (isError) when a cell did not end ok. For long runs call it as a task: a cancel interrupts
    the running cell and runs no further one (a synchronous call you cancel lets the running
    cell finish and runs no further one).
    """
    nb = await nbs.open_to_run(path, agent)
    return await nbs.runs.cells(nb, start=start_index, stop=stop_index, timeout=timeout,
                                continue_on_error=continue_on_error, ctx=ctx, max_chars=max_output_chars,
                                max_image_bytes=max_image_bytes)


@tool(RUN, permissions.RUN_CODE, output=views.Execution)
async def code_execute(
    path: Path,
    code: Annotated[str, Field(description="Code to run in the notebook's kernel.")],
    timeout: Timeout = 300,
    stream: Stream = False,
    max_output_chars: MaxChars = outputs.DEFAULT_MAX_CHARS,
    ctx: Context | None = None,
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = AGENT,
) -> ToolResult:
    """Run code in the notebook's kernel without touching any cell.

    For scratch work: inspect a variable, check a shape, pip install. The code
    shares the notebook's variables (same kernel as its cells and as the
    person's JupyterLab tab) but nothing is written into the notebook. Same
    answer shape as cell_execute.
    """
    nb = await nbs.open(path, agent)
    await nbs.may_start_kernel(nb, agent)
    return await nbs.runs.code(nb, code=code, timeout=timeout, client=ClientStream(ctx) if stream else None,
                               max_chars=max_output_chars)


@tool(READ_ONLY, permissions.LIST_KERNELS)
async def kernel_list(nbs: Notebooks = NOTEBOOKS) -> views.KernelListing:
    """List the kernels this server can start (kernelspecs) and the kernels running now.

    Returns {"default_kernel_name", "kernelspecs": [{"name", "display_name", "language"}],
    "kernels": [{"kernel_id", "kernel_name", "execution_state", "last_activity",
    "connections", "notebooks", "started_by_mcp"}]}: `notebooks` are the notebooks whose
    session uses the kernel (a person's tab and the agent share it); `connections` counts
    the websockets connected (JupyterLab tabs). Pass a kernelspec name to kernel_select.
    """
    return await nbs.kernels.listing()


@tool({**EDIT, "idempotentHint": True}, permissions.MANAGE_KERNEL)
async def kernel_interrupt(path: Path, nbs: Notebooks = NOTEBOOKS) -> views.NotebookKernel:
    """Interrupt the notebook's kernel (JupyterLab's Interrupt: a KeyboardInterrupt in the
    running code), whoever started what it runs: a cell_execute or notebook_execute run
    ends "interrupted" with its outputs so far; a notebook_execute runs no further cell.
    Variables are kept. Returns {"path", "kernel_id", "kernel_name", "execution_state"}.
    A notebook with no running kernel: an error, and nothing is started.
    """
    path = nbs.rooms.canonical(path)
    kernel_id = await nbs.kernels.kernel_of(path)
    await nbs.kernels.interrupt(kernel_id)
    return views.NotebookKernel(path=path, **nbs.kernels.model(kernel_id))


@tool(DELETE, permissions.MANAGE_KERNEL)
async def kernel_restart(path: Path, nbs: Notebooks = NOTEBOOKS) -> views.NotebookKernel:
    """Restart the notebook's kernel (JupyterLab's Restart Kernel): the same kernel, a fresh
    process, every variable gone; people's tabs stay connected to it. A run going on ends at
    once, with its outputs so far and a message saying the kernel was restarted. Returns
    {"path", "kernel_id", "kernel_name", "execution_state"} once the kernel is back. A
    notebook with no running kernel: an error, and nothing is started.
    """
    path = nbs.rooms.canonical(path)
    kernel_id = await nbs.kernels.kernel_of(path)
    await nbs.kernels.restart(kernel_id)
    return views.NotebookKernel(path=path, **nbs.kernels.model(kernel_id))


@tool(DELETE, permissions.SELECT_KERNEL)
async def kernel_select(
    path: Path,
    kernel_name: Annotated[str, Field(description="A kernelspec name, as kernel_list gives them (e.g. 'python3').")],
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = AGENT,
) -> views.NotebookKernel:
    """Choose or change the notebook's kernel (JupyterLab's Select Kernel).

    The notebook's session gets a new kernel of `kernel_name` and its old kernel is shut down
    (its variables are gone); a person's tab on the notebook follows, since it is the same
    session. With no session yet, one is made with that kernel. The notebook's
    metadata.kernelspec is set in the live document (and saved with it). Returns {"path",
    "kernel_id", "kernel_name", "execution_state"}. An unknown kernelspec: an error naming
    the ones there are, and nothing changes.
    """
    nb = await nbs.open_for_edit(path, agent)
    kernel_id, spec = await nbs.kernels.select(nb.path, kernel_name)  # the session's kernel, then the metadata:
    nb = await nbs.rooms.current(nb)                                    # both, or neither
    nb.set_metadata("kernelspec", {"name": kernel_name, "display_name": spec.get("display_name", kernel_name),
                                   "language": spec.get("language", "")})
    await nbs.edited(nb)
    return views.NotebookKernel(path=nb.path, **nbs.kernels.model(kernel_id))


@tool(READ_ONLY, permissions.READ)
async def room_list(nbs: Notebooks = NOTEBOOKS) -> views.Rooms:
    """List every open collaborative document room (diagnostic, read-only).

    Returns {"rooms": [{"room_id", "path", "file_id", "users", "user_count",
    "clients", "has_kernel", "idle_seconds", "saved", "save_error"}]}. One notebook
    never has two rooms; idle_seconds is the time since MCP last used the room (null
    if it never did). saved is false when the room's last save failed (the file could
    not be written: permissions, a full disk): its edits are only in the room, which
    stays open and is saved again at each sweep until that works; save_error says why,
    naming the file (null when saved is true).
    """
    sessions = await nbs.serverapp.session_manager.list_sessions()
    with_kernel = {s.get("path") for s in sessions if s.get("kernel")}
    described = []
    for room_id, room in nbs.rooms.document_rooms():
        where, lost = nbs.rooms.whereabouts(room_id, room)
        error = lost or nbs.activity.save_error(room_id)
        people = presence.users(room)
        described.append(views.Room(room_id=room_id, path=where, file_id=file_id_of(room_id),
                                    users=[u["display_name"] for u in people], user_count=len(people),
                                    clients=len(room.clients), has_kernel=where in with_kernel,
                                    idle_seconds=nbs.activity.idle_seconds(room_id), saved=error is None,
                                    save_error=error))
    return views.Rooms(rooms=described)
