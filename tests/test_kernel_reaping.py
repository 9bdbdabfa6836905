"""Kernels MCP started are stopped when nobody uses them, and capped (issue 12, finding 15):
against real `jupyter lab` processes, checked through Jupyter's REST API as a person's
JupyterLab would see it; and the decision itself, as a pure function."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from jupyter_mcp.client import connect
from jupyter_mcp.kernels.reaping import stoppable
from jupyter_mcp.testing import LiveServer, call, new_notebook, refused, ui_session
from jupyter_mcp.testing.plugin import starts_process

IDLE = 2.0  # kernel_idle_timeout of the reaping server, seconds
SWEEP = 0.25


@pytest.fixture(scope="module")
@starts_process
def reaping(tmp_path_factory):
    """One server that stops MCP's kernels after IDLE seconds unused, checking every SWEEP."""
    server = LiveServer(tmp_path_factory.mktemp("reaping"), args=[
        f"--JupyterMCPApp.kernel_idle_timeout={IDLE}", f"--JupyterMCPApp.room_sweep_interval={SWEEP}"]).start()
    yield server
    server.stop()


async def rest(live: LiveServer, what: str) -> list[dict]:
    async with httpx.AsyncClient(headers=live.headers) as http:
        response = await http.get(live.url + f"api/{what}")
        response.raise_for_status()
        return response.json()


async def session_of(live: LiveServer, path: str) -> dict | None:
    return next((s for s in await rest(live, "sessions") if s["path"] == path), None)


async def kernel_ids(live: LiveServer) -> set[str]:
    return {k["id"] for k in await rest(live, "kernels")}


async def until_stopped(live: LiveServer, path: str, kernel_id: str, within: float) -> None:
    deadline = time.monotonic() + within
    while await session_of(live, path) is not None or kernel_id in await kernel_ids(live):
        assert time.monotonic() < deadline, f"the idle kernel of {path} was never stopped"
        await asyncio.sleep(0.1)


async def mcp_kernel(live: LiveServer, mcp, path: str) -> str:
    """Run a cell of ``path`` (MCP makes its session); the kernel id."""
    await call(mcp, "code_execute", path=path, code="x = 1")
    session = await session_of(live, path)
    assert session is not None
    return session["kernel"]["id"]


@pytest.mark.unit
def test_the_decision():
    idle = dict(connections=0, state="idle", running=False, idle_seconds=10.0, timeout=5.0)
    assert stoppable(**idle)
    assert not stoppable(**{**idle, "connections": 1})  # a JupyterLab tab is connected
    assert not stoppable(**{**idle, "state": "busy"})  # a person's cell runs
    assert not stoppable(**{**idle, "state": "starting"})
    assert not stoppable(**{**idle, "running": True})  # an MCP run holds it
    assert not stoppable(**{**idle, "idle_seconds": 4.9})
    assert not stoppable(**{**idle, "timeout": 0})  # 0: never


@pytest.mark.live
async def test_an_idle_mcp_kernel_is_stopped_with_its_session_then_runs_again(reaping):
    name, _ = new_notebook(reaping.root, "x = 1", prefix="reap")
    async with connect(reaping.mcp_url, reaping.token) as mcp:
        kernel_id = await mcp_kernel(reaping, mcp, name)
        await until_stopped(reaping, name, kernel_id, within=IDLE + 10)
        assert f"stopped the kernel MCP started for {name}" in reaping.log()
        again = await call(mcp, "code_execute", path=name, code="print('x' in dir())")
        assert again["status"] == "ok" and again["outputs"][0]["text"] == "False\n"  # a fresh kernel
        fresh = await session_of(reaping, name)
        assert fresh is not None and fresh["kernel"]["id"] != kernel_id


@pytest.mark.live
async def test_a_kernel_a_tab_is_connected_to_is_not_stopped(reaping):
    name, _ = new_notebook(reaping.root, "x = 1", prefix="tab")
    async with connect(reaping.mcp_url, reaping.token) as mcp:
        kernel_id = await mcp_kernel(reaping, mcp, name)
        url = reaping.url.replace("http://", "ws://") + f"api/kernels/{kernel_id}/channels?session_id={uuid.uuid4()}"
        ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {reaping.token}"}))
        try:
            await asyncio.sleep(IDLE + 6 * SWEEP)
            kernels = {k["id"]: k for k in await rest(reaping, "kernels")}
            assert kernels[kernel_id]["connections"] >= 1
            assert (await session_of(reaping, name))["kernel"]["id"] == kernel_id
        finally:
            ws.close()
        await until_stopped(reaping, name, kernel_id, within=IDLE + 10)  # the tab closed: now it goes


@pytest.mark.live
async def test_a_kernel_mcp_did_not_start_is_not_stopped(reaping):
    outside, _ = new_notebook(reaping.root, "x = 1", prefix="outside")
    ours, _ = new_notebook(reaping.root, "x = 1", prefix="ours")
    session = await ui_session(reaping.url, reaping.token, outside)  # POST /api/sessions, as JupyterLab does
    async with connect(reaping.mcp_url, reaping.token) as mcp:
        await call(mcp, "code_execute", path=outside, code="y = 2")  # MCP used it, then left it idle
        our_kernel = await mcp_kernel(reaping, mcp, ours)
        await until_stopped(reaping, ours, our_kernel, within=IDLE + 10)
        await asyncio.sleep(4 * SWEEP)
        assert (await session_of(reaping, outside))["kernel"]["id"] == session["kernel"]["id"]
        assert session["kernel"]["id"] in await kernel_ids(reaping)
        kept = await call(mcp, "code_execute", path=outside, code="print(y)")
        assert kept["outputs"][0]["text"] == "2\n"  # the same kernel, its variables kept


@pytest.mark.live
async def test_max_kernels_refuses_one_more_and_starts_nothing(live_factory):
    live = live_factory(args=["--JupyterMCPApp.max_kernels=1", "--JupyterMCPApp.kernel_idle_timeout=0"])
    first, _ = new_notebook(live.root, "x = 1", prefix="first")
    second, ids = new_notebook(live.root, "x = 2", prefix="second")
    outside, _ = new_notebook(live.root, "x = 3", prefix="outside")
    async with connect(live.mcp_url, live.token) as mcp:
        await mcp_kernel(live, mcp, first)
        before = await kernel_ids(live)
        message = await refused(mcp, "cell_execute", path=second, cell_id=ids[0])
        assert "JupyterMCPApp.max_kernels" in message and "= 1" in message and first in message
        assert "Nothing was started" in message
        assert await refused(mcp, "code_execute", path=second, code="1")
        assert await session_of(live, second) is None and await kernel_ids(live) == before
        assert (await call(mcp, "notebook_get", path=second))["cells"][0].get("execution_count") is None
        ran = await call(mcp, "code_execute", path=first, code="print(x)")
        assert ran["outputs"][0]["text"] == "1\n"
        await ui_session(live.url, live.token, outside)  # a notebook with a kernel is never refused
        assert (await call(mcp, "code_execute", path=outside, code="print(7)"))["outputs"][0]["text"] == "7\n"
