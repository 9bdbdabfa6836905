"""Execution: cells run in the notebook's kernel; outputs stream live into the room (real jupyter lab)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import httpx
import pytest

from jupyter_mcp.client import LEGACY, MODERN, Tasks, connect
from jupyter_mcp.testing import (UIClient, call, failed_run, new_notebook, refused, saved_notebook, ui_execute, ui_session,
                                 write_notebook)

pytestmark = pytest.mark.live

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
FIVE_LINES = "import time\nfor i in range(5):\n    print(f'line {i}', flush=True)\n    time.sleep(0.3)"


def notebook(live, *sources: str) -> tuple[str, list[str]]:
    return new_notebook(live.root, *sources, prefix="ex")


def stdout_of(ycell) -> str:
    return "".join(str(o.get("text", "")) for o in ycell["outputs"].to_py() if o.get("output_type") == "stream")


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_ui_sees_lines_one_by_one_before_the_call_returns(live, mode):
    name, ids = notebook(live, FIVE_LINES)
    async with connect(live.mcp_url, live.token, mode=mode) as mcp, UIClient(live.url, live.token, name) as ui:
        states: list[tuple[str, str]] = []

        def observe(_events):
            ycell = ui.nb.ycells[0]
            states.append((stdout_of(ycell), str(ycell.get("execution_state"))))

        ui.nb.ycells.observe_deep(observe)
        result = await call(mcp, "cell_execute", path=name, cell_id=ids[0])
        seen_before_return = list(states)
        assert result["status"] == "ok" and result["execution_count"] >= 1
        partial = [s for s, _ in seen_before_return]
        for k in range(1, 5):  # each prefix of the output was visible on its own, while running
            prefix = "".join(f"line {i}\n" for i in range(k))
            assert (prefix, "running") in seen_before_return, (prefix, partial)
        await ui.wait_for(lambda: ui.nb.ycells[0].get("execution_state") == "idle"
                          and ui.nb.ycells[0].get("execution_count") == result["execution_count"])
        assert stdout_of(ui.nb.ycells[0]) == "".join(f"line {i}\n" for i in range(5))


async def test_outputs_and_count_reach_disk(live):
    name, ids = notebook(live, "print('saved output')", "21 * 2")
    async with connect(live.mcp_url, live.token) as mcp:
        first = await call(mcp, "cell_execute", path=name, cell_id=ids[0])
        second = await call(mcp, "cell_execute", path=name, index=1)
    assert second["execution_count"] == first["execution_count"] + 1
    cells = (await saved_notebook(live.root / name, lambda nb: nb["cells"][1]["outputs"], timeout=10,
                                  what="the outputs"))["cells"]  # the room saves after its 1 s debounce
    assert cells[0]["execution_count"] == first["execution_count"]
    assert "".join(cells[0]["outputs"][0]["text"]) == "saved output\n"
    assert "".join(cells[1]["outputs"][0]["data"]["text/plain"]) == "42"


async def test_print_only_cell_gets_its_count_and_error_cell_reports(live):
    name, ids = notebook(live, "print('only printing')", "def f():\n    return 1/0\nf()")
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        printed = await call(mcp, "cell_execute", path=name, cell_id=ids[0])
        assert isinstance(printed["execution_count"], int)
        await ui.wait_for(lambda: ui.nb.ycells[0].get("execution_count") == printed["execution_count"])
        failed, text = await failed_run(mcp, "cell_execute", path=name, cell_id=ids[1])
        assert failed["status"] == "error"
        assert failed["outputs"][0]["ename"] == "ZeroDivisionError"
        assert "ZeroDivisionError" in text and "\x1b[" not in text and "return 1/0" in text
        await ui.wait_for(lambda: [o["output_type"] for o in ui.nb.ycells[1]["outputs"].to_py()] == ["error"])


async def test_png_comes_back_as_image_content(live):
    code = ("import base64\nfrom IPython.display import Image, display\n"
            f"display(Image(data=base64.b64decode('{PNG}')))\nprint('done')")
    name, ids = notebook(live, code)
    async with connect(live.mcp_url, live.token) as mcp:
        raw = await mcp.call_tool("cell_execute", {"path": name, "cell_id": ids[0]})
        images = [c for c in raw.content if c.type == "image"]
        assert len(images) == 1 and images[0].mime_type == "image/png" and images[0].data == PNG
        assert any(c.type == "text" and "done" in c.text for c in raw.content)
        scratch = await mcp.call_tool("code_execute", {"path": name, "code": code})
        assert [c.type for c in scratch.content].count("image") == 1


async def test_timeout_interrupts_and_the_kernel_is_free(live):
    name, ids = notebook(live, "import time\ncounter = 0\nwhile True:\n    counter += 1\n    time.sleep(0.01)")
    async with connect(live.mcp_url, live.token) as mcp:
        result, text = await failed_run(mcp, "cell_execute", path=name, cell_id=ids[0], timeout=1.5)
        assert result["status"] == "timeout" and "interrupted" in result["message"]
        assert "KeyboardInterrupt" in text
        started = time.monotonic()
        first = await call(mcp, "code_execute", path=name, code="print(counter)", timeout=10)
        assert time.monotonic() - started < 10  # ran at once, not queued behind the loop
        await asyncio.sleep(0.3)
        second = await call(mcp, "code_execute", path=name, code="print(counter)", timeout=10)
        assert first["outputs"][0]["text"] == second["outputs"][0]["text"]  # the loop really stopped
        assert first["status"] == "ok"


async def test_code_execute_leaves_the_document_untouched(live):
    name, ids = notebook(live, "x = 1")
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        before = await call(mcp, "notebook_get", path=name)
        ui_before = ui.nb.get()
        result = await call(mcp, "code_execute", path=name, code="y = 41 + 1\nprint(y)")
        assert result["outputs"][0]["text"] == "42\n"
        after = await call(mcp, "notebook_get", path=name)
        assert after["cells"] == before["cells"]
        await asyncio.sleep(0.3)
        assert ui.nb.get() == ui_before
        empty = await refused(mcp, "code_execute", path=name, code="   ")
        assert "code is empty" in empty


async def test_the_ui_sessions_kernel_is_used(live):
    name, ids = notebook(live, "shared = 'set by the agent'")
    session = await ui_session(live.url, live.token, name)
    async with connect(live.mcp_url, live.token) as mcp:
        await call(mcp, "cell_execute", path=name, cell_id=ids[0])
        seen = await ui_execute(live.url, live.token, session["kernel"]["id"], "print(shared)")
        assert seen == "set by the agent\n"
        await ui_execute(live.url, live.token, session["kernel"]["id"], "from_ui = 7")
        back = await call(mcp, "code_execute", path=name, code="print(from_ui * 6)")
        assert back["outputs"][0]["text"] == "42\n"
    sessions = httpx.get(live.url + "api/sessions", headers=live.headers).json()
    assert [s["kernel"]["id"] for s in sessions if s["path"] == name] == [session["kernel"]["id"]]


async def test_mcp_creates_the_session_the_ui_then_joins(live):
    name, ids = notebook(live, "made_by = 'mcp'")
    async with connect(live.mcp_url, live.token) as mcp:
        await call(mcp, "cell_execute", path=name, cell_id=ids[0])
        sessions = [s for s in httpx.get(live.url + "api/sessions", headers=live.headers).json() if s["path"] == name]
        assert len(sessions) == 1 and sessions[0]["type"] == "notebook"
        joined = await ui_session(live.url, live.token, name)  # what JupyterLab does on open
        assert joined["kernel"]["id"] == sessions[0]["kernel"]["id"]
        assert await ui_execute(live.url, live.token, joined["kernel"]["id"], "print(made_by)") == "mcp\n"


async def test_killed_kernel_gives_clear_error_and_next_run_works(live):
    killer = "import os, signal, time\nprint('before the end', flush=True)\ntime.sleep(0.5)\nos.kill(os.getpid(), signal.SIGKILL)"
    name, ids = notebook(live, killer, "print('alive again')")
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        message = await refused(mcp, "cell_execute", path=name, cell_id=ids[0], timeout=60)
        assert "kernel died" in message
        assert stdout_of(ui.nb.ycells[0]) == "before the end\n"  # partial output kept in the document
        # the answer and the document's last update travel on two connections: wait for the update
        await ui.wait_for(lambda: ui.nb.ycells[0].get("execution_state") == "idle")
        again = await call(mcp, "cell_execute", path=name, cell_id=ids[1], timeout=60)
        assert again["status"] == "ok" and again["outputs"][0]["text"] == "alive again\n"


async def test_clear_output_and_update_display_like_jupyterlab(live):
    code = ("from IPython.display import display, clear_output, update_display\n"
            "for i in range(3):\n    clear_output(wait=True)\n    print(f'step {i}')\n"
            "h = display('first', display_id=True)\nh.update('updated')")
    name, ids = notebook(live, code)
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        result = await call(mcp, "cell_execute", path=name, cell_id=ids[0])
        assert [o["text"] for o in result["outputs"]] == ["step 2\n", "'updated'"]
        await ui.wait_for(lambda: ui.nb.ycells[0].get("execution_state") == "idle")
        outs = ui.nb.ycells[0]["outputs"].to_py()
        assert [o["output_type"] for o in outs] == ["stream", "display_data"]
        assert outs[0]["text"] == "step 2\n" and outs[1]["data"]["text/plain"] == "'updated'"


async def test_stream_sends_outputs_as_progress_before_the_result(live):
    name, ids = notebook(live, FIVE_LINES)
    async with connect(live.mcp_url, live.token) as mcp:
        got: list[str] = []
        result_arrived = asyncio.Event()

        async def on_progress(progress, total, message):
            assert not result_arrived.is_set()
            got.append(message)

        raw = await mcp.call_tool("cell_execute", {"path": name, "cell_id": ids[0], "stream": True},
                                  progress_callback=on_progress)
        result_arrived.set()
        assert got == [f"line {i}\n" for i in range(5)]
        assert raw.structured_content["status"] == "ok"


async def test_stream_without_progress_token_sends_log_messages(live):
    name, ids = notebook(live, "print('a', flush=True)\nprint('b')")
    logs: list[str] = []

    async def on_log(params):
        logs.append(params.data["msg"] if isinstance(params.data, dict) else str(params.data))

    async with connect(live.mcp_url, live.token, logging_callback=on_log) as mcp:
        await call(mcp, "code_execute", path=name, code="print('a', flush=True)\nimport time; time.sleep(0.2)\nprint('b')",
                   stream=True)
    assert "".join(logs) == "a\nb\n"


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_cell_insert_execute_adds_a_cell_and_runs_it_live(live, mode):
    """The new cell appears where asked and runs in the notebook's kernel, its outputs in the
    person's view; as a task too; a cell that raised is a failed call and stays."""
    name, ids = notebook(live, "x = 20")
    async with connect(live.mcp_url, live.token, mode=mode) as mcp, UIClient(live.url, live.token, name) as ui:
        await call(mcp, "cell_execute", path=name, cell_id=ids[0])
        ran = await call(mcp, "cell_insert_execute", path=name, source="print(x + 1)", after_cell_id=ids[0])
        assert ran["status"] == "ok" and ran["outputs"][0]["text"] == "21\n" and ran["path"] == name
        await ui.wait_for(lambda: len(ui.nb.ycells) == 2 and stdout_of(ui.nb.ycells[1]) == "21\n"
                          and ui.nb.ycells[1].get("execution_count") == ran["execution_count"])  # the count lands last
        assert ui.cell_ids() == [ids[0], ran["cell_id"]]
        assert ui.nb.ycells[1]["execution_count"] == ran["execution_count"] and ui.source(1) == "print(x + 1)"
        done = await Tasks(mcp).run("cell_insert_execute", {"path": name, "source": "print('first')", "index": 0})
        assert done["structuredContent"]["outputs"][0]["text"] == "first\n"
        await ui.wait_for(lambda: ui.cell_ids()[0] == done["structuredContent"]["cell_id"]
                          and stdout_of(ui.nb.ycells[0]) == "first\n")
        failed, text = await failed_run(mcp, "cell_insert_execute", path=name, source="1 / 0")
        assert failed["status"] == "error" and "ZeroDivisionError" in text
        await ui.wait_for(lambda: len(ui.nb.ycells) == 4 and ui.cell_ids()[3] == failed["cell_id"])


