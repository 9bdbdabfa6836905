"""Rooms: the ONE live collaborative document of each notebook.

Every path-taking tool resolves its notebook here: canonical path → file id → room id
(jupyter-server-ydoc's own codec) → the room the UI (or an earlier call) made, or a new
one made by jupyter-server-ydoc itself, under the same per-room lock its websocket handler
takes. So MCP and the people in JupyterLab always share one document.

jupyter-server-ydoc's (and jupyter-ydoc's) internals it needs (the room table, a room's
document, its file loader, its delayed cleanup, the room locks) are all reached through
``adapters/ydoc_rooms.py``.

``Rooms`` is the one object the other parts hold: this resolve point and what is open, over
saving and closing (``saving.Saving``) and the table of rooms (``room_table.RoomTable``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pycrdt import Map

from ..adapters import ydoc_rooms
from ..adapters.ydoc_rooms import document_of, loader_of
from ..errors import NotebookError, logs_its_error
from . import memory
from .checked_files import CheckedFiles
from .content import file_content, without_placeholders
from .paths import canonical_path, hidden_part, real_file, to_os_path
from .room_table import file_id_of, room_id_of
from .saving import Saving

OPEN_TIMEOUT_SEC = 60.0  # a room that is not up by then is broken (its store failed, say)
GLOBAL_AWARENESS_ROOM = "JupyterLab:globalAwareness"  # what JupyterLab's Collaborators panel shows


@dataclass
class LiveNotebook:
    """One notebook's room, as resolved for one tool call. Do not keep it across awaits
    that may outlive the room: resolve it again (``Rooms.current``) and find cells by id."""

    path: str
    room_id: str
    room: Any

    @property
    def doc(self) -> Any:
        """The live YNotebook: edits here are what every connected client sees."""
        return document_of(self.room)

    @property
    def ymeta(self) -> Any:
        """The notebook-level Map (nbformat version and metadata) of the live document."""
        return ydoc_rooms.notebook_meta(self.doc)

    def metadata(self) -> dict[str, Any]:
        return (self.ymeta.to_py() or {}).get("metadata") or {}

    def set_metadata(self, key: str, value: Any) -> None:
        """Set one notebook-level metadata entry, as JupyterLab does (a JSON value in the metadata Map)."""
        meta = self.ymeta.get("metadata")
        if isinstance(meta, Map):
            meta[key] = value
        else:
            self.ymeta["metadata"] = Map({**(meta if isinstance(meta, dict) else {}), key: value})

    def kernelspec_name(self) -> str | None:
        """The kernelspec the notebook's metadata names, if any."""
        return (self.metadata().get("kernelspec") or {}).get("name")


class Rooms(Saving):
    """Resolves notebooks to their rooms; saves and closes rooms for the sweeper (``Saving``)."""

    async def start(self) -> None:
        """Start the ydoc websocket server now, as its handler does on the first UI connection,
        and its monitor.

        MCP creates rooms without a websocket, and a server that never started makes
        jupyter-server-ydoc's own shutdown raise "WebsocketServer not running". Its monitor (a
        task that logs statistics once a minute) is started here, outside any request: left to
        jupyter-server-ydoc, it starts in the first tab's request and holds that request's
        context, and with it the tab's websocket handler and the room it served, for the life of
        the server (``memory.py``).
        """
        await ydoc_rooms.start_websocket_server(self.ydoc)

    # -- the resolve point ---------------------------------------------------

    def canonical(self, path: object) -> str:
        return canonical_path(self.root_dir, path)

    def existing(self, path: object) -> str:
        """The canonical path of a notebook in the workspace that the tools may open; else a refusal."""
        canonical = self.canonical(path)
        hidden = hidden_part(canonical)
        if hidden is not None and not self.serverapp.contents_manager.allow_hidden:
            raise NotebookError(f"{canonical!r} is hidden ({hidden!r} starts with '.'), and this server does not "
                                "open hidden files (ContentsManager.allow_hidden is off)")
        full = to_os_path(self.root_dir, canonical)
        if os.path.isdir(full):
            raise NotebookError(f"{canonical!r} is a folder, not a notebook")
        if real_file(self.root_dir, canonical) is None:  # a symlink swapped in or a hard link: refused
            raise NotebookError(f"no notebook at {canonical!r} (notebook_list shows what exists; "
                                "notebook_create makes a new one)")
        return canonical

    def writable(self, path: object) -> str:
        """The canonical path of an existing notebook this server may write; else a refusal.

        For the tools that change a notebook: an edit of a file the server cannot write could
        never be saved, so it is refused before it changes anything."""
        canonical = self.existing(path)
        refusal = self._cannot_write(canonical)
        if refusal is not None:
            raise NotebookError(f"{refusal}, so an edit could never be saved; nothing was changed. Reading it "
                                "works; to edit it, make the file writable for the server")
        return canonical

    async def open(self, path: object) -> LiveNotebook:
        """The live notebook at ``path``, attaching to its room or creating it."""
        canonical = self.existing(path)
        room_id = self._resolved.get(canonical)
        if room_id is not None:  # the room this path resolved to last time, if it is still that file's
            room = self._table.get(room_id)
            if room is not None and room.ready and getattr(document_of(room), "path", None) == canonical:
                return self._in_use(LiveNotebook(canonical, room_id, room))
        file_id = self.file_ids.index(canonical)
        room_id = room_id_of(file_id)
        existing = self._table.get(room_id)
        self._check_files_of(ydoc_rooms.file_loader(self.ydoc, file_id))  # the loader a new room will load through
        try:
            await asyncio.wait_for(asyncio.shield(self._load(room_id, existing)), OPEN_TIMEOUT_SEC)
        except Exception as exc:
            if isinstance(exc, asyncio.TimeoutError):
                reason = f"its collaborative room did not start in {OPEN_TIMEOUT_SEC:g}s (see the server log)"
            else:
                reason = getattr(exc, "log_message", None) or str(exc) or type(exc).__name__
            raise NotebookError(f"could not open {canonical!r} as a notebook: {reason}") from None
        room = self._table.get(room_id)
        if room is None:  # deleted between the lock and here: take the next one
            return await self.open(canonical)
        if not room.ready:
            self._drop_if_broken(room_id, None)
            raise NotebookError(f"could not open {canonical!r} as a notebook: its collaborative room failed "
                                "to load (see the server log)")
        await ydoc_rooms.loaded_progressively(room)
        self._check_files_of(loader_of(room))
        self._resolved[canonical] = room_id
        return self._in_use(LiveNotebook(canonical, room_id, room))

    def _load(self, room_id: str, existing: Any) -> asyncio.Future[None]:
        """The room's load, one per room, run to its end whoever stops waiting for it.

        A caller cancelled mid-load (a cancelled task) must not cancel it: jupyter-server-ydoc
        cleans up a load that raised an Exception, not one that was cancelled, and would keep
        the room in its table half-loaded, never ready, for every later call. A room that
        failed to load (a corrupt file, a store it cannot open) is left in its table, empty:
        the next call would get that empty document and its first save would overwrite the
        file, so it is taken out."""
        load = self._loads.get(room_id)
        if load is None:
            async def run() -> None:
                try:
                    await self.ydoc.get_document(room_id=room_id, copy=False, create=True)
                except BaseException:
                    self._drop_if_broken(room_id, existing)
                    raise
                finally:
                    self._loads.pop(room_id, None)
            load = self._loads[room_id] = asyncio.ensure_future(run())
            load.add_done_callback(logs_its_error(f"loading room {room_id}"))
        return load

    def _check_files_of(self, loader: Any) -> None:
        """Make the room's file loader read and write through ``CheckedFiles`` (its first load,
        jupyter-server-ydoc's reloads and autosaves, our saves, a person's room on the same file)."""
        contents = ydoc_rooms.loader_contents(loader)
        if not isinstance(contents, CheckedFiles):
            ydoc_rooms.set_loader_contents(loader, CheckedFiles(contents, self.root_dir))
        self._reattaching(loader)

    def keep_file_id(self, room: Any) -> None:
        """Let the room's file loader put its file-id row back when another program sharing the
        database removes it (``fileids.Reattaching``), instead of losing its file."""
        self._reattaching(loader_of(room))

    def keep_no_history(self, room: Any) -> None:
        """The room's document records no undo history from now on (``memory.keep_no_history``):
        for a room a person opened (``open`` does it for every room MCP uses)."""
        memory.keep_no_history(document_of(room))

    def _in_use(self, nb: LiveNotebook) -> LiveNotebook:
        """MCP uses this room now: ydoc's own delayed cleanup (armed when the last UI client
        left) no longer applies to it; the sweeper decides when it closes. Its document keeps
        no undo history."""
        self.keep_open(nb.room)
        memory.keep_no_history(nb.doc)
        return nb

    def keep_open(self, room: Any) -> None:
        """Cancel jupyter-server-ydoc's delayed cleanup of the room, if one is armed (it
        deletes the room without saving it): the sweeper closes it, once it is saved."""
        ydoc_rooms.cancel_delayed_cleanup(room)

    def _drop_if_broken(self, room_id: str, keep: Any) -> None:
        room = self._table.get(room_id)
        if room is not None and room is not keep and not room.ready and not room.clients:
            self._table.pop(room_id, None)

    def find(self, path: object) -> LiveNotebook | None:
        """The notebook's room if one is open; never creates a room or a file id."""
        canonical = self.canonical(path)
        file_id = self.file_ids.get_id(canonical)
        if not file_id:
            return None
        room_id = room_id_of(file_id)
        room = self._table.get(room_id)
        return LiveNotebook(canonical, room_id, room) if room is not None else None

    def is_current(self, nb: LiveNotebook) -> bool:
        """Whether ``nb``'s room is still the notebook's room (not closed and re-created)."""
        return self._table.get(nb.room_id) is nb.room

    async def current(self, nb: LiveNotebook) -> LiveNotebook:
        """``nb`` itself while its room lives; else the notebook's room now (re-created)."""
        if self.is_current(nb):
            return self._in_use(nb)
        return await self.open(nb.path)

    async def content(self, nb: LiveNotebook) -> dict[str, Any]:
        """The live notebook as its file would hold it if it were saved now."""
        return without_placeholders(await file_content(nb.doc))

    # -- what is open ----------------------------------------------------------

    def document_rooms(self) -> Iterator[tuple[str, Any]]:
        for room_id, room in list(self._table.items()):
            if room_id.count(":") >= 2 and ydoc_rooms.is_document_room(room):
                yield room_id, room

    def path_of(self, room_id: str) -> str | None:
        return self.file_ids.get_path(file_id_of(room_id))

    def open_notebooks(self) -> dict[str, LiveNotebook]:
        """Every notebook with an open room, by path (one file-id lookup per open room)."""
        found = {}
        for room_id, room in self.document_rooms():
            path = self.path_of(room_id)
            if path is not None:
                found[path] = LiveNotebook(path, room_id, room)
        return found

    def global_awareness(self) -> Any | None:
        """The room whose awareness JupyterLab's Collaborators panel shows, if it is open."""
        return self._table.get(GLOBAL_AWARENESS_ROOM)
