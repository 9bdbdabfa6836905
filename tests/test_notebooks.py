"""Live notebooks: every tool works on the one room the UI shows (real jupyter lab, UI stand-in)."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import time
import uuid

import pytest

from jupyter_mcp.client import LEGACY, MODERN, connect
from jupyter_mcp.testing import UIClient, call, disk_sources, eventually, new_notebook, refused, write_notebook

pytestmark = pytest.mark.live


def fresh(live, sources=("a = 1", "b = 2", "c = 3")) -> tuple[str, list[str]]:
    return new_notebook(live.root, *sources)


def rooms_for(listing: dict, path: str) -> list[dict]:
    return [r for r in listing["rooms"] if r["path"] == path]


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_mcp_edit_is_seen_by_ui_and_ui_edit_by_mcp(live, mode):
    name, ids = fresh(live)
    async with connect(live.mcp_url, live.token, mode=mode) as mcp, UIClient(live.url, live.token, name) as ui:
        assert ui.cell_ids() == ids
        await call(mcp, "cell_update", path=name, cell_id=ids[1], source="b = 'from the agent'")
        await ui.wait_for(lambda: ui.source(1) == "b = 'from the agent'")
        ui.nb.set_cell(2, source="c = 'from a person'")
        await asyncio.sleep(0)  # let the provider send it
        for _ in range(100):
            cell = await call(mcp, "cell_get", path=name, cell_id=ids[2])
            if cell["source"] == "c = 'from a person'":
                break
            await asyncio.sleep(0.05)
        assert cell["source"] == "c = 'from a person'"
        inserted = await call(mcp, "cell_insert", path=name, source="# notes", cell_type="markdown", index=1)
        await ui.wait_for(lambda: len(ui.nb.ycells) == 4)
        assert ui.cell_ids()[1] == inserted["id"] and ui.nb.ycells[1]["cell_type"] == "markdown"
        deleted = await call(mcp, "cell_delete", path=name, cell_id=ids[0])
        assert [gone["id"] for gone in deleted["deleted"]] == [ids[0]] and deleted["cell_count"] == 3
        await ui.wait_for(lambda: ui.cell_ids() == [inserted["id"], ids[1], ids[2]])
        got = await call(mcp, "notebook_get", path=name)
        assert [c["id"] for c in got["cells"]] == ui.cell_ids()
        assert [c["source"] for c in got["cells"]] == [ui.source(i) for i in range(3)]


async def test_cell_update_answers_what_it_replaced_a_persons_text_included(live):
    """The diff is against the source just before the update: a line the person typed, which the
    agent's new source leaves out, shows as removed, so the agent knows what it overwrote."""
    name, ids = fresh(live, ("total = 0\nfor x in data:\n    total += x",))
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        ui.type_into(0, "\nprint(total)  # Ada")
        for _ in range(200):  # the person's line has reached the server's document
            if (await call(mcp, "cell_get", path=name, cell_id=ids[0]))["source"].endswith("# Ada"):
                break
            await asyncio.sleep(0.05)
        answer = await call(mcp, "cell_update", path=name, cell_id=ids[0], source="total = sum(data)")
        assert answer["source"] == "total = sum(data)"
        assert answer["diff"] == ("--- before\n+++ after\n@@ -1,4 +1 @@\n-total = 0\n-for x in data:\n"
                                  "-    total += x\n-print(total)  # Ada\n+total = sum(data)\n")
        same = await call(mcp, "cell_update", path=name, cell_id=ids[0], source="total = sum(data)")
        assert same["diff"] == ""