async def test_cell_insert_execute_refused_makes_no_cell(live):
    name, ids = notebook(live, "x = 1")
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        for args, reason in [({"source": "1", "index": 5}, "out of range"), ({"source": "  \n"}, "source is empty"),
                             ({"source": "1", "after_cell_id": "nope"}, "no cell with id"),
                             ({"source": "1", "index": 0, "after_cell_id": ids[0]}, "not both")]:
            assert reason in await refused(mcp, "cell_insert_execute", path=name, **args), args
        assert ui.cell_ids() == ids
        assert [c["id"] for c in (await call(mcp, "notebook_get", path=name))["cells"]] == ids


async def test_execute_refusals(live):
    name, ids = notebook(live, "x = 1")
    md = f"md-{uuid.uuid4().hex[:6]}.ipynb"
    md_ids = write_notebook(live.root / md, ["# Title"], cell_type="markdown")
    async with connect(live.mcp_url, live.token) as mcp:
        assert "no cell with id" in await refused(mcp, "cell_execute", path=name, cell_id="nope")
        assert "out of range" in await refused(mcp, "cell_execute", path=name, index=4)
        assert "only code cells run" in await refused(mcp, "cell_execute", path=md, cell_id=md_ids[0])
        assert "escapes" in await refused(mcp, "code_execute", path="../x.ipynb", code="1")
        assert "no notebook" in await refused(mcp, "code_execute", path="nothere.ipynb", code="1")


