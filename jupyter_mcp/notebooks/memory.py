"""What kept a notebook's memory, open or closed, and how it is let go (issue 41, finding 5: the
server's memory grew with every edit and every run, and most of it stayed once every room was
closed).

- jupyter-ydoc gives every room's document an undo manager (``YBaseDoc.undo_manager``) that
  records every change made in the room, the agent's and every person's keystroke alike, and so
  keeps every deleted piece for as long as the room is open: each source an edit replaced, each
  output a new run cleared. Nothing on the server undoes anything (JupyterLab's undo runs in the
  browser, on the tab's own document; jupyter-collaboration's forks have documents of their
  own), so a room's document keeps no undo history here (``keep_no_history``: when MCP opens a
  room, ``Rooms.open``, and when a person joins one, ``Rooms.keep_no_history``).
  Measured: after 100 replacements of a 2 KB cell source and 100 runs, a document whose cells
  are 2.4 KB encoded as 207 KB (what a tab opening the notebook downloads); without the history,
  as 12 KB (tests/test_room_freeing.py).
- A closed room stays referenced by what served it: the websocket handler of each person who was
  in it, which the asyncio context of every task and timer started in its request holds
  (jupyter-server's ``CallContext`` names a request's handler there): among them
  jupyter-collaboration's cancelled cleanup timer (alive until its 60 s delay is over) and, for
  the life of the server, the websocket server's monitor task, which jupyter-collaboration starts
  in the first tab's request. So ``Rooms.close`` makes the closed room let go of its document, its
  update store and its file loader (whatever still holds the room holds an empty shell), and
  ``Rooms.start`` starts the monitor outside any request (``saving.py`` and ``rooms.py``, through
  ``adapters/ydoc_rooms.py``, the one module that knows jupyter-server-ydoc's internals).
"""

from __future__ import annotations

import weakref
from typing import Any

#: The one transaction origin a room document's undo manager records: no transaction has it.
NO_HISTORY = "jupyter_mcp: the server keeps no undo history"

_without_history: weakref.WeakSet[Any] = weakref.WeakSet()


def keep_no_history(document: Any) -> None:
    """Make a room's document (a jupyter-ydoc document) record no undo history from now on.

    Its undo manager records only the transactions whose origin it was told to include, once
    told any (pycrdt's, as Yjs's): told ``NO_HISTORY``, which no transaction has, it records
    none, and a deleted item is no longer kept for an undo that never comes. (What it kept
    before stays in the document until the room closes: apply it as soon as the room is seen.)"""
    if document is None or document in _without_history:
        return
    manager = getattr(document, "undo_manager", None)
    if manager is None:
        return
    manager.include_origin(NO_HISTORY)
    manager.clear()
    _without_history.add(document)