async def test_several_cells_deleted_at_once_as_one_change(live):
    """cell_ids deletes cells wherever they are, in one change the person's view applies at once;
    a person's edit to a cell left standing is kept."""
    name, ids = fresh(live, ("a = 1", "b = 2", "c = 3", "d = 4", "e = 5"))
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        ui.type_into(1, "  # a person's note")
        seen = []
        ui.nb.ycells.observe(lambda event: seen.append(len(ui.nb.ycells)))
        deleted = await call(mcp, "cell_delete", path=name, cell_ids=[ids[4], ids[0], ids[2]])
        assert [(gone["id"], gone["index"], gone["source"]) for gone in deleted["deleted"]] == [
            (ids[0], 0, "a = 1"), (ids[2], 2, "c = 3"), (ids[4], 4, "e = 5")]
        assert deleted["cell_count"] == 2
        await ui.wait_for(lambda: ui.cell_ids() == [ids[1], ids[3]])
        assert seen == [2]  # one update: no state with some of them gone
        assert ui.source(0) == "b = 2  # a person's note"
        got = await call(mcp, "notebook_get", path=name)
        assert [(c["id"], c["source"]) for c in got["cells"]] == [(ids[1], "b = 2  # a person's note"),
                                                                    (ids[3], "d = 4")]


async def test_path_variants_converge_on_one_room_with_ui_connected(live):
    (live.root / "sub").mkdir(exist_ok=True)
    name = f"sub/v-{uuid.uuid4().hex[:6]}.ipynb"
    ids = write_notebook(live.root / name, ["x = 1"])
    variants = [name, "./" + name, "/" + name, f"{live.root}/{name}", "sub/../" + name]
    async with UIClient(live.url, live.token, name) as ui, connect(live.mcp_url, live.token) as mcp:
        seen = set()
        for i, variant in enumerate(variants):
            await call(mcp, "cell_update", path=variant, cell_id=ids[0], source=f"x = {i}")
            seen.add((await call(mcp, "notebook_get", path=variant))["room_id"])
        assert seen == {ui.room_id}
        listing = await call(mcp, "room_list")
        mine = rooms_for(listing, name)
        assert len(mine) == 1 and mine[0]["room_id"] == ui.room_id
        assert mine[0]["clients"] == 1 and "Ada Person" in mine[0]["users"]
        await ui.wait_for(lambda: ui.source(0) == f"x = {len(variants) - 1}")
        assert all(r["path"] for r in listing["rooms"])
        assert len({r["path"] for r in listing["rooms"]}) == len(listing["rooms"])


async def test_ten_concurrent_first_calls_make_one_room(live):
    name, _ = fresh(live)
    async with connect(live.mcp_url, live.token) as mcp:
        variants = [name, "./" + name, "/" + name, f"{live.root}/{name}"] * 3
        results = await asyncio.gather(*(call(mcp, "notebook_get", path=v) for v in variants[:10]))
        assert len({r["room_id"] for r in results}) == 1
        assert len(rooms_for(await call(mcp, "room_list"), name)) == 1


async def test_fifty_updates_keep_count_and_id(live):
    name, ids = fresh(live)
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        for i in range(50):
            updated = await call(mcp, "cell_update", path=name, cell_id=ids[1], source=f"b = {i}\n" * (i % 3 + 1))
            assert updated["id"] == ids[1] and updated["index"] == 1
        got = await call(mcp, "notebook_get", path=name)
        assert [c["id"] for c in got["cells"]] == ids
        await ui.wait_for(lambda: ui.source(1) == "b = 49\n" * 2)
        assert ui.cell_ids() == ids


async def concurrent_round(live, sessions, per_session=5):
    name, ids = fresh(live, ["seed"])
    async with UIClient(live.url, live.token, name) as ui:
        async def inserter(k, mcp):
            made = []
            for j in range(per_session):
                made.append((await call(mcp, "cell_insert", path=name, source=f"ins-{k}-{j}"))["id"])
            return made

        async def person():
            for j in range(10):
                ui.nb.set_cell(0, source=f"seed edited {j}")
                await asyncio.sleep(0.01)

        made, _ = await asyncio.gather(asyncio.gather(*(inserter(k, m) for k, m in enumerate(sessions))), person())
        new_ids = [i for batch in made for i in batch]
        expected = {f"ins-{k}-{j}" for k in range(len(sessions)) for j in range(per_session)}
        # The person's last keystroke travels on the websocket, the read on another connection:
        # nothing orders the two, so the read waits until that keystroke has arrived (10 s at most).
        for _ in range(200):
            final = await call(sessions[0], "notebook_get", path=name, include_outputs=False)
            if final["cells"][0]["source"] == "seed edited 9":
                break
            await asyncio.sleep(0.05)
        server_ids = [c["id"] for c in final["cells"]]
        sources = [c["source"] for c in final["cells"]]
        assert len(server_ids) == len(set(server_ids)), "duplicate cell ids"
        assert sorted(s for s in sources if s.startswith("ins-")) == sorted(expected), "an insert is missing or doubled"
        assert set(new_ids) <= set(server_ids) and len(new_ids) == len(expected)
        assert server_ids[0] == ids[0] and sources[0] == "seed edited 9"
        await ui.wait_for(lambda: ui.cell_ids() == server_ids and ui.source(0) == "seed edited 9")
        assert [ui.source(i) for i in range(len(server_ids))] == sources


