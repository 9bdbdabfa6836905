"""Saves that fail, with real faults on a real server: a file the server cannot write, a full
disk, a shutdown with an unsavable room; and reads that must not write at all.

An acknowledged edit is never thrown away: a room whose save failed stays open with its edits,
the sweeper tries again each sweep and says so (a warning naming the file and the reason, and
``room_list``), and the edit reaches the disk once the fault is gone. Edits of a file the server
cannot write are refused before they change anything. A room nobody changed is closed without
writing its file.

The server runs as root here (CI does): for "cannot write" it is started without root's
file-permission override (``LiveServer(unprivileged_files=True)``), and the full disk is a small
tmpfs mounted in its workspace. Both need root; elsewhere these tests are skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_mcp.client import connect
from jupyter_mcp.testing import LiveServer, UIClient, call, disk_sources, eventually, new_notebook, read_notebook, refused
from jupyter_mcp.testing.plugin import starts_process

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="real permission and disk faults need root")

NOBODY = 65534
ROOT = 0
NO_AUTOSAVE = ["--YDocExtension.document_save_delay=3600"]  # jupyter-server-ydoc's own autosave stays out of it
# Idle after 1.5 s, a sweep every 0.3 s: a room with nothing to keep it open closes within 2 s.
SWEEPY = {"MCP_ROOM_IDLE_TIMEOUT_SEC": "1.5", "MCP_ROOM_SWEEP_INTERVAL_SEC": "0.3"}


def rooms_for(listing: dict, path: str) -> list[dict]:
    return [r for r in listing["rooms"] if r["path"] == path]


async def room_of(mcp, name: str) -> dict | None:
    found = rooms_for(await call(mcp, "room_list"), name)
    assert len(found) <= 1
    return found[0] if found else None


async def unsaved_room(mcp, name: str) -> dict:
    """Wait until a sweep tried to save the room and could not: its entry in room_list."""
    async def failed():
        room = await room_of(mcp, name)
        assert room is not None, f"the room of {name} was closed with its edit unsaved"
        return room if room.get("saved") is False else None
    return await eventually(failed, what=f"a failed save of {name}")


async def room_closed(mcp, name: str, timeout: float = 20) -> None:
    async def gone():
        return await room_of(mcp, name) is None
    await eventually(gone, timeout, what=f"the sweep closing the room of {name}")


def warnings_naming(log: str, path: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("[W ") and "jupyter_mcp:" in line and path in line]


# -- the test harness itself ------------------------------------------------------------------


@pytest.mark.unit
def test_unprivileged_files_server_can_read_but_not_write_others_files(tmp_path):
    """The premise of the "cannot write" tests: under LiveServer's command prefix, root cannot
    write a file owned by someone else with mode 0644 (os.access says so, and a write fails), can
    still read it, and can still write its own files."""
    theirs, mine = tmp_path / "theirs.txt", tmp_path / "mine.txt"
    theirs.write_text("theirs")
    mine.write_text("mine")
    os.chown(theirs, NOBODY, NOBODY)
    theirs.chmod(0o644)
    probe = (
        "import json, os, sys\n"
        "def write(p):\n"
        "    try:\n"
        "        open(p, 'a').close(); return True\n"
        "    except PermissionError:\n"
        "        return False\n"
        "t, m = sys.argv[1:]\n"
        "print(json.dumps({'access': os.access(t, os.W_OK), 'write': write(t), 'read': open(t).read(),"
        " 'mine': os.access(m, os.W_OK) and write(m)}))\n"
    )
    prefix = LiveServer(tmp_path / "srv", unprivileged_files=True).command_prefix()
    out = subprocess.run([*prefix, sys.executable, "-c", probe, str(theirs), str(mine)],
                         check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == {"access": False, "write": False, "read": "theirs", "mine": True}
    assert os.access(theirs, os.W_OK)  # this process (full root) could: the prefix is what matters


# -- a file the server cannot write -------------------------------------------------------------


@pytest.mark.live
async def test_edits_of_a_file_the_server_cannot_write_are_refused_up_front(live_factory):
    server = live_factory(unprivileged_files=True)
    name, ids = new_notebook(server.root, "a = 1", "b = 2")
    file = server.root / name
    os.chown(file, NOBODY, NOBODY)
    file.chmod(0o644)
    before = file.read_bytes()
    async with connect(server.mcp_url, server.token) as mcp:
        assert [c["source"] for c in (await call(mcp, "notebook_get", path=name))["cells"]] == ["a = 1", "b = 2"]
        for tool, args in [("cell_update", {"cell_id": ids[0], "source": "a = 'changed'"}),
                           ("cell_insert", {"source": "inserted"}),
                           ("cell_delete", {"cell_id": ids[1]}),
                           ("cell_execute", {"cell_id": ids[0]})]:
            message = await refused(mcp, tool, path=name, **args)
            assert name in message and "cannot write" in message, (tool, message)
        after = await call(mcp, "notebook_get", path=name)  # the room: nothing changed in it
        assert [c["source"] for c in after["cells"]] == ["a = 1", "b = 2"]
        assert [c.get("execution_count") for c in after["cells"]] == [None, None]
        assert (await call(mcp, "cell_get", path=name, cell_id=ids[0]))["outputs"] == []
    assert file.read_bytes() == before


@pytest.mark.live
async def test_room_whose_file_became_unwritable_stays_open_until_it_can_be_saved(live_factory):
    """(a) An edit, then the file is no longer the server's to write: every sweep tries, fails,
    warns with the path and the reason, keeps the room (room_list: saved false, the reason);
    once the file is writable again the next sweep saves the edit and closes the room."""
    server = live_factory(unprivileged_files=True, env=SWEEPY, args=NO_AUTOSAVE)
    name, ids = new_notebook(server.root, "a = 1", "b = 2")
    file = server.root / name
    async with connect(server.mcp_url, server.token) as mcp:
        await call(mcp, "cell_update", path=name, cell_id=ids[0], source="a = 'kept'")
        os.chown(file, NOBODY, NOBODY)  # before the room is idle (1.5 s)
        room = await unsaved_room(mcp, name)
        assert "cannot write" in room["save_error"] and name in room["save_error"], room
        await asyncio.sleep(1.5)  # several more sweeps: still open, still unsaved, warned each time
        room = await room_of(mcp, name)
        assert room is not None and room["saved"] is False
        warned = warnings_naming(server.log(), name)
        assert len(warned) >= 2 and all("cannot write" in line for line in warned), warned
        assert disk_sources(file) == ["a = 1", "b = 2"]

        os.chown(file, ROOT, ROOT)
        await room_closed(mcp, name)
        assert disk_sources(file) == ["a = 'kept'", "b = 2"]
        again = await call(mcp, "cell_get", path=name, cell_id=ids[0])  # a new room, from the file
        assert again["source"] == "a = 'kept'"


@pytest.mark.live
async def test_unsavable_room_at_shutdown_is_named_in_the_log(live_factory):
    """(c) SIGTERM with a room whose file the server cannot write: one error line names the file
    and the reason (the edit cannot be kept, but nobody is left to believe it was)."""
    server = live_factory(unprivileged_files=True, args=NO_AUTOSAVE)
    name, ids = new_notebook(server.root, "a = 1")
    saved_name, saved_ids = new_notebook(server.root, "a = 1")
    async with connect(server.mcp_url, server.token) as mcp:
        await call(mcp, "cell_update", path=name, cell_id=ids[0], source="a = 'lost at shutdown'")
        await call(mcp, "cell_update", path=saved_name, cell_id=saved_ids[0], source="a = 'saved at shutdown'")
    os.chown(server.root / name, NOBODY, NOBODY)
    assert server.stop() == 0
    errors = [line for line in server.log().splitlines() if line.startswith("[E ") and "could not be saved" in line]
    assert len(errors) == 1, errors
    assert name in errors[0] and "cannot write" in errors[0] and saved_name not in errors[0]
    assert disk_sources(server.root / saved_name) == ["a = 'saved at shutdown'"]
    assert disk_sources(server.root / name) == ["a = 1"]


# -- a full disk ----------------------------------------------------------------------------------


@pytest.fixture
@starts_process
def small_disk(tmp_path):
    """A server whose workspace has a 1 MiB tmpfs at ``small/``: (server, that folder)."""
    base = tmp_path / "srv"
    mount_point = base / "workspace" / "small"
    mount_point.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(mount_point)], check=True)
    server = LiveServer(base, env=SWEEPY, args=NO_AUTOSAVE)
    try:
        yield server.start(), mount_point
    finally:
        server.stop()
        if subprocess.run(["umount", str(mount_point)]).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)], check=True)


def fill(folder: Path) -> Path:
    """Fill the file system of ``folder`` to the last byte; the filler file, to free it."""
    filler = folder / "filler.bin"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError:
            pass
    assert os.statvfs(folder).f_bavail == 0
    return filler


@pytest.mark.live
async def test_room_on_a_full_disk_stays_open_until_there_is_room(small_disk):
    """(b) The disk fills after the notebook was opened; an edit; the sweeps fail (warning, room
    kept, room_list: saved false with the reason); space freed, the next sweep saves and closes."""
    server, small = small_disk
    name, ids = new_notebook(small, "a = 1", "b = 2")
    name = f"small/{name}"
    file = server.root / name
    async with connect(server.mcp_url, server.token) as mcp:
        await call(mcp, "notebook_get", path=name)
        filler = fill(small)
        await call(mcp, "cell_insert", path=name, source="x = 'y' * 10_000  # a cell bigger than a page")
        await call(mcp, "cell_update", path=name, cell_id=ids[0], source="a = 'kept'")
        room = await unsaved_room(mcp, name)
        assert "No space left" in room["save_error"], room
        await asyncio.sleep(1.5)
        assert (await room_of(mcp, name))["saved"] is False
        warned = warnings_naming(server.log(), name)
        assert len(warned) >= 2 and all("No space left" in line for line in warned), warned
        assert disk_sources(file) == ["a = 1", "b = 2"]  # the file itself is intact

        filler.unlink()
        await room_closed(mcp, name)
        assert disk_sources(file) == ["a = 'kept'", "b = 2", "x = 'y' * 10_000  # a cell bigger than a page"]


# -- reads do not write ---------------------------------------------------------------------------


UNUSUAL = {
    # indent=2, keys in an order of their own, no language_info, no kernelspec
    "indented.ipynb": json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {"custom": {"k": 1}},
                                  "cells": [{"id": "c1", "cell_type": "markdown", "metadata": {},
                                             "source": ["# Title\n", "text"]},
                                            {"id": "c2", "cell_type": "code", "metadata": {}, "source": "1 + 1",
                                             "execution_count": None, "outputs": []}]}, indent=2),
    # zero cells (a room shows one empty cell for it), no trailing newline
    "empty.ipynb": json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}),
}


@pytest.mark.live
async def test_reading_then_a_sweep_leaves_the_file_untouched(live_factory):
    """(d) notebook_get and cell_get on notebooks written unusually, then the sweep closes the
    rooms: not a byte (nor the modification time) of the files changed."""
    server = live_factory(env=SWEEPY)  # jupyter-server-ydoc's autosave on, as by default
    files = {}
    for name, text in UNUSUAL.items():
        (server.root / name).write_text(text)
        files[name] = ((server.root / name).read_bytes(), (server.root / name).stat().st_mtime_ns)
    async with connect(server.mcp_url, server.token) as mcp:
        for name in UNUSUAL:
            await call(mcp, "notebook_get", path=name)
            await call(mcp, "cell_get", path=name, index=0)
            assert await room_of(mcp, name) is not None
        for name in UNUSUAL:
            await room_closed(mcp, name)
    for name, (data, mtime) in files.items():
        assert (server.root / name).read_bytes() == data, name
        assert (server.root / name).stat().st_mtime_ns == mtime, name
    assert not [line for line in server.log().splitlines() if "Saving file" in line]


@pytest.fixture(scope="module")
@starts_process
def sweeping_server(tmp_path_factory):
    """One server for the tests that need only its settings (the sweep saves, jupyter-server-ydoc's
    autosave off), and neither stop it nor read its log: each works on a notebook of its own."""
    server = LiveServer(tmp_path_factory.mktemp("sweeping"), env=SWEEPY, args=NO_AUTOSAVE).start()
    yield server
    server.stop()


@pytest.mark.live
async def test_a_persons_edit_counts_as_a_change_and_is_saved_by_the_sweep(sweeping_server):
    """Not writing unchanged rooms must not skip rooms changed by someone else: an edit made in
    JupyterLab (the UI stand-in, over the room's websocket) in a room MCP read is saved by the
    sweep (jupyter-server-ydoc's autosave is off here, so only the sweep can save it)."""
    server = sweeping_server
    name, ids = new_notebook(server.root, "a = 1", "b = 2")
    async with connect(server.mcp_url, server.token) as mcp:
        async with UIClient(server.url, server.token, name) as ui:
            await call(mcp, "notebook_get", path=name)
            with ui.doc.transaction():
                ui.nb.ycells[1]["source"].insert(len(ui.source(1)), "  # a person's edit")
            async def seen():
                cell = await call(mcp, "cell_get", path=name, cell_id=ids[1])
                return cell["source"] == "b = 2  # a person's edit"
            await eventually(seen, what="MCP seeing the person's edit")
        await room_closed(mcp, name)
    assert disk_sources(server.root / name) == ["a = 1", "b = 2  # a person's edit"]


@pytest.mark.live
async def test_a_save_does_not_write_jupyter_ydocs_metadata_placeholders(sweeping_server):
    """A notebook whose file has no kernelspec and no language_info, edited and run (python3):
    the swept file does not get the empty ones jupyter-ydoc puts in the room
    ({"name": "", "display_name": ""}, {"name": ""}); its other metadata is kept."""
    server = sweeping_server
    name = "bare.ipynb"
    (server.root / name).write_text(json.dumps({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {"custom": "kept"},
        "cells": [{"id": "c1", "cell_type": "code", "metadata": {}, "source": "1 + 1",
                   "execution_count": None, "outputs": []}]}))
    async with connect(server.mcp_url, server.token) as mcp:
        room = await call(mcp, "notebook_get", path=name)
        assert room["metadata"]["kernelspec"] == {"name": "", "display_name": ""}  # in the room, not the file
        await call(mcp, "cell_update", path=name, cell_id="c1", source="2 + 2")
        ran = await call(mcp, "cell_execute", path=name, cell_id="c1", timeout=60)
        assert ran["status"] == "ok", ran
        await room_closed(mcp, name, timeout=60)
    saved = read_notebook(server.root / name)
    assert disk_sources(server.root / name) == ["2 + 2"] and saved["cells"][0]["execution_count"] == 1
    metadata = saved["metadata"]
    assert metadata.get("kernelspec") != {"name": "", "display_name": ""}, metadata
    assert metadata.get("language_info") != {"name": ""}, metadata
    assert metadata["custom"] == "kept"
