"""notebook_execute: Run All (or a range) live in the document, with a person's client connected.

Each test checks what the person sees in their copy of the document and what the agent is told:
the cells run in order, each cell's outputs appear in it, a run stops at the first error unless
told not to, a cancel interrupts the running cell and starts no other, and a cell the person
deletes meanwhile is skipped."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from mcp.shared.exceptions import MCPError

from jupyter_mcp.client import Tasks, connect
from jupyter_mcp.testing import UIClient, call, failed_run, refused

pytestmark = pytest.mark.live

TICKS = "import time\nfor i in range(300):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.1)"


def notebook(live, *cells: tuple[str, str]) -> tuple[str, list[str]]:
    """A notebook of (cell_type, source) cells; its name and cell ids."""
    import nbformat
    name = f"run-{uuid.uuid4().hex[:8]}.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) if t == "code" else
                                         nbformat.v4.new_markdown_cell(s) for t, s in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, live.root / name)
    return name, [c.id for c in nb.cells]


def stdout(ui: UIClient, index: int) -> str:
    return "".join(str(o.get("text", "")) for o in ui.nb.ycells[index]["outputs"].to_py()
                   if o.get("output_type") == "stream")


def count(ui: UIClient, index: int):
    return ui.nb.ycells[index].get("execution_count")


async def test_runs_every_code_cell_in_order_live_with_progress_per_cell(live):
    name, ids = notebook(live, ("code", "x = 1"), ("markdown", "# notes"), ("code", "x += 1\nprint(x)"),
                         ("code", "print(x * 10)"))
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        told: list[tuple[float, float | None, str]] = []

        async def on_progress(progress, total, message):
            told.append((progress, total, message))

        raw = await mcp.call_tool("notebook_execute", {"path": name}, progress_callback=on_progress)
        assert not raw.is_error, raw.content[0].text
        answer = raw.structured_content
        assert answer["status"] == "ok" and answer["not_run"] == [] and answer["skipped"] == []
        assert [c["cell_id"] for c in answer["cells"]] == [ids[0], ids[2], ids[3]]
        assert [c["index"] for c in answer["cells"]] == [0, 2, 3]
        assert [c["outputs"][0]["text"] for c in answer["cells"][1:]] == ["2\n", "20\n"]
        counts = [c["execution_count"] for c in answer["cells"]]
        assert counts == sorted(counts) and len(set(counts)) == 3
        text = raw.content[0].text
        assert f"cell 2 ({ids[2]}): ok [{counts[1]}]" in text and "20" in text
        # the person's copy: every code cell ran, in place, the markdown cell untouched
        await ui.wait_for(lambda: stdout(ui, 3) == "20\n")
        assert stdout(ui, 2) == "2\n" and [count(ui, i) for i in (0, 2, 3)] == counts
        assert "outputs" not in json.loads(str(ui.nb.ycells[1]))
        # one progress notification before each cell, then one at the end: 0..3 of 3
        assert [p for p, _, _ in told] == [0, 1, 2, 3] and {t for _, t, _ in told} == {3}
        assert told[1][2] == f"cell 0 ({ids[0]}): ok; running cell {ids[2]}, 2 of 3" and told[3][2] == "done"


async def test_stops_at_the_first_error_unless_told_to_go_on(live):
    name, ids = notebook(live, ("code", "print('a')"), ("code", "print('b', flush=True)\n1 / 0"),
                         ("code", "print('c')"))
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        answer, text = await failed_run(mcp, "notebook_execute", path=name)
        assert answer["status"] == "error" and answer["not_run"] == [ids[2]]
        assert [c["status"] for c in answer["cells"]] == ["ok", "error"]
        error = answer["cells"][1]["outputs"]
        assert error[0]["text"] == "b\n" and error[1]["ename"] == "ZeroDivisionError"
        assert "ZeroDivisionError" in text and "1 cell(s) not run" in text
        assert "stopped at cell 1" in answer["message"]
        await asyncio.sleep(0.5)
        assert count(ui, 2) is None and stdout(ui, 2) == ""  # the third cell never ran

        answer, _ = await failed_run(mcp, "notebook_execute", path=name, continue_on_error=True)
        assert [c["status"] for c in answer["cells"]] == ["ok", "error", "ok"] and answer["not_run"] == []
        assert answer["status"] == "error"  # how the first cell that failed ended
        assert answer["cells"][2]["outputs"][0]["text"] == "c\n"  # not aborted by the kernel after the error
        await ui.wait_for(lambda: stdout(ui, 2) == "c\n")


async def test_a_range_runs_only_its_cells_and_a_bad_range_changes_nothing(live):
    name, ids = notebook(live, ("code", "print('one')"), ("code", "print('two')"), ("code", "print('three')"))
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        answer = await call(mcp, "notebook_execute", path=name, start_index=1, stop_index=2)
        assert [c["cell_id"] for c in answer["cells"]] == [ids[1]]
        await ui.wait_for(lambda: stdout(ui, 1) == "two\n")
        assert count(ui, 0) is None and count(ui, 2) is None
        message = await refused(mcp, "notebook_execute", path=name, start_index=1, stop_index=9)
        assert "not within the notebook's 3 cells" in message
        message = await refused(mcp, "notebook_execute", path=name, start_index=2, stop_index=1)
        assert "stop_index from start_index" in message
        await asyncio.sleep(0.3)
        assert count(ui, 0) is None and count(ui, 2) is None


async def test_a_cell_the_person_deletes_before_its_turn_is_skipped(live):
    name, ids = notebook(live, ("code", "import time\ntime.sleep(2)\nprint('slept')"), ("code", "print('gone')"),
                         ("code", "print('last')"))
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        run = asyncio.create_task(call(mcp, "notebook_execute", path=name, timeout=60))
        await ui.wait_for(lambda: ui.nb.ycells[0].get("execution_state") == "running", timeout=60)
        ui.nb.ycells.pop(1)  # the person deletes the second cell while the first runs
        answer = await asyncio.wait_for(run, 60)
        assert [c["cell_id"] for c in answer["cells"]] == [ids[0], ids[2]]
        assert answer["skipped"] == [{"cell_id": ids[1], "reason": "deleted"}]
        assert answer["cells"][1]["index"] == 1 and answer["cells"][1]["outputs"][0]["text"] == "last\n"
        await ui.wait_for(lambda: stdout(ui, 1) == "last\n")


async def test_as_a_task_a_cancel_interrupts_the_running_cell_and_starts_no_other(live, mode):
    marker = live.root / f"ran-{uuid.uuid4().hex[:8]}"
    name, ids = notebook(live, ("code", "print('first')"), ("code", TICKS),
                         ("code", f"open({str(marker)!r}, 'w').write('ran')"))
    async with connect(live.mcp_url, live.token, mode=mode) as mcp, UIClient(live.url, live.token, name) as ui:
        tasks = Tasks(mcp)
        task = await tasks.submit("notebook_execute", {"path": name, "timeout": 120})
        await ui.wait_for(lambda: "tick 5" in stdout(ui, 1), timeout=60)
        working = await tasks.get(task["taskId"])
        assert working["status"] == "working"
        assert working["statusMessage"] == f"cell 0 ({ids[0]}): ok; running cell {ids[1]}, 2 of 3"
        assert (await tasks.cancel(task["taskId"]))["status"] == "cancelled"
        result = await tasks.result(task["taskId"])
        answer = result["structuredContent"]
        assert [c["status"] for c in answer["cells"]] == ["ok", "interrupted"] and answer["not_run"] == [ids[2]]
        assert answer["message"] == "cancelled: no further cell was run"
        ticks = [ln for ln in answer["cells"][1]["outputs"][0]["text"].splitlines() if ln.startswith("tick")]
        assert len(ticks) >= 5
        await ui.wait_for(lambda: ui.nb.ycells[1].get("execution_state") == "idle")
        done = await call(mcp, "code_execute", path=name, code="print(i)", timeout=20)
        await asyncio.sleep(0.5)
        again = await call(mcp, "code_execute", path=name, code="print(i)", timeout=20)
        assert done["outputs"][0]["text"] == again["outputs"][0]["text"]  # the loop really stopped
        assert not marker.exists() and count(ui, 2) is None


async def test_a_failed_run_as_a_task_ends_failed_with_every_cell_kept(live, mode):
    name, ids = notebook(live, ("code", "print('ok here')"), ("code", "raise ValueError('bad input')"))
    async with connect(live.mcp_url, live.token, mode=mode) as mcp:
        tasks = Tasks(mcp)
        task = await tasks.submit("notebook_execute", {"path": name, "timeout": 60})
        final = await tasks.wait(task["taskId"], timeout=90)
        assert final["status"] == "failed" and "ValueError: bad input" in final["statusMessage"]
        with pytest.raises(MCPError) as info:
            await tasks.result(task["taskId"])
        kept = info.value.error.data["partial"]["structuredContent"]
        assert [c["status"] for c in kept["cells"]] == ["ok", "error"]
        assert kept["cells"][0]["outputs"][0]["text"] == "ok here\n"


async def test_a_call_the_client_cancels_lets_the_running_cell_finish_and_starts_no_other(live, mode):
    """The SDK client abandons the call (2025-11-25: notifications/cancelled; 2026-07-28: it closes
    the response stream). The running cell is not cut short (as with cell_execute: only a task's
    cancel interrupts), and no further cell starts."""
    marker = live.root / f"ran-{uuid.uuid4().hex[:8]}"
    name, _ = notebook(live, ("code", "import time\nfor i in range(6):\n    print(i, flush=True)\n    time.sleep(0.25)"),
                       ("code", f"open({str(marker)!r}, 'w').write('ran')"))
    async with connect(live.mcp_url, live.token, mode=mode) as mcp, UIClient(live.url, live.token, name) as ui:
        run = asyncio.create_task(mcp.call_tool("notebook_execute", {"path": name}))
        await ui.wait_for(lambda: "1\n" in stdout(ui, 0), timeout=60)
        run.cancel()
        await ui.wait_for(lambda: stdout(ui, 0) == "0\n1\n2\n3\n4\n5\n", timeout=30)
        await ui.wait_for(lambda: ui.nb.ycells[0].get("execution_state") == "idle")
        await asyncio.sleep(1.5)
        assert not marker.exists() and count(ui, 1) is None