async def test_eight_sessions_insert_concurrently_while_ui_edits_20_rounds(live):
    clients = [connect(live.mcp_url, live.token) for _ in range(8)]
    sessions = [await c.__aenter__() for c in clients]
    try:
        for _ in range(20):
            await concurrent_round(live, sessions)
    finally:
        for c in reversed(clients):
            await c.__aexit__(None, None, None)


@pytest.mark.parametrize("source", ["ui", "mcp"])
async def test_watch_returns_on_first_change(live, source):
    name, ids = fresh(live)
    async with connect(live.mcp_url, live.token) as watcher, connect(live.mcp_url, live.token) as other, \
            UIClient(live.url, live.token, name) as ui:
        quiet = await call(watcher, "notebook_watch", path=name, timeout=0.5)
        assert quiet["changed"] is False and quiet["changes"] == []
        waiting = asyncio.create_task(call(watcher, "notebook_watch", path=name, timeout=60))
        await asyncio.sleep(0.5)
        assert not waiting.done()
        if source == "ui":
            ui.nb.set_cell(2, source="c = 'person'")
        else:
            await call(other, "cell_update", path=name, cell_id=ids[2], source="c = 'agent'")
        result = await asyncio.wait_for(waiting, 30)
        assert result["changed"] is True
        assert {"kind": "source", "cell_id": ids[2], "cell_index": 2} in result["changes"]
        assert result["waited_seconds"] < 30
        inserting = asyncio.create_task(call(watcher, "notebook_watch", path=name, timeout=60))
        await asyncio.sleep(0.3)
        new = await call(other, "cell_insert", path=name, source="new", index=0)
        inserted = await asyncio.wait_for(inserting, 30)
        assert {"kind": "cells_inserted", "cell_index": 0, "cell_ids": [new["id"]]} in inserted["changes"]


async def test_list_users_without_room_is_empty_and_opens_nothing(live):
    name, _ = fresh(live)
    async with connect(live.mcp_url, live.token) as mcp:
        result = await call(mcp, "notebook_list_users", path=name)
        assert result == {"path": name, "room_open": False, "users": []}
        assert rooms_for(await call(mcp, "room_list"), name) == []
        async with UIClient(live.url, live.token, name, name="Grace Hopper") as ui:
            async def listed():  # the tab's awareness has reached the room
                return (await call(mcp, "notebook_list_users", path="/" + name))["users"]

            users = await eventually(listed, what="the person listed")
            assert [u["display_name"] for u in users] == ["Grace Hopper"]
            assert users[0]["is_agent"] is False
            assert ui.room_id == (await call(mcp, "notebook_get", path=name))["room_id"]


async def test_activity_resets_idle_seconds(live):
    name, ids = fresh(live)
    async with connect(live.mcp_url, live.token) as mcp:
        await call(mcp, "notebook_get", path=name)
        await asyncio.sleep(1.0)
        before = rooms_for(await call(mcp, "room_list"), name)[0]["idle_seconds"]
        await call(mcp, "cell_update", path=name, cell_id=ids[0], source="a = 2")
        after = rooms_for(await call(mcp, "room_list"), name)[0]["idle_seconds"]
        assert before >= 1.0 and after < before


