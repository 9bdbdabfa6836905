"""In-place operations on a live YNotebook.

Each operation is synchronous on purpose: between finding a cell and changing it
there is no ``await``, so no other edit (another agent, a person) can slip in and
shift the indexes. Cells are edited in place: ``cell_update`` changes the existing
source Text, never replaces the cell's Map, so the id and the position survive, and
so does every other client's cursor outside the part that changed.

Being synchronous, each operation holds the server's event loop (every user's requests,
kernels and UI) while it runs, so each is bounded: a new source replaces only what lies
between the longest common prefix and suffix of the old and new texts (linear, at memcmp
speed: jupyter-ydoc's ``set_cell(source=...)`` runs difflib's SequenceMatcher instead,
which took seconds on a 32 KB text unlike the one it replaced), and no source may be
longer than ``MAX_SOURCE_CHARS``.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import time
import weakref
from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict  # pydantic needs these on Python < 3.12

from pycrdt import Array, Map, Text

from ..errors import NotebookError

CellType = Literal["code", "markdown", "raw"]
CELL_TYPES: tuple[CellType, ...] = ("code", "markdown", "raw")


def cell_type_of(cell: Any) -> CellType:
    """A cell's type as nbformat names them ("code" when it has none: jupyter-ydoc's default)."""
    kind = cell.get("cell_type", "code")
    return next((t for t in CELL_TYPES if t == kind), "code")


class CellBrief(TypedDict):
    """A cell as an edit answers it: no outputs to convert."""

    id: str | None
    index: int
    cell_type: CellType
    source: str


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


def id_of(ycell: Map) -> str | None:
    value = ycell.get("id")
    return str(value) if value is not None else None


def find(ynb: Any, cell_id: str, hint: int | None = None) -> int | None:
    """The index of the cell with this id (checking ``hint`` first), or None.

    Never walks the cell list Map by Map: pycrdt reaches item ``i`` of an Array by walking
    from its start, so visiting every cell is quadratic (2.3 s for 20,000 cells). The
    index the last snapshot saw the id at is checked first (one lookup; cells rarely move);
    only if the cell is not there is the list read again, in one pass (``snapshot``)."""
    ycells = ynb.ycells
    count = len(ycells)
    for guess in (hint, _positions.get(ynb.ydoc, {}).get(cell_id)):
        if guess is not None and 0 <= guess < count and id_of(ycells[guess]) == cell_id:
            return guess
    snapshot(ynb)
    return _positions.get(ynb.ydoc, {}).get(cell_id)


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

    Takes the cell's Map or its plain dict from ``snapshot``: reading the whole cell list at
    once is far cheaper than reading Maps field by field. A Map is read as its JSON, as
    ``snapshot`` reads the list, so one cell reads the same whichever way it is asked for."""
    cell = json.loads(str(ycell)) if isinstance(ycell, Map) else ycell
    cell_type = cell_type_of(cell)
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
    attachments = cell.get("attachments")
    if isinstance(attachments, dict) and attachments:
        view["attachments"] = {str(name): sorted(str(m) for m in bundle) if isinstance(bundle, dict) else []
                               for name, bundle in attachments.items()}
    view["metadata"] = dict(cell.get("metadata") or {})
    return view


OUTLINE_LINE_CHARS = 120


def outline_view(cell: dict[str, Any], index: int) -> OutlineCell:
    """A cell as an outline read shows it: id, type, first line, sizes (``cell`` as ``snapshot``
    gives it)."""
    cell = cell if isinstance(cell, dict) else {}
    source = cell.get("source", "")
    source = "".join(map(str, source)) if isinstance(source, list) else str(source)
    first = next((line for line in source.splitlines() if line.strip()), "")
    view: OutlineCell = {
        "id": str(cell["id"]) if cell.get("id") is not None else None,
        "index": index,
        "cell_type": cell_type_of(cell),
        "first_line": first if len(first) <= OUTLINE_LINE_CHARS else first[:OUTLINE_LINE_CHARS - 1] + "…",
        "line_count": len(source.splitlines()),
    }
    if view["cell_type"] == "code":
        count = cell.get("execution_count")
        stored = cell.get("outputs")
        outputs: list[Any] = stored if isinstance(stored, list) else []
        view["execution_count"] = int(count) if count is not None else None
        view["output_count"] = len(outputs)
        view["output_chars"] = sum(_chars(o) for o in outputs)
    return view


