"""What a room held is freed when the room closes, and an open room does not keep what was
deleted from it (issue 41, finding 5: memory grew with every edit and run, and stayed once every
room was closed). In-process server, the real MCP client, two tabs typing as people do; the live
objects are counted in the server's process (``jupyter_mcp.testing.census``)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from jupyter_mcp.client import connect
from jupyter_mcp.testing import UIClient, call, census, eventually, write_notebook

pytestmark = pytest.mark.live

NOTES = "# notes: "  # the first cell's source: the people type there
#: Objects that live as long as an HTTP request, not a room (MCP's own client keeps a stream open).
REQUEST_SCOPED = {"jupyter_mcp.transport.handlers.MCPHandler", "jupyter_mcp.transport.tornado_asgi.ASGIRequest",
                  "jupyter_mcp.permissions.Permissions", "jupyter_mcp.identity.Agent",
                  "jupyter_mcp.adapters.sdk_server._ResponsesOnly"}
#: What documents are made of: nothing of it outlives the rooms.
DOCUMENTS = ("room documents", "Y documents", "Y documents (native)", "Y shared types (native)", "awareness",
             "undo managers (native)")
#: Entries of the tables kept per room or path (per kernel: the kernels keep running).
TABLES = ("open rooms", "activity", "presence", "resolved paths", "room loads", "read caches (cells)",
          "file loaders", "update stores")


@pytest.fixture
def cleanup_delay():
    """jupyter-collaboration's delay before it deletes a room its last person left (its default: 60 s)."""
    return None


@pytest.fixture
def jp_server_config(jp_server_config, cleanup_delay):
    if cleanup_delay is None:
        return jp_server_config
    return {**jp_server_config, "YDocExtension": {"document_cleanup_delay": cleanup_delay}}


def notebooks(root, count):
    paths = [f"freeing-{i}.ipynb" for i in range(count)]
    for path in paths:
        write_notebook(root / path, [NOTES, "x = 0", "print('hello')"])
    return paths


async def agent_works(client, paths, rounds):
    """Every kind of call on every notebook: reads, an update, an insert and a delete, a small
    run, who is here."""
    for i in range(rounds):
        for path in paths:
            await call(client, "notebook_get", path=path)
            await call(client, "cell_get", path=path, index=1)
            await call(client, "cell_update", path=path, index=1, source=f"x = {i}\n" + "# padding\n" * 20)
            new = await call(client, "cell_insert", path=path, source=f"y = {i}")
            await call(client, "cell_delete", path=path, cell_id=new["id"])
            await call(client, "cell_execute", path=path, index=2)
            await call(client, "notebook_list_users", path=path)


async def people_type_while_the_agent_works(base_url, token, client, paths, rounds):
    """Two people, each in a notebook of their own, share their cursor and type while the agent
    works; every keystroke reaches the server's document. Returns when both tabs have left."""
    async with contextlib.AsyncExitStack() as tabs:
        people = [await tabs.enter_async_context(UIClient(base_url, token, path, name=name))
                  for path, name in zip(paths, ("Ada Person", "Grace Person"))]
        for person in people:
            await person.put_cursor(0, 2)
        typing = asyncio.Event()
        typed = ["", ""]

        async def type_(k):
            while not typing.is_set():
                letter = "abcdefghij"[len(typed[k]) % 10]
                people[k].type_into(0, letter)
                typed[k] += letter
                await asyncio.sleep(0.01)

        typists = [asyncio.create_task(type_(k)) for k in range(len(people))]
        await agent_works(client, paths, rounds)
        typing.set()
        await asyncio.gather(*typists)
        for path, text in zip(paths, typed):
            async def arrived(path=path, text=text):
                return (await call(client, "cell_get", path=path, index=0))["source"] == NOTES + text
            await eventually(arrived, what=f"every keystroke in {path}")


async def close_every_room(mcp_ext):
    """The sweeper closes every room (once the people's websockets are gone)."""
    mcp_ext.sweeper.idle_timeout = 0

    async def closed():
        await mcp_ext.sweeper.sweep()
        return not list(mcp_ext.rooms.document_rooms())

    await eventually(closed, what="every room closed")
    await asyncio.sleep(0.5)  # the closed rooms' tasks end as the loop turns


def grown(before, after, names):
    return {name: (before.get(name, 0), after.get(name, 0)) for name in names
            if after.get(name, 0) > before.get(name, 0)}


def ours(counts):
    return [name for name in counts if name.startswith("jupyter_mcp.") and name not in REQUEST_SCOPED]


