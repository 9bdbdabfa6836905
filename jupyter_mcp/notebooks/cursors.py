"""Which cell a person's text cursor is in, from what JupyterLab shares in the room's awareness.

JupyterLab's collaborative editor puts each person's cursors in their awareness state
(``cursors``: ``[{anchor, head, primary, empty}]``), each end a Yjs relative position:
``{"item": ID}`` (just before that character) or ``{"type": ID}`` (the end of that text:
an empty cell's, or the caret after the last character). A position names a character or a
text, never its cell.

pycrdt cannot say which text a position lies in. ``StickyIndex.get_index`` gives the offset
alone (yrs works out the text too, but pycrdt returns only its index, whatever sequence the
sticky index was made with) and panics on a position it cannot resolve; nothing in pycrdt
maps an item's id to its parent. ``sticky_index`` only goes the other way (a text and an
offset to an id), so an index from ids to cells would take a call per character and still
miss the deleted characters a caret may name; building one from the encoded document would
mean decoding Yjs's update format by hand. What pycrdt does answer is where a new item goes.
So the position is asked of a copy of the document, in Yjs's own terms: one character is
integrated there just before the character named (that character as its right origin) or at
the start of the text named (as its parent), and the cell whose source took it is the cell
the cursor is in.

One copy serves every position of a call, and none is made when no position could be known:
  - an id at or past the document's state vector (a stranger's, or made up) is no item of
    the document: no cell, without probing;
  - a probe placed before an item lands in that item's parent and changes nothing a later
    probe finds: in a text it adds a character, in an array an element (event paths and the
    cells read from them agree), and before a map's value Yjs discards it at once rather than
    let it replace the value (one placed *after* the value would replace a cell's ``id`` or
    its source);
  - a probe yrs refuses (a "text" that is no type) changes nothing either, and the next goes
    on in the same copy.
A position in text deleted for good (a deleted cell's) names a collected item: the probe
integrates nowhere, so no cell. The copy is the cost (about 50 ms for 5,000 cells, in a
worker thread); a probe costs what Yjs walks to place it, the items before the named one in
its parent (a few ms before the last of 5,000 cells), at most ``MAX_POSITIONS`` a call.

The copy observes its cells; pycrdt keeps an observer's callback, and with it the document,
inside the native object, a cycle Python's collector cannot see. The copy is unobserved
before the call returns, whatever happens, so nothing a call made outlives it.
"""

from __future__ import annotations

import random
from typing import Any

from pycrdt import Array, Doc, write_var_uint

from .moves import state_vector

_INFO_STRING = 4  # Yjs content ref of a string (ContentString)
_HAS_RIGHT_ORIGIN = 0x40  # Yjs item info bit: a right origin follows
_MAX_ID = 1 << 53
MAX_POSITIONS = 100  # cursors resolved per call: awareness states are whatever clients send


def _id(value: Any) -> tuple[int, int] | None:
    """A Yjs ID from JSON: two whole numbers within what Yjs writes (53 bits)."""
    if not isinstance(value, dict):
        return None
    client, clock = value.get("client"), value.get("clock")
    if type(client) is int and type(clock) is int and 0 <= client < _MAX_ID and 0 <= clock < _MAX_ID:
        return client, clock
    return None


def probe(position: Any, client: int, known: dict[int, int] | None = None) -> bytes | None:
    """A Yjs update (v1) of one character from ``client`` placed at a relative position (JSON),
    or None if the position does not name a character or a nested text (of the document whose
    state vector is ``known``, when given)."""
    if not isinstance(position, dict):
        return None
    item, text = _id(position.get("item")), _id(position.get("type"))
    named = item if item is not None else text
    if named is None or (known is not None and named[1] >= known.get(named[0], 0)):
        return None  # a root type's name (not a cell), or no item the document has
    if item is not None:  # just before the character (its right origin: the same parent)
        placed = bytes([_HAS_RIGHT_ORIGIN | _INFO_STRING]) + _numbers(*item)
    else:  # at the start of the text (no origin: a parent, given by its item's id, ``named`` here)
        placed = bytes([_INFO_STRING]) + _numbers(0, *named)
    one_client_one_struct = _numbers(1, 1, client, 0)
    return one_client_one_struct + placed + _numbers(1) + b"?" + _numbers(0)  # the string "?", no deletions


def _numbers(*values: int) -> bytes:
    return b"".join(write_var_uint(n) for n in values)


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
        self._known = state_vector(ydoc.get_state())

    def cell_of(self, position: Any) -> str | None:
        """The id of the cell whose source holds ``position``, or None."""
        return self.cells_of({None: position})[None]

    def cells_of(self, positions: dict[Any, Any]) -> dict[Any, str | None]:
        """``cell_of`` each position, by key, in one copy of the document at the most: at most
        ``MAX_POSITIONS`` that the document may know are probed (the rest None); a made-up
        position counts for nothing, so strangers cannot crowd out the people who come after
        them. Copies a whole document: for a large one, run in a worker thread."""
        probes: dict[Any, bytes] = {}
        for key, position in positions.items():
            update = probe(position, random.getrandbits(52) | 1 << 52, self._known)  # a client no peer has
            if update is not None:
                probes[key] = update
                if len(probes) == MAX_POSITIONS:
                    break
        found: dict[Any, str | None] = {}
        if probes:
            with _Copy(self._update) as copy:
                found = {key: copy.landing(update) for key, update in probes.items()}
        return {key: found.get(key) for key in positions}


class _Copy:
    """A copy of the document that tells which cell's source a probe character went into;
    observed only within ``with``."""

    def __init__(self, update: bytes) -> None:
        self.doc: Doc[Array[Any]] = Doc()
        self.doc.apply_update(update)
        self.cells = self.doc.get("cells", type=Array)
        self.hit: list[str | None] = []

    def __enter__(self) -> _Copy:
        self.subscription = self.cells.observe_deep(self._on_change)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cells.unobserve(self.subscription)

    def _on_change(self, events: list[Any]) -> None:
        for event in events:
            path = list(getattr(event, "path", []))
            if len(path) == 2 and path[1] == "source" and isinstance(path[0], int):
                value = self.cells[path[0]].get("id")
                self.hit.append(str(value) if value is not None else None)
            else:
                self.hit.append(None)

    def landing(self, update: bytes) -> str | None:
        """The id of the cell whose source the probe ``update`` went into, or None."""
        self.hit.clear()
        try:
            self.doc.apply_update(update)
        except Exception:  # refused: the position names something that holds no text (a cell's map)
            return None
        return self.hit[0] if len(self.hit) == 1 else None
