"""In-place operations on a live YNotebook.

Each operation is synchronous on purpose: between finding a cell and changing it
there is no ``await``, so no other edit (another agent, a person) can slip in and
shift the indexes. Cells are edited in place: ``cell_update`` changes the existing
source Text (a diff), never replaces the cell's Map, so the id, the position and
every other client's cursor survive.
"""

from __future__ import annotations

import weakref
from typing import Any, Literal

from pycrdt import Array, Map, Text

from .errors import NotebookError

CellType = Literal["code", "markdown", "raw"]


def id_of(ycell: Map) -> str | None:
    value = ycell.get("id")
    return str(value) if value is not None else None


def find(ynb: Any, cell_id: str, hint: int | None = None) -> int | None:
    """The index of the cell with this id (checking ``hint`` first), or None."""
    ycells = ynb.ycells
    if hint is not None and 0 <= hint < len(ycells) and id_of(ycells[hint]) == cell_id:
        return hint
    return next((i for i, ycell in enumerate(ycells) if id_of(ycell) == cell_id), None)


def locate(ynb: Any, cell_id: str | None = None, index: int | None = None) -> int:
    """The index of the cell named by ``cell_id`` (preferred) or ``index``; refuses clearly."""
    count = len(ynb.ycells)
    if cell_id is not None:
        if not isinstance(cell_id, str) or not cell_id:
            raise NotebookError("cell_id must be a non-empty string")
        i = find(ynb, cell_id)
        if i is not None:
            if index is not None and index != i:
                raise NotebookError(f"cell_id {cell_id!r} is at index {i}, not {index}; pass one of them")
            return i
        raise NotebookError(f"no cell with id {cell_id!r} in this notebook ({count} cells); "
                            "notebook_get lists the ids")
    if index is None:
        raise NotebookError("name the cell: pass cell_id (preferred) or index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise NotebookError(f"index must be an integer, not {type(index).__name__}")
    if not 0 <= index < count:
        span = f"0..{count - 1}" if count else "none: the notebook is empty"
        raise NotebookError(f"index {index} is out of range: the notebook has {count} cells ({span})")
    return index


def cell_view(ycell: Map | dict[str, Any], index: int) -> dict[str, Any]:
    """A cell as plain data, outputs as stored (callers summarise them for agents).

    Takes the cell's Map or its ``to_py()`` dict: converting the whole cell list at once
    (``ycells.to_py()``) is far cheaper than reading Maps field by field."""
    cell = ycell.to_py() if isinstance(ycell, Map) else ycell
    cell_type = str(cell.get("cell_type", "code"))
    source = cell.get("source", "")
    view: dict[str, Any] = {
        "id": str(cell["id"]) if cell.get("id") is not None else None,
        "index": index,
        "cell_type": cell_type,
        "source": "".join(source) if isinstance(source, list) else str(source),
    }
    if cell_type == "code":
        count = cell.get("execution_count")
        view["execution_count"] = int(count) if count is not None else None
        view["outputs"] = list(cell.get("outputs") or [])
    view["metadata"] = dict(cell.get("metadata") or {})
    return view


_snapshots: weakref.WeakKeyDictionary[Any, tuple[bytes, list[dict[str, Any]]]] = weakref.WeakKeyDictionary()


def _version(ydoc: Any) -> bytes:
    """What the document's content is a function of: its state vector (what was inserted)
    and its delete set (what was deleted: a deletion does not advance the state vector,
    so the vector alone would still show a deleted cell, or text a person erased)."""
    state = ydoc.get_state()
    return state + ydoc.get_update(state)  # an update against its own state: the delete set only


def snapshot(ynb: Any) -> list[dict[str, Any]]:
    """Every cell as plain data, converted once per state of the document.

    Converting a Y document to Python costs ~70 µs a cell; computing its version ~10 µs,
    so an unchanged notebook is read again for free. (Not invalidated by a document
    observer: pycrdt keeps an observed Doc alive for ever, closed room or not.) Callers
    must not modify what they get (it is shared); ``cell_view`` copies what it returns."""
    version = _version(ynb.ydoc)
    cached = _snapshots.get(ynb.ydoc)
    if cached is not None and cached[0] == version:
        return cached[1]
    cells = ynb.ycells.to_py()
    _snapshots[ynb.ydoc] = (version, cells)
    return cells


def brief(ycell: Map, index: int) -> dict[str, Any]:
    """Id, index, type and source: what an edit answers (no outputs to convert)."""
    return {"id": id_of(ycell), "index": index, "cell_type": str(ycell.get("cell_type", "code")),
            "source": str(ycell.get("source", ""))}


def set_source(ynb: Any, index: int, source: str) -> None:
    """Replace the source of the cell at ``index`` by editing its Text in place."""
    ycell = ynb.ycells[index]
    before = id_of(ycell)
    if not isinstance(ycell.get("source"), Text):  # a legacy cell with a plain string source
        ycell["source"] = Text()
    ynb.set_cell(index, source=source)
    after = id_of(ynb.ycells[index])
    if after != before:
        raise RuntimeError(f"cell id changed during an in-place update ({before!r} -> {after!r})")


def set_type(ynb: Any, index: int, cell_type: CellType) -> None:
    """Change a cell's type in place (its id, source and position stay)."""
    ycell = ynb.ycells[index]
    if ycell.get("cell_type") == cell_type:
        return
    with ynb.ydoc.transaction():
        ycell["cell_type"] = cell_type
        if cell_type == "code":
            ycell["outputs"] = Array()
            ycell["execution_count"] = None
            ycell["execution_state"] = "idle"
        else:
            for key in ("outputs", "execution_count", "execution_state"):
                if key in ycell:
                    del ycell[key]


def update(ynb: Any, index: int, source: str, cell_type: CellType | None = None) -> None:
    """A new source (and optionally type) for the cell at ``index``, in one transaction."""
    with ynb.ydoc.transaction():
        set_source(ynb, index, source)
        if cell_type is not None:
            set_type(ynb, index, cell_type)


def insert(ynb: Any, position: int, cell_type: CellType, source: str) -> str:
    """Insert one new cell at ``position`` (0..len); returns its new id."""
    count = len(ynb.ycells)
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position <= count:
        raise NotebookError(f"index {position!r} is out of range for an insert: use 0..{count} "
                            f"(the notebook has {count} cells; {count} appends)")
    cell: dict[str, Any] = {"cell_type": cell_type, "source": source, "metadata": {}}
    if cell_type == "code":
        cell.update(outputs=[], execution_count=None)
    ycell = ynb.create_ycell(cell)
    ynb.ycells.insert(position, ycell)
    return id_of(ynb.ycells[position]) or ""


def delete(ynb: Any, index: int) -> dict[str, Any]:
    """Delete the one cell at ``index``; returns what it was."""
    gone = brief(ynb.ycells[index], index)
    del ynb.ycells[index]
    return gone


# --- outputs of a running cell, written as they arrive --------------------------------


def _youtput(output: dict[str, Any]) -> Map:
    item = dict(output)
    if item.get("output_type") == "stream":
        text = item.get("text", "")
        item["text"] = Text("".join(text) if isinstance(text, list) else text)
    return Map(item)


def begin_run(ynb: Any, index: int) -> None:
    """As JupyterLab does when a cell starts: outputs and count cleared, shown as running [*]."""
    ycell = ynb.ycells[index]
    with ynb.ydoc.transaction():
        outputs = ycell.get("outputs")
        if isinstance(outputs, Array):
            outputs.clear()
        else:
            ycell["outputs"] = Array()
        ycell["execution_count"] = None
        ycell["execution_state"] = "running"


def replace_outputs(ynb: Any, index: int, outputs: list[dict[str, Any]]) -> None:
    """Set a cell's outputs to exactly ``outputs`` (after the room was re-created mid-run)."""
    youtputs = ynb.ycells[index]["outputs"]
    with ynb.ydoc.transaction():
        youtputs.clear()
        youtputs.extend([_youtput(o) for o in outputs])


def apply_output_event(ynb: Any, index: int, event: dict[str, Any]) -> None:
    """Apply one output event from the kernel loop to the cell, in place."""
    youtputs = ynb.ycells[index]["outputs"]
    kind = event["kind"]
    with ynb.ydoc.transaction():
        if kind == "clear":
            youtputs.clear()
        elif kind == "output":
            youtputs.append(_youtput(event["output"]))
        elif kind == "stream":
            text = youtputs[event["index"]]["text"]
            if isinstance(text, Text):
                text += event["text"]  # on the local: `youtputs[i]["text"] += s` would lose it
            else:
                youtputs[event["index"]]["text"] = Text(str(text) + event["text"])
        elif kind == "update":
            target = youtputs[event["index"]]
            target["data"] = event["output"].get("data", {})
            target["metadata"] = event["output"].get("metadata", {})


def end_run(ynb: Any, index: int, execution_count: int | None) -> None:
    ycell = ynb.ycells[index]
    with ynb.ydoc.transaction():
        ycell["execution_count"] = execution_count
        ycell["execution_state"] = "idle"
