"""Finding text in notebooks: a literal, line by line, in cell sources and (if asked) outputs.

Pure functions over cells as plain data (a live document's ``snapshot`` or a file's JSON), so a
search runs in a worker thread, off the event loop. Only literal text is searched: a regular
expression of the caller's could backtrack for ever in a thread nobody can stop.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from . import outputs
from .cells import CellType, cell_type_of

EXCERPT_CHARS = 160  # the longest excerpt of a matching line
MAX_QUERY_CHARS = 1000


def cells_of_file(data: bytes) -> list[Any]:
    """A notebook file's cells, as plain data (``[]`` if it holds none); ValueError if it is not
    a JSON object."""
    notebook = json.loads(data)
    if not isinstance(notebook, dict):
        raise ValueError("not a notebook: its JSON is not an object")
    cells = notebook.get("cells")
    return cells if isinstance(cells, list) else []


class Match(TypedDict):
    """Where a search found its text in one notebook."""

    cell_id: str | None
    index: int
    cell_type: CellType
    where: Literal["source", "output"]
    line: int  # 1-based, within the cell's source or within that output's text
    excerpt: str  # the matching line (a window of it around the match when long)


def search_cells(cells: list[Any], query: str, case_sensitive: bool, include_outputs: bool,
                 limit: int) -> tuple[list[Match], bool]:
    """Up to ``limit`` matches in ``cells``, in order, and whether there were more."""
    needle = query if case_sensitive else query.casefold()
    found: list[Match] = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            continue
        for where, text in _texts(cell, include_outputs):
            for number, line in enumerate(text.splitlines(), 1):
                at = (line if case_sensitive else line.casefold()).find(needle)
                if at < 0:
                    continue
                if len(found) == limit:
                    return found, True
                found.append({"cell_id": str(cell["id"]) if cell.get("id") is not None else None, "index": index,
                              "cell_type": cell_type_of(cell), "where": where, "line": number,
                              "excerpt": excerpt(line, at, len(query))})
    return found, False


def _texts(cell: dict[str, Any], include_outputs: bool) -> Iterator[tuple[Literal["source", "output"], str]]:
    source = cell.get("source", "")
    yield "source", "".join(map(str, source)) if isinstance(source, list) else str(source)
    if include_outputs and isinstance(cell.get("outputs"), list):
        for output in cell["outputs"]:
            if isinstance(output, dict):
                yield "output", outputs.output_text(output)


def excerpt(line: str, at: int, length: int) -> str:
    """The matching line, or a window of it around the match, marked "…" where it is cut."""
    if len(line) <= EXCERPT_CHARS:
        return line
    before = max(0, (EXCERPT_CHARS - length) // 2)
    start = max(0, min(at - before, len(line) - EXCERPT_CHARS))
    end = start + max(EXCERPT_CHARS, length)
    return ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")