async def _valid_on_disk(live, name: str, ready) -> dict:
    """The notebook as saved, once ``ready(nb)`` holds (the room saves after its 1 s debounce);
    it validates against nbformat's schema."""
    import nbformat

    saved = await saved_notebook(live.root / name, ready, timeout=10, what="what was expected saved")
    nbformat.validate(nbformat.from_dict(saved))
    return saved


async def test_a_cell_retyped_to_markdown_while_it_runs_finishes_clearly(live):
    code = "import time\nprint('before', flush=True)\ntime.sleep(3)\nprint('after')"
    name, ids = notebook(live, code)
    async with connect(live.mcp_url, live.token) as mcp, connect(live.mcp_url, live.token) as other, \
            UIClient(live.url, live.token, name) as ui:
        run = asyncio.create_task(mcp.call_tool("cell_execute", {"path": name, "cell_id": ids[0]}))
        await ui.wait_for(lambda: "before" in stdout_of(ui.nb.ycells[0]))
        await call(other, "cell_update", path=name, cell_id=ids[0], source="# now *markdown*", cell_type="markdown")
        raw = await run
        assert not raw.is_error, raw.content[0].text
        result = raw.structured_content
        assert result["status"] == "ok"
        assert "markdown cell while it ran" in result["message"]
        assert [o["text"] for o in result["outputs"]] == ["before\nafter\n"]  # all in the answer
        started = time.monotonic()
        follow = await call(mcp, "code_execute", path=name, code="print('free')", timeout=10)
        assert follow["outputs"][0]["text"] == "free\n" and time.monotonic() - started < 2  # the kernel is idle
        cell = await call(mcp, "cell_get", path=name, cell_id=ids[0])
        assert cell["cell_type"] == "markdown" and cell["source"] == "# now *markdown*"
        ycell = ui.nb.ycells[0].to_py()
        assert not {"outputs", "execution_count", "execution_state"} & set(ycell), ycell
    saved = await _valid_on_disk(live, name, lambda nb: nb["cells"][0]["cell_type"] == "markdown")
    assert saved["cells"][0]["source"] in ("# now *markdown*", ["# now *markdown*"])


