"""Faults, each a test: a kernel killed from outside mid-run, a client that disconnects
mid-call, a room deleted under a running execution, Redis restarting under the task
store. (SIGTERM with pending edits: test_notebooks.test_shutdown_flushes_every_touched_room.)"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid

import httpx
import nbformat
import pytest
from mcp.shared.exceptions import MCPError

from jupyter_mcp.client import Tasks, connect
from jupyter_mcp.testing import UIClient, call, refused, saved_notebook, write_notebook

pytestmark = pytest.mark.live

TICKS = "import time\nfor i in range({n}):\n    print(f'tick {{i}}', flush=True)\n    time.sleep({every})"


def stdout_of(ycell) -> str:
    return "".join(str(o.get("text", "")) for o in ycell["outputs"].to_py() if o.get("output_type") == "stream")


def kernel_pid(kernel_id: str) -> int:
    """The kernel process, found as an operator would: by its connection file on the command line."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if f"kernel-{kernel_id}.json" in cmdline and "ipykernel" in cmdline:
            return int(pid)
    raise LookupError(kernel_id)


async def test_kernel_killed_from_outside_mid_run(live):
    name = f"fault-{uuid.uuid4().hex[:6]}.ipynb"
    ids = write_notebook(live.root / name, [TICKS.format(n=100, every=0.2), "print('fresh kernel')"])
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        run = asyncio.create_task(mcp.call_tool("cell_execute", {"path": name, "cell_id": ids[0], "timeout": 120}))
        await ui.wait_for(lambda: "tick 3" in stdout_of(ui.nb.ycells[0]))
        sessions = httpx.get(live.url + "api/sessions", headers=live.headers).json()
        kernel_id = next(s["kernel"]["id"] for s in sessions if s["path"] == name)
        os.kill(kernel_pid(kernel_id), signal.SIGKILL)
        result = await asyncio.wait_for(run, 60)
        assert result.is_error and "kernel died" in result.content[0].text
        kept = stdout_of(ui.nb.ycells[0])
        assert kept.startswith("tick 0\ntick 1\ntick 2\ntick 3\n")  # partial outputs kept in the document
        # the answer and the document's last update travel on two connections: wait for the update
        await ui.wait_for(lambda: ui.nb.ycells[0].get("execution_state") == "idle")
        again = await call(mcp, "cell_execute", path=name, cell_id=ids[1], timeout=120)
        assert again["status"] == "ok" and again["outputs"][0]["text"] == "fresh kernel\n"


