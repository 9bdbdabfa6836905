"""The file-id database is the user's, shared by every server they run: a second server must not
take the first one's rooms away from their files, and a room whose row another program removed
anyway keeps its edits and finds its file again.

Two real `jupyter lab` servers share one data directory (and runtime directory), as two servers
of one user do; the unit tests prune a real jupyter-server-fileid database."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path

import pytest
from jupyter_server_fileid.manager import ArbitraryFileIdManager

from jupyter_mcp.client import connect
from jupyter_mcp.notebooks.fileids import prune_stale
from jupyter_mcp.testing import LiveServer, UIClient, call, disk_sources, eventually, new_notebook
from jupyter_mcp.testing.plugin import starts_process

NO_AUTOSAVE = ["--YDocExtension.document_save_delay=3600"]


def rows(db: Path) -> dict[str, str]:
    con = sqlite3.connect(db)
    try:
        return dict(con.execute("SELECT id, path FROM Files").fetchall())
    finally:
        con.close()


def execute(db: Path, sql: str, *args: object) -> None:
    con = sqlite3.connect(db)
    try:
        with con:
            con.execute(sql, args)
    finally:
        con.close()


# -- pruning, on a real database ---------------------------------------------------------------

@pytest.fixture
def manager(tmp_path):
    root = tmp_path / "mine"
    root.mkdir()
    ids = ArbitraryFileIdManager(root_dir=str(root), db_path=str(tmp_path / "ids.db"))
    yield ids, root
    ids.con.close()


@pytest.mark.unit
def test_a_row_of_a_file_that_exists_is_never_pruned_wherever_it_is(manager, tmp_path):
    ids, root = manager
    other = tmp_path / "other"
    other.mkdir()
    (other / "theirs.ipynb").write_text("{}")
    (root / "mine.ipynb").write_text("{}")
    con = ids.con
    with con:
        con.execute("INSERT INTO Files (id, path) VALUES ('theirs', ?)", (str(other / "theirs.ipynb"),))
    mine = ids.index("mine.ipynb")
    assert prune_stale(ids, str(root), keep=set()) == 0
    assert ids.get_path(mine) == "mine.ipynb"
    assert con.execute("SELECT path FROM Files WHERE id = 'theirs'").fetchone() == (str(other / "theirs.ipynb"),)


@pytest.mark.unit
def test_rows_of_files_gone_are_pruned_unless_a_room_may_hold_them(manager, tmp_path):
    ids, root = manager
    running = tmp_path / "running"
    con = ids.con
    with con:
        con.executemany("INSERT INTO Files (id, path) VALUES (?, ?)", [
            ("gone-here", str(root / "gone.ipynb")),
            ("open-here", str(root / "open-but-deleted.ipynb")),
            ("gone-under-a-running-server", str(running / "deleted.ipynb")),
            ("gone-nowhere", str(tmp_path / "stopped" / "deleted.ipynb")),
        ])
    assert prune_stale(ids, str(root), keep={"open-here"}, other_roots=[str(running), str(root)]) == 2
    left = dict(con.execute("SELECT id, path FROM Files").fetchall())
    assert set(left) == {"open-here", "gone-under-a-running-server"}


# -- two servers of one user ----------------------------------------------------------------------

@pytest.fixture
@starts_process
def shared_dirs(tmp_path):
    """One user's data and runtime directories, as every server they start uses."""
    dirs = {"JUPYTER_DATA_DIR": str(tmp_path / "user-data"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "user-runtime")}
    servers: list[LiveServer] = []

    def start(name: str, args: list[str] | None = None) -> LiveServer:
        server = LiveServer(tmp_path / name, env=dirs, args=args)
        servers.append(server)
        return server.start()

    yield start, Path(dirs["JUPYTER_DATA_DIR"]) / "file_id_manager.db"
    for server in servers:
        server.stop()


async def room_of(client, path: str) -> dict:
    listing = await call(client, "room_list")
    found = [room for room in listing["rooms"] if room["path"] == path]
    assert len(found) == 1, listing
    return found[0]


