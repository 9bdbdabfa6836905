"""Jupyter's authorizer decides every tool call, as it decides Jupyter's own REST calls.

A real server with real users (testing.identity.TwoUsers) and a real authorizer
(testing.identity.Restricted): bob may only read, carol may do anything but make sessions,
alice may do anything. What the REST API refuses a user, MCP refuses too, with an error
naming the permission, and nothing changes.
"""

from __future__ import annotations

import uuid
import warnings

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from jupyter_mcp.client import MODERN, Tasks, connect
from jupyter_mcp.testing import LiveServer, call, disk_sources, new_notebook, refused
from jupyter_mcp.testing.plugin import starts_process

pytestmark = pytest.mark.live

USERS = ["--ServerApp.identity_provider_class=jupyter_mcp.testing.identity.TwoUsers",
         "--ServerApp.authorizer_class=jupyter_mcp.testing.identity.Restricted"]


@pytest.fixture(scope="module")
@starts_process
def server(tmp_path_factory):
    live = LiveServer(tmp_path_factory.mktemp("permissions"), token="alice-token", args=USERS).start()
    yield live
    live.stop()


def rest(server, method, path, token, **kwargs):
    return httpx.request(method, server.url + path, headers={"Authorization": f"token {token}"}, timeout=60, **kwargs)


def sessions_of(server, name):
    return [s for s in rest(server, "GET", "api/sessions", "alice-token").json() if s["path"] == name]


def test_the_authorizer_is_real(server):
    """The premise: the REST API refuses bob writes, kernels and sessions, and carol sessions."""
    name, _ = new_notebook(server.root, "1")
    assert rest(server, "GET", f"api/contents/{name}", "bob-token").status_code == 200
    assert rest(server, "PUT", "api/contents/x.ipynb", "bob-token", json={"type": "notebook"}).status_code == 403
    assert rest(server, "POST", "api/kernels", "bob-token", json={}).status_code == 403
    assert rest(server, "POST", "api/sessions", "bob-token", json={"path": name, "type": "notebook"}).status_code == 403
    assert rest(server, "POST", "api/sessions", "carol-token", json={"path": name, "type": "notebook"}).status_code == 403


async def test_a_reader_reads_and_nothing_else(server):
    name, ids = new_notebook(server.root, "x = 1", "print(x)")
    before = (server.root / name).read_bytes()
    async with connect(server.mcp_url, "bob-token") as bob:
        assert name in [n["path"] for n in (await call(bob, "notebook_list"))["notebooks"]]
        assert [c["source"] for c in (await call(bob, "notebook_get", path=name))["cells"]] == ["x = 1", "print(x)"]
        assert (await call(bob, "cell_get", path=name, cell_id=ids[0]))["source"] == "x = 1"
        for tool, args in [("cell_update", {"cell_id": ids[0], "source": "x = 2"}),
                           ("cell_insert", {"source": "y = 3"}),
                           ("cell_delete", {"cell_id": ids[1]}),
                           ("cell_delete", {"cell_ids": ids}),
                           ("cell_insert_execute", {"source": "import os"})]:
            message = await refused(bob, tool, path=name, **args)
            assert "permission denied" in message and "write on contents" in message and "'bob'" in message
        created = f"new-{uuid.uuid4().hex[:6]}.ipynb"
        assert "write on contents" in await refused(bob, "notebook_create", path=created)
        assert not (server.root / created).exists()
        message = await refused(bob, "code_execute", path=name, code="import os; os.system('touch /tmp/pwned')")
        assert "execute on kernels" in message
        assert "execute on kernels" in await refused(bob, "cell_execute", path=name, cell_id=ids[0])
        assert [c["source"] for c in (await call(bob, "notebook_get", path=name))["cells"]] == ["x = 1", "print(x)"]
    assert sessions_of(server, name) == []  # no kernel was started for bob
    assert disk_sources(server.root / name) == ["x = 1", "print(x)"]
    assert (server.root / name).read_bytes() == before


async def test_a_refused_task_is_refused_before_any_task_exists(server):
    """Called as a task, a call the authorizer forbids is refused at once: no task is made."""
    name, ids = new_notebook(server.root, "print('never')")
    async with connect(server.mcp_url, "bob-token") as bob:
        tasks = Tasks(bob)
        raw = await tasks.request("tools/call", {"name": "cell_execute", "arguments": {"path": name, "cell_id": ids[0]},
                                                 "task": {}})
        assert "task" not in raw and raw["isError"] is True and "execute on kernels" in raw["content"][0]["text"]
        assert (await tasks.list())["tasks"] == []
    assert sessions_of(server, name) == []