async def test_client_disconnecting_mid_call_does_not_lose_the_run(live):
    """The execution finishes and its outputs still land in the document."""
    name = f"fault-{uuid.uuid4().hex[:6]}.ipynb"
    ids = write_notebook(live.root / name, [TICKS.format(n=8, every=0.25)])
    headers = {**live.headers, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with UIClient(live.url, live.token, name) as ui:
        async with httpx.AsyncClient(timeout=30) as http:
            init = await http.post(live.mcp_url, headers=headers, json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "leaver", "version": "1"}}})
            session = {**headers, "mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            await http.post(live.mcp_url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            async with http.stream("POST", live.mcp_url, headers=session, json={
                    "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "cell_execute", "arguments": {"path": name, "cell_id": ids[0]}}}):
                await ui.wait_for(lambda: "tick 1" in stdout_of(ui.nb.ycells[0]))
            # the connection is gone (the stream and the client are closed)
        await ui.wait_for(lambda: ui.nb.ycells[0].get("execution_state") == "idle", timeout=30)
        assert stdout_of(ui.nb.ycells[0]) == "".join(f"tick {i}\n" for i in range(8))
        assert isinstance(ui.nb.ycells[0].get("execution_count"), (int, float))
    # the room saves after its debounce; a save may be under way (Jupyter writes the file in place)
    cells = (await saved_notebook(live.root / name, lambda nb: nb["cells"][0]["outputs"], timeout=5,
                                  what="the run's outputs"))["cells"]
    assert "".join(cells[0]["outputs"][0]["text"]).count("tick") == 8


async def test_room_deleted_under_a_running_execution(mcp_url, jp_token, mcp_ext, jp_root_dir):
    """Outputs still land, in the re-created room (in-process server: the test reaches
    into jupyter-server-ydoc to delete the room, as its own cleanup would)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(TICKS.format(n=10, every=0.3))])
    nbformat.write(nb, jp_root_dir / "deleted.ipynb")
    try:
        async with connect(mcp_url, jp_token) as mcp:
            first = await call(mcp, "notebook_get", path="deleted.ipynb")
            room_id = first["room_id"]
            run = asyncio.create_task(call(mcp, "cell_execute", path="deleted.ipynb", index=0, timeout=120))
            server = mcp_ext.rooms.ydoc.ywebsocket_server
            for _ in range(100):
                room = server.rooms.get(room_id)
                outputs = room._document.ycells[0]["outputs"].to_py() if room else []
                if outputs and "tick 2" in str(outputs):
                    break
                await asyncio.sleep(0.05)
            old_room = server.rooms[room_id]
            await server.delete_room(name=room_id)
            result = await asyncio.wait_for(run, 60)
            assert result["status"] == "ok"
            new_room = server.rooms[room_id]
            assert new_room is not old_room
            text = stdout_of(new_room._document.ycells[0])
            assert text == "".join(f"tick {i}\n" for i in range(10))  # earlier lines too: rebuilt, then appended
            assert new_room._document.ycells[0]["execution_count"] == result["execution_count"]
    finally:
        for kernel_id in list(mcp_ext.serverapp.kernel_manager.list_kernel_ids()):
            await mcp_ext.serverapp.kernel_manager.shutdown_kernel(kernel_id, now=True)


async def test_redis_restart_under_the_task_store(live_factory, tmp_path):
    """Clear errors while Redis is down, recovery after."""
    from jupyter_mcp.testing import RedisServer

    redis = RedisServer(tmp_path).start()
    try:
        server = live_factory(args=["--JupyterMCPApp.task_store_class=jupyter_mcp.tasks.redis_store:RedisTaskStore",
                                    f"--JupyterMCPApp.task_store_options=url={redis.url}"])
        async with connect(server.mcp_url, server.token) as client:
            tasks = Tasks(client)
            before = await tasks.submit("notebook_list", {})
            await tasks.wait(before["taskId"], timeout=30)
            redis.stop()
            with pytest.raises(MCPError) as down:
                await tasks.get(before["taskId"])
            assert "task store is unavailable" in down.value.error.message
            with pytest.raises(MCPError) as down:
                await tasks.submit("notebook_list", {})
            assert "task store is unavailable" in down.value.error.message
            plain = await client.call_tool("notebook_list", {})  # everything that is not a task still works
            assert plain.is_error is False
            redis.start()
            deadline = time.monotonic() + 30
            while True:
                try:
                    after = await tasks.submit("notebook_list", {})
                    break
                except MCPError:
                    assert time.monotonic() < deadline, "the task store did not recover"
                    await asyncio.sleep(0.5)
            assert (await tasks.wait(after["taskId"], timeout=30))["status"] == "completed"
            assert (await tasks.result(after["taskId"]))["isError"] is False
        assert " 500 " not in server.log()
    finally:
        redis.stop()


async def test_refused_path_on_a_dead_room_does_not_hang(live):
    """A notebook deleted from disk while nobody has it open: a clear error, at once."""
    name = f"fault-{uuid.uuid4().hex[:6]}.ipynb"
    write_notebook(live.root / name, ["x = 1"])
    (live.root / name).unlink()
    async with connect(live.mcp_url, live.token) as mcp:
        started = time.monotonic()
        assert "no notebook at" in await refused(mcp, "notebook_get", path=name)
        assert time.monotonic() - started < 10


async def test_kernels_shut_down_from_the_ui_leave_nothing_open_in_the_server(live_factory):
    """A person shuts the kernel down (or a culler does) after the agent ran cells in it: the
    server must not keep that kernel's client (its sockets and threads) for ever."""
    server = live_factory()
    ids = write_notebook(server.root / "k.ipynb", ["1+1"])

    def open_in_server() -> tuple[int, int]:
        pid = server.proc.pid
        return len(os.listdir(f"/proc/{pid}/task")), len(os.listdir(f"/proc/{pid}/fd"))

    seen = []
    async with connect(server.mcp_url, server.token) as mcp:
        for _ in range(6):
            result = await call(mcp, "cell_execute", path="k.ipynb", cell_id=ids[0], timeout=120)
            assert result["status"] == "ok"
            for session in httpx.get(server.url + "api/sessions", headers=server.headers).json():
                httpx.delete(server.url + f"api/sessions/{session['id']}", headers=server.headers, timeout=60)
            seen.append(open_in_server())
    (threads_first, fds_first), (threads_last, fds_last) = seen[1], seen[-1]
    assert threads_last <= threads_first + 1 and fds_last <= fds_first + 4, seen


PORT_TAKEN_ONCE = """import json, os, socket, sys
connection_file, marker = sys.argv[1], sys.argv[2]
if not os.path.exists(marker):  # the first start: another process holds the kernel's shell port
    open(marker, "w").close()
    info = json.load(open(connection_file))
    taken = socket.socket()
    taken.bind((info["ip"], info["shell_port"]))
    taken.listen()
from ipykernel.kernelapp import launch_new_instance
sys.argv = [sys.argv[0], "-f", connection_file]
launch_new_instance()
"""


async def test_kernel_that_dies_while_starting_is_waited_for_through_its_restart(live, tmp_path):
    """Ports are picked before the kernel binds them, so another process can take one meanwhile
    (many kernels starting at once): the kernel dies while starting and its nanny restarts it on new
    ports. The agent's first call waits for that instead of failing."""
    spec_name = f"port-taken-{uuid.uuid4().hex[:6]}"
    spec = live.base / "data" / "kernels" / spec_name
    spec.mkdir(parents=True)
    (spec / "start.py").write_text(PORT_TAKEN_ONCE)
    marker = tmp_path / "started-once"
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, str(spec / "start.py"), "{connection_file}", str(marker)],
        "display_name": "Python 3 (port taken once)", "language": "python"}))
    async with connect(live.mcp_url, live.token) as mcp:
        created = await call(mcp, "notebook_create", path=f"{spec_name}.ipynb", kernel_name=spec_name)
        answer = await call(mcp, "code_execute", path=created["path"], code="print('up')", timeout=120)
        assert marker.exists()  # the first start did die on the taken port
        assert answer["status"] == "ok" and answer["outputs"][0]["text"] == "up\n"
