"""The idle-room sweeper and the shutdown flush.

A room with no connected client and no MCP activity for the idle timeout is saved, checked
again (someone may have arrived during the save), then closed. At shutdown every room MCP
used is saved before the rooms stop: closing a room is only safe once its edits are on disk.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from .activity import Activity
from .rooms import Rooms

log = logging.getLogger(__name__)


class Sweeper:
    def __init__(self, rooms: Rooms, activity: Activity, *, idle_timeout: float, interval: float,
                 on_close: Callable[[str], None] = lambda room_id: None) -> None:
        self.rooms = rooms
        self.activity = activity
        self.idle_timeout = idle_timeout
        self.interval = interval
        self.on_close = on_close
        self._task: asyncio.Task[None] | None = None

    def _closable(self, room_id: str, room: Any) -> bool:
        if room.clients or self.activity.busy(room_id):
            return False
        return self.activity.idle_for(room_id, time.monotonic()) >= self.idle_timeout

    async def sweep(self) -> list[str]:
        """Save, then close, every room with no client and no MCP activity for the idle timeout."""
        closed = []
        for room_id, room in self.rooms.document_rooms():
            if not self._closable(room_id, room):
                continue
            async with self.rooms.locked(room_id) as current:
                if current is not room:
                    continue
                if not await self.rooms.save(room):
                    continue
                # The save awaited: re-check that nobody arrived meanwhile.
                if not self._closable(room_id, room):
                    continue
                await self.rooms.close(room_id, room)
            self.activity.forget(room_id)
            self.on_close(room_id)
            log.info("jupyter_mcp: saved and closed idle room %s", room_id)
            closed.append(room_id)
        return closed

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                if await self.sweep():
                    release_memory()
            except Exception:
                log.exception("jupyter_mcp: the idle-room sweep failed; it runs again next interval")

    async def flush(self) -> None:
        """Save every room MCP used (at shutdown, before the rooms stop)."""
        rooms = [(rid, room) for rid, room in self.rooms.document_rooms() if self.activity.used(rid)]
        results = await asyncio.gather(*(self.rooms.save(room) for _, room in rooms), return_exceptions=True)
        for (room_id, _), result in zip(rooms, results):
            if isinstance(result, BaseException):
                log.error("jupyter_mcp: could not save room %s at shutdown: %r", room_id, result)

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
