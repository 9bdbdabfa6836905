"""jupyter-server-ydoc's rooms on this server, as every part of ``Rooms`` reads them: its
extension and room table, the room id of a file id (its own codec) and back, which file a room
is (``whereabouts``: its file-id row put back when another program removed it), and whether the
server may write a notebook's file."""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any

from jupyter_server_ydoc.utils import decode_file_path, encode_file_path, room_id_from_encoded_path

from ..adapters import ydoc_rooms
from ..adapters.ydoc_rooms import loader_of
from .fileids import Reattaching, lost_path
from .paths import to_os_path


def room_id_of(file_id: str) -> str:
    return room_id_from_encoded_path(encode_file_path("json", "notebook", file_id))


def file_id_of(room_id: str) -> str:
    return decode_file_path(room_id)[2]


class RoomTable:
    """The state resolving and saving share: the rooms, and the files they are."""

    def __init__(self, serverapp: Any, root_dir: str) -> None:
        self.serverapp = serverapp
        self.root_dir = root_dir
        self._resolved: dict[str, str] = {}  # canonical path -> room id, as last resolved
        # room -> its document's state vector when it last differed from its file: a save tried
        # again (after a failure) writes without reading the file again if nothing changed since
        self._differs: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()
        self._loads: dict[str, asyncio.Future[None]] = {}  # room id -> its load under way

    @property
    def ydoc(self) -> Any:
        """jupyter-server-ydoc's extension app (looked up late: extensions load alphabetically)."""
        ext = self.serverapp.web_app.settings.get("jupyter_server_ydoc")
        if ext is None:
            raise RuntimeError("jupyter-server-ydoc is not enabled on this server; live notebooks need it")
        return ext

    @property
    def file_ids(self) -> Any:
        return self.serverapp.web_app.settings["file_id_manager"]

    @property
    def _table(self) -> dict[str, Any]:
        return ydoc_rooms.room_table(self.ydoc)

    def _cannot_write(self, canonical: str) -> str | None:
        """Why the server may not write this notebook's file, or None if it may."""
        if os.access(to_os_path(self.root_dir, canonical), os.W_OK):
            return None
        return (f"the server cannot write {canonical!r} (its file permissions do not let the user the server "
                "runs as write it)")

    def _reattaching(self, loader: Any) -> None:
        file_ids = ydoc_rooms.loader_file_ids(loader)
        if not isinstance(file_ids, Reattaching):
            ydoc_rooms.set_loader_file_ids(loader, Reattaching(file_ids, loader, self.root_dir))

    def whereabouts(self, room_id: str, room: Any) -> tuple[str | None, str | None]:
        """The room's file (its id's path, or the last one its loader knew) and, when its id has
        lost its row and it could not be put back, why the room cannot save."""
        loader = loader_of(room)
        self._reattaching(loader)
        try:
            return loader.path, None
        except RuntimeError:
            last = ydoc_rooms.last_path_of(loader)
            return last, lost_path(self.file_ids, file_id_of(room_id), last, self.root_dir)