def _chars(value: Any) -> int:
    """The characters of text a stored value holds (its strings, however nested)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_chars(v) for k, v in value.items() if k != "metadata")
    if isinstance(value, list):
        return sum(_chars(v) for v in value)
    return 0


_snapshots: weakref.WeakKeyDictionary[Any, tuple[bytes, list[dict[str, Any]]]] = weakref.WeakKeyDictionary()
#: Per document: each cell id -> its index when the document was last read (``find``'s first guess).
_positions: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()


def _version(ydoc: Any) -> bytes:
    """What the document's content is a function of: its state vector (what was inserted)
    and its delete set (what was deleted: a deletion does not advance the state vector,
    so the vector alone would still show a deleted cell, or text a person erased)."""
    state = ydoc.get_state()
    return state + ydoc.get_update(state)  # an update against its own state: the delete set only


def _cached(ynb: Any) -> tuple[bytes, list[dict[str, Any]] | None]:
    version = _version(ynb.ydoc)
    cached = _snapshots.get(ynb.ydoc)
    return version, cached[1] if cached is not None and cached[0] == version else None


def _keep(ynb: Any, version: bytes, cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    _snapshots[ynb.ydoc] = (version, cells)
    positions: dict[str, int] = {}
    for i, cell in enumerate(cells):
        if isinstance(cell, dict) and cell.get("id") is not None:
            positions.setdefault(str(cell["id"]), i)  # the first, as a walk from the start finds
    _positions[ynb.ydoc] = positions
    return cells


def snapshot(ynb: Any) -> list[dict[str, Any]]:
    """Every cell as plain data, read once per state of the document.

    Read as the JSON text pycrdt makes of the whole list in one pass (``str(ycells)``: 0.15 s
    for 20,000 cells), never Map by Map (``ycells.to_py()`` walks the list from its start
    for each item: quadratic, 13 s for 20,000 cells); JSON's numbers are what jupyter-ydoc
    reads (a whole float is an int). Computing the version costs ~10 µs, so an unchanged
    notebook is read again for free. (Not invalidated by a document observer: pycrdt keeps an
    observed Doc alive for ever, closed room or not.) Callers must not modify what they get
    (it is shared); ``cell_view`` copies what it returns."""
    version, cells = _cached(ynb)
    if cells is None:
        cells = _keep(ynb, version, json.loads(str(ynb.ycells)))
    return cells


async def read_all(ynb: Any) -> list[dict[str, Any]]:
    """``snapshot``, decoded in slices with the event loop let go between them (the JSON of a
    20,000-cell notebook takes ~0.12 s to decode at once). The document may change during
    the awaits: what is returned is the state it was in when its text was taken."""
    version, cells = _cached(ynb)
    if cells is None:
        cells = _keep(ynb, version, await decode_list(str(ynb.ycells)))
    return cells


async def decode_list(text: str, budget: float = 0.01) -> list[Any]:
    """A JSON list decoded item by item, yielding to the event loop every ``budget`` seconds."""
    decoder, items = json.JSONDecoder(), []
    i, end = _skip_space(text, 1), len(text)  # after the "["
    deadline = time.monotonic() + budget
    while i < end and text[i] != "]":
        item, i = decoder.raw_decode(text, i)
        items.append(item)
        i = _skip_space(text, i)
        if i < end and text[i] == ",":
            i = _skip_space(text, i + 1)
        if time.monotonic() > deadline:
            await asyncio.sleep(0)
            deadline = time.monotonic() + budget
    return items


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def brief(ycell: Map, index: int) -> CellBrief:
    """Id, index, type and source: what an edit answers (no outputs to convert)."""
    return {"id": id_of(ycell), "index": index, "cell_type": cell_type_of(ycell), "source": str(ycell.get("source", ""))}


MAX_DIFF_CHARS = 20_000  # a diff longer than this is cut: the whole new source is in the answer anyway


def diff(old: str, new: str) -> str:
    """What an edit changed in a cell's source, as a unified diff ("" if nothing): the agent sees
    what it replaced, a person's text it had not read included, without reading the cell again.
    difflib's matching is superlinear: callers run it in a worker thread, on copies."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 "before", "after", lineterm="")
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + f"\n[diff cut at {MAX_DIFF_CHARS} of {len(text)} characters]\n"
    return text


