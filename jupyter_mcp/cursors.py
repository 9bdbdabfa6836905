"""Which cell a person's text cursor is in, from what JupyterLab shares in the room's awareness.

JupyterLab's collaborative editor puts each person's cursors in their awareness state
(``cursors``: ``[{anchor, head, primary, empty}]``), each end a Yjs relative position:
``{"item": ID}`` (just before that character) or ``{"type": ID}`` (the end of that text:
an empty cell's, or the caret after the last character). A position names a character or a
text, never its cell, and pycrdt can turn one into an index but not into the text it lies in
(and panics on a position it does not know).

So the position is asked of a copy of the document, in Yjs's own terms: one character is
integrated there with the position as its origin (after the character named) or as its
parent (into the text named), and the cell whose source took it is the cell the cursor is
in. A position the document does not know (a stranger's, or in text since deleted for
good) integrates nowhere: no cell. One copy serves every cursor of a call (see
``Positions``); none is made for a room where nobody shares a cursor.
"""

from __future__ import annotations

import random
from typing import Any

from pycrdt import Array, Doc

_INFO_STRING = 4  # Yjs content ref of a string (ContentString)
_HAS_ORIGIN = 0x80  # Yjs item info bit: a left origin follows
_MAX_ID = 1 << 53
MAX_POSITIONS = 100  # cursors resolved per call: awareness states are whatever clients send


def _varuint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _id(value: Any) -> tuple[int, int] | None:
    """A Yjs ID from JSON: two whole numbers within what Yjs writes (53 bits)."""
    if not isinstance(value, dict):
        return None
    client, clock = value.get("client"), value.get("clock")
    if all(type(n) is int and 0 <= n < _MAX_ID for n in (client, clock)):
        return client, clock
    return None


def probe(position: Any, client: int) -> bytes | None:
    """A Yjs update (v1) of one character from ``client`` placed at a relative position (JSON),
    or None if the position does not name a character or a nested text."""
    if not isinstance(position, dict):
        return None
    item, text = _id(position.get("item")), _id(position.get("type"))
    if item is not None:  # insert after the character (a new item's left origin)
        placed = bytes([_HAS_ORIGIN | _INFO_STRING]) + _varuint(item[0]) + _varuint(item[1])
    elif text is not None:  # at the start of the text (no origin: a parent, given by its item's id)
        placed = bytes([_INFO_STRING]) + _varuint(0) + _varuint(text[0]) + _varuint(text[1])
    else:
        return None  # a root type's name: not a cell
    one_client_one_struct = _varuint(1) + _varuint(1) + _varuint(client) + _varuint(0)
    return one_client_one_struct + placed + _varuint(1) + b"?" + _varuint(0)  # the string "?", no deletions


def head_of(state: Any) -> Any:
    """The caret of an awareness state's primary cursor (the first, if none is marked), or None."""
    cursors = state.get("cursors") if isinstance(state, dict) else None
    if not isinstance(cursors, list):
        return None
    shaped = [c for c in cursors if isinstance(c, dict)]
    primary = next((c for c in shaped if c.get("primary")), shaped[0] if shaped else None)
    return primary.get("head") if primary else None


class Positions:
    """Cells of relative positions in one state of a notebook document."""

    def __init__(self, ydoc: Doc) -> None:
        self._update = ydoc.get_update()

    def cell_of(self, position: Any) -> str | None:
        """The id of the cell whose source holds ``position``, or None."""
        return self.cells_of({None: position})[None]

    def cells_of(self, positions: dict[Any, Any]) -> dict[Any, str | None]:
        """``cell_of`` each position (at most ``MAX_POSITIONS``; the rest None), by key. Probes
        share a copy of the document while they land in cell sources (a character there moves
        no other item); one that lands anywhere else may have changed the copy, so the next
        probe gets a fresh one. Copies whole documents: for a large one, run in a worker thread."""
        found: dict[Any, str | None] = {}
        copy = None
        for key, position in list(positions.items())[:MAX_POSITIONS]:
            if copy is None:
                copy = _Copy(self._update)
            found[key] = copy.probe(position)
            if found[key] is None:
                copy = None
        return {key: found.get(key) for key in positions}


class _Copy:
    """A copy of the document that tells which cell's source a probe character went into."""

    def __init__(self, update: bytes) -> None:
        self.doc = Doc()
        self.doc.apply_update(update)
        self.cells = self.doc.get("cells", type=Array)
        self.hit: list[str | None] = []
        self.cells.observe_deep(self._on_change)

    def _on_change(self, events: list[Any]) -> None:
        for event in events:
            path = list(getattr(event, "path", []))
            if len(path) == 2 and path[1] == "source" and isinstance(path[0], int):
                value = self.cells[path[0]].get("id")
                self.hit.append(str(value) if value is not None else None)
            else:
                self.hit.append(None)

    def probe(self, position: Any) -> str | None:
        self.hit.clear()
        update = probe(position, random.getrandbits(52) | 1 << 52)  # a client no peer has
        if update is None:
            return None
        try:
            self.doc.apply_update(update)
        except RuntimeError:  # the position names something that holds no text (a cell's map)
            return None
        return self.hit[0] if len(self.hit) == 1 else None
