"""jupyter-server-ydoc's (jupyter-collaboration's) and jupyter-ydoc's internals: the room table,
a room's document, file loader, locks and delayed cleanup, the websocket server's monitor, the
file loader's collaborators, and a notebook document's metadata map.

MCP resolves every notebook to the room the people in JupyterLab share, saves it so that a caller
can tell a saved room from a lost one, and lets a closed room go; none of it has a public API in
jupyter-server-ydoc, so it is all here."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from jupyter_server_ydoc.loaders import FileLoader

# -- the extension: its room table, locks, loaders and websocket server -----------------------------


def room_table(ydoc: Any) -> dict[str, Any]:
    """Room id -> room, as the websocket server holds them (``YDocExtension.ywebsocket_server.rooms``)."""
    return ydoc.ywebsocket_server.rooms


def room_lock(ydoc: Any, room_id: str) -> asyncio.Lock:
    """The per-room lock the websocket handler takes to make or delete a room (``_room_locks``)."""
    return ydoc._room_locks[room_id]


def file_loader(ydoc: Any, file_id: str) -> Any:
    """The file's loader, made now if need be (``YDocExtension.file_loaders``): a new room loads through it."""
    return ydoc.file_loaders[file_id]


async def start_websocket_server(ydoc: Any) -> None:
    """Start the websocket server as its handler does on the first tab's connection, and its monitor
    (``WebsocketServer._monitor``) in a task of our own: left to jupyter-server-ydoc, the monitor
    starts in the first tab's request and holds that request's context for the server's life."""
    server = ydoc.ywebsocket_server
    if not server.started.is_set():
        asyncio.create_task(server.start())
        await server.started.wait()
    if server.monitor_task is None:
        server.monitor_task = asyncio.create_task(server._monitor(), name="jupyter-collaboration-monitor")


async def delete_room(ydoc: Any, room: Any, file_id: str) -> None:
    """Delete a room as the websocket handler does when its last client left: its delayed cleanup
    cancelled, the room deleted, its file's loader removed when no room uses it any more."""
    cancel_delayed_cleanup(room)
    await ydoc.ywebsocket_server.delete_room(room=room)
    loaders = ydoc.file_loaders
    if file_id in loaders and loaders[file_id].number_of_subscriptions == 0:
        await loaders.remove(file_id)


# -- a room ---------------------------------------------------------------------------------------


def document_of(room: Any) -> Any:
    """The room's live jupyter-ydoc document (``DocumentRoom._document``)."""
    return room._document


def is_document_room(room: Any) -> bool:
    """Whether the room holds a document (a ``DocumentRoom``), not awareness alone."""
    return hasattr(room, "_document")


async def loaded_progressively(room: Any) -> None:
    """Wait for the rest of a room jupyter-server-ydoc loads progressively (its
    ``document_load_progressively`` setting): until then it holds part of the notebook."""
    if getattr(room, "_document_load_progressively", False):
        await room._document_progressively_loaded


def loader_of(room: Any) -> Any:
    """The room's file loader (``DocumentRoom._file``)."""
    return room._file


def file_format_and_type(room: Any) -> tuple[str, str]:
    """How the room's file is read and written (``_file_format``, ``_file_type``: "json", "notebook")."""
    return room._file_format, room._file_type


def is_reloading(room: Any) -> bool:
    """Whether the room is taking its file's content now (it changed on disk): ``_update_lock`` held."""
    return room._update_lock.locked()


async def take_file_content(room: Any) -> None:
    """Give the room its file's content, as jupyter-server-ydoc does when the file changed on disk
    (``_on_outofband_change``)."""
    await room._on_outofband_change()


async def mark_saved(room: Any, file_hash: str) -> None:
    """Mark the room's document saved as jupyter-server-ydoc marks its own saves (under its
    ``_update_lock``: not dirty, the file's hash), for the people in the room."""
    async with room._update_lock:
        room._document.dirty = False
        room._document.hash = file_hash


def cancel_delayed_cleanup(room: Any) -> None:
    """Cancel the room's delayed cleanup (``YRoom.cleaner``, armed when its last client left; it
    deletes the room without saving it), if one is armed."""
    cleaner = getattr(room, "cleaner", None)
    if cleaner is not None and not cleaner.done():
        cleaner.cancel()


def let_go(room: Any) -> None:
    """A closed room lets go of its document, awareness, update store and file loader: what served
    it may still hold the room (a tab's websocket handler, held by its request's tasks and timers),
    and holds an empty shell."""
    room._document = room.ydoc = room.awareness = room.ystore = room._file = None


# -- a file loader --------------------------------------------------------------------------------


def loader_contents(loader: Any) -> Any:
    """The contents manager the loader reads and writes through (``FileLoader._contents_manager``)."""
    return loader._contents_manager


def set_loader_contents(loader: Any, contents: Any) -> None:
    """Make the loader read and write through ``contents`` (a checking wrapper of its own)."""
    loader._contents_manager = contents


def loader_file_ids(loader: Any) -> Any:
    """The file-id manager the loader asks for its path (``FileLoader._file_id_manager``)."""
    return loader._file_id_manager


def set_loader_file_ids(loader: Any, file_ids: Any) -> None:
    """Make the loader ask ``file_ids`` for its path (a wrapper that puts a lost row back)."""
    loader._file_id_manager = file_ids


def last_path_of(loader: Any) -> str | None:
    """The path the loader last knew its file at (``FileLoader._current_path``): its file id may
    have lost its row since."""
    return getattr(loader, "_current_path", None)


def around_saves_and_loads(before_save: Callable[[str], Awaitable[None]], after_load: Callable[[str], None]) -> None:
    """Run ``before_save(file_id)`` before every save of a collaborative file and
    ``after_load(file_id)`` after every load of one, whoever makes it. jupyter-server-ydoc saves and
    (re)loads every room through its file loader (``FileLoader.maybe_save_content``, ``load_content``),
    made inside jupyter-server-ydoc, one per file: wrapped on the class, once per process."""
    if getattr(FileLoader.maybe_save_content, "wrapped_by_jupyter_mcp", False):
        return
    save, load = FileLoader.maybe_save_content, FileLoader.load_content

    @functools.wraps(save)
    async def maybe_save_content(loader: FileLoader, model: dict[str, Any]) -> dict[str, Any] | None:
        await before_save(loader.file_id)
        return await save(loader, model)

    @functools.wraps(load)
    async def load_content(loader: FileLoader, format: str, file_type: str) -> dict[str, Any]:
        model = await load(loader, format, file_type)
        after_load(loader.file_id)
        return model

    maybe_save_content.wrapped_by_jupyter_mcp = True  # type: ignore[attr-defined]
    setattr(FileLoader, "maybe_save_content", maybe_save_content)
    setattr(FileLoader, "load_content", load_content)


# -- a jupyter-ydoc notebook ------------------------------------------------------------------------


def notebook_meta(document: Any) -> Any:
    """The notebook-level Map (nbformat version and metadata) of a ``YNotebook`` (``_ymeta``)."""
    return document._ymeta