#: The longest source one cell may be given, in characters (code points): 256 Ki. Every path
#: in this module that writes a cell's source checks it (``check_source``). Any source this
#: long fits in the MCP server's 4 MiB request limit however a client encodes it (at most 12
#: bytes of JSON a character: ``\ud83d\ude00``), so an agent over it gets this clear refusal,
#: not the transport's bare HTTP 413; and writing it (the request, the edit, the answer, the
#: broadcast to the UIs, the save) holds the event loop for a few tens of milliseconds at most.
MAX_SOURCE_CHARS = 1 << 18


def check_source(source: object) -> bytes:
    """The source as UTF-8, if a cell may hold it; refuses clearly (before anything changes)."""
    if not isinstance(source, str):
        raise NotebookError(f"source must be a string, not {type(source).__name__}")
    if len(source) > MAX_SOURCE_CHARS:
        raise NotebookError(f"source is {len(source):,} characters, over the limit of {MAX_SOURCE_CHARS:,} "
                            "characters for one cell; nothing was changed (split it across cells, or keep "
                            "the data in a file the code reads)")
    try:
        return source.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NotebookError(f"source is not valid Unicode (a lone surrogate at character {exc.start}); "
                            "nothing was changed") from None


def _continues(data: bytes, i: int) -> bool:
    """Whether byte ``i`` of UTF-8 ``data`` is inside a character (not the start of one or the end)."""
    return i < len(data) and data[i] & 0xC0 == 0x80


def _shared(a: bytes, b: bytes, limit: int, from_end: bool) -> int:
    """How many bytes (at most ``limit``) ``a`` and ``b`` share at their start (or end).

    Compares slices (memcmp) growing twice as long, then bisects the last one: time linear
    in the answer, however different the rest is."""
    def part(data: bytes, i: int, j: int) -> bytes:  # bytes i..j counted from the start or the end
        return data[len(data) - j:len(data) - i] if from_end else data[i:j]

    same, step = 0, 64
    while same < limit:
        stop = min(same + step, limit)
        if part(a, same, stop) != part(b, same, stop):
            while stop - same > 1:  # a and b agree on `same` bytes, not on `stop`
                mid = (same + stop) // 2
                if part(a, same, mid) == part(b, same, mid):
                    same = mid
                else:
                    stop = mid
            return same
        same, step = stop, step * 2
    return same


