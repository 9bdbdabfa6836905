"""kernel_list, kernel_interrupt, kernel_restart and kernel_select on a real server, with a person's
client (the collaborative document and Jupyter's REST API, as JupyterLab uses them) beside the agent."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid

import httpx
import pytest

from jupyter_mcp.client import connect
from jupyter_mcp.testing import UIClient, call, failed_run, new_notebook, refused

pytestmark = pytest.mark.live

LOOP = "import time\nfor i in range(600):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.1)"


def rest(live, method: str, path: str, **kwargs):
    return httpx.request(method, live.url + path, headers=live.headers, timeout=60, **kwargs)


def session_of(live, name: str) -> dict | None:
    return next((s for s in rest(live, "GET", "api/sessions").json() if s["path"] == name), None)


def stdout(ui: UIClient, index: int) -> str:
    return "".join(str(o.get("text", "")) for o in ui.nb.ycells[index]["outputs"].to_py()
                   if o.get("output_type") == "stream")


@pytest.fixture(scope="module")
def second_kernelspec(live):
    """A second kernelspec on the live server (its Jupyter data dir), telling itself apart by an env var."""
    spec = live.base / "data" / "kernels" / "python3-second"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (second)", "language": "python", "env": {"WHICH_KERNEL": "second"}}))
    return "python3-second"


async def test_kernel_list_names_specs_and_which_notebook_each_kernel_serves(live, second_kernelspec):
    name, _ = new_notebook(live.root, "1")
    async with connect(live.mcp_url, live.token) as mcp:
        before = await call(mcp, "kernel_list")
        assert before["default_kernel_name"] == "python3"
        specs = {s["name"]: s for s in before["kernelspecs"]}
        assert specs["python3-second"] == {"name": "python3-second", "display_name": "Python 3 (second)",
                                           "language": "python"}
        assert not [k for k in before["kernels"] if name in k["notebooks"]]
        await call(mcp, "code_execute", path=name, code="None", timeout=120)
        after = await call(mcp, "kernel_list")
        mine = [k for k in after["kernels"] if name in k["notebooks"]]
        assert len(mine) == 1 and mine[0]["kernel_id"] == session_of(live, name)["kernel"]["id"]
        assert mine[0]["kernel_name"] == "python3" and mine[0]["started_by_mcp"] is True
        assert {k["kernel_id"] for k in after["kernels"]} == {k["id"] for k in rest(live, "GET", "api/kernels").json()}


async def test_kernel_interrupt_stops_a_notebook_run_and_keeps_the_variables(live):
    marker = live.root / f"ran-{uuid.uuid4().hex[:8]}"
    name, ids = new_notebook(live.root, "kept = 42", LOOP, f"open({str(marker)!r}, 'w').write('ran')")
    async with connect(live.mcp_url, live.token) as mcp, connect(live.mcp_url, live.token) as other, \
            UIClient(live.url, live.token, name) as ui:
        run = asyncio.create_task(mcp.call_tool("notebook_execute", {"path": name, "timeout": 120}))
        await ui.wait_for(lambda: "tick 3" in stdout(ui, 1), timeout=60)
        answer = await call(other, "kernel_interrupt", path=name)
        assert answer["kernel_id"] == session_of(live, name)["kernel"]["id"] and answer["path"] == name
        result = await asyncio.wait_for(run, 30)
        assert result.is_error
        ran = result.structured_content
        assert [c["status"] for c in ran["cells"]] == ["ok", "interrupted"] and ran["not_run"] == [ids[2]]
        assert not marker.exists()
        assert (await call(mcp, "code_execute", path=name, code="print(kept)"))["outputs"][0]["text"] == "42\n"


async def test_kernel_interrupt_and_restart_of_a_notebook_without_a_kernel_start_nothing(live):
    name, _ = new_notebook(live.root, "1")
    async with connect(live.mcp_url, live.token) as mcp:
        for tool in ("kernel_interrupt", "kernel_restart"):
            assert "has no running kernel" in await refused(mcp, tool, path=name)
    assert session_of(live, name) is None


async def test_kernel_restart_ends_the_running_cell_and_forgets_the_variables(live):
    name, ids = new_notebook(live.root, "kept = 42", LOOP, "print('after the restart')")
    async with connect(live.mcp_url, live.token) as mcp, connect(live.mcp_url, live.token) as other, \
            UIClient(live.url, live.token, name) as ui:
        await call(mcp, "cell_execute", path=name, cell_id=ids[0], timeout=120)
        kernel_id = session_of(live, name)["kernel"]["id"]
        run = asyncio.create_task(mcp.call_tool("cell_execute", {"path": name, "cell_id": ids[1], "timeout": 300}))
        await ui.wait_for(lambda: "tick 3" in stdout(ui, 1), timeout=60)
        answer = await call(other, "kernel_restart", path=name)
        assert answer["kernel_id"] == kernel_id  # the same kernel (a person's tab stays on it), a new process
        result = await asyncio.wait_for(run, 30)  # not the 300 s timeout, nor the end of the 60 s loop
        assert result.is_error and "kernel was restarted" in result.content[0].text
        await ui.wait_for(lambda: ui.nb.ycells[1].get("execution_state") == "idle")
        assert "tick 3" in stdout(ui, 1)  # the outputs so far stay in the cell
        gone, _ = await failed_run(mcp, "code_execute", path=name, code="kept")
        assert gone["outputs"][0]["ename"] == "NameError"
        again = await call(mcp, "cell_execute", path=name, cell_id=ids[2])
        assert again["outputs"][0]["text"] == "after the restart\n"
        assert session_of(live, name)["kernel"]["id"] == kernel_id


async def test_a_persons_restart_ends_the_agents_run_even_when_the_code_ignores_interrupts(live):
    """Restart from JupyterLab (its REST call) while the agent runs code that ignores SIGINT (so the
    interrupt a restart begins with does not end it): the agent's run ends once the kernel is back,
    saying it was restarted, not at its 300 s timeout."""
    name, ids = new_notebook(live.root, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n" + LOOP)
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        run = asyncio.create_task(mcp.call_tool("cell_execute", {"path": name, "cell_id": ids[0], "timeout": 300}))
        await ui.wait_for(lambda: "tick 3" in stdout(ui, 0), timeout=60)
        kernel_id = session_of(live, name)["kernel"]["id"]
        assert (await asyncio.to_thread(rest, live, "POST", f"api/kernels/{kernel_id}/restart")).status_code == 200
        result = await asyncio.wait_for(run, 30)
        assert result.is_error and "kernel was restarted" in result.content[0].text
        await ui.wait_for(lambda: ui.nb.ycells[0].get("execution_state") == "idle")
        assert (await call(mcp, "code_execute", path=name, code="print('fresh')"))["outputs"][0]["text"] == "fresh\n"


async def test_kernel_select_changes_the_sessions_kernel_and_the_metadata(live, second_kernelspec):
    name, _ = new_notebook(live.root, "import os\nprint(os.environ.get('WHICH_KERNEL', 'first'))")
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        assert (await call(mcp, "code_execute", path=name, code="print('first' if 'WHICH_KERNEL' not in "
                                                                   "__import__('os').environ else 'second')")
                )["outputs"][0]["text"] == "first\n"
        session = session_of(live, name)
        old = session["kernel"]["id"]
        message = await refused(mcp, "kernel_select", path=name, kernel_name="no-such-kernel")
        assert "no kernelspec named 'no-such-kernel'" in message and "python3-second" in message
        assert session_of(live, name)["kernel"]["id"] == old

        answer = await call(mcp, "kernel_select", path=name, kernel_name=second_kernelspec)
        assert answer["kernel_name"] == "python3-second" and answer["kernel_id"] != old
        now = session_of(live, name)
        assert now["id"] == session["id"] and now["kernel"]["id"] == answer["kernel_id"]  # the same session
        assert old not in {k["id"] for k in rest(live, "GET", "api/kernels").json()}  # the old kernel is shut down
        await ui.wait_for(lambda: (ui.nb._ymeta["metadata"].to_py().get("kernelspec") or {}).get("name")
                          == "python3-second")
        assert ui.nb._ymeta["metadata"].to_py()["kernelspec"]["display_name"] == "Python 3 (second)"
        ran = await call(mcp, "cell_execute", path=name, index=0)
        assert ran["outputs"][0]["text"] == "second\n"
        listed = [k for k in (await call(mcp, "kernel_list"))["kernels"] if name in k["notebooks"]]
        assert [k["kernel_name"] for k in listed] == ["python3-second"]


async def test_kernel_select_without_a_session_makes_one_with_that_kernel(live, second_kernelspec):
    name, _ = new_notebook(live.root, "import os\nprint(os.environ.get('WHICH_KERNEL', 'first'))")
    async with connect(live.mcp_url, live.token) as mcp:
        answer = await call(mcp, "kernel_select", path=name, kernel_name=second_kernelspec)
        assert session_of(live, name)["kernel"]["id"] == answer["kernel_id"]
        assert (await call(mcp, "cell_execute", path=name, index=0))["outputs"][0]["text"] == "second\n"
        got = await call(mcp, "notebook_get", path=name)
        assert got["metadata"]["kernelspec"]["name"] == "python3-second"