async def test_running_code_needs_sessions_write_only_to_make_a_session(server):
    """carol may run code but not make sessions: refused on a notebook without a session,
    allowed once one exists (alice made it), as Jupyter's REST API would have it."""
    name, ids = new_notebook(server.root, "print('carol ran')")
    async with connect(server.mcp_url, "carol-token") as carol, connect(server.mcp_url, "alice-token") as alice:
        message = await refused(carol, "cell_execute", path=name, cell_id=ids[0])
        assert "write on sessions" in message and "'carol'" in message
        inserted = await refused(carol, "cell_insert_execute", path=name, source="print('new')")
        assert "write on sessions" in inserted
        assert [c["id"] for c in (await call(carol, "notebook_get", path=name))["cells"]] == ids  # no cell made
        assert sessions_of(server, name) == []
        assert (await call(alice, "code_execute", path=name, code="1 + 1"))["status"] == "ok"
        ran = await call(carol, "cell_execute", path=name, cell_id=ids[0])
        assert ran["status"] == "ok" and ran["outputs"][0]["text"] == "carol ran\n"
        edited = await call(carol, "cell_update", path=name, cell_id=ids[0], source="print('edited')")
        assert edited["source"] == "print('edited')"


async def test_an_unrestricted_user_does_everything(server):
    name, ids = new_notebook(server.root, "print('alice')")
    async with connect(server.mcp_url, "alice-token") as alice:
        assert (await call(alice, "cell_execute", path=name, cell_id=ids[0]))["outputs"][0]["text"] == "alice\n"
        await call(alice, "cell_insert", path=name, source="2")
        created = f"new-{uuid.uuid4().hex[:6]}.ipynb"
        await call(alice, "notebook_create", path=created)
        assert (server.root / created).exists()


async def test_kernel_tools_ask_what_jupyters_kernel_and_session_calls_ask(server):
    """bob (read only) lists kernels but may not interrupt, restart or change one; carol (no session
    writes) interrupts and restarts, but may not change a notebook's kernel: as the REST API says."""
    name, _ = new_notebook(server.root, "1")
    async with connect(server.mcp_url, "alice-token") as alice, connect(server.mcp_url, "bob-token") as bob, \
            connect(server.mcp_url, "carol-token") as carol:
        await call(alice, "code_execute", path=name, code="None", timeout=120)
        kernel_id = sessions_of(server, name)[0]["kernel"]["id"]
        assert rest(server, "POST", f"api/kernels/{kernel_id}/interrupt", "bob-token").status_code == 403
        assert rest(server, "POST", f"api/kernels/{kernel_id}/interrupt", "carol-token").status_code == 204
        listed = await call(bob, "kernel_list")
        assert [k["kernel_id"] for k in listed["kernels"] if name in k["notebooks"]] == [kernel_id]
        for tool in ("kernel_interrupt", "kernel_restart"):
            assert "write on kernels" in await refused(bob, tool, path=name)
        assert "write on contents" in await refused(bob, "kernel_select", path=name, kernel_name="python3")
        await call(carol, "kernel_interrupt", path=name)
        await call(carol, "kernel_restart", path=name)
        message = await refused(carol, "kernel_select", path=name, kernel_name="python3")
        assert "write on sessions" in message and "'carol'" in message
        assert sessions_of(server, name)[0]["kernel"]["id"] == kernel_id  # nothing changed the kernel


async def test_listing_the_workspace_needs_read_on_contents(server):
    """bob (a reader) lists the files and notebooks; dave (who may reach /mcp and nothing else)
    is refused both, each naming the permission."""
    name, _ = new_notebook(server.root, "1")
    async with connect(server.mcp_url, "bob-token") as bob:
        assert name in [e["path"] for e in (await call(bob, "file_list"))["entries"]]
    async with connect(server.mcp_url, "dave-token") as dave:
        for tool in ("file_list", "notebook_list"):
            message = await refused(dave, tool)
            assert "read on contents" in message and "'dave'" in message, message


async def test_notebook_resources_need_read_on_contents(server):
    """Listing, reading and subscribing to the notebook resources (and citing cells, which embeds
    them) is reading contents: bob (a reader) may, dave (who may reach /mcp and nothing else) is
    refused each, on both eras."""
    name, ids = new_notebook(server.root, "1")
    resource = f"notebook://{name}"
    async with connect(server.mcp_url, "bob-token") as bob:
        assert resource in [str(r.uri) for r in (await bob.list_resources()).resources]
        assert '"nbformat": 4' in (await bob.read_resource(resource)).contents[0].text
    async with connect(server.mcp_url, "dave-token") as dave, \
            connect(server.mcp_url, "dave-token", mode=MODERN) as dave_modern:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the SDK marks resources/subscribe deprecated
            attempts = [dave.list_resources(), dave.list_resource_templates(), dave.read_resource(resource),
                        dave.read_resource(f"{resource}/cells/{ids[0]}"), dave.subscribe_resource(resource),
                        dave_modern.read_resource(resource),
                        dave.get_prompt("notebook_cite", {"path": name, "cells": "0"})]
            for attempt in attempts:
                with pytest.raises(MCPError) as refused_:
                    await attempt
                assert "read on contents" in refused_.value.error.message and "'dave'" in refused_.value.error.message
        with pytest.raises(MCPError) as refused_:
            async with dave_modern.listen(resource_subscriptions=[resource]):
                pass
        assert "read on contents" in refused_.value.error.message