async def test_closing_every_room_frees_their_documents_and_records(mcp_url, jp_token, mcp_ext, jp_root_dir,
                                                                  jp_base_url, http_server_port):
    """Every kind of call on three notebooks while two people type in two of them. Once every
    room is closed, none of their documents is alive (the websocket handler that served each
    person holds its room, and is itself held by the asyncio context of every task and timer
    started in its request), and jupyter-mcp's records of the rooms are gone."""
    base_url = f"http://127.0.0.1:{http_server_port[1]}{jp_base_url}"
    paths = notebooks(jp_root_dir, 3)
    earlier = census.count(mcp_ext)  # what servers of earlier tests in this process left, if any
    async with connect(mcp_url, jp_token) as client:
        await agent_works(client, paths, rounds=1)  # kernels started, everything imported
        await close_every_room(mcp_ext)
        before = await settled(mcp_ext, earlier, DOCUMENTS)
        await people_type_while_the_agent_works(base_url, jp_token, client, paths[:2], rounds=8)
        await close_every_room(mcp_ext)
        after = await settled(mcp_ext, before, DOCUMENTS)
    assert not grown(before, after, DOCUMENTS), f"alive after every room closed: {grown(before, after, DOCUMENTS)}"
    assert not grown(earlier, before, DOCUMENTS), "documents of this server alive with every room closed"
    assert not grown(before, after, TABLES)
    assert not grown(before, after, ours(after)), "jupyter-mcp objects left behind by the closed rooms"
    assert after["kernel clients"] == before["kernel clients"]  # the kernels run on, one client each


async def settled(mcp_ext, before, names):
    """The server's count once none of ``names`` is above ``before`` (or after 10 s, for the
    assertion to name what stayed)."""
    async def back():
        after = census.count(mcp_ext)
        return after if not grown(before, after, names) else None

    try:
        return await eventually(back, timeout=10, what=f"{', '.join(names)} back to their count before")
    except AssertionError:
        return census.count(mcp_ext)


@pytest.mark.parametrize("cleanup_delay", [1.0])
async def test_nothing_of_a_closed_room_outlives_the_cleanup_delay(mcp_url, jp_token, mcp_ext, jp_root_dir,
                                                                  jp_base_url, http_server_port):
    """What served a room a person was in (its websocket handler, jupyter-collaboration's
    cancelled cleanup timer) may hold the closed room's empty shell until that cleanup delay is
    over; nothing holds it after, not even the first room a tab opened on this server."""
    base_url = f"http://127.0.0.1:{http_server_port[1]}{jp_base_url}"
    paths = notebooks(jp_root_dir, 2)
    async with connect(mcp_url, jp_token) as client:
        await agent_works(client, paths, rounds=1)
        await close_every_room(mcp_ext)
        before = census.count(mcp_ext)
        await people_type_while_the_agent_works(base_url, jp_token, client, paths, rounds=2)
        await close_every_room(mcp_ext)
        await asyncio.sleep(2)  # the cleanup delay is over
        rooms = ("rooms", "room websocket handlers", "file loaders", "update stores", *DOCUMENTS)
        after = await settled(mcp_ext, before, rooms)
    assert not grown(before, after, rooms), f"still alive: {grown(before, after, rooms)}"


async def test_an_open_room_keeps_nothing_an_edit_or_a_run_deleted(mcp_url, jp_token, mcp_ext, jp_root_dir):
    """The server's copy of a document keeps no undo history: what an agent's edit replaced, and
    the outputs a new run cleared, are not kept in it (what a tab that opens the notebook
    downloads stays the size of the notebook)."""
    paths = notebooks(jp_root_dir, 1)
    async with connect(mcp_url, jp_token) as client:
        await call(client, "notebook_get", path=paths[0])
        for i in range(100):  # each a new 2 KB source, all of it different from the one it replaces
            source = "".join(f"value_{j} = {i} * {j}  # line {j}\n" for j in range(64))
            await call(client, "cell_update", path=paths[0], index=1, source=source)
            await call(client, "cell_execute", path=paths[0], index=2)
        nb = mcp_ext.rooms.find(paths[0])
        state = len(nb.room.ydoc.get_update())  # the whole document, as a tab syncing from nothing gets it
        content = len(str(nb.doc.ycells).encode())  # its cells, as JSON
    assert state < 4 * content + 4096, (f"the document's state is {state:,} bytes for {content:,} bytes of cells: "
                                        "it keeps what was deleted")
