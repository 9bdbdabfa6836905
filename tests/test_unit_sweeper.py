"""Unit tests of the idle sweep and the shutdown flush against stand-in rooms (pure logic:
which rooms close, in which order things happen, what is said when a save fails)."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from types import SimpleNamespace

import pytest

from jupyter_mcp.notebooks.activity import Activity
from jupyter_mcp.notebooks.saving import Saved
from jupyter_mcp.notebooks.sweeper import Sweeper

pytestmark = pytest.mark.unit

WROTE = Saved(True, wrote=True)


class StandInRooms:
    def __init__(self, **rooms) -> None:
        self.table = {rid: SimpleNamespace(clients=set(), saves=WROTE) for rid in rooms}
        for rid, attrs in rooms.items():
            vars(self.table[rid]).update(attrs)
        self.log: list[tuple[str, str]] = []

    def document_rooms(self):
        return list(self.table.items())

    def path_of(self, room_id):
        return f"{room_id}.ipynb"

    @asynccontextmanager
    async def locked(self, room_id):
        yield self.table.get(room_id)

    async def save(self, room):
        rid = next(r for r, v in self.table.items() if v is room)
        self.log.append(("save", rid))
        return room.saves

    def keep_open(self, room):
        self.log.append(("keep", next(r for r, v in self.table.items() if v is room)))

    async def close(self, room_id, room):
        self.log.append(("close", room_id))
        del self.table[room_id]


def long_idle(activity, *room_ids):
    for rid in room_ids:
        activity.idle_for(rid, 0)  # first seen long ago


async def test_only_idle_rooms_with_nobody_in_them_close_and_only_after_a_save():
    failed = Saved(False, "the server cannot write 'unsaved.ipynb'")
    rooms = StandInRooms(idle={}, watched={"clients": {"ui"}}, running={}, unsaved={"saves": failed}, recent={})
    activity = Activity()
    long_idle(activity, "idle", "watched", "running", "unsaved")
    closed_rooms: list[str] = []
    sweeper = Sweeper(rooms, activity, idle_timeout=0.5, interval=60, on_close=closed_rooms.append)
    activity.touch("recent")
    with activity.running("running"):  # idle as long as the others, but a cell still runs
        closed = await sweeper.sweep()
    assert closed == ["idle"] == closed_rooms
    assert rooms.log == [("save", "idle"), ("close", "idle"), ("save", "unsaved"), ("keep", "unsaved")]
    assert set(rooms.table) == {"watched", "running", "unsaved", "recent"}


async def test_a_room_whose_save_failed_stays_open_is_retried_each_sweep_and_closes_once_saved(caplog):
    rooms = StandInRooms(full={"saves": Saved(False, "writing 'full.ipynb' failed: No space left on device")})
    activity = Activity()
    long_idle(activity, "full")
    sweeper = Sweeper(rooms, activity, idle_timeout=0.5, interval=60)
    with caplog.at_level(logging.WARNING, logger="jupyter_mcp.notebooks.sweeper"):
        assert await sweeper.sweep() == []
        assert await sweeper.sweep() == []
    assert activity.save_error("full") == "writing 'full.ipynb' failed: No space left on device"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2 and all("full.ipynb" in w and "No space left" in w and "tried again" in w for w in warned)
    rooms.table["full"].saves = WROTE  # space freed
    assert await sweeper.sweep() == ["full"]
    assert activity.save_error("full") is None
    assert [op for op, _ in rooms.log] == ["save", "keep", "save", "keep", "save", "close"]


async def test_an_unchanged_room_closes_and_a_deleted_notebook_s_room_closes_with_a_warning(caplog):
    rooms = StandInRooms(read={"saves": Saved(True)}, gone={"saves": Saved(False, "'gone.ipynb' was deleted", gone=True)})
    activity = Activity()
    long_idle(activity, "read", "gone")
    with caplog.at_level(logging.INFO, logger="jupyter_mcp.notebooks.sweeper"):
        assert await Sweeper(rooms, activity, idle_timeout=0.5, interval=60).sweep() == ["read", "gone"]
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (logging.INFO, "jupyter_mcp: closed idle room read") in messages
    assert any(level == logging.WARNING and "gone.ipynb" in m for level, m in messages)


async def test_the_flush_saves_every_room_mcp_used_and_no_other():
    rooms = StandInRooms(used={}, untouched={})
    activity = Activity()
    activity.touch("used")
    await Sweeper(rooms, activity, idle_timeout=600, interval=60).stop()
    assert rooms.log == [("save", "used")]


async def test_the_flush_names_every_room_it_could_not_save_in_one_error_line(caplog):
    class Broken(Exception):
        pass

    rooms = StandInRooms(fine={}, locked={"saves": Saved(False, "the server cannot write 'locked.ipynb'")},
                         full={"saves": Saved(False, "writing 'full.ipynb' failed: No space left on device")},
                         broken={})

    async def save(room):
        if room is rooms.table["broken"]:
            raise Broken("boom")
        return room.saves

    rooms.save = save
    activity = Activity()
    for rid in rooms.table:
        activity.touch(rid)
    with caplog.at_level(logging.ERROR, logger="jupyter_mcp.notebooks.sweeper"):
        unsaved = await Sweeper(rooms, activity, idle_timeout=600, interval=60).flush()
    assert len(unsaved) == 3
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    for part in ("locked.ipynb", "cannot write", "full.ipynb", "No space left", "broken.ipynb", "Broken: boom"):
        assert part in errors[0]
    assert "fine" not in errors[0]
