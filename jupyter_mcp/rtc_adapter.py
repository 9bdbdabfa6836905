"""Rooms: the ONE live collaborative document of each notebook.

Every path-taking tool goes through ``Rooms.open``: canonical path → file id →
room id ``json:notebook:<file_id>`` → the room the UI (or an earlier call) made, or
a new one made by jupyter-server-ydoc itself, under the same per-room lock its
websocket handler takes. So MCP and the people in JupyterLab always share one
document. The idle-room sweeper and the shutdown flush live here too, because
closing a room is only safe once its edits are on disk.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .errors import NotebookError
from .paths import canonical_path, to_os_path
from .presence import GLOBAL_ROOM, AgentPresence

log = logging.getLogger(__name__)

NOTEBOOK_ROOM_PREFIX = "json:notebook:"
OPEN_TIMEOUT_SEC = 60.0  # a room that is not up by then is broken (its store failed, say)


def ydoc_extension(serverapp: Any) -> Any:
    """jupyter-server-ydoc's extension app (looked up late: extensions load alphabetically)."""
    ext = serverapp.web_app.settings.get("jupyter_server_ydoc")
    if ext is None:
        raise RuntimeError("jupyter-server-ydoc is not enabled on this server; live notebooks need it")
    return ext


async def ensure_websocket_server(serverapp: Any) -> None:
    """Start the ydoc websocket server now, as its handler does on the first UI connection.

    MCP creates rooms without a websocket, and a server that never started makes
    jupyter-server-ydoc's own shutdown raise "WebsocketServer not running".
    """
    server = ydoc_extension(serverapp).ywebsocket_server
    if not server.started.is_set():
        asyncio.create_task(server.start())
        await server.started.wait()


@dataclass
class LiveNotebook:
    """One notebook's room, as resolved for one tool call. Do not keep it across awaits
    that may outlive the room: fetch it again (by path) and find cells by id."""

    path: str
    file_id: str
    room_id: str
    room: Any

    @property
    def doc(self) -> Any:
        """The live YNotebook: edits here are what every connected client sees."""
        return self.room._document


