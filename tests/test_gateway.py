"""Remote kernels: a `jupyter lab` whose kernels run on a real Jupyter Kernel Gateway that
checks an auth token (``--GatewayClient.url``, ``--GatewayClient.auth_token``), as under JupyterHub with Kernel or Enterprise Gateway. Runs, outputs
live in the document and on disk, timeouts, a task's cancel, an idle kernel stopped, and the
gateway going away mid-run and coming back: each through the real MCP SDK client over HTTP."""

from __future__ import annotations

import asyncio
import signal
import time

import httpx
import pytest
from mcp_types import ElicitResult

from jupyter_mcp.client import Tasks, connect
from jupyter_mcp.testing import LiveServer, UIClient, call, failed_run, new_notebook, refused, saved_notebook
from jupyter_mcp.testing.gateway import KernelGateway
from jupyter_mcp.testing.plugin import starts_process

pytestmark = pytest.mark.live

FIVE_LINES = "import time\nfor i in range(5):\n    print(f'line {i}', flush=True)\n    time.sleep(0.3)"
TICKER = "import time\nfor i in range(1000):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.2)"


@pytest.fixture(scope="module")
@starts_process
def gateway(tmp_path_factory):
    gw = KernelGateway(tmp_path_factory.mktemp("gateway")).start()
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
@starts_process
def server(gateway, tmp_path_factory):
    live = LiveServer(tmp_path_factory.mktemp("gw-server"), args=gateway.args).start()
    yield live
    live.stop()


def stdout_of(ycell) -> str:
    return "".join(str(o.get("text", "")) for o in ycell["outputs"].to_py() if o.get("output_type") == "stream")


async def test_a_cell_runs_on_the_gateway_live_in_the_document_and_on_disk(gateway, server):
    name, ids = new_notebook(server.root, FIVE_LINES, "import os\nos.getppid()", prefix="gw")
    async with connect(server.mcp_url, server.token) as mcp, UIClient(server.url, server.token, name) as ui:
        seen: list[str] = []
        ui.nb.ycells.observe_deep(lambda _events: seen.append(stdout_of(ui.nb.ycells[0])))
        result = await call(mcp, "cell_execute", path=name, cell_id=ids[0])
        assert result["status"] == "ok"
        for k in range(1, 5):  # each line reached the person's document while the cell still ran
            assert "".join(f"line {i}\n" for i in range(k)) in seen
        parent = await call(mcp, "cell_execute", path=name, cell_id=ids[1])
        assert parent["outputs"][0]["text"] == str(gateway.proc.pid)  # a child of the gateway
        session = [s for s in await sessions(server) if s["path"] == name][0]
        assert session["kernel"]["id"] in gateway.kernel_ids()
    await saved_notebook(  # the room's autosave writes the outputs
        server.root / name, lambda nb: "".join(nb["cells"][0]["outputs"][0]["text"] if nb["cells"][0]["outputs"] else "")
        == "".join(f"line {i}\n" for i in range(5)), timeout=30, what="the five lines in the first cell's outputs")


async def test_a_timeout_interrupts_the_gateway_kernel_and_keeps_its_state(server):
    name, _ = new_notebook(server.root, "x = 1", prefix="gw-timeout")
    async with connect(server.mcp_url, server.token) as mcp:
        result, _ = await failed_run(mcp, "code_execute", path=name, code=TICKER, timeout=3)
        assert result["status"] == "timeout" and "interrupted" in result["message"]
        assert result["outputs"][0]["text"].startswith("tick 0\n")
        first = await call(mcp, "code_execute", path=name, code="print(i)")
        await asyncio.sleep(0.6)
        second = await call(mcp, "code_execute", path=name, code="print(i)")
        assert first["outputs"][0]["text"] == second["outputs"][0]["text"]  # interrupted, not restarted


async def test_a_task_cancel_interrupts_the_gateway_kernel(server):
    name, ids = new_notebook(server.root, TICKER, prefix="gw-cancel")
    async with connect(server.mcp_url, server.token) as mcp:
        tasks = Tasks(mcp)
        await call(mcp, "code_execute", path=name, code="None", timeout=120)  # the kernel is up
        task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        await asyncio.sleep(2.0)
        assert (await tasks.cancel(task["taskId"]))["status"] == "cancelled"
        kept = await tasks.result(task["taskId"])
        lines = [ln for c in kept["content"] if c["type"] == "text" for ln in c["text"].splitlines()
                 if ln.startswith("tick ")]
        assert len(lines) >= 3 and lines == [f"tick {i}" for i in range(len(lines))], "|".join(lines)
        first = await call(mcp, "code_execute", path=name, code="print(i)", timeout=20)
        await asyncio.sleep(0.6)
        second = await call(mcp, "code_execute", path=name, code="print(i)", timeout=20)
        assert first["outputs"][0]["text"] == second["outputs"][0]["text"]  # the loop really stopped


async def test_input_on_the_gateway_kernel_asks_the_client(server):
    """The gateway kernel's input_request arrives on its stdin channel (over the gateway's websocket)
    and the client's answer goes back the same way."""
    name, ids = new_notebook(server.root, "name = input('Your name: ')\nprint('hello', name)", prefix="gw-input")

    async def answer(context, params) -> ElicitResult:
        return ElicitResult(action="accept", content={"value": "Ada"})

    async with connect(server.mcp_url, server.token, elicitation_callback=answer) as mcp:
        result = await call(mcp, "cell_execute", path=name, cell_id=ids[0], timeout=60)
        assert result["status"] == "ok" and result["outputs"][0]["text"] == "Your name: Ada\nhello Ada\n"