async def test_large_outputs_summarised_not_altered(live):
    name = f"big-{uuid.uuid4().hex[:6]}.ipynb"
    import nbformat

    long_text = "line\n" * 10_000
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "print('x')", outputs=[nbformat.v4.new_output("stream", name="stdout", text=long_text),
                               nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=",
                                                                            "text/plain": "<Figure>"})])])
    nbformat.write(nb, live.root / name)
    async with connect(live.mcp_url, live.token) as mcp:
        raw = await mcp.call_tool("notebook_get", {"path": name, "max_output_chars": 100})
        out = raw.structured_content["cells"][0]["outputs"]
        assert len(out[0]["text"]) < 300 and "more characters not shown" in out[0]["text"]
        # the stored figure is attached as it is stored, and its output names it
        assert out[1]["mime_types"] == ["image/png", "text/plain"]
        assert out[1]["text"] == "[image/png, 8 bytes: image 1 attached to this answer]"
        assert [(c.type, getattr(c, "data", None)) for c in raw.content[1:]] == [("image", "iVBORw0KGgo=")]
        full = await call(mcp, "cell_get", path=name, index=0, max_output_chars=0)
        assert full["outputs"][0]["text"] == long_text  # the document still has all of it


async def test_what_a_person_ran_is_readable_without_running_it_again(live):
    """A person's cells ran in the document (here through the kernel, as a browser would): a
    later read shows the plot as an image, the HTML and markdown results as text, and names a
    markdown cell's attachments; max_image_bytes=0 leaves the image out and says so."""
    import nbformat

    png = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
    code = ("import base64\nfrom IPython.display import HTML, Image, Markdown, display\n"
            f"display(Image(data=base64.b64decode('{png}'), format='png'))\n"
            "display(HTML('<table><tr><td>revenue</td><td>42</td></tr></table>'))\nMarkdown('**bold** claim')")
    note = nbformat.v4.new_markdown_cell("![chart](attachment:chart.png)")
    note.attachments = {"chart.png": {"image/png": png}}
    name = f"rich-{uuid.uuid4().hex[:6]}.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code), note])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, live.root / name)
    async with connect(live.mcp_url, live.token) as person:
        await call(person, "cell_execute", path=name, index=0)
    async with connect(live.mcp_url, live.token) as agent:  # another session, reading what is there
        raw = await agent.call_tool("cell_get", {"path": name, "index": 0})
        outputs = raw.structured_content["outputs"]
        assert outputs[0]["text"].startswith("[image/png, ") and "image 1 attached" in outputs[0]["text"]
        assert [(c.type, c.mime_type, c.data) for c in raw.content if c.type == "image"] == [("image", "image/png", png)]
        assert "revenue" in outputs[1]["text"] and "42" in outputs[1]["text"] and " at 0x" not in outputs[1]["text"]
        assert "**bold** claim" in outputs[2]["text"]
        lean = await agent.call_tool("cell_get", {"path": name, "index": 0, "max_image_bytes": 0})
        assert not [c for c in lean.content if c.type == "image"]
        assert "not attached" in lean.structured_content["outputs"][0]["text"]
        read = await call(agent, "notebook_get", path=name)
        assert read["cells"][1]["attachments"] == {"chart.png": ["image/png"]}