async def test_odd_outputs_from_the_kernel_are_stored_valid_and_read_back(live):
    name, ids = notebook(live,
                         "from IPython.display import display\ndisplay({'text/plain': 5}, raw=True)",
                         "from IPython.display import display\n"
                         "display({'text/plain': 'x', 'text/html': ['<b>', 7]}, raw=True, display_id=['a'])",
                         "display({'application/json': {'k': [1, 2]}, 'text/plain': 'j'}, raw=True)")
    async with connect(live.mcp_url, live.token) as mcp:
        five = await call(mcp, "cell_execute", path=name, cell_id=ids[0])
        assert five["status"] == "ok" and five["outputs"][0]["text"] == "5"
        listed = await call(mcp, "cell_execute", path=name, cell_id=ids[1])
        assert listed["status"] == "ok" and listed["outputs"][0]["text"] == "x"
        as_json = await call(mcp, "cell_execute", path=name, cell_id=ids[2])
        assert as_json["status"] == "ok"
        got = await call(mcp, "notebook_get", path=name)
        assert [c["outputs"][0]["text"] for c in got["cells"]] == ["5", "x", "j"]
        cell = await call(mcp, "cell_get", path=name, cell_id=ids[0])
        assert cell["outputs"][0]["text"] == "5"
    saved = await _valid_on_disk(live, name, lambda nb: all(c["outputs"] for c in nb["cells"]))
    assert saved["cells"][2]["outputs"][0]["data"]["application/json"] == {"k": [1, 2]}  # JSON kept as JSON


async def test_a_notebook_with_odd_outputs_on_disk_is_read(live):
    name, ids = notebook(live, "x", "y")
    nb = json.loads((live.root / name).read_text())
    nb["cells"][0]["outputs"] = [{"output_type": "display_data", "data": {"text/plain": 5}, "metadata": {}}]
    # (not a stream text or a list holding a number: the room's loading refuses that file already)
    nb["cells"][1]["outputs"] = [{"output_type": "execute_result", "data": {"text/html": {"b": 1}}, "metadata": {},
                                  "execution_count": 1},
                                 {"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["tb", 2]}]
    (live.root / name).write_text(json.dumps(nb))  # another tool wrote this file
    async with connect(live.mcp_url, live.token) as mcp:
        got = await call(mcp, "notebook_get", path=name)
        # read as the file has them: a whole number stays whole (not the 5.0 of a Y float)
        assert [[o["text"] for o in c["outputs"]] for c in got["cells"]] == [["5"], ['{"b": 1}', "tb\n2"]]
        cell = await call(mcp, "cell_get", path=name, cell_id=ids[1])
        assert cell["outputs"][1]["ename"] == "E"
        assert [o["text"] for o in cell["outputs"]] == ['{"b": 1}', "tb\n2"]  # as notebook_get has it
