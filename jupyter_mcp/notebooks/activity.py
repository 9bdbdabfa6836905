"""When MCP last used each room, which rooms have work in progress, and which could not be saved.

The sweeper closes a room only once it has been idle (no client, no MCP use, nothing
running) for its timeout, and only once it is saved; ``room_list`` shows the idle time and
the last failed save; a running cell keeps its agent present. All three read it here.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager


class Activity:
    def __init__(self) -> None:
        self._last_used: dict[str, float] = {}
        self._first_seen: dict[str, float] = {}  # rooms MCP never used, since the sweeper first saw them
        self._running: Counter[str] = Counter()
        self._save_errors: dict[str, str] = {}  # rooms whose last save failed: why

    def touch(self, room_id: str) -> None:
        self._last_used[room_id] = time.monotonic()

    @contextmanager
    def running(self, room_id: str) -> Iterator[None]:
        """Work in progress in the room (an execution, a watch): it is never idle meanwhile."""
        self._running[room_id] += 1
        try:
            yield
        finally:
            self._running[room_id] -= 1
            if not self._running[room_id]:
                del self._running[room_id]
            self.touch(room_id)

    def busy(self, room_id: str) -> bool:
        return bool(self._running.get(room_id))

    def used(self, room_id: str) -> bool:
        """Whether MCP used this room since it was opened (its edits must be saved at shutdown)."""
        return room_id in self._last_used

    def idle_seconds(self, room_id: str) -> float | None:
        """Seconds since MCP last used the room (None if it never did)."""
        last = self._last_used.get(room_id)
        return None if last is None else round(time.monotonic() - last, 3)

    def idle_for(self, room_id: str, now: float) -> float:
        """Seconds idle; for a room MCP never used, since the first time this was asked."""
        last = self._last_used.get(room_id)
        if last is None:
            last = self._first_seen.setdefault(room_id, now)
        return now - last

    def save_failed(self, room_id: str, reason: str) -> None:
        self._save_errors[room_id] = reason

    def save_succeeded(self, room_id: str) -> None:
        self._save_errors.pop(room_id, None)

    def save_error(self, room_id: str) -> str | None:
        """Why the room's last save failed (its edits are only in memory), or None."""
        return self._save_errors.get(room_id)

    def forget(self, room_id: str) -> None:
        self._last_used.pop(room_id, None)
        self._first_seen.pop(room_id, None)
        self._save_errors.pop(room_id, None)