def replace_text(text: Text, new: bytes, ahead_of_others: bool = False) -> None:
    """Make ``text`` hold the UTF-8 ``new``, editing only what lies between the longest common
    prefix and suffix, in one transaction; linear in the texts' length.

    A person's cursor before or after the changed span stays where it was (a small edit
    touches a small span); texts with nothing in common are replaced whole. pycrdt indexes a
    Text in UTF-8 bytes, so both ends are moved back to character boundaries.

    The new text is inserted before the old span, which is deleted after: deleted first, the
    insert would land past the deleted characters, at the very spot where a person typing just
    after the span puts their next letter, and Yjs puts the lower client id first of two inserts
    at one spot, so the letter of any tab whose id is below the server's (a browser draws 32
    bits, pycrdt 53: nearly every browser tab) would go before, or into, the new text.

    ``ahead_of_others``: text that belongs before anything typed at its spot meanwhile (a
    keystroke carried into a moved cell) is inserted as a replacement of the character before
    it, so what others type after that character goes after it, whatever the client ids."""
    old = str(text).encode("utf-8")
    if old == new:
        return  # no event, no cursor moved
    limit = min(len(old), len(new))
    start = _shared(old, new, limit, from_end=False)
    while start and (_continues(old, start) or _continues(new, start)):
        start -= 1
    tail = _shared(old, new, limit - start, from_end=True)
    while tail and _continues(old, len(old) - tail):  # the same byte in `new`: it is shared
        tail -= 1
    old_end, new_end = len(old) - tail, len(new) - tail
    if ahead_of_others and old_end == start and start:  # a pure insertion: the character before it joins the span
        start -= 1
        while _continues(old, start):
            start -= 1
    added = new_end - start
    with text.doc.transaction():
        if added:
            text.insert(start, new[start:new_end].decode("utf-8"))
        if old_end > start:
            del text[start + added:old_end + added]


def set_source(ynb: Any, index: int, source: str) -> None:
    """Replace the source of the cell at ``index`` by editing its Text in place, in one
    transaction (the cell's Map, id and position stay); refuses a source over the cap."""
    new = check_source(source)
    ycell = ynb.ycells[index]
    with ynb.ydoc.transaction():
        if not isinstance(ycell.get("source"), Text):  # a legacy cell with a plain string source
            ycell["source"] = Text()
        replace_text(ycell["source"], new)


#: What only a code cell has (nbformat rejects a markdown or raw cell with outputs or a count).
CODE_ONLY = ("outputs", "execution_count", "execution_state")


def is_code(ynb: Any, index: int) -> bool:
    return ynb.ycells[index].get("cell_type") == "code"


def drop_code_fields(ynb: Any, index: int) -> bool:
    """Remove what only a code cell may have from a cell that is not one (a cell another client
    retyped in place, leaving them); whether anything was removed."""
    ycell = ynb.ycells[index]
    if ycell.get("cell_type") == "code":
        return False
    present = [key for key in CODE_ONLY if key in ycell]
    if present:
        with ynb.ydoc.transaction():
            for key in present:
                del ycell[key]
    return bool(present)


def set_type(ynb: Any, index: int, cell_type: CellType) -> None:
    """Change a cell's type in place (its id, source and position stay): a cell that becomes
    code gets no outputs and no count, one that stops being code loses them (and its running
    mark: a run still going on writes no more into it)."""
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
            drop_code_fields(ynb, index)


def _patched(ynb: Any, cached: list[dict[str, Any]] | None, index: int, kind: str) -> None:
    """After one edit of ours, the read cache patched at ``index`` rather than dropped: read
    again whole, a 20,000-cell list holds the event loop ~0.15 s in one pycrdt call; one
    cell is read in microseconds. ``cached``: the cache as it was just before the edit
    (None: it was not current, nothing to patch)."""
    if cached is None:
        return
    cells = list(cached)  # the old list may be in a reader's hands: never changed
    if kind == "delete":
        del cells[index]
    else:
        cell = json.loads(str(ynb.ycells[index]))
        if kind == "insert":
            cells.insert(index, cell)
        else:
            cells[index] = cell
    _keep(ynb, _version(ynb.ydoc), cells)


def update(ynb: Any, index: int, source: str, cell_type: CellType | None = None) -> None:
    """A new source (and optionally type) for the cell at ``index``, in one transaction."""
    cached = _cached(ynb)[1]
    with ynb.ydoc.transaction():  # set_source refuses before it changes anything
        set_source(ynb, index, source)
        if cell_type is not None:
            set_type(ynb, index, cell_type)
    _patched(ynb, cached, index, "update")


def insert(ynb: Any, position: int, cell_type: CellType, source: str) -> str:
    """Insert one new cell at ``position`` (0..len); returns its new id."""
    count = len(ynb.ycells)
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position <= count:
        raise NotebookError(f"index {position!r} is out of range for an insert: use 0..{count} "
                            f"(the notebook has {count} cells; {count} appends)")
    check_source(source)
    cell: dict[str, Any] = {"cell_type": cell_type, "source": source, "metadata": {}}
    if cell_type == "code":
        cell.update(outputs=[], execution_count=None)
    ycell = ynb.create_ycell(cell)
    cached = _cached(ynb)[1]
    ynb.ycells.insert(position, ycell)
    _patched(ynb, cached, position, "insert")
    return id_of(ynb.ycells[position]) or ""


def delete(ynb: Any, indexes: list[int]) -> list[CellBrief]:
    """Delete the cells at ``indexes`` (distinct), in one transaction: every client sees them
    go at once. Returns what they were, in notebook order, each with the index it had."""
    gone = [brief(ynb.ycells[i], i) for i in sorted(indexes)]
    cached = _cached(ynb)[1]
    with ynb.ydoc.transaction():
        for i in sorted(indexes, reverse=True):  # from the end: the indexes before stay true
            del ynb.ycells[i]
    if cached is not None:  # the read cache patched, as _patched does for one edit
        dropped = set(indexes)
        _keep(ynb, _version(ynb.ydoc), [cell for i, cell in enumerate(cached) if i not in dropped])
    return gone


def move(ynb: Any, index: int, to: int) -> None:
    """Move the cell at ``index`` so that it is at ``to``, as JupyterLab does: deleted and a copy
    (same id, source, outputs, metadata) inserted, in one transaction every client decodes."""
    count = len(ynb.ycells)
    if isinstance(to, bool) or not isinstance(to, int) or not 0 <= to < count:
        raise NotebookError(f"to_index {to!r} is out of range: use 0..{count - 1} (the cell's index after the move)")
    if to == index:
        return
    cached = _cached(ynb)[1]
    cell = json.loads(str(ynb.ycells[index]))
    state = cell.get("execution_state")
    with ynb.ydoc.transaction():
        del ynb.ycells[index]
        ynb.ycells.insert(to, ynb.create_ycell(cell))
        if cell.get("cell_type") == "code" and state not in (None, "idle"):
            ynb.ycells[to]["execution_state"] = state  # a running cell still shows [*]
    if cached is not None:
        moved = list(cached)
        moved.insert(to, moved.pop(index))
        _keep(ynb, _version(ynb.ydoc), moved)


def edit(ynb: Any, index: int, old: str, new: str, replace_all: bool = False) -> int:
    """Replace ``old`` by ``new`` in the cell's source, editing only those spans of its Text (a
    person typing elsewhere in the cell keeps their text and cursor); how many were replaced.
    ``old`` must occur exactly once, or ``replace_all`` be given."""
    if not isinstance(old, str) or not old:
        raise NotebookError("old must be the exact, non-empty text to replace (copy it from cell_get)")
    check_source(new)
    ycell = ynb.ycells[index]
    source = str(ycell.get("source", ""))
    found = source.count(old)
    if not found:
        raise NotebookError(f"old text not found in cell {index}'s source ({len(source):,} characters); it must "
                            "match exactly, whitespace and line breaks included: read the cell again with cell_get")
    if found > 1 and not replace_all:
        raise NotebookError(f"old text occurs {found} times in cell {index}'s source; include more of the "
                            "surrounding text so it occurs once, or pass replace_all=true to replace every one")
    check_source(source.replace(old, new))
    text = ycell.get("source")
    if not isinstance(text, Text):  # a legacy cell with a plain string source: made a Text, whole
        set_source(ynb, index, source.replace(old, new))
        return found
    cached = _cached(ynb)[1]
    spans, byte, last = [], 0, 0  # the byte offset of each occurrence (pycrdt indexes UTF-8 bytes)
    at = source.find(old)
    while at >= 0:
        byte += len(source[last:at].encode("utf-8"))
        spans.append(byte)
        last = at
        at = source.find(old, at + len(old))
    old_bytes, new_bytes = len(old.encode("utf-8")), len(new.encode("utf-8"))
    with ynb.ydoc.transaction():
        for start in reversed(spans):  # from the end: earlier offsets stay valid
            if new:  # inserted before the old text, then that deleted: as replace_text does, and why
                text.insert(start, new)
            del text[start + new_bytes:start + new_bytes + old_bytes]
    _patched(ynb, cached, index, "update")
    return found


