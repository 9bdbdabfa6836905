"""The agent is a collaborator: while it works on a notebook the room's awareness holds a
user for it (a name that says it is an agent, a colour of its own), refreshed while it is
active and dropped after it goes idle; notebook_list_users marks it, and names the cell each
person's cursor is in (keeping nothing alive after it answers)."""

from __future__ import annotations

import asyncio
import gc
import uuid

import pytest
from mcp_types import Implementation
from pycrdt import Doc, create_awareness_message

from jupyter_mcp.client import connect
from jupyter_mcp.notebooks.presence import preferred_colour
from jupyter_mcp.testing import UIClient, call, eventually, write_notebook

pytestmark = pytest.mark.live


def agent_named(client_name):
    return f"jupyter agent ({client_name})"


async def test_agent_appears_to_the_person_and_in_list_users(live, mode):
    name = f"presence-{uuid.uuid4().hex[:6]}.ipynb"
    ids = write_notebook(live.root / name, ["x = 1"])
    async with UIClient(live.url, live.token, name, name="Grace Hopper") as ui, \
            connect(live.mcp_url, live.token, mode=mode, client_info=Implementation(name="claude-test", version="1")) as mcp:
        await call(mcp, "cell_update", path=name, cell_id=ids[0], source="x = 2")
        await ui.wait_for(lambda: any(u["name"] == agent_named("claude-test") for u in ui.others()))
        agent = next(u for u in ui.others() if u["name"] == agent_named("claude-test"))
        assert agent["is_agent"] is True and agent["color"].startswith("#") and agent["initials"]
        users = (await call(mcp, "notebook_list_users", path=name))["users"]
        marks = {u["display_name"]: u["is_agent"] for u in users}
        assert marks == {"Grace Hopper": False, agent_named("claude-test"): True}


async def test_two_agents_have_their_own_entries_and_colours(live):
    """Two agents whose names prefer the same colour still get colours of their own."""
    first = "alpha-agent"
    second = next(f"agent-{i}" for i in range(1000) if preferred_colour(f"agent-{i}") == preferred_colour(first))
    name = f"presence-{uuid.uuid4().hex[:6]}.ipynb"
    write_notebook(live.root / name, ["x = 1"])
    async with UIClient(live.url, live.token, name) as ui, \
            connect(live.mcp_url, live.token, client_info=Implementation(name=first, version="1")) as a, \
            connect(live.mcp_url, live.token, client_info=Implementation(name=second, version="1")) as b:
        await call(a, "notebook_get", path=name)
        await call(b, "notebook_get", path=name)
        await ui.wait_for(lambda: {agent_named(first), agent_named(second)} <= {u["name"] for u in ui.others()})
        colours = {u["name"]: u["color"] for u in ui.others() if u.get("is_agent")}
        assert colours[agent_named(first)] != colours[agent_named(second)]


async def test_agent_is_dropped_after_it_goes_idle_and_kept_while_running(live_factory):
    server = live_factory(args=["--JupyterMCPApp.agent_idle_timeout=2"])
    name = f"presence-{uuid.uuid4().hex[:6]}.ipynb"
    ids = write_notebook(server.root / name, ["import time\ntime.sleep(6)\nprint('done')"])
    async with UIClient(server.url, server.token, name) as ui, \
            connect(server.mcp_url, server.token, client_info=Implementation(name="busy-agent", version="1")) as mcp:
        running = asyncio.create_task(call(mcp, "cell_execute", path=name, cell_id=ids[0]))
        await ui.wait_for(lambda: any(u.get("is_agent") for u in ui.others()))
        await asyncio.sleep(4)  # idle time has passed, but its cell is still running
        assert any(u.get("is_agent") for u in ui.others())
        assert (await running)["status"] == "ok"
        await ui.wait_for(lambda: not any(u.get("is_agent") for u in ui.others()), timeout=20)
        users = (await call(mcp, "notebook_list_users", path=name))["users"]
        assert [u["is_agent"] for u in users] == [False]


