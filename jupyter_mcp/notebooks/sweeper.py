"""The idle-room sweeper and the shutdown flush.

A room with no connected client and no MCP activity for the idle timeout is saved, checked
again (someone may have arrived during the save), then closed. A room nobody changed is
closed without writing its file. A room whose save fails stays open with its edits: the
sweeper says so (a warning naming the file and the reason, and ``room_list``) and tries again
at every sweep until the save works. At shutdown every room MCP used is saved before the rooms
stop, and one error line names each room that could not be. Each sweep then runs
``stop_idle_kernels`` (``Kernels.stop_idle``: the kernels MCP started that nobody uses).
A room MCP is busy in is not closed by jupyter-server-ydoc either when its last person leaves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .activity import Activity
from .rooms import Rooms

log = logging.getLogger(__name__)

#: jupyter-server-ydoc's events of people joining and leaving rooms.
COLLABORATOR_EVENTS = "https://schema.jupyter.org/jupyter_collaboration/awareness/v1"


class Sweeper:
    def __init__(self, rooms: Rooms, activity: Activity, *, idle_timeout: float, interval: float,
                 on_close: Callable[[str], None] = lambda room_id: None, logger: logging.Logger | None = None,
                 stop_idle_kernels: Callable[[], Awaitable[object]] | None = None) -> None:
        self.rooms = rooms
        self.activity = activity
        self.idle_timeout = idle_timeout
        self.interval = interval
        self.on_close = on_close
        self.stop_idle_kernels = stop_idle_kernels
        self.log = logger or log  # the server's log, so that its lines reach the server's output
        self._task: asyncio.Task[None] | None = None

    async def on_collaborator_event(self, logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        """jupyter-server-ydoc's awareness events: when the last person leaves a room, it arms its
        own cleanup, which deletes the room a while later (``document_cleanup_delay``) whatever
        MCP is doing there. A busy room (a run, a resource subscription) is kept open instead;
        the sweeper closes it once it is idle, as any other."""
        room_id = data.get("roomid")
        if not isinstance(room_id, str):
            return
        room = dict(self.rooms.document_rooms()).get(room_id)
        if room is None:
            return
        if data.get("action") == "join":  # a room JupyterLab opened: its file-id row is kept too,
            self.rooms.keep_file_id(room)
            self.rooms.keep_no_history(room)  # and its document keeps no undo history
        elif data.get("action") == "leave" and self.activity.busy(room_id):
            self.rooms.keep_open(room)

    def _closable(self, room_id: str, room: Any) -> bool:
        if room.clients or self.activity.busy(room_id):
            return False
        return self.activity.idle_for(room_id, time.monotonic()) >= self.idle_timeout

    async def sweep(self) -> list[str]:
        """Save, then close, every room with no client and no MCP activity for the idle timeout;
        keep every room whose save failed."""
        closed = []
        for room_id, room in self.rooms.document_rooms():
            if not self._closable(room_id, room):
                continue
            async with self.rooms.locked(room_id) as current:
                if current is not room:
                    continue
                saved = await self.rooms.save(room)
                if saved.gone:
                    self.log.warning("jupyter_mcp: closing room %s: %s; what it held that was not saved before "
                                     "is dropped with it", room_id, saved.reason)
                elif not saved.ok:
                    self.activity.save_failed(room_id, saved.reason or "unknown")
                    self.rooms.keep_open(room)
                    self.log.warning("jupyter_mcp: could not save %s: %s. Its room %s stays open with its edits; "
                                     "the save is tried again at the next sweep",
                                     self.rooms.path_of(room_id) or room_id, saved.reason, room_id)
                    continue
                elif self.activity.save_error(room_id) is not None:
                    self.log.info("jupyter_mcp: saved %s at last (room %s)", self.rooms.path_of(room_id) or room_id,
                                  room_id)
                self.activity.save_succeeded(room_id)
                # The save awaited: re-check that nobody arrived meanwhile.
                if not self._closable(room_id, room):
                    continue
                await self.rooms.close(room_id, room)
            self.activity.forget(room_id)
            self.on_close(room_id)
            self.log.info("jupyter_mcp: %s idle room %s", "saved and closed" if saved.wrote else "closed", room_id)
            closed.append(room_id)
        return closed

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                if await self.sweep():
                    release_memory()
            except Exception:
                self.log.exception("jupyter_mcp: the idle-room sweep failed; it runs again next interval")
            if self.stop_idle_kernels is not None:
                try:
                    await self.stop_idle_kernels()
                except Exception:
                    self.log.exception("jupyter_mcp: stopping idle kernels failed; it runs again next interval")

    async def flush(self) -> list[str]:
        """Save every room MCP used (at shutdown, before the rooms stop); the reasons of the
        rooms that could not be saved, which one error line of the log also names."""
        rooms = [(rid, room) for rid, room in self.rooms.document_rooms() if self.activity.used(rid)]
        results = await asyncio.gather(*(self.rooms.save(room) for _, room in rooms), return_exceptions=True)
        unsaved = []
        for (room_id, _), result in zip(rooms, results):
            if isinstance(result, BaseException):
                unsaved.append(f"{self.rooms.path_of(room_id) or room_id}: {type(result).__name__}: {result}")
            elif not result.ok:
                unsaved.append(result.reason or f"room {room_id}: unknown")
        if unsaved:
            self.log.error("jupyter_mcp: %d room(s) could not be saved at shutdown, their unsaved edits are lost: %s",
                           len(unsaved), " | ".join(unsaved))
        return unsaved

    def start(self) -> None:
        self._task = asyncio.create_task(self._sweep_forever(), name="jupyter-mcp-room-sweeper")

    async def stop(self) -> None:
        """Stop sweeping, then save every room MCP used."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.flush()


def release_memory() -> None:
    """Give freed heap back to the system after rooms closed (glibc keeps it otherwise)."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass
