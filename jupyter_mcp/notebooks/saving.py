"""Saving a room into its file, and closing it (the sweeper's two steps, under the room's lock).

Saving is ours, not jupyter-server-ydoc's ``_save_to_disc``: its save task swallows every
outcome (a file it may not write is skipped without a word, a failed write is logged and the
task ends as if it had saved), so a caller could never tell a saved room from a lost one.
``Saving.save`` writes through the room's own file loader and says what happened.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from jupyter_server.utils import ensure_async
from jupyter_server_ydoc.utils import OutOfBandChanges

from ..adapters import ydoc_rooms
from ..adapters.ydoc_rooms import document_of, loader_of
from .content import file_content, loaded_into, same_made_up_ids, without_placeholders
from .paths import to_os_path
from .room_table import RoomTable, file_id_of


@dataclass(frozen=True)
class Saved:
    """What a save did. ``ok``: the file holds the room's document (written now, or it already
    did: ``wrote`` says which). Otherwise ``reason`` says why not, naming the file."""

    ok: bool
    reason: str | None = None
    wrote: bool = False
    gone: bool = False  # the file no longer exists: there is nothing to save the room into



class Saving(RoomTable):
    """Saves a room into its file and closes it, as the sweeper asks."""

    @asynccontextmanager
    async def locked(self, room_id: str) -> AsyncIterator[Any | None]:
        """Hold the room's lock (the one the websocket handler takes); yields the room."""
        async with ydoc_rooms.room_lock(self.ydoc, room_id):
            yield self._table.get(room_id)

    async def save(self, room: Any) -> Saved:
        """Make the room's file hold the room's document, and say whether it does.

        A document that is what loading its file gives (nobody changed it, or
        jupyter-server-ydoc's autosave already wrote the change) is not written: a read never
        rewrites a file. Otherwise it is written through the room's file loader (what Ctrl+S
        does, and with its check for changes on disk), jupyter-ydoc's metadata placeholders
        left out. Never raises for a failed save: the answer says why, naming the file."""
        loader = loader_of(room)
        path, lost = self.whereabouts(room.room_id, room)
        if lost is not None:  # the id lost its row: a deleted file, or another program removed it
            gone = path is None or not os.path.lexists(to_os_path(self.root_dir, path))
            return Saved(False, lost, gone=gone)
        assert path is not None
        if ydoc_rooms.is_reloading(room):
            return Saved(False, f"{path!r} is being reloaded into the room (it changed on disk); not saved yet")
        state = room.ydoc.get_state()
        content = await file_content(document_of(room))
        if not os.path.exists(to_os_path(self.root_dir, path)):
            return Saved(False, f"{path!r} was deleted", gone=True)
        if self._differs.get(room) != state:
            try:
                if await self._matches_file(room, path, content):
                    return Saved(True)
            except Exception:
                pass  # unreadable: the write below says whether it can be saved
            self._differs[room] = state
        file_format, file_type = ydoc_rooms.file_format_and_type(room)
        model = {"format": file_format, "type": file_type, "content": without_placeholders(content)}
        try:
            saved_model = await loader.maybe_save_content(model)
        except OutOfBandChanges:
            # jupyter-server-ydoc's rule: the file on disk wins, the room takes its content.
            await ydoc_rooms.take_file_content(room)
            return Saved(False, f"{path!r} changed on disk since the room loaded it; the room took the file's "
                                "content (as jupyter-server-ydoc does) and its own unsaved edits were dropped")
        except Exception as exc:
            reason = getattr(exc, "log_message", None) or str(exc) or type(exc).__name__
            reason = reason.replace(self.root_dir.rstrip(os.sep) + os.sep, "")  # workspace paths, not the box's
            return Saved(False, f"writing {path!r} failed: {reason}")
        if saved_model is None:  # the loader skips a file the contents manager says is not writable
            return Saved(False, self._cannot_write(path) or f"the save of {path!r} was interrupted")
        self._differs.pop(room, None)
        if room.clients:  # mark the save as jupyter-server-ydoc marks its own, for the people in the room
            # (with nobody there, the room is about to close: a change now would reach its
            # broadcast loop after the room stopped)
            await ydoc_rooms.mark_saved(room, saved_model["hash"])
        return Saved(True, wrote=True)

    async def _matches_file(self, room: Any, path: str, content: Any) -> bool:
        """Whether ``content`` is what loading the file into a room gives now (read through the
        contents manager directly: the loader's own read would reset its changed-on-disk check)."""
        contents = self.serverapp.contents_manager
        file_format, file_type = ydoc_rooms.file_format_and_type(room)
        model = await ensure_async(contents.get(path, format=file_format, type=file_type, content=True))
        loaded = model["content"]
        if file_type == "file" and isinstance(loaded, str):
            loaded = loaded.replace("\r\n", "\n")  # as the loader normalises text files
        fresh = await asyncio.to_thread(loaded_into, type(document_of(room)), loaded)
        fresh_content = await file_content(fresh)
        same_made_up_ids(loaded, fresh_content, content)
        return fresh_content == content

    async def close(self, room_id: str, room: Any) -> None:
        """Delete the room as jupyter-server-ydoc's handler does when its last client left."""
        await ydoc_rooms.delete_room(self.ydoc, room, file_id_of(room_id))
        self._resolved = {path: rid for path, rid in self._resolved.items() if rid != room_id}
        # What served the room may still hold it (a person's websocket handler, held by the
        # context of every task and timer of its request, jupyter-server-ydoc's cancelled cleanup
        # timer among them: memory.py); it holds an empty shell. Nothing serves the room any more,
        # and an update still queued in its store is written all the same (its flush timer holds it).
        ydoc_rooms.let_go(room)