async def test_bad_input_is_refused_and_changes_nothing(live):
    name, ids = fresh(live)
    (live.root / "notes.txt").write_text("not a notebook")
    (live.root / "corrupt.ipynb").write_text("{ this is not json")
    disk_before = {p: (live.root / p).read_bytes() for p in (name, "notes.txt", "corrupt.ipynb")}
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        before = await call(mcp, "notebook_get", path=name)
        cases = [
            ("cell_get", {"path": name, "cell_id": "nope"}, "no cell with id 'nope'"),
            ("cell_get", {"path": name, "index": 3}, "out of range"),
            ("cell_get", {"path": name, "index": -1}, "out of range"),
            ("cell_get", {"path": name}, "pass cell_id"),
            ("cell_get", {"path": name, "cell_id": ids[0], "index": 2}, "not 2"),
            ("cell_update", {"path": name, "cell_id": "nope", "source": "x"}, "no cell with id"),
            ("cell_update", {"path": name, "index": 99, "source": "x"}, "out of range"),
            ("cell_update", {"path": name, "cell_id": ids[0], "source": "x", "cell_type": "python"}, "cell_type"),
            ("cell_insert", {"path": name, "index": 99}, "out of range"),
            ("cell_insert", {"path": name, "index": -1}, "out of range"),
            ("cell_insert", {"path": name, "cell_type": "sql"}, "cell_type"),
            ("cell_insert", {"path": name, "after_cell_id": "nope"}, "no cell with id"),
            ("cell_insert", {"path": name, "after_cell_id": ids[0], "index": 0}, "not both"),
            ("cell_delete", {"path": name, "cell_id": "nope"}, "no cell with id"),
            ("cell_delete", {"path": name, "index": 3}, "out of range"),
            ("cell_delete", {"path": name, "cell_ids": [ids[0], "nope"]}, "no cell with id 'nope'"),
            ("cell_delete", {"path": name, "cell_ids": [ids[0], ids[0]]}, "more than once"),
            ("cell_delete", {"path": name, "cell_ids": []}, "empty"),
            ("cell_delete", {"path": name, "cell_ids": [ids[0]], "index": 0}, "cell_ids alone"),
            ("notebook_get", {"path": "../escape.ipynb"}, "escapes the workspace"),
            ("notebook_get", {"path": "/etc/passwd.ipynb"}, "outside the workspace"),
            ("notebook_get", {"path": "notes.txt"}, "not a notebook path"),
            ("notebook_get", {"path": "missing.ipynb"}, "no notebook at 'missing.ipynb'"),
            ("notebook_get", {"path": "corrupt.ipynb"}, "could not open 'corrupt.ipynb'"),
            ("cell_update", {"path": "corrupt.ipynb", "index": 0, "source": "x"}, "could not open"),
            ("notebook_watch", {"path": "../x.ipynb", "timeout": 1}, "escapes"),
            ("notebook_list_users", {"path": "a\x00.ipynb"}, "NUL"),
            ("cell_insert", {"path": "sub", "source": "x"}, "not a notebook path"),
        ]
        for tool, args, expected in cases:
            message = await refused(mcp, tool, **args)
            assert expected in message, (tool, args, message)
        after = await call(mcp, "notebook_get", path=name)
        assert after["cells"] == before["cells"]
        assert ui.cell_ids() == ids
        listing = await call(mcp, "room_list")
        assert not [r for r in listing["rooms"] if r["path"] in ("corrupt.ipynb", "missing.ipynb", "notes.txt")]
    for p, content in disk_before.items():
        assert (live.root / p).read_bytes() == content
    assert not (live.root / "missing.ipynb").exists()


async def test_cell_type_change_in_place(live):
    name, ids = fresh(live)
    async with connect(live.mcp_url, live.token) as mcp:
        changed = await call(mcp, "cell_update", path=name, cell_id=ids[0], source="# Title", cell_type="markdown")
        assert changed == {"id": ids[0], "index": 0, "cell_type": "markdown", "source": "# Title",
                           "diff": "--- before\n+++ after\n@@ -1 +1 @@\n-a = 1\n+# Title\n"}
        cell = await call(mcp, "cell_get", path=name, cell_id=ids[0])
        assert "outputs" not in cell and cell["cell_type"] == "markdown"


# --- rooms on disk: sweeper, shutdown, file ids --------------------------------------------

SWEEPY = {"MCP_ROOM_IDLE_TIMEOUT_SEC": "1", "MCP_ROOM_SWEEP_INTERVAL_SEC": "0.3"}
NO_AUTOSAVE = ["--YDocExtension.document_save_delay=3600"]  # only an explicit save can persist


async def wait_room_gone(mcp, name, timeout=20):
    for _ in range(int(timeout / 0.1)):
        if not rooms_for(await call(mcp, "room_list"), name):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"room of {name} was not swept")