@pytest.mark.live
async def test_a_second_server_of_the_same_user_leaves_the_first_ones_rooms_their_files(shared_dirs):
    start, db = shared_dirs
    first = start("first")
    path, ids = new_notebook(first.root, "a = 1", "b = 2")
    async with connect(first.mcp_url, first.token) as client:
        await call(client, "cell_update", path=path, cell_id=ids[0], source="a = 'before the second server'")
        room = await room_of(client, path)

        second = start("second")  # another folder, the same data directory: its start reads the shared rows
        other, _ = new_notebook(second.root, "x = 1")
        async with connect(second.mcp_url, second.token) as client2:
            await call(client2, "cell_get", path=other, index=0)

        await call(client, "cell_update", path=path, cell_id=ids[1], source="b = 'after the second server'")
        after = await room_of(client, path)
        assert (after["room_id"], after["saved"], after["save_error"]) == (room["room_id"], True, None)
        await eventually(lambda: on_disk(first.root / path, ["a = 'before the second server'",
                                                             "b = 'after the second server'"]),
                         what="the first server's autosave of both edits")
        async with UIClient(first.url, first.token, path) as ui:  # JupyterLab opens the notebook the agent edits
            assert ui.room_id == room["room_id"]
            assert [str(c["source"]) for c in ui.nb.ycells] == ["a = 'before the second server'",
                                                               "b = 'after the second server'"]
    assert "No path found" not in first.log()
    assert rows(db)[room["file_id"]].endswith(f"first/workspace/{path}")


async def on_disk(file: Path, sources: list[str]) -> bool:
    try:
        return disk_sources(file, timeout=0) == sources
    except AssertionError:  # not there yet, or being written
        return False


@pytest.mark.live
async def test_a_room_whose_row_another_program_removed_gets_it_back_and_saves(shared_dirs):
    start, db = shared_dirs
    server = start("only")
    path, ids = new_notebook(server.root, "a = 1", "b = 2")
    async with connect(server.mcp_url, server.token) as client:
        await call(client, "cell_update", path=path, cell_id=ids[0], source="a = 'saved'")
        room = await room_of(client, path)
        await eventually(lambda: on_disk(server.root / path, ["a = 'saved'", "b = 2"]), what="the autosave")
        execute(db, "DELETE FROM Files WHERE id = ?", room["file_id"])  # what an older server's prune did
        await call(client, "cell_update", path=path, cell_id=ids[1], source="b = 'kept'")

        async def back():  # the room's file loader polls its file every second, and asks for its path
            return rows(db).get(room["file_id"], "").endswith(f"workspace/{path}")
        await eventually(back, what="the row put back with the room's own id")
        listed = await room_of(client, path)
        assert (listed["room_id"], listed["saved"], listed["save_error"]) == (room["room_id"], True, None)
        await eventually(lambda: on_disk(server.root / path, ["a = 'saved'", "b = 'kept'"]),
                         what="the autosave of the edit made while the row was gone")
        async with UIClient(server.url, server.token, path) as ui:
            assert ui.room_id == room["room_id"]
    assert "put back" in server.log()


@pytest.mark.live
async def test_a_room_that_cannot_get_its_row_back_never_says_it_saved_and_keeps_its_edits(shared_dirs):
    start, db = shared_dirs
    server = start("only", args=NO_AUTOSAVE + ["--JupyterMCPApp.room_idle_timeout=1.5",
                                               "--JupyterMCPApp.room_sweep_interval=0.3"])
    path, ids = new_notebook(server.root, "a = 1")
    async with connect(server.mcp_url, server.token) as client:
        await call(client, "cell_update", path=path, cell_id=ids[0], source="a = 'unsaved'")
        room = await room_of(client, path)
        stored = rows(db)[room["file_id"]]
        # Another program drops the row and the path gets a new id at once, before the room could take it back.
        con = sqlite3.connect(db)
        with con:
            con.execute("DELETE FROM Files WHERE id = ?", (room["file_id"],))
            con.execute("INSERT INTO Files (id, path) VALUES (?, ?)", (uuid.uuid4().hex, stored))
        con.close()
        await asyncio.sleep(2.5)  # past the idle timeout and several sweeps
        listing = await call(client, "room_list")
        mine = [r for r in listing["rooms"] if r["room_id"] == room["room_id"]]
        assert len(mine) == 1, "the room with unsaved edits was closed"
        assert mine[0]["path"] == path and mine[0]["saved"] is False
        assert "another id" in mine[0]["save_error"] and path in mine[0]["save_error"]
        assert disk_sources(server.root / path) == ["a = 1"]  # nothing written into the file that is no longer its
