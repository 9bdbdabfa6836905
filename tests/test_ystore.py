"""The batched update store (jupyter_mcp.ystore): a room's updates are written together, and a
server that dies or stops after edits loses nothing the default store keeps. What that store
keeps is the room's history: a JupyterLab tab still open when the server comes back merges into
the room without a duplicated or lost cell, because the room is rebuilt from a store that holds
everything its file holds."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from pycrdt import Doc, Text
from pycrdt.store import YDocNotFound
from jupyter_server_ydoc.stores import SQLiteYStore

from jupyter_mcp.client import connect
from jupyter_mcp.testing import UIClient, call, disk_sources, new_notebook
from jupyter_mcp.ystore import BatchedYStore


EXTENSIONS = {"jupyter_mcp": True, "jupyter_server_ydoc": True, "jupyter_server_fileid": True}


@pytest.fixture
def jp_server_config(request):
    """The in-process server, with the store class a test names, if any."""
    store = getattr(request, "param", None)
    return {"ServerApp": {"jpserver_extensions": EXTENSIONS},
            **({"YDocExtension": {"ystore_class": store}} if store else {})}


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


async def test_a_reopened_room_reads_what_its_closed_store_still_held(tmp_path):
    """A room closed and opened again gets a new store: it reads what the old one had queued."""
    doc = Doc()
    text = doc.get("t", type=Text)
    async with store_at(tmp_path / "ystore.db", "json:notebook:two") as closed:
        with doc.new_transaction():
            text += "queued"
        await closed.write(doc.get_update())
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
        await asyncio.sleep(1)  # the tab and the room exchange what each lacks
        assert sources(back) == expected
    async with connect(server.mcp_url, server.token) as mcp:
        listed = await call(mcp, "notebook_get", path=name, include_outputs=False)
        assert [c["source"] for c in listed["cells"]] == expected


async def test_a_server_killed_after_its_save_comes_back_with_the_open_tab_merging_cleanly(live_factory):
    server = live_factory()
    name, expected, ui = await _edit_and_stop(server, _killed_once_saved)
    await _comes_back_whole(server, name, expected, ui)


async def test_a_server_stopped_right_after_edits_comes_back_with_the_open_tab_merging_cleanly(live_factory):
    server = live_factory(args=["--YDocExtension.document_save_delay=3600"])  # only the stop saves
    name, expected, ui = await _edit_and_stop(server, _stopped_at_once)
    await _comes_back_whole(server, name, expected, ui)
