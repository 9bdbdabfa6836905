"""Tasks as every client speaks them (docs/tasks.md, "Three dialects"), against a real jupyter lab
and real kernels: the official TypeScript SDK 1.x task client (2025-11-25 core tasks), the official
TypeScript SDK 2.x client with @modelcontextprotocol/ext-tasks (io.modelcontextprotocol/tasks), and
the project's own client in each dialect. The seed's io.datalayer/tasks is tests/test_tasks.py."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from jupyter_mcp.client import CORE, OFFICIAL, SEED, Tasks, connect
from jupyter_mcp.testing import call, new_notebook
from jupyter_mcp.testing.npm import npm_packages

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / "build" / "task-clients"
PACKAGES = ["@modelcontextprotocol/sdk@1.32.2", "@modelcontextprotocol/client@2.4.0",
            "@modelcontextprotocol/ext-tasks@0.2.2"]
SLOW = "import time\ntime.sleep({s})\nprint('slept {s}')"
COUNTED = "import time\nopen({marker!r}, 'a').write('ran\\n')\ntime.sleep(2)\nprint('slept 2')"
ASKS = "name = input('Your name: ')\nprint('hello', name)"
TICKER = "import time\nfor i in range(600):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.1)"


@pytest.fixture(scope="module")
def clients():
    """The TypeScript clients, installed once; the scripts placed beside their node_modules."""
    prefix = npm_packages(PACKAGES, CLIENTS)
    for script in (ROOT / "tests" / "js").glob("*.mjs"):
        shutil.copy(script, prefix / script.name)
    return prefix


def node(clients, script: str, scenario: str, live, notebook: str, cell: str, key: str = "") -> dict:
    env = {**os.environ, "URL": live.mcp_url, "TOKEN": live.token, "NB": notebook, "CELL": cell, "KEY": key}
    done = subprocess.run(["node", str(clients / script), scenario], capture_output=True, text=True, timeout=240,
                          env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def text_of(result: dict) -> str:
    return json.dumps(result)


async def kernel_stopped_running(live, name) -> bool:
    """The kernel answers a new execution at once: the cancelled cell is not running any more."""
    async with connect(live.mcp_url, live.token) as client:
        result = await call(client, "code_execute", path=name, code="print('idle')", timeout=20)
    return result["outputs"][0]["text"] == "idle\n"


async def warm(live, name):
    async with connect(live.mcp_url, live.token) as client:
        await call(client, "code_execute", path=name, code="None", timeout=120)


# --- The official TypeScript SDK 1.x: 2025-11-25 core tasks ---------------------------------------------


async def test_core_client_polls_a_task_to_completion_and_reads_the_output(live, clients):
    name, ids = new_notebook(live.root, SLOW.format(s=3), prefix="core")
    seen = node(clients, "tasks_core.mjs", "complete", live, name, ids[0])
    assert seen["created"]["status"] == "working" and seen["created"]["ttl"] is None  # never expires while it runs
    assert "working" in seen["statuses"] and seen["statuses"][-1] == "completed"
    assert "slept 3" in text_of(seen["result"]) and not seen["result"].get("isError")


async def test_core_client_answers_an_input_request_on_tasks_results_stream(live, clients):
    """input() in a task: input_required, at which the SDK calls tasks/result; the elicitation
    related to the task arrives on that stream, its answer reaches the code."""
    name, ids = new_notebook(live.root, ASKS, prefix="core")
    seen = node(clients, "tasks_core.mjs", "input", live, name, ids[0])
    assert "input_required" in seen["statuses"], seen
    [asked] = seen["asked"]
    assert "Your name:" in asked["message"] and asked["requestedSchema"]["properties"]["value"]["type"] == "string"
    assert asked["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == seen["created"]["taskId"]
    assert "hello Ada" in text_of(seen["result"]) and not seen["result"].get("isError")


async def test_core_tasks_result_waits_for_the_end(live, clients):
    """tasks/result on a working task blocks until the task is terminal, then answers what the call would have."""
    name, ids = new_notebook(live.root, SLOW.format(s=3), prefix="core")
    seen = node(clients, "tasks_core.mjs", "wait", live, name, ids[0])
    assert seen["created"]["status"] == "working"
    assert "slept 3" in text_of(seen["result"])
    assert seen["after"]["status"] == "completed" and seen["after"]["ttl"] >= 3000


async def test_core_cancel_stops_the_kernel_and_a_second_cancel_is_refused(live, clients):
    name, ids = new_notebook(live.root, TICKER, prefix="core")
    await warm(live, name)
    seen = node(clients, "tasks_core.mjs", "cancel", live, name, ids[0])
    assert seen["cancelled"]["status"] == "cancelled" and seen["after"]["status"] == "cancelled"
    assert "tick 1" in text_of(seen["result"]) and "KeyboardInterrupt" in text_of(seen["result"])
    assert seen["again"]["code"] == -32602  # a terminal task cannot be cancelled
    assert await kernel_stopped_running(live, name)


async def ran_once(live, marker: str) -> bool:
    """The cell that counts its runs in ``marker`` ran once: a second run would follow the first at once."""
    await asyncio.sleep(1)
    return (live.root / marker).read_text() == "ran\n"


async def test_core_retry_with_an_idempotency_key_is_the_same_task(live, clients):
    marker = f"runs-{uuid.uuid4().hex}.txt"
    name, ids = new_notebook(live.root, COUNTED.format(marker=marker), prefix="core")
    seen = node(clients, "tasks_core.mjs", "retry", live, name, ids[0], key=uuid.uuid4().hex)
    assert seen["first"]["taskId"] == seen["second"]["taskId"]
    assert "slept 2" in text_of(seen["result"]) and await ran_once(live, marker)


async def test_a_synchronous_90_s_cell_outlives_the_sdks_60_s_timeout_on_progress(live, clients):
    """Without a task, a call that runs code and carries a progress token is told of progress at
    least every 15 s, so a client that resets its timeout on progress (the SDK's default: 60 s)
    waits for the whole cell."""
    name, ids = new_notebook(live.root, SLOW.format(s=90), prefix="sync")
    await warm(live, name)
    seen = node(clients, "tasks_core.mjs", "sync", live, name, ids[0])
    assert "slept 90" in text_of(seen["result"]) and seen["seconds"] >= 90
    times = [0] + [p["at"] for p in seen["progress"]] + [seen["seconds"]]
    assert max(b - a for a, b in zip(times, times[1:])) < 15
    values = [p["progress"] for p in seen["progress"]]
    assert values == sorted(set(values))  # each greater than the one before, as the spec says


# --- The official TypeScript SDK 2.x with @modelcontextprotocol/ext-tasks: io.modelcontextprotocol/tasks --


async def test_official_client_gets_a_task_for_a_cell_and_its_output(live, clients):
    name, ids = new_notebook(live.root, SLOW.format(s=3), prefix="official")
    seen = node(clients, "tasks_official.mjs", "complete", live, name, ids[0])
    assert seen["kind"] == "task" and seen["outcome"] == "completed"
    assert "working" in seen["statuses"]
    assert "slept 3" in text_of(seen["result"]) and seen["result"]["resultType"] == "complete"


async def test_official_client_answers_an_input_request_with_tasks_update(live, clients):
    """input() in a task: input_required with the question in inputRequests, which ext-tasks hands
    its input handler and answers with tasks/update; the answer reaches the code."""
    name, ids = new_notebook(live.root, ASKS, prefix="official")
    seen = node(clients, "tasks_official.mjs", "input", live, name, ids[0])
    assert seen["kind"] == "task" and seen["outcome"] == "completed" and "input_required" in seen["statuses"]
    [asked] = seen["asked"]
    assert "Your name:" in asked["message"] and asked["requestedSchema"]["properties"]["value"]["type"] == "string"
    assert "hello Ada" in text_of(seen["result"]) and not seen["result"].get("isError")


async def test_official_client_gets_a_quick_tool_answered_at_once(live, clients):
    """The server decides: a tool that runs no code answers at once, not as a task."""
    name, ids = new_notebook(live.root, "x = 1", prefix="official")
    seen = node(clients, "tasks_official.mjs", "quick", live, name, ids[0])
    assert seen["kind"] == "immediate" and "x = 1" in text_of(seen["result"])


async def test_official_cancel_stops_the_kernel(live, clients):
    name, ids = new_notebook(live.root, TICKER, prefix="official")
    await warm(live, name)
    seen = node(clients, "tasks_official.mjs", "cancel", live, name, ids[0])
    assert seen["kind"] == "task" and seen["outcome"] == "cancelled" and seen["server"] == "cancelled"
    assert await kernel_stopped_running(live, name)
    async with connect(live.mcp_url, live.token, mode="2026-07-28") as client:  # the output it produced, kept
        kept = await Tasks(client, OFFICIAL).get(seen["taskId"])
    assert kept["status"] == "cancelled" and "KeyboardInterrupt" in text_of(kept["result"])


async def test_official_retry_with_an_idempotency_key_is_the_same_task(live, clients):
    marker = f"runs-{uuid.uuid4().hex}.txt"
    name, ids = new_notebook(live.root, COUNTED.format(marker=marker), prefix="official")
    seen = node(clients, "tasks_official.mjs", "retry", live, name, ids[0], key=uuid.uuid4().hex)
    assert seen["first"] and seen["first"] == seen["second"]
    assert "slept 2" in text_of(seen["result"]) and await ran_once(live, marker)


# --- The project's client, in each dialect ------------------------------------------------------------------


async def raises(coro) -> MCPError:
    with pytest.raises(MCPError) as info:
        await coro
    return info.value


async def test_core_answers_what_the_call_would_have_for_a_cell_that_raised(live):
    """On the core, a call answered isError is a failed task whose tasks/result is that answer; on
    the seed's, tasks/result raises it."""
    name, ids = new_notebook(live.root, "1/0", prefix="core")
    async with connect(live.mcp_url, live.token) as client:
        core, seed = Tasks(client, CORE), Tasks(client, SEED)
        task = await core.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        answer = await core.result(task["taskId"])  # waits
        assert answer["isError"] and "ZeroDivisionError" in text_of(answer)
        assert (await core.get(task["taskId"]))["status"] == "failed"
        error = await raises(seed.result(task["taskId"]))
        assert error.error.code == -32603 and "ZeroDivisionError" in error.error.message


def acknowledged(answer: dict) -> bool:
    """An empty result: its type, and the server's stamp in _meta on 2026-07-28."""
    return answer["resultType"] == "complete" and set(answer) <= {"resultType", "_meta"}


async def test_official_shapes_on_the_wire(live, mode):
    """ttlMs and pollIntervalMs, resultType on every answer, the result inline in tasks/get, a cell
    that raised a completed task, no tasks/list or tasks/result, tasks/update and tasks/cancel
    acknowledged."""
    name, ids = new_notebook(live.root, "1/0", SLOW.format(s=1), prefix="official")
    async with connect(live.mcp_url, live.token, mode=mode) as client:
        tasks = Tasks(client, OFFICIAL)
        created = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        assert created["resultType"] == "task" and created["ttlMs"] is None and created["pollIntervalMs"] > 0
        assert "task" not in created and "ttl" not in created
        final = await tasks.wait(created["taskId"], timeout=60)
        assert final["resultType"] == "complete" and final["status"] == "completed"
        assert final["result"]["isError"] and final["result"]["resultType"] == "complete"
        assert "ZeroDivisionError" in text_of(final["result"]) and isinstance(final["ttlMs"], int)
        for method in ("tasks/list", "tasks/result"):
            error = await raises(tasks.request(method, {"taskId": created["taskId"]}))
            assert error.error.code == -32601, method
        assert acknowledged(await tasks.update(created["taskId"], {"never-asked": {"action": "accept"}}))
        assert acknowledged(await tasks.cancel(created["taskId"]))  # it ended: acknowledged, and unchanged
        assert (await tasks.get(created["taskId"]))["status"] == "completed"
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            error = await raises(tasks.request(method, {"taskId": "tsk_nope", "inputResponses": {}}))
            assert error.error.code == -32602, method
        answer = await tasks.run("cell_execute", {"path": name, "cell_id": ids[1]})
        assert "slept 1" in text_of(answer)


async def test_official_tasks_requests_must_name_their_task_in_mcp_name(live):
    name, ids = new_notebook(live.root, "1", prefix="official")
    async with connect(live.mcp_url, live.token, mode="2026-07-28") as client:
        tasks = Tasks(client, OFFICIAL)
        created = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        session = client.session
        data = {"method": "tasks/get", "params": {"taskId": created["taskId"]}}
        opts: dict = {}
        session._stamp(data, opts)
        data["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"] = {OFFICIAL: {}}
        opts.setdefault("headers", {})["Mcp-Name"] = "tsk_another"
        with pytest.raises(MCPError) as info:
            await session._dispatcher.send_raw_request("tasks/get", data["params"], opts)
        assert info.value.error.code == -32020 and "Mcp-Name" in info.value.error.message


async def official_request(client, method: str, params: dict, mcp_name: str | None) -> dict:
    """A 2026-07-28 request declaring the official extension, with this ``Mcp-Name`` header (or none)."""
    session = client.session
    data, opts = {"method": method, "params": dict(params)}, {}
    session._stamp(data, opts)
    data["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"] = {OFFICIAL: {}}
    if mcp_name is not None:
        opts.setdefault("headers", {})["Mcp-Name"] = mcp_name
    return await session._dispatcher.send_raw_request(method, data["params"], opts)


async def test_methods_the_official_extension_lacks_are_not_found_whatever_the_mcp_name_header(live):
    """2026-07-28 has no tasks/result nor tasks/list: -32601 with or without an Mcp-Name header (the
    official conformance suite sends tasks/result without one), never the header's -32020. A method it
    has still needs the header, read as the SDK reads Mcp-Name (a =?base64?...?= value decoded)."""
    name, ids = new_notebook(live.root, "1", prefix="official")
    async with connect(live.mcp_url, live.token, mode="2026-07-28") as client:
        created = await Tasks(client, OFFICIAL).submit("cell_execute", {"path": name, "cell_id": ids[0]})
        task_id = created["taskId"]
        for method, header in [("tasks/result", None), ("tasks/result", "tsk_another"), ("tasks/list", None),
                               ("tasks/result", task_id)]:
            error = await raises(official_request(client, method, {"taskId": task_id}, header))
            assert error.error.code == -32601 and f"{method} is not a method of" in error.error.message, header
        error = await raises(official_request(client, "tasks/get", {"taskId": task_id}, None))
        assert error.error.code == -32020 and "Mcp-Name" in error.error.message
        encoded = "=?base64?" + base64.b64encode(task_id.encode()).decode() + "?="
        assert (await official_request(client, "tasks/get", {"taskId": task_id}, encoded))["taskId"] == task_id


async def test_a_2026_client_that_declared_no_tasks_extension_gets_no_task(live):
    """The official extension: never a task for a client that did not declare it; -32021 names it."""
    name, ids = new_notebook(live.root, "1", prefix="plain")
    async with connect(live.mcp_url, live.token, mode="2026-07-28") as client:
        tasks = Tasks(client, CORE)  # declares nothing, which 2026-07-28 has no core tasks for
        error = await raises(tasks.request("tools/call", {"name": "cell_execute", "task": {},
                                                          "arguments": {"path": name, "cell_id": ids[0]}}))
        assert error.error.code == -32021 and OFFICIAL in json.dumps(error.error.data)
        result = await client.call_tool("cell_execute", {"path": name, "cell_id": ids[0]})
        assert not result.is_error  # without task metadata, the plain call it always was


async def test_official_is_advertised_exactly_empty_on_2026(live):
    async with connect(live.mcp_url, live.token, mode="2026-07-28") as client:
        raw = await Tasks(client).request("server/discover", {})
        assert raw["capabilities"]["extensions"][OFFICIAL] == {}
        assert "io.datalayer/tasks" in raw["capabilities"]["extensions"]