async def test_sweeper_saves_before_closing_and_keeps_rooms_with_clients(live_factory):
    server = live_factory(env=SWEEPY, args=NO_AUTOSAVE)
    edited, ids = fresh(server)
    watched, wids = fresh(server)
    async with connect(server.mcp_url, server.token) as mcp, UIClient(server.url, server.token, watched) as ui:
        await call(mcp, "cell_update", path=edited, cell_id=ids[0], source="a = 'edited then swept'")
        await call(mcp, "cell_update", path=watched, cell_id=wids[0], source="a = 'ui is here'")
        await wait_room_gone(mcp, edited)
        assert disk_sources(server.root / edited)[0] == "a = 'edited then swept'"
        await asyncio.sleep(2.5)  # several sweeps later, the room with a client is still open
        assert len(rooms_for(await call(mcp, "room_list"), watched)) == 1
        assert ui.source(0) == "a = 'ui is here'"
        again = await call(mcp, "cell_get", path=edited, cell_id=ids[0])  # re-created from disk
        assert again["source"] == "a = 'edited then swept'"


async def test_shutdown_flushes_every_touched_room(live_factory):
    server = live_factory(args=NO_AUTOSAVE)
    names = [fresh(server) for _ in range(3)]
    async with connect(server.mcp_url, server.token) as mcp:
        for k, (name, ids) in enumerate(names):
            await call(mcp, "cell_update", path=name, cell_id=ids[1], source=f"b = {k} # pending")
            await call(mcp, "cell_insert", path=name, source="added")
    rc = server.stop()
    assert rc == 0
    for k, (name, _) in enumerate(names):
        assert disk_sources(server.root / name) == ["a = 1", f"b = {k} # pending", "c = 3", "added"]
    assert "Traceback" not in server.log()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_a_stop_by_signal_saves_every_room_and_exits_promptly(live_factory, sig):
    """Whatever signal stops the server (JupyterHub's spawner sends SIGINT, with stdin not a
    terminal), every room MCP kept is saved first, a kernel MCP started included, and the
    process exits within seconds."""
    server = live_factory(args=NO_AUTOSAVE)
    name, ids = fresh(server)
    async with connect(server.mcp_url, server.token) as mcp:
        await call(mcp, "cell_update", path=name, cell_id=ids[0], source="a = 'pending'")
        await call(mcp, "cell_execute", path=name, cell_id=ids[0])
        await call(mcp, "cell_insert", path=name, source="added")
    started = time.monotonic()
    rc = server.stop(sig, timeout=30)
    took = time.monotonic() - started
    assert took < 10, f"the server took {took:.1f}s to stop"
    assert rc == 0
    assert disk_sources(server.root / name) == ["a = 'pending'", "b = 2", "c = 3", "added"]


async def test_zero_lost_edits_script_edit_sweep_shutdown(live_factory):
    """Acceptance: edits through MCP, then a sweep, then a shutdown: every edit is on disk."""
    server = live_factory(env=SWEEPY, args=NO_AUTOSAVE)
    first, ids1 = fresh(server)
    second, ids2 = fresh(server)
    async with connect(server.mcp_url, server.token) as mcp:
        for i in range(20):
            await call(mcp, "cell_update", path=first, cell_id=ids1[i % 3], source=f"first {i}")
        await wait_room_gone(mcp, first)
        for i in range(20):
            await call(mcp, "cell_update", path=second, cell_id=ids2[i % 3], source=f"second {i}")
    server.stop()
    assert disk_sources(server.root / first) == ["first 18", "first 19", "first 17"]
    assert disk_sources(server.root / second) == ["second 18", "second 19", "second 17"]


def test_file_id_rows_pruned_at_start(live_factory, tmp_path):
    server = live_factory()
    db = server.base / "data" / "file_id_manager.db"
    keep, _ = fresh(server)
    gone, _ = fresh(server)

    async def index_some():
        async with connect(server.mcp_url, server.token) as mcp:
            await call(mcp, "notebook_get", path=keep)
            await call(mcp, "notebook_get", path=gone)

    asyncio.run(index_some())
    server.stop()
    (server.root / gone).unlink()
    with sqlite3.connect(db) as con:
        con.execute("INSERT INTO Files (id, path) VALUES (?, ?)", ("leak-1", "/etc/host-path.ipynb"))
        con.execute("INSERT INTO Files (id, path) VALUES (?, ?)", ("leak-2", str(tmp_path / "elsewhere.ipynb")))
    server.start()
    server.stop()
    with sqlite3.connect(db) as con:
        paths = {p for (p,) in con.execute("SELECT path FROM Files")}
    assert any(p.endswith(keep) for p in paths)
    assert not any(p.endswith(gone) for p in paths)
    assert "/etc/host-path.ipynb" not in paths and str(tmp_path / "elsewhere.ipynb") not in paths
    rows = json.dumps(sorted(paths))
    server.start()  # idempotent: a second start prunes nothing more
    server.stop()
    with sqlite3.connect(db) as con:
        assert json.dumps(sorted(p for (p,) in con.execute("SELECT path FROM Files"))) == rows