def clear_outputs(ynb: Any, index: int) -> bool:
    """Clear a code cell's outputs and count, as JupyterLab's "Clear Outputs" does; whether
    there was anything to clear (any other cell has none: nothing to do)."""
    ycell = ynb.ycells[index]
    if not is_code(ynb, index):
        return False
    outputs = ycell.get("outputs")
    if not (isinstance(outputs, Array) and len(outputs)) and ycell.get("execution_count") is None:
        return False
    cached = _cached(ynb)[1]
    with ynb.ydoc.transaction():
        if isinstance(outputs, Array):
            outputs.clear()
        else:
            ycell["outputs"] = Array()
        ycell["execution_count"] = None
    _patched(ynb, cached, index, "update")
    return True


# --- outputs of a running cell, written as they arrive --------------------------------


def _youtput(output: dict[str, Any]) -> Map:
    item = dict(output)
    if item.get("output_type") == "stream":
        text = item.get("text", "")
        item["text"] = Text("".join(text) if isinstance(text, list) else text)
    return Map(item)


def begin_run(ynb: Any, index: int) -> None:
    """As JupyterLab does when a cell starts: outputs and count cleared, shown as running [*].
    Outputs go only to a code cell: any other is left alone (the writers below too)."""
    ycell = ynb.ycells[index]
    if not is_code(ynb, index):
        return
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
    if not is_code(ynb, index):
        return
    if not isinstance(ynb.ycells[index].get("outputs"), Array):
        ynb.ycells[index]["outputs"] = Array()
    youtputs = ynb.ycells[index]["outputs"]
    with ynb.ydoc.transaction():
        youtputs.clear()
        youtputs.extend([_youtput(o) for o in outputs])


def apply_output_event(ynb: Any, index: int, event: dict[str, Any]) -> None:
    """Apply one output event from the kernel loop to the cell, in place."""
    if not is_code(ynb, index):
        return
    if not isinstance(ynb.ycells[index].get("outputs"), Array):
        ynb.ycells[index]["outputs"] = Array()
    youtputs = ynb.ycells[index]["outputs"]
    kind = event["kind"]
    with ynb.ydoc.transaction():
        if kind == "clear":
            youtputs.clear()
        elif kind == "output":
            youtputs.append(_youtput(event["output"]))
        elif kind == "stream":
            at = event["index"]
            if not (at < len(youtputs) and youtputs[at].get("output_type") == "stream"):
                # someone cleared the outputs meanwhile: the text goes on in a stream of its own
                youtputs.append(_youtput({"output_type": "stream", "name": event.get("name", "stdout"),
                                          "text": event["text"]}))
                return
            text = youtputs[at]["text"]
            if isinstance(text, Text):
                text += event["text"]  # on the local: `youtputs[i]["text"] += s` would lose it
            else:
                youtputs[at]["text"] = Text(str(text) + event["text"])
        elif kind == "update" and event["index"] < len(youtputs):
            target = youtputs[event["index"]]
            target["data"] = event["output"].get("data", {})
            target["metadata"] = event["output"].get("metadata", {})


def end_run(ynb: Any, index: int, execution_count: int | None) -> None:
    ycell = ynb.ycells[index]
    if not is_code(ynb, index):
        drop_code_fields(ynb, index)
        return
    with ynb.ydoc.transaction():
        ycell["execution_count"] = execution_count
        ycell["execution_state"] = "idle"
