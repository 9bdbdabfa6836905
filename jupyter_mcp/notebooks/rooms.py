"""Rooms: the ONE live collaborative document of each notebook.

Every path-taking tool resolves its notebook here: canonical path → file id → room id
(jupyter-server-ydoc's own codec) → the room the UI (or an earlier call) made, or a new
one made by jupyter-server-ydoc itself, under the same per-room lock its websocket handler
takes. So MCP and the people in JupyterLab always share one document.

This is the one module that uses jupyter-server-ydoc's (and jupyter-ydoc's) internals: the
room table, a room's document, its file loader, its delayed cleanup, the room locks, all
reached through ``adapters/ydoc_rooms.py``.

Saving is ours, not jupyter-server-ydoc's ``_save_to_disc``: its save task swallows every
outcome (a file it may not write is skipped without a word, a failed write is logged and the
task ends as if it had saved), so a caller could never tell a saved room from a lost one.
``Rooms.save`` writes through the room's own file loader and says what happened.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import os
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

from jupyter_server.utils import ensure_async
from jupyter_server_ydoc.utils import (
    OutOfBandChanges,
    decode_file_path,
    encode_file_path,
    room_id_from_encoded_path,
)
from jupyter_ydoc import YNotebook
from jupyter_ydoc.utils import cast_all
from pycrdt import Doc, Map

from ..adapters import ydoc_rooms
from ..adapters.ydoc_rooms import document_of, loader_of
from ..errors import NotebookError, logs_its_error
from . import cells, memory
from .fileids import Reattaching, lost_path
from .paths import canonical_path, hidden_part, read_real_file, real_file, to_os_path

OPEN_TIMEOUT_SEC = 60.0  # a room that is not up by then is broken (its store failed, say)
GLOBAL_AWARENESS_ROOM = "JupyterLab:globalAwareness"  # what JupyterLab's Collaborators panel shows


def room_id_of(file_id: str) -> str:
    return room_id_from_encoded_path(encode_file_path("json", "notebook", file_id))


def file_id_of(room_id: str) -> str:
    return decode_file_path(room_id)[2]


# What jupyter-ydoc puts in a notebook's metadata when its file has none (YNotebook._set):
# placeholders, not the notebook's; a save leaves them out rather than write them into the file.
METADATA_PLACEHOLDERS = {"kernelspec": {"name": "", "display_name": ""}, "language_info": {"name": ""}}


@dataclass(frozen=True)
class Saved:
    """What a save did. ``ok``: the file holds the room's document (written now, or it already
    did: ``wrote`` says which). Otherwise ``reason`` says why not, naming the file."""

    ok: bool
    reason: str | None = None
    wrote: bool = False
    gone: bool = False  # the file no longer exists: there is nothing to save the room into


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


class Rooms:
    """Resolves notebooks to their rooms, and saves and closes rooms for the sweeper."""

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

    def _cannot_write(self, canonical: str) -> str | None:
        """Why the server may not write this notebook's file, or None if it may."""
        if os.access(to_os_path(self.root_dir, canonical), os.W_OK):
            return None
        return (f"the server cannot write {canonical!r} (its file permissions do not let the user the server "
                "runs as write it)")

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
        for a room a person opened (an agent's call does it for the rooms MCP opens)."""
        memory.keep_no_history(document_of(room))

    def _reattaching(self, loader: Any) -> None:
        file_ids = ydoc_rooms.loader_file_ids(loader)
        if not isinstance(file_ids, Reattaching):
            ydoc_rooms.set_loader_file_ids(loader, Reattaching(file_ids, loader, self.root_dir))

    def _in_use(self, nb: LiveNotebook) -> LiveNotebook:
        """MCP uses this room now: ydoc's own delayed cleanup (armed when the last UI client
        left) no longer applies to it; the sweeper decides when it closes."""
        self.keep_open(nb.room)
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
        return _without_placeholders(await _content(nb.doc))

    # -- what is open ----------------------------------------------------------

    def document_rooms(self) -> Iterator[tuple[str, Any]]:
        for room_id, room in list(self._table.items()):
            if room_id.count(":") >= 2 and ydoc_rooms.is_document_room(room):
                yield room_id, room

    def path_of(self, room_id: str) -> str | None:
        return self.file_ids.get_path(file_id_of(room_id))

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

    # -- saving and closing ----------------------------------------------------

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
        content = await _content(document_of(room))
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
        model = {"format": file_format, "type": file_type, "content": _without_placeholders(content)}
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
        fresh = await asyncio.to_thread(_loaded_into, type(document_of(room)), loaded)
        fresh_content = await _content(fresh)
        _same_made_up_ids(loaded, fresh_content, content)
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


class CheckedFiles:
    """The contents manager as one file's loader uses it, checking the file it actually read or
    is about to write, not only the path: the contents manager opens by path and follows
    symlinks (its atomic writing writes a symlink's target, and a hard link's other names, in
    place), so a notebook swapped for a symlink after its path was checked would bring a file
    from outside the workspace into the room, or have the room written into it.

    A read asks for the hash of the bytes the contents manager parsed, and compares it with the
    hash of the workspace's own file, read without following a symlink (``read_real_file``):
    anything else read is refused before the room gets it. A write first checks the file
    (``real_file``), with no await between the check and the contents manager's open."""

    def __init__(self, contents: Any, root_dir: str) -> None:
        self._contents = contents
        self._root_dir = root_dir

    def __getattr__(self, name: str) -> Any:
        return getattr(self._contents, name)

    async def get(self, path: str, content: bool = True, **kwargs: Any) -> dict[str, Any]:
        if not content:
            return await ensure_async(self._contents.get(path, content=False, **kwargs))
        kwargs["require_hash"] = True
        model = await ensure_async(self._contents.get(path, content=True, **kwargs))
        algorithm = model["hash_algorithm"]
        own = await asyncio.to_thread(lambda: hashlib.new(algorithm, read_real_file(self._root_dir, path)).hexdigest())
        if own != model["hash"]:
            raise NotebookError(f"{path!r} changed while it was read (the file read was not the workspace's own "
                                "file at that path, or it was written meanwhile); nothing read was used, try again")
        return model

    async def save(self, model: dict[str, Any], path: str) -> dict[str, Any]:
        real_file(self._root_dir, path)  # a symlink or a hard link there now: refused, nothing written
        return await ensure_async(self._contents.save(model, path))


def _loaded_into(document_type: Any, content: Any) -> Any:
    """A new document of ``document_type`` holding ``content``, as a room loads it. Run in a
    worker thread: the document is its own (pycrdt may be used from any thread), and
    jupyter-ydoc builds a notebook cell by cell, each insert walking the list from its start
    (quadratic: 13 s of CPU for 20,000 cells), in steps of at most a few ms each, so the
    event loop gets the interpreter back between them."""
    fresh = document_type(Doc())
    fresh.set(content)
    return fresh


async def _content(document: Any) -> Any:
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


def _without_placeholders(content: Any) -> Any:
    """A notebook's content without the metadata jupyter-ydoc made up for a file that had none."""
    metadata = content.get("metadata") if isinstance(content, dict) else None
    if not isinstance(metadata, dict) or not any(metadata.get(k) == v for k, v in METADATA_PLACEHOLDERS.items()):
        return content
    content = {**content, "metadata": copy.copy(metadata)}
    for key, placeholder in METADATA_PLACEHOLDERS.items():
        if content["metadata"].get(key) == placeholder:
            del content["metadata"][key]
    return content


def _same_made_up_ids(loaded: Any, fresh: Any, live: Any) -> None:
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
