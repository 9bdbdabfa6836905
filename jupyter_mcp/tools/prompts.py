"""The prompts: conversation starters a person picks in their MCP client (the "@" of an IDE)."""

from __future__ import annotations

import re
from typing import Annotated

from fastmcp.dependencies import Depends
from fastmcp.prompts import Message
from mcp_types import EmbeddedResource, TextResourceContents
from pydantic import Field

from ..errors import NotebookError
from ..identity import Agent, calling_agent
from ..notebooks.cells import read_all
from .declarations import NOTEBOOKS
from .operations import Notebooks
from .resources import CELL_MIME, cell_resource, dumps

MAX_CITED = 50  # cells one citation embeds
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def cited(spec: str, ids: list[str]) -> list[int]:
    """The indexes ``spec`` names, in its order, each once: "0-2,5" (indexes and ranges, both ends
    included) or cell ids ("a1b2c3,d4e5f6"), mixed as needed; refused clearly otherwise. A cell's
    id wins over an index of the same digits (nbformat's random ids are all digits one time in 40)."""
    chosen: list[int] = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        span = None if item in ids else _RANGE.fullmatch(item)  # an id of digits alone is an id
        if span:
            first, last = int(span.group(1)), int(span.group(2) or span.group(1))
            if last < first or last >= len(ids):
                raise NotebookError(f"cells {item!r}: the notebook has {len(ids)} cells (0..{len(ids) - 1})"
                                    if last >= len(ids) else f"cells {item!r}: a range goes up, as in 2-5")
            chosen.extend(range(first, last + 1))
        elif item in ids:
            chosen.append(ids.index(item))
        else:
            raise NotebookError(f"cells {item!r}: no cell has that id, and it is not an index or a range "
                                "(name cells as '0-2,5' or by their ids, comma-separated)")
    chosen = list(dict.fromkeys(chosen))
    if not chosen:
        raise NotebookError("cells is empty: name cells as '0-2,5' or by their ids, comma-separated")
    if len(chosen) > MAX_CITED:
        raise NotebookError(f"{len(chosen)} cells named; a citation holds {MAX_CITED} at most")
    return chosen


async def notebook_cite(
    path: Annotated[str, Field(description="Notebook path in the workspace, e.g. 'analysis/report.ipynb'.")],
    cells: Annotated[str, Field(description="The cells: indexes and ranges ('0-2,5') or cell ids, comma-separated.")],
    request: Annotated[str, Field(description="What to do with them (optional).")] = "",
    nbs: Notebooks = NOTEBOOKS,
    agent: Agent = Depends(calling_agent),
) -> list[Message]:
    """Cite cells of a live notebook into the conversation, as "@" does in an IDE: each cell
    (source and outputs, as the notebook holds them now, unsaved edits included) embedded as
    its notebook:// resource, then the request."""
    nb = await nbs.open(path, agent)
    every = await read_all(nb.doc)
    ids = [str(cell.get("id")) for cell in every]
    chosen = cited(cells, ids)
    messages = [Message(f"Cells {', '.join(str(i) for i in chosen)} of the notebook {nb.path}, as it is now:")]
    for index in chosen:
        cell = nb.doc.get_cell(index)
        messages.append(Message(EmbeddedResource(type="resource", resource=TextResourceContents(
            uri=cell_resource(nb.path, ids[index]), mime_type=CELL_MIME, text=dumps(cell)))))
    if request.strip():
        messages.append(Message(request))
    return messages


PROMPTS = [notebook_cite]