async def test_an_agents_name_is_bounded_before_it_reaches_anyone(live):
    """A client's name goes into every collaborator's awareness: a huge one (or one with
    control characters) is cut to a short printable name, not sent to every browser."""
    name = f"presence-{uuid.uuid4().hex[:6]}.ipynb"
    write_notebook(live.root / name, ["x = 1"])
    huge = "evil\x1b[2J" + "A" * 500_000
    async with UIClient(live.url, live.token, name) as ui, \
            connect(live.mcp_url, live.token, client_info=Implementation(name=huge, version="1")) as mcp:
        await call(mcp, "notebook_get", path=name)
        await ui.wait_for(lambda: any(u.get("is_agent") for u in ui.others()))
        shown = next(u for u in ui.others() if u.get("is_agent"))
        assert len(shown["name"]) < 100 and shown["name"].startswith("jupyter agent (evil[2JAAA")
        assert "\x1b" not in shown["name"]
        listed = (await call(mcp, "notebook_list_users", path=name))["users"]
        assert all(len(u["display_name"]) < 100 for u in listed)


async def test_list_users_names_the_cell_each_persons_cursor_is_in(live):
    """The cell a person is on, as their shared cursor says: it follows them to another cell and
    survives the agent's edit of that cell; a cursor in a cell since deleted names none."""
    name = f"presence-{uuid.uuid4().hex[:6]}.ipynb"
    ids = write_notebook(live.root / name, ["x = 1", "y = 2", "z = 3"])
    async with UIClient(live.url, live.token, name, name="Grace Hopper") as grace, \
            UIClient(live.url, live.token, name, name="Alan Turing") as alan, \
            connect(live.mcp_url, live.token) as mcp:
        async def cells_of_people() -> dict:
            users = (await call(mcp, "notebook_list_users", path=name))["users"]
            return {u["display_name"]: u.get("cell_id") for u in users if not u["is_agent"]}

        async def until(wanted: dict) -> None:
            for _ in range(200):
                if await cells_of_people() == wanted:
                    return
                await asyncio.sleep(0.05)
            assert await cells_of_people() == wanted

        await until({"Grace Hopper": None, "Alan Turing": None})  # nobody has put a cursor anywhere
        await grace.put_cursor(1, 2)
        await alan.put_cursor(2, 0)
        await until({"Grace Hopper": ids[1], "Alan Turing": ids[2]})
        await call(mcp, "cell_update", path=name, cell_id=ids[1], source="y = 'rewritten by the agent'")
        await grace.put_cursor(0, 1)
        await until({"Grace Hopper": ids[0], "Alan Turing": ids[2]})
        await call(mcp, "cell_delete", path=name, cell_id=ids[2])
        await until({"Grace Hopper": ids[0], "Alan Turing": None})


async def test_list_users_keeps_no_copy_of_the_document_alive(mcp_url, jp_token, jp_root_dir):
    """In the server's own process: a person shares a real caret, a stranger one the document
    does not know; every notebook_list_users names the person's cell (and none for the
    stranger), and afterwards as many pycrdt Docs are alive in the process as before the calls."""
    name = "carets.ipynb"
    ids = write_notebook(jp_root_dir / name, [f"x_{i} = {i}" for i in range(30)])
    base = mcp_url.removesuffix("mcp")
    async with UIClient(base, jp_token, name, name="Grace Hopper") as grace, \
            UIClient(base, jp_token, name, name="Stranger") as stranger, connect(mcp_url, jp_token) as mcp:
        await grace.put_cursor(17, 2)
        unknown = {"type": None, "tname": None, "item": {"client": 12345, "clock": 99}, "assoc": 0}
        stranger.awareness.set_local_state({**stranger.awareness.get_local_state(),
                                            "cursors": [{"anchor": unknown, "head": unknown, "primary": True}]})
        await stranger.channel.send(create_awareness_message(
            stranger.awareness.encode_awareness_update([stranger.doc.client_id])))

        async def cells_of_people() -> dict:
            users = (await call(mcp, "notebook_list_users", path=name))["users"]
            return {u["display_name"]: u["cell_id"] for u in users if not u["is_agent"]}

        wanted = {"Grace Hopper": ids[17], "Stranger": None}

        async def seen() -> bool:
            return await cells_of_people() == wanted

        await eventually(seen, what="both carets seen")
        gc.collect()
        before = sum(isinstance(o, Doc) for o in gc.get_objects())
        for _ in range(20):
            assert await cells_of_people() == wanted
        gc.collect()
        assert sum(isinstance(o, Doc) for o in gc.get_objects()) == before
