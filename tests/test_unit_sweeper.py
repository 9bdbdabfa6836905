"""Unit tests of the idle sweep and the shutdown flush against stand-in rooms (pure logic:
which rooms close, in which order things happen)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from types import SimpleNamespace

from jupyter_mcp.activity import Activity
from jupyter_mcp.sweeper import Sweeper


class StandInRooms:
    def __init__(self, **rooms) -> None:
        self.table = {rid: SimpleNamespace(clients=set(), saves=True) for rid in rooms}
        for rid, attrs in rooms.items():
            vars(self.table[rid]).update(attrs)
        self.log: list[tuple[str, str]] = []

    def document_rooms(self):
        return list(self.table.items())

    @asynccontextmanager
    async def locked(self, room_id):
        yield self.table.get(room_id)

    async def save(self, room):
        rid = next(r for r, v in self.table.items() if v is room)
        self.log.append(("save", rid))
        return room.saves

    async def close(self, room_id, room):
        self.log.append(("close", room_id))
        del self.table[room_id]


async def test_only_idle_rooms_with_nobody_in_them_close_and_only_after_a_save():
    rooms = StandInRooms(idle={}, watched={"clients": {"ui"}}, running={}, unsaved={"saves": False}, recent={})
    activity = Activity()
    for rid in ("idle", "watched", "running", "unsaved"):
        activity.idle_for(rid, 0)  # first seen long ago
    closed_rooms: list[str] = []
    sweeper = Sweeper(rooms, activity, idle_timeout=0.5, interval=60, on_close=closed_rooms.append)
    activity.touch("recent")
    with activity.running("running"):  # idle as long as the others, but a cell still runs
        closed = await sweeper.sweep()
    assert closed == ["idle"] == closed_rooms
    assert rooms.log == [("save", "idle"), ("close", "idle"), ("save", "unsaved")]
    assert set(rooms.table) == {"watched", "running", "unsaved", "recent"}


async def test_the_flush_saves_every_room_mcp_used_and_no_other():
    rooms = StandInRooms(used={}, untouched={})
    activity = Activity()
    activity.touch("used")
    await Sweeper(rooms, activity, idle_timeout=600, interval=60).stop()
    assert rooms.log == [("save", "used")]
