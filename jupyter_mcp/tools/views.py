"""What every tool answers, as types: fastmcp publishes each as the tool's output schema,
so an agent knows the shape before it calls (and SDK clients check answers against it).

A result a lower layer builds is typed where it is built (a cell brief in ``cells``, a file
entry in ``files``, a kernel listing in ``kernels.sessions``...); this module names those for
the tools, and types what the tools put together from them."""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict  # pydantic needs these on Python < 3.12

from ..kernels.sessions import KernelListing, KernelModel
from ..notebooks.cells import CellBrief, CellType, OutlineCell
from ..notebooks.changes import Change, Watched
from ..notebooks.files import CreatedNotebook, FileEntry, NewCell, NotebookFile
from ..notebooks.presence import User as PresentUser
from ..notebooks.search import Match

#: How a run ended, as the agent sees it: the kernel's answer ("aborted": the kernel refused the
#: request because an earlier one failed just before), or "cancelled" in a task's partial result.
ExecutionStatus = Literal["ok", "error", "timeout", "interrupted", "aborted", "cancelled"]


class NotebookList(TypedDict):
    notebooks: list[NotebookFile]


class FileList(TypedDict):
    folder: str
    entries: list[FileEntry]
    next_index: int | None  # start_index for the next page; null: this was the last


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


class Notebook(TypedDict):
    path: str
    room_id: str
    cell_count: int  # the whole notebook's
    metadata: dict[str, Any]
    start_index: int  # the index of the first cell in ``cells``
    next_index: int | None  # where the next page starts; None: ``cells`` ends at the last cell
    cells: list[Cell] | list[OutlineCell]


class User(PresentUser):
    cell_id: str | None  # the cell holding their text cursor


class Users(TypedDict):
    path: str
    room_open: bool
    users: list[User]


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


class SearchMatch(Match):
    path: str


class SearchResult(TypedDict):
    query: str
    matches: list[SearchMatch]
    truncated: bool  # more matches than max_results: narrow the search
    notebooks_searched: int
    unreadable: list[str]  # notebooks that could not be read (not a notebook's JSON, gone meanwhile)


class NotebookKernel(KernelModel):
    path: str


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


__all__ = ["Cell", "CellBrief", "CellRun", "CellType", "Change", "ClearedOutputs", "CreatedNotebook",
           "DeletedCells", "EditedCell", "Execution", "ExecutionStatus", "FileEntry", "FileList",
           "InsertedCell", "KernelListing", "MovedCell", "NewCell", "Notebook", "NotebookFile",
           "NotebookKernel", "NotebookList", "NotebookRun", "OutlineCell", "Output", "Room", "Rooms",
           "SearchMatch", "SearchResult", "SkippedCell", "UpdatedCell", "User", "Users", "Watched"]
