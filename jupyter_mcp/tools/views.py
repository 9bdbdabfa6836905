"""What every tool answers, as types: fastmcp publishes each as the tool's output schema,
so an agent knows the shape before it calls (and SDK clients check answers against it)."""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict  # pydantic needs these on Python < 3.12

from ..notebooks.cells import CellType

#: How a run ended, as the agent sees it: the kernel's answer ("aborted": the kernel refused the
#: request because an earlier one failed just before), or "cancelled" in a task's partial result.
ExecutionStatus = Literal["ok", "error", "timeout", "interrupted", "aborted", "cancelled"]


class NotebookFile(TypedDict):
    path: str
    size: int
    last_modified: str  # ISO 8601, UTC


class NotebookList(TypedDict):
    notebooks: list[NotebookFile]


class FileEntry(TypedDict):
    path: str
    type: Literal["directory", "notebook", "file"]
    last_modified: str  # ISO 8601, UTC
    size: NotRequired[int]  # files only


class FileList(TypedDict):
    folder: str
    entries: list[FileEntry]
    next_index: int | None  # start_index for the next page; null: this was the last


class NewCell(TypedDict):
    cell_type: NotRequired[CellType]
    source: NotRequired[str]


class CreatedNotebook(TypedDict):
    path: str
    kernel_name: str
    cell_ids: list[str]


class Output(TypedDict):
    """One output as an agent reads it: its text form, and the mime types it carries."""

    output_type: str
    name: NotRequired[str]  # streams: stdout or stderr
    ename: NotRequired[str | None]  # errors
    evalue: NotRequired[str | None]
    mime_types: NotRequired[list[str]]
    text: str


class Cell(TypedDict):
    id: str | None
    index: int
    cell_type: CellType
    source: str
    execution_count: NotRequired[int | None]  # code cells
    outputs: NotRequired[list[Output]]  # code cells, unless left out
    attachments: NotRequired[dict[str, list[str]]]  # markdown/raw cells: file name -> its mime types
    metadata: dict[str, Any]


class OutlineCell(TypedDict):
    """A cell in an outline read: enough to find it, not its whole text."""

    id: str | None
    index: int
    cell_type: CellType
    first_line: str  # cut to 120 characters
    line_count: int
    execution_count: NotRequired[int | None]  # code cells
    output_count: NotRequired[int]  # code cells
    output_chars: NotRequired[int]  # code cells: the characters their outputs hold (text, base64 images)


class Notebook(TypedDict):
    path: str
    room_id: str
    cell_count: int  # the whole notebook's
    metadata: dict[str, Any]
    start_index: int  # the index of the first cell in ``cells``
    next_index: int | None  # where the next page starts; None: ``cells`` ends at the last cell
    cells: list[Cell] | list[OutlineCell]


class Change(TypedDict):
    """``kind``: the cell field that changed ("source", "outputs", "execution_count", "cell_type",
    "metadata", ...), or "cells_inserted", "cells_deleted", "notebook_metadata"."""

    kind: str
    cell_id: NotRequired[str | None]
    cell_index: NotRequired[int]
    cell_ids: NotRequired[list[str | None]]  # cells_inserted
    count: NotRequired[int]  # cells_deleted


class Watched(TypedDict):
    path: str
    changed: bool
    changes: list[Change]
    waited_seconds: float


class User(TypedDict):
    client_id: int
    name: str | None
    display_name: str | None
    username: str | None
    initials: str | None
    color: str | None
    is_agent: bool
    cell_id: NotRequired[str | None]  # notebook_list_users: the cell holding their text cursor


class Users(TypedDict):
    path: str
    room_open: bool
    users: list[User]


class CellBrief(TypedDict):
    id: str | None
    index: int
    cell_type: CellType
    source: str


class InsertedCell(TypedDict):
    id: str
    index: int
    cell_count: int


class UpdatedCell(CellBrief):
    diff: str  # unified diff of the source, before the edit to after it ("" if unchanged)


class EditedCell(UpdatedCell):
    replacements: int  # how many times the old text was replaced


class MovedCell(TypedDict):
    id: str | None
    index: int  # where it is now
    from_index: int
    cell_count: int


class ClearedOutputs(TypedDict):
    path: str
    cleared: list[str | None]  # the ids of the cells whose outputs were cleared
    running: list[str | None]  # left as they are: running cells (their run is writing outputs)


class DeletedCells(TypedDict):
    deleted: list[CellBrief]  # in notebook order, each with the index it had
    cell_count: int


class Execution(TypedDict):
    path: NotRequired[str]  # absent only in a task's partial result
    cell_id: NotRequired[str]  # cell_execute
    status: ExecutionStatus
    execution_count: NotRequired[int | None]
    outputs: list[Output]
    message: NotRequired[str]  # why it stopped (timeout, interrupt, abort)
    partial: NotRequired[bool]  # a task's output so far, not the run's answer


class CellRun(TypedDict):
    """One cell of a notebook_execute: how it ended, its count and its outputs."""

    cell_id: str
    index: int  # where it was when it ran
    status: ExecutionStatus
    execution_count: int | None
    outputs: list[Output]
    message: NotRequired[str]  # why it stopped (timeout, interrupt, a kernel that died)


class SkippedCell(TypedDict):
    cell_id: str
    reason: str  # deleted, or no longer a code cell, by the time its turn came


class NotebookRun(TypedDict):
    path: str
    status: ExecutionStatus  # "ok", or how the first cell that did not end ok ended
    cells: list[CellRun]  # in the order they ran
    skipped: list[SkippedCell]
    not_run: list[str]  # ids of the cells never started (stopped at an error, or cancelled)
    message: NotRequired[str]  # why it stopped before the end
    partial: NotRequired[bool]  # a task's cells so far, not the run's answer


class SearchMatch(TypedDict):
    path: str
    cell_id: str | None
    index: int
    cell_type: CellType
    where: Literal["source", "output"]
    line: int  # 1-based, within the cell's source or within that output's text
    excerpt: str  # the matching line (a window of it around the match when long)


class SearchResult(TypedDict):
    query: str
    matches: list[SearchMatch]
    truncated: bool  # more matches than max_results: narrow the search
    notebooks_searched: int
    unreadable: list[str]  # notebooks that could not be read (not a notebook's JSON, gone meanwhile)


class KernelSpec(TypedDict):
    name: str
    display_name: str
    language: str | None


class RunningKernel(TypedDict):
    kernel_id: str
    kernel_name: str | None
    execution_state: str | None  # idle, busy, starting, ...
    last_activity: str | None
    connections: int  # websockets connected (a JupyterLab tab holds one)
    notebooks: list[str]  # the notebooks whose sessions use it
    started_by_mcp: bool  # started by MCP for a notebook that had no session (stopped when idle)


class Kernels(TypedDict):
    default_kernel_name: str
    kernelspecs: list[KernelSpec]
    kernels: list[RunningKernel]


class NotebookKernel(TypedDict):
    path: str
    kernel_id: str
    kernel_name: str | None
    execution_state: str | None


class Room(TypedDict):
    room_id: str
    path: str | None
    file_id: str
    users: list[str | None]
    user_count: int
    clients: int
    has_kernel: bool
    idle_seconds: float | None
    saved: bool  # false: the last save failed, the edits are only in this room (kept open, retried each sweep)
    save_error: str | None  # why the last save failed, naming the file


class Rooms(TypedDict):
    rooms: list[Room]