async def test_notebook_get_sees_deletions_right_after_a_read(live):
    """A deletion does not advance a Y document's state vector: a read cached by that
    vector would still show a deleted cell, or text a person just erased."""
    name, ids = fresh(live, ("keep = 1", "doomed = 2", "value = 12345"))
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        await call(mcp, "notebook_get", path=name)
        await call(mcp, "cell_delete", path=name, cell_id=ids[1])
        got = await call(mcp, "notebook_get", path=name)
        assert [c["id"] for c in got["cells"]] == [ids[0], ids[2]]
        await call(mcp, "cell_update", path=name, cell_id=ids[2], source="value = 1")  # a pure deletion
        got = await call(mcp, "notebook_get", path=name)
        assert got["cells"][1]["source"] == "value = 1"
        ui.nb.set_cell(0, source="keep")  # a person erases text
        for _ in range(100):
            got = await call(mcp, "notebook_get", path=name)
            if got["cells"][0]["source"] == "keep":
                break
            await asyncio.sleep(0.05)
        assert got["cells"][0]["source"] == "keep"


async def test_every_name_of_one_file_is_one_room_and_listed_once(live_factory, tmp_path):
    """A notebook reached through a symlinked file or folder inside the workspace is the
    same notebook: one room, every edit kept. notebook_list shows each notebook once, by
    that name, and leaves out what the other tools refuse: a symlink out of the workspace,
    hidden folders and files (and a hidden one is refused as hidden, not as missing)."""
    server = live_factory(args=NO_AUTOSAVE)
    (server.root / "d").mkdir()
    write_notebook(server.root / "d" / "a.ipynb", ["first"])
    (server.root / "alias.ipynb").symlink_to(server.root / "d" / "a.ipynb")
    (server.root / "dlink").symlink_to(server.root / "d")
    outside = tmp_path / "outside.ipynb"
    write_notebook(outside, ["secret"])
    (server.root / "out.ipynb").symlink_to(outside)
    (server.root / ".hidden").mkdir()
    write_notebook(server.root / ".hidden" / "h.ipynb", ["hidden"])
    write_notebook(server.root / ".dot.ipynb", ["hidden too"])
    async with connect(server.mcp_url, server.token) as mcp:
        for name in ("d/a.ipynb", "alias.ipynb", "dlink/a.ipynb"):
            inserted = await call(mcp, "cell_insert", path=name, source=f"via {name}")
            assert inserted["cell_count"] >= 2
        got = await call(mcp, "notebook_get", path="alias.ipynb")
        assert got["path"] == "d/a.ipynb"
        assert [c["source"] for c in got["cells"]] == ["first", "via d/a.ipynb", "via alias.ipynb", "via dlink/a.ipynb"]
        rooms = (await call(mcp, "room_list"))["rooms"]
        assert [r["path"] for r in rooms] == ["d/a.ipynb"]
        listed = [n["path"] for n in (await call(mcp, "notebook_list"))["notebooks"]]
        assert listed == ["d/a.ipynb"]
        for hidden in (".hidden/h.ipynb", ".dot.ipynb"):
            message = await refused(mcp, "notebook_get", path=hidden)
            assert "hidden" in message and "no notebook" not in message
    server.stop()
    assert disk_sources(server.root / "d" / "a.ipynb") == ["first", "via d/a.ipynb", "via alias.ipynb",
                                                          "via dlink/a.ipynb"]
    assert disk_sources(outside) == ["secret"]