async def test_an_idle_kernel_mcp_started_on_the_gateway_is_stopped(gateway, live_factory):
    """The idle stop asks the gateway who is connected (it counts MCP's own websocket too)."""
    live = live_factory(args=[*gateway.args, "--JupyterMCPApp.kernel_idle_timeout=3",
                              "--JupyterMCPApp.room_sweep_interval=1"])
    name, _ = new_notebook(live.root, "x = 1", prefix="gw-idle")
    async with connect(live.mcp_url, live.token) as mcp:
        await call(mcp, "code_execute", path=name, code="x = 2", timeout=120)
        kernel_id = [s for s in await sessions(live) if s["path"] == name][0]["kernel"]["id"]
        assert kernel_id in gateway.kernel_ids()
        deadline = time.monotonic() + 40
        while kernel_id in gateway.kernel_ids():
            assert time.monotonic() < deadline, live.log()[-3000:]
            await asyncio.sleep(0.5)
        assert f"stopped the kernel MCP started for {name}" in live.log()
        again = await call(mcp, "code_execute", path=name, code="print('x' in dir())", timeout=120)
        assert again["outputs"][0]["text"] == "False\n"  # a fresh kernel on the gateway


@pytest.fixture
@starts_process
def own_gateway(tmp_path):
    """A gateway of the test's own, stopped after the servers using it (live_factory's)."""
    gw = KernelGateway(tmp_path / "own-gateway").start()
    yield gw
    gw.stop()


async def test_the_gateway_going_away_mid_run_is_a_clear_error(own_gateway, live_factory):
    gateway = own_gateway
    live = live_factory(args=gateway.args)
    name, ids = new_notebook(live.root, TICKER, prefix="gw-gone")
    async with connect(live.mcp_url, live.token) as mcp:
        running = asyncio.ensure_future(mcp.call_tool("cell_execute", {"path": name, "cell_id": ids[0]}))
        deadline = time.monotonic() + 60
        while "tick 3" not in "".join(o.get("text", "") for o in (
                await call(mcp, "cell_get", path=name, cell_id=ids[0]))["outputs"]):
            assert time.monotonic() < deadline and not running.done(), live.log()[-3000:]
            await asyncio.sleep(0.3)
        gateway.proc.send_signal(signal.SIGKILL)
        gateway.proc.wait()
        result = await asyncio.wait_for(running, 60)
        assert result.is_error
        assert "gateway closed while this code ran; outputs so far are kept" in result.content[0].text
        kept = (await call(mcp, "cell_get", path=name, cell_id=ids[0]))["outputs"]
        assert "tick 0\ntick 1\ntick 2\ntick 3\n" in "".join(o.get("text", "") for o in kept)
        down = await refused(mcp, "code_execute", path=name, code="print('down')", timeout=10)
        assert "gateway does not answer" in down and "Check to be sure the Gateway instance is running" in down
        gateway.start()  # on the same port, without the kernel it had
        gone = await refused(mcp, "code_execute", path=name, code="print('gone')", timeout=30)
        assert "gone from its gateway" in gone and "this code was not run" in gone
        back = await call(mcp, "code_execute", path=name, code="print('back')", timeout=120)
        assert back["outputs"][0]["text"] == "back\n"  # a fresh kernel on the gateway


async def sessions(live) -> list[dict]:
    async with httpx.AsyncClient() as http:
        r = await http.get(live.url + "api/sessions", headers=live.headers)
        return r.json()


async def test_kernel_tools_manage_the_gateway_kernel(gateway, server):
    """kernel_list shows the gateway's kernelspecs and kernels, kernel_restart ends the agent's run on
    the gateway kernel at once (the same kernel, its variables gone), kernel_interrupt stops a run."""
    name, ids = new_notebook(server.root, "kept = 1", TICKER, TICKER.replace("tick", "tock"), prefix="gw-kernel")
    async with connect(server.mcp_url, server.token) as mcp, connect(server.mcp_url, server.token) as other, \
            UIClient(server.url, server.token, name) as ui:
        await call(mcp, "cell_execute", path=name, cell_id=ids[0], timeout=120)
        listed = await call(mcp, "kernel_list")
        assert "python3" in {s["name"] for s in listed["kernelspecs"]}
        mine = [k for k in listed["kernels"] if name in k["notebooks"]]
        assert len(mine) == 1 and mine[0]["kernel_id"] in gateway.kernel_ids()
        run = asyncio.create_task(mcp.call_tool("cell_execute", {"path": name, "cell_id": ids[1], "timeout": 300}))
        await ui.wait_for(lambda: "tick 3" in stdout_of(ui.nb.ycells[1]), timeout=60)
        await call(other, "kernel_interrupt", path=name)
        interrupted = await asyncio.wait_for(run, 30)
        assert interrupted.is_error and interrupted.structured_content["status"] == "interrupted"
        run = asyncio.create_task(mcp.call_tool("cell_execute", {"path": name, "cell_id": ids[2], "timeout": 300}))
        await ui.wait_for(lambda: "tock 3" in stdout_of(ui.nb.ycells[2]), timeout=60)
        assert (await call(other, "kernel_restart", path=name))["kernel_id"] == mine[0]["kernel_id"]
        restarted = await asyncio.wait_for(run, 30)
        assert restarted.is_error and "kernel was restarted" in restarted.content[0].text
        gone, _ = await failed_run(mcp, "code_execute", path=name, code="kept")
        assert gone["outputs"][0]["ename"] == "NameError"