class Rooms:
    """Resolve point, activity tracking, idle sweeper and shutdown flush for notebook rooms."""

    def __init__(self, serverapp: Any, root_dir: str, *, idle_timeout: float, sweep_interval: float,
                 agent_idle: float = 60.0) -> None:
        self.serverapp = serverapp
        self.root_dir = root_dir
        self.idle_timeout = idle_timeout
        self.sweep_interval = sweep_interval
        self._last_active: dict[str, float] = {}
        self._open_rooms: dict[str, tuple[str, str]] = {}  # canonical path -> (file id, room id)
        self._touched: set[str] = set()
        self._busy: Counter[str] = Counter()
        self._sweeper: asyncio.Task[None] | None = None
        self.presence = AgentPresence(agent_idle, busy=lambda room_id: bool(self._busy.get(room_id)))

    # -- the resolve point ---------------------------------------------------

    @property
    def ydoc(self) -> Any:
        return ydoc_extension(self.serverapp)

    @property
    def file_ids(self) -> Any:
        return self.serverapp.web_app.settings["file_id_manager"]

    def canonical(self, path: object) -> str:
        return canonical_path(self.root_dir, path)

    def _existing_notebook(self, path: object) -> str:
        canonical = self.canonical(path)
        full = to_os_path(self.root_dir, canonical)
        if os.path.isdir(full):
            raise NotebookError(f"{canonical!r} is a folder, not a notebook")
        if not os.path.isfile(full):
            raise NotebookError(f"no notebook at {canonical!r} (notebook_list shows what exists; "
                                "notebook_create makes a new one)")
        return canonical

    async def open(self, path: object) -> LiveNotebook:
        """The live notebook at ``path``, attaching to its room or creating it."""
        canonical = self._existing_notebook(path)
        known = self._open_rooms.get(canonical)
        if known is not None:  # the room this path resolved to last time, if it is still that file's
            file_id, room_id = known
            room = self.ydoc.ywebsocket_server.rooms.get(room_id)
            if room is not None and room.ready and getattr(room._document, "path", None) == canonical:
                self.touch(room_id, room)
                return LiveNotebook(canonical, file_id, room_id, room)
        file_id = self.file_ids.index(canonical)
        room_id = NOTEBOOK_ROOM_PREFIX + file_id
        all_rooms = self.ydoc.ywebsocket_server.rooms
        existing = all_rooms.get(room_id)
        try:
            await asyncio.wait_for(self.ydoc.get_document(room_id=room_id, copy=False, create=True), OPEN_TIMEOUT_SEC)
        except Exception as exc:
            # jupyter-server-ydoc leaves a room that failed to load (a corrupt file, a
            # store it cannot open) in its table, empty: the next call would get that
            # empty document and its first save would overwrite the file. Take it out.
            self._drop_if_broken(room_id, existing)
            if isinstance(exc, asyncio.TimeoutError):
                reason = f"its collaborative room did not start in {OPEN_TIMEOUT_SEC:g}s (see the server log)"
            else:
                reason = getattr(exc, "log_message", None) or str(exc) or type(exc).__name__
            raise NotebookError(f"could not open {canonical!r} as a notebook: {reason}") from None
        room = all_rooms.get(room_id)
        if room is None:  # deleted between the lock and here: take the next one
            return await self.open(canonical)
        if not room.ready:
            self._drop_if_broken(room_id, None)
            raise NotebookError(f"could not open {canonical!r} as a notebook: its collaborative room failed "
                                "to load (see the server log)")
        if getattr(room, "_document_load_progressively", False):
            await room._document_progressively_loaded
        self._open_rooms[canonical] = (file_id, room_id)
        self.touch(room_id, room)
        return LiveNotebook(canonical, file_id, room_id, room)

    def _drop_if_broken(self, room_id: str, keep: Any) -> None:
        room = self.ydoc.ywebsocket_server.rooms.get(room_id)
        if room is not None and room is not keep and not room.ready and not room.clients:
            self.ydoc.ywebsocket_server.rooms.pop(room_id, None)

    def find(self, path: object) -> LiveNotebook | None:
        """The notebook's room if one is open; never creates a room or a file id."""
        canonical = self.canonical(path)
        file_id = self.file_ids.get_id(canonical)
        if not file_id:
            return None
        room_id = NOTEBOOK_ROOM_PREFIX + file_id
        room = self.ydoc.ywebsocket_server.rooms.get(room_id)
        return LiveNotebook(canonical, file_id, room_id, room) if room is not None else None

    def touch(self, room_id: str, room: Any | None = None) -> None:
        """Record MCP activity: the sweeper keeps the room, and ydoc's own delayed
        cleanup (armed when the last UI client left) no longer applies to it."""
        self._last_active[room_id] = time.monotonic()
        self._touched.add(room_id)
        if room is not None:
            path = getattr(getattr(room, "_document", None), "path", None)
            self.presence.seen(room_id, room, path, self.ydoc.ywebsocket_server.rooms.get(GLOBAL_ROOM))
        cleaner = getattr(room, "cleaner", None)
        if cleaner is not None and not cleaner.done():
            cleaner.cancel()

    async def edited(self, nb: LiveNotebook) -> None:
        """After an edit: record the activity, and let the room broadcast the update to
        the people watching before the answer to the agent is put together."""
        self.touch(nb.room_id, nb.room)
        for _ in range(3):
            await asyncio.sleep(0)

    @contextmanager
    def running(self, room_id: str) -> Iterator[None]:
        """Marks an execution in progress: the sweeper never closes the room meanwhile."""
        self._busy[room_id] += 1
        try:
            yield
        finally:
            self._busy[room_id] -= 1
            if not self._busy[room_id]:
                del self._busy[room_id]
            self._last_active[room_id] = time.monotonic()

    # -- what is open ----------------------------------------------------------

    def idle_seconds(self, room_id: str) -> float | None:
        last = self._last_active.get(room_id)
        return None if last is None else round(time.monotonic() - last, 3)

    def document_rooms(self) -> Iterator[tuple[str, Any]]:
        for room_id, room in list(self.ydoc.ywebsocket_server.rooms.items()):
            if room_id.count(":") >= 2 and hasattr(room, "_document"):
                yield room_id, room

    def users(self, room: Any) -> list[dict[str, Any]]:
        """The people (and agents) in a room's awareness, without the room's own entry."""
        people = []
        for client_id, state in room.awareness.states.items():
            user = (state or {}).get("user")
            if not user:
                continue
            people.append({
                "client_id": client_id,
                "name": user.get("name"),
                "display_name": user.get("display_name") or user.get("name"),
                "username": user.get("username"),
                "initials": user.get("initials"),
                "color": user.get("color"),
                "is_agent": bool(user.get("is_agent") or state.get("agent")),
            })
        return people

    async def describe(self) -> list[dict[str, Any]]:
        """Every open document room, for room_list."""
        sessions = await self.serverapp.session_manager.list_sessions()
        with_kernel = {s.get("path") for s in sessions if s.get("kernel")}
        described = []
        for room_id, room in self.document_rooms():
            file_id = room_id.split(":", 2)[2]
            path = self.file_ids.get_path(file_id)
            users = self.users(room)
            described.append({
                "room_id": room_id,
                "path": path,
                "file_id": file_id,
                "users": [u["display_name"] for u in users],
                "user_count": len(users),
                "clients": len(room.clients),
                "has_kernel": path in with_kernel,
                "idle_seconds": self.idle_seconds(room_id),
            })
        return described

    async def watch(self, path: object, timeout: float) -> dict[str, Any]:
        """Block until the first change to the notebook after this call, or ``timeout``."""
        from .cells import describe_changes

        nb = await self.open(path)
        ynb = nb.doc
        changes: list[dict[str, Any]] = []
        fired = asyncio.Event()

        def on_cells(events: list[Any]) -> None:
            changes.extend(describe_changes(ynb, events))
            fired.set()

        def on_meta(events: list[Any]) -> None:
            changes.append({"kind": "notebook_metadata"})
            fired.set()

        subscriptions = [(ynb.ycells, ynb.ycells.observe_deep(on_cells)),
                         (ynb._ymeta, ynb._ymeta.observe_deep(on_meta))]
        started = time.monotonic()
        with self.running(nb.room_id):
            try:
                await asyncio.wait_for(fired.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            finally:
                for shared, subscription in subscriptions:
                    shared.unobserve(subscription)
        return {"path": nb.path, "changed": bool(changes), "changes": changes,
                "waited_seconds": round(time.monotonic() - started, 3)}

    # -- saving and closing --------------------------------------------------

    async def save(self, room: Any) -> bool:
        """Write the room's document to disk now and wait for it (what Ctrl+S does)."""
        task = room._save_to_disc()
        if task is None:  # an out-of-band reload holds the room's update lock
            return False
        await task
        return True

    def _closable(self, room_id: str, room: Any, now: float) -> bool:
        if room.clients or self._busy.get(room_id):
            return False
        last = self._last_active.setdefault(room_id, now)
        return now - last >= self.idle_timeout

    async def sweep(self) -> list[str]:
        """Save, then close, every room with no client and no MCP activity for the idle timeout."""
        closed = []
        for room_id, room in self.document_rooms():
            if not self._closable(room_id, room, time.monotonic()):
                continue
            async with self.ydoc._room_locks[room_id]:
                if self.ydoc.ywebsocket_server.rooms.get(room_id) is not room:
                    continue
                if not await self.save(room):
                    continue
                # The save awaited: re-check that nobody arrived meanwhile.
                if not self._closable(room_id, room, time.monotonic()):
                    continue
                await self._close(room_id, room)
            closed.append(room_id)
        return closed

    async def _close(self, room_id: str, room: Any) -> None:
        """Delete the room as jupyter-server-ydoc's handler does when its last client left."""
        if room.cleaner is not None and not room.cleaner.done():
            room.cleaner.cancel()
        await self.ydoc.ywebsocket_server.delete_room(room=room)
        file_id = room_id.split(":", 2)[2]
        loaders = self.ydoc.file_loaders
        if file_id in loaders and loaders[file_id].number_of_subscriptions == 0:
            await loaders.remove(file_id)
        self._last_active.pop(room_id, None)
        self._touched.discard(room_id)
        self._open_rooms = {p: v for p, v in self._open_rooms.items() if v[1] != room_id}
        self.presence.forget_room(room_id)
        log.info("jupyter_mcp: saved and closed idle room %s", room_id)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                if await self.sweep():
                    release_memory()
            except Exception:
                log.exception("jupyter_mcp: the idle-room sweep failed; it runs again next interval")

    async def flush_all(self) -> None:
        """At shutdown: save every room MCP touched, before the rooms stop."""
        rooms = [(rid, room) for rid, room in self.document_rooms() if rid in self._touched]
        results = await asyncio.gather(*(self.save(room) for _, room in rooms), return_exceptions=True)
        for (room_id, _), result in zip(rooms, results):
            if isinstance(result, BaseException):
                log.error("jupyter_mcp: could not save room %s at shutdown: %r", room_id, result)

    # -- file ids ------------------------------------------------------------

    def prune_file_ids(self) -> int:
        """Drop file-id rows outside the root, or of files gone and not in an open room."""
        fim = self.file_ids
        con = getattr(fim, "con", None)
        if con is None:
            return 0
        open_ids = {rid.split(":", 2)[2] for rid, _ in self.document_rooms()}
        stale = []
        for file_id, stored in con.execute("SELECT id, path FROM Files").fetchall():
            rel = fim._from_normalized_path(stored)
            if rel is None or rel.startswith("../"):
                stale.append(file_id)
            elif file_id not in open_ids and not os.path.lexists(to_os_path(self.root_dir, rel)):
                stale.append(file_id)
        if stale:
            with con:
                con.executemany("DELETE FROM Files WHERE id = ?", [(i,) for i in stale])
            log.info("jupyter_mcp: pruned %d stale file-id rows", len(stale))
        return len(stale)

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        await ensure_websocket_server(self.serverapp)
        self.prune_file_ids()
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="jupyter-mcp-room-sweeper")
        self.presence.start()

    async def stop(self) -> None:
        await self.presence.stop()
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        await self.flush_all()


def release_memory() -> None:
    """Give freed heap back to the system after rooms closed (glibc keeps it otherwise)."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass
