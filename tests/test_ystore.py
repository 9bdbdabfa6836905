"""The batched update store (jupyter_mcp.ystore): a room's updates are written together, and a
server that dies or stops after edits loses nothing the default store keeps. What that store
keeps is the room's history: a JupyterLab tab still open when the server comes back merges into
the room without a duplicated or lost cell, because the room is rebuilt from a store that holds
everything its file holds."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from pathlib import Path

import pytest
from jupyter_ydoc import YNotebook
from pycrdt import Doc, Text
from pycrdt.store import YDocNotFound
from jupyter_server_ydoc.stores import SQLiteYStore

from jupyter_mcp.client import connect
from jupyter_mcp.testing import UIClient, call, disk_sources, new_notebook
from jupyter_mcp.ystore import MAX_MERGED_BYTES, MAX_MERGED_UPDATES, BatchedYStore, pieces


EXTENSIONS = {"jupyter_mcp": True, "jupyter_server_ydoc": True, "jupyter_server_fileid": True}


@pytest.fixture
def jp_server_config(request):
    """The in-process server, with the store class a test names, if any."""
    store = getattr(request, "param", None)
    return {"ServerApp": {"jpserver_extensions": EXTENSIONS},
            **({"YDocExtension": {"ystore_class": store}} if store else {})}


@pytest.mark.live
@pytest.mark.parametrize("jp_server_config, kept_in", [(None, BatchedYStore), (
    "jupyter_server_ydoc.stores.SQLiteYStore", SQLiteYStore)], indirect=["jp_server_config"], ids=["default", "configured"])
async def test_rooms_keep_their_updates_in_the_batched_store_unless_another_is_configured(
        mcp_url, jp_token, jp_root_dir, mcp_ext, kept_in):
    name, _ = new_notebook(jp_root_dir, "a = 1")
    async with connect(mcp_url, jp_token) as mcp:
        await call(mcp, "cell_insert", path=name, source="b = 2")
    stores = [room.ystore for _, room in mcp_ext.rooms.document_rooms()]
    assert stores and all(type(store) is kept_in for store in stores)


def sources(ui: UIClient) -> list[str]:
    return [str(c["source"]) for c in ui.nb.ycells]


async def stored_rows(store: SQLiteYStore) -> int:
    """Rows in the database, read past the batched store's own flush."""
    try:
        return len([row async for row in SQLiteYStore.read(store)])
    except YDocNotFound:
        return 0


def store_at(db: Path, path: str) -> BatchedYStore:
    store = BatchedYStore(path=path)
    store.db_path = str(db)
    return store


@pytest.mark.unit
async def test_updates_are_written_as_one_and_read_back_whole(tmp_path):
    async with store_at(tmp_path / "ystore.db", "json:notebook:one") as store:
        doc = Doc()
        text = doc.get("t", type=Text)
        doc.observe(lambda event: asyncio.get_running_loop().create_task(store.write(event.update)))
        for i in range(50):
            text += f"{i},"
        await asyncio.sleep(0)  # the fifty writes are queued, none written yet
        assert await stored_rows(store) == 0
        await store.flush()
        assert await stored_rows(store) == 1  # fifty updates, one row
        again = Doc()
        await store.apply_updates(again)
        assert str(again.get("t", type=Text)) == str(text)


@pytest.mark.unit
def test_a_batch_is_merged_in_pieces_of_bounded_size():
    one_char = [b"u"] * (2 * MAX_MERGED_UPDATES + 1)
    assert [len(p) for p in pieces(one_char)] == [MAX_MERGED_UPDATES, MAX_MERGED_UPDATES, 1]
    big, small = b"b" * (MAX_MERGED_BYTES + 1), b"s" * 10
    assert pieces([small, big, small, small]) == [[small], [big], [small, small]]  # a big one alone, in its place
    assert pieces([]) == []


@pytest.mark.unit
async def test_a_reopened_room_reads_what_its_closed_store_still_held(tmp_path):
    """A room closed and opened again gets a new store: it reads what the old one had queued."""
    doc = Doc()
    text = doc.get("t", type=Text)
    async with store_at(tmp_path / "ystore.db", "json:notebook:two") as closed:
        with doc.new_transaction():
            text += "queued"
        await closed.write(doc.get_update())
        await closed.db_initialized.wait()  # the room had its store long before it closed
        async with store_at(tmp_path / "ystore.db", "json:notebook:two") as reopened:
            again = Doc()
            await reopened.apply_updates(again)
            assert str(again.get("t", type=Text)) == "queued"


async def _edit_and_stop(server, stop):
    """An agent and a person edit a notebook; ``stop`` ends the server. Returns the notebook, the
    expected sources, and the person's tab (its document and session)."""
    name, ids = new_notebook(server.root, "a = 1", "b = 2")
    expected = ["a = 'agent'", "b = 2 # person", *(f"agent {i}" for i in range(5))]
    ui = await UIClient(server.url, server.token, name).__aenter__()
    try:
        async with connect(server.mcp_url, server.token) as mcp:
            await call(mcp, "cell_update", path=name, cell_id=ids[0], source="a = 'agent'")
            for i in range(5):
                await call(mcp, "cell_insert", path=name, source=f"agent {i}")
            ui.type_into(1, " # person")
            await ui.wait_for(lambda: sources(ui) == expected)
        await stop(server, name, expected)
    finally:
        try:
            await ui.__aexit__(None, None, None)
        except Exception:
            pass  # its server is gone
    return name, expected, ui


async def _killed_once_saved(server, name, expected):
    for _ in range(200):  # jupyter-collaboration's autosave, 1 s after the last change
        if disk_sources(server.root / name) == expected:
            break
        await asyncio.sleep(0.05)
    assert disk_sources(server.root / name) == expected
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait()


async def _stopped_at_once(server, name, expected):
    assert await asyncio.to_thread(server.stop, signal.SIGTERM) == 0


async def _comes_back_whole(server, name, expected, ui):
    server.restart()
    assert disk_sources(server.root / name) == expected
    async with UIClient(server.url, server.token, name, doc=ui.doc, session_id=ui.session["sessionId"]) as back:
        await back.wait_for(lambda: sources(back) == expected)  # the tab and the room exchange what each lacks
        assert sources(back) == expected
    async with connect(server.mcp_url, server.token) as mcp:
        listed = await call(mcp, "notebook_get", path=name, include_outputs=False)
        assert [c["source"] for c in listed["cells"]] == expected


@pytest.mark.live
async def test_a_server_killed_after_its_save_comes_back_with_the_open_tab_merging_cleanly(live_factory):
    server = live_factory()
    name, expected, ui = await _edit_and_stop(server, _killed_once_saved)
    await _comes_back_whole(server, name, expected, ui)


@pytest.mark.live
async def test_a_server_stopped_right_after_edits_comes_back_with_the_open_tab_merging_cleanly(live_factory):
    server = live_factory(args=["--YDocExtension.document_save_delay=3600"])  # only the stop saves
    name, expected, ui = await _edit_and_stop(server, _stopped_at_once)
    await _comes_back_whole(server, name, expected, ui)


@pytest.mark.live
async def test_a_long_burst_of_typing_is_stored_in_pieces_the_loop_can_afford(live_factory):
    """A person types 12,000 characters, one update each, all waiting in the store (its flush delay
    at a minute) until the sweeper saves the room they left. pycrdt's merge of them grows faster than
    linearly and holds the event loop (and the GIL) while it runs: merged at once, a status request
    waited 1.1 s here. They are written in pieces of at most MAX_MERGED_UPDATES, one row each (the
    loop runs between two), and the store then holds everything the file holds, which is what a
    room reopening reads. The pieces are what is asserted, not a time: a status request waited
    30-45 ms, once 265 ms on a loaded machine, which a threshold would have called a failure."""
    server = live_factory(args=["--BatchedYStore.flush_delay=60", "--YDocExtension.document_save_delay=600",
                                "--JupyterMCPApp.room_idle_timeout=1", "--JupyterMCPApp.room_sweep_interval=0.5"])
    name, ids = new_notebook(server.root, "")
    typed = 12_000
    async with UIClient(server.url, server.token, name) as ui:  # the tab makes the room, with its store
        for _ in range(typed):
            ui.type_into(0, "x")
        async with connect(server.mcp_url, server.token) as mcp:
            for _ in range(600):  # every keystroke reached the server's room
                if len((await call(mcp, "cell_get", path=name, cell_id=ids[0]))["source"]) == typed:
                    break
                await asyncio.sleep(0.1)
    for _ in range(600):  # the tab left: the sweeper flushes the store, saves and closes the room
        if disk_sources(server.root / name) == ["x" * typed]:
            break
        await asyncio.sleep(0.1)
    assert disk_sources(server.root / name) == ["x" * typed]
    with sqlite3.connect(server.base / ".jupyter_ystore.db") as db:
        rows = [row for (row,) in db.execute("SELECT yupdate FROM yupdates")]
    assert len(rows) > typed // MAX_MERGED_UPDATES  # the keystrokes in pieces, and the room's first load
    stored = Doc()
    for row in rows:
        stored.apply_update(row)
    assert str(YNotebook(stored).ycells[0]["source"]) == "x" * typed


@pytest.mark.live
class TestConfiguredDelay:
    @pytest.fixture
    def jp_server_config(self):
        return {"ServerApp": {"jpserver_extensions": EXTENSIONS}, "BatchedYStore": {"flush_delay": 0.25}}

    async def test_the_configured_flush_delay_reaches_the_rooms_mcp_opens(self, mcp_url, jp_token, jp_root_dir,
                                                                          mcp_ext):
        """jupyter-collaboration makes the store of a room its get_document opens without the
        server's configuration; the batched store takes it anyway."""
        name, _ = new_notebook(jp_root_dir, "a = 1")
        async with connect(mcp_url, jp_token) as mcp:
            await call(mcp, "cell_insert", path=name, source="b = 2")
        stores = [room.ystore for _, room in mcp_ext.rooms.document_rooms()]
        assert stores and all(isinstance(s, BatchedYStore) and s.flush_delay == 0.25 for s in stores)
