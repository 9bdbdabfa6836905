"""A room's document as its file holds it: the content a save writes and a room is compared with
its file by (``file_content``, read in one pass), jupyter-ydoc's made-up metadata left out
(``without_placeholders``) and its made-up cell ids matched (``same_made_up_ids``), and a file's
content loaded into a fresh document as a room loads it (``loaded_into``)."""

from __future__ import annotations

import copy
from typing import Any, cast

from jupyter_ydoc import YNotebook
from jupyter_ydoc.utils import cast_all
from pycrdt import Doc

from ..adapters import ydoc_rooms
from . import cells

# What jupyter-ydoc puts in a notebook's metadata when its file has none (YNotebook._set):
# placeholders, not the notebook's; a save leaves them out rather than write them into the file.
METADATA_PLACEHOLDERS = {"kernelspec": {"name": "", "display_name": ""}, "language_info": {"name": ""}}



def loaded_into(document_type: Any, content: Any) -> Any:
    """A new document of ``document_type`` holding ``content``, as a room loads it. Run in a
    worker thread: the document is its own (pycrdt may be used from any thread), and
    jupyter-ydoc builds a notebook cell by cell, each insert walking the list from its start
    (quadratic: 13 s of CPU for 20,000 cells), in steps of at most a few ms each, so the
    event loop gets the interpreter back between them."""
    fresh = document_type(Doc())
    fresh.set(content)
    return fresh


async def file_content(document: Any) -> Any:
    """The document's content as its file holds it: what jupyter-ydoc's ``aget`` answers, for a
    notebook read in one pass (``cells.decode_list`` of pycrdt's JSON of the cell list).
    ``aget`` reads cell by cell, each read walking the list from its start: 24 s of event
    loop for 20,000 cells. Cells as jupyter-ydoc's ``_cell_to_py`` gives them (no running
    mark; no ids before nbformat 4.5; no empty attachments on a markdown or raw cell); a
    notebook with a cell id twice is left to ``aget`` (it renumbers them in the document)."""
    if not isinstance(document, YNotebook):
        return await document.aget()
    plain: list[dict[str, Any]] = await cells.decode_list(str(document.ycells))  # new objects: ours to change
    ids = [cell.get("id") for cell in plain if cell.get("id") is not None]
    if len(ids) != len(set(ids)):
        return await document.aget()
    meta = cast(dict[str, Any], cast_all(ydoc_rooms.notebook_meta(document).to_py() or {}, float, int))  # a dict in, a dict out
    no_ids = int(meta.get("nbformat", 0)) == 4 and int(meta.get("nbformat_minor", 0)) <= 4
    for cell in plain:
        cell.pop("execution_state", None)
        if no_ids:
            cell.pop("id", None)
        if cell.get("cell_type") in ("raw", "markdown") and "attachments" in cell and not cell["attachments"]:
            del cell["attachments"]
    return {"cells": plain, "metadata": meta.get("metadata", {}), "nbformat": int(meta.get("nbformat", 0)),
            "nbformat_minor": int(meta.get("nbformat_minor", 0))}


def without_placeholders(content: Any) -> Any:
    """A notebook's content without the metadata jupyter-ydoc made up for a file that had none."""
    metadata = content.get("metadata") if isinstance(content, dict) else None
    if not isinstance(metadata, dict) or not any(metadata.get(k) == v for k, v in METADATA_PLACEHOLDERS.items()):
        return content
    content = {**content, "metadata": copy.copy(metadata)}
    for key, placeholder in METADATA_PLACEHOLDERS.items():
        if content["metadata"].get(key) == placeholder:
            del content["metadata"][key]
    return content


def same_made_up_ids(loaded: Any, fresh: Any, live: Any) -> None:
    """Give ``fresh`` the live document's ids where jupyter-ydoc made one up at random on
    loading (a cell with no id in the file; the one empty cell of a notebook with none), so
    that loading the same file twice compares equal."""
    if not (isinstance(loaded, dict) and isinstance(fresh, dict) and isinstance(live, dict)):
        return
    file_cells = loaded.get("cells") or []
    made_up = [i for i, cell in enumerate(file_cells) if "id" not in cell] if file_cells else [0]
    fresh_cells, live_cells = fresh.get("cells") or [], live.get("cells") or []
    for i in made_up:
        if i < len(fresh_cells) and i < len(live_cells) and "id" in fresh_cells[i] and "id" in live_cells[i]:
            fresh_cells[i]["id"] = live_cells[i]["id"]
