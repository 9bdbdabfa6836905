"""MCP tasks, promise by promise (docs/tasks.md), against a real jupyter lab and a real kernel,
on both protocol eras. Each test's docstring states the promise it proves."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import asynccontextmanager

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from jupyter_mcp.client import IDEMPOTENCY_KEY, Tasks, connect
from jupyter_mcp.testing import call, eventually, new_notebook

SLOW = "import time\ntime.sleep({s})\nprint('slept {s}')"
TICKER = "import time\nfor i in range(1000):\n    print(f'tick {{i}}', flush=True)\n    time.sleep({every})"


@asynccontextmanager
async def tasks_on(server, mode, **kwargs):
    async with connect(server.mcp_url, server.token, mode=mode, **kwargs) as client:
        yield client, Tasks(client)


def notebook(server, *sources):
    return new_notebook(server.root, *sources, prefix="task")


async def raises(coro) -> MCPError:
    with pytest.raises(MCPError) as info:
        await coro
    return info.value


async def warm(client, name):
    """Start the notebook's kernel first, so a timed wait measures the cell, not a kernel start."""
    await call(client, "code_execute", path=name, code="None", timeout=120)


async def kernel_is_idle(client, name):
    """A follow-up execution returns at once: the kernel is not still running the old code."""
    started = time.monotonic()
    result = await call(client, "code_execute", path=name, code="print('idle')", timeout=20)
    return result["outputs"][0]["text"] == "idle\n" and time.monotonic() - started < 10


# --- Nothing changes unless you ask --------------------------------------------------------


@pytest.mark.live
async def test_without_task_metadata_tools_call_is_unchanged(live, mode):
    """A task is created only when the request carries task metadata. Without it,
    tools/call runs exactly as it always has and returns the tool's output."""
    name, ids = notebook(live, "print('plain')")
    async with tasks_on(live, mode) as (client, tasks):
        result = await client.call_tool("cell_execute", {"path": name, "cell_id": ids[0]})
        assert result.structured_content["outputs"][0]["text"] == "plain\n"
        before = {t["taskId"] for t in (await tasks.list())["tasks"]}
        raw = await tasks.request("tools/call", {"name": "cell_execute", "arguments": {"path": name, "index": 0}})
        assert "task" not in raw and raw["content"][0]["text"] == "plain\n"
        assert {t["taskId"] for t in (await tasks.list())["tasks"]} == before  # no task was made


@pytest.mark.live
async def test_create_task_result_returned_at_once(live, mode):
    """tools/call returns a task id immediately, the work goes on without the caller, and
    the answer is a CreateTaskResult rather than the tool's output, with taskId, status,
    createdAt, lastUpdatedAt, ttl, pollInterval."""
    name, ids = notebook(live, SLOW.format(s=3))
    async with tasks_on(live, mode) as (client, tasks):
        started = time.monotonic()
        task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]}, ttl=900000)
        assert time.monotonic() - started < 2.5  # long before the 3 s cell ends
        assert set(task) >= {"taskId", "status", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"}
        assert task["status"] == "working" and task["ttl"] == 900000 and task["pollInterval"] > 0
        assert task["taskId"].startswith("tsk_")
        assert (await tasks.get(task["taskId"]))["status"] == "working"
        done = await tasks.wait(task["taskId"], timeout=60)
        assert done["status"] == "completed"
        result = await tasks.result(task["taskId"])
        assert result["content"][0]["text"] == "slept 3\n"
        assert result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == task["taskId"]


@pytest.mark.live
async def test_result_available_from_another_connection(live, mode):
    """the client asks for the result whenever it likes — from another connection, after a reconnect"""
    name, ids = notebook(live, SLOW.format(s=1))
    async with tasks_on(live, mode) as (_, tasks):
        task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
    async with tasks_on(live, mode) as (_, later):
        await later.wait(task["taskId"], timeout=60)
        assert (await later.result(task["taskId"]))["content"][0]["text"] == "slept 1\n"


# --- A retry is one task --------------------------------------------------------------------


@pytest.mark.live
async def test_retry_with_key_answers_the_first_task(live, mode):
    """Name the call with an idempotency key and a retry answers the task the first attempt
    created, rather than starting the work again — also after a reconnect on a new session."""
    name, ids = notebook(live, "runs = globals().get('runs', 0) + 1\nprint(runs)")
    key = f"run-{uuid.uuid4()}"
    args = {"path": name, "cell_id": ids[0]}
    async with tasks_on(live, mode) as (_, tasks):
        first = await tasks.submit("cell_execute", args, idempotency_key=key)
        again = await tasks.submit("cell_execute", args, idempotency_key=key)
        assert again["taskId"] == first["taskId"]
    async with tasks_on(live, mode) as (client, reconnected):  # a new MCP session
        third = await reconnected.submit("cell_execute", args, idempotency_key=key)
        assert third["taskId"] == first["taskId"]
        await reconnected.wait(first["taskId"], timeout=60)
        result = await reconnected.result(first["taskId"])
        assert result["structuredContent"]["outputs"][0]["text"] == "1\n"
        runs = await call(client, "code_execute", path=name, code="print(runs)")
        assert runs["outputs"][0]["text"] == "1\n"  # the cell ran once


@pytest.mark.live
async def test_same_call_with_arguments_in_another_order_is_the_same_call(live, mode):
    """The same call written with its arguments in another order is still the same call."""
    name, ids = notebook(live, "x = 1")
    key = f"order-{uuid.uuid4()}"
    async with tasks_on(live, mode) as (_, tasks):
        a = await tasks.request("tools/call", {"name": "cell_get", "arguments": {"path": name, "cell_id": ids[0]},
                                               "task": {}, "_meta": {IDEMPOTENCY_KEY: key}})
        b = await tasks.request("tools/call", {"name": "cell_get", "arguments": {"cell_id": ids[0], "path": name},
                                               "task": {}, "_meta": {IDEMPOTENCY_KEY: key}})
        assert a["task"]["taskId"] == b["task"]["taskId"]


@pytest.mark.live
async def test_same_key_on_a_different_call_is_refused(live, mode):
    """The same key on a different call is refused rather than replayed."""
    name, ids = notebook(live, "x = 1", "y = 2")
    key = f"diff-{uuid.uuid4()}"
    async with tasks_on(live, mode) as (_, tasks):
        await tasks.submit("cell_get", {"path": name, "cell_id": ids[0]}, idempotency_key=key)
        error = await raises(tasks.submit("cell_get", {"path": name, "cell_id": ids[1]}, idempotency_key=key))
        assert "already names a different call" in error.error.message
        error = await raises(tasks.submit("notebook_get", {"path": name}, idempotency_key=key))
        assert "different call" in error.error.message


@pytest.mark.live
async def test_key_is_free_again_once_its_task_expired(live, mode):
    """A key belongs to a task, so it lives as long as the task does: once a task has
    expired its key is free again."""
    name, ids = notebook(live, "x = 1")
    key = f"expire-{uuid.uuid4()}"
    args = {"path": name, "cell_id": ids[0]}
    async with tasks_on(live, mode) as (_, tasks):
        first = await tasks.submit("cell_get", args, ttl=3000, idempotency_key=key)
        await tasks.wait(first["taskId"], timeout=30)
        assert (await tasks.submit("cell_get", args, ttl=3000, idempotency_key=key))["taskId"] == first["taskId"]
        await asyncio.sleep(3.2)
        second = await tasks.submit("cell_get", args, ttl=3000, idempotency_key=key)
        assert second["taskId"] != first["taskId"]


@pytest.mark.live
async def test_synchronous_call_with_key_is_not_deduplicated(live, mode):
    """a call that did not ask for a task is not deduplicated — a synchronous call carrying
    a key is still a synchronous call."""
    name, ids = notebook(live, "n = globals().get('n', 0) + 1\nprint(n)")
    key = f"sync-{uuid.uuid4()}"
    async with tasks_on(live, mode) as (client, tasks):
        outs = []
        for _ in range(2):
            raw = await tasks.request("tools/call", {"name": "cell_execute", "arguments": {"path": name, "index": 0},
                                                     "_meta": {IDEMPOTENCY_KEY: key}})
            outs.append(raw["structuredContent"]["outputs"][0]["text"])
        assert outs == ["1\n", "2\n"]


# --- The five states ---------------------------------------------------------------------------


@pytest.mark.live
async def test_states_and_terminal_ones_never_change(live, mode):
    """The last three are terminal: the record stops changing (completed, failed,
    cancelled; working while running; input_required is never produced here.)"""
    name, ids = notebook(live, "print('done')")
    async with tasks_on(live, mode) as (_, tasks):
        task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        done = await tasks.wait(task["taskId"], timeout=60)
        assert done["status"] == "completed" and "pollInterval" not in done
        error = await raises(tasks.cancel(task["taskId"]))
        assert "already completed" in error.error.message
        await asyncio.sleep(0.3)
        assert await tasks.get(task["taskId"]) == done
        failed = await tasks.submit("cell_get", {"path": name, "cell_id": "missing"})
        final = await tasks.wait(failed["taskId"], timeout=30)
        assert final["status"] == "failed"
        await raises(tasks.cancel(failed["taskId"]))
        assert await tasks.get(failed["taskId"]) == final
        listed = {t["taskId"]: t for t in (await tasks.list())["tasks"]}
        for record in (done, final):  # the list says the same (the 2026-07-28 envelope aside)
            assert listed[record["taskId"]] == {k: v for k, v in record.items() if k not in ("_meta", "resultType")}


@pytest.mark.live
async def test_tasks_list_is_newest_first_and_paginated(live_factory, mode):
    """tasks/list — The tasks this server holds, newest first (in pages of 50)."""
    server = live_factory()
    async with tasks_on(server, mode) as (_, tasks):
        made = [(await tasks.submit("notebook_list", {}))["taskId"] for _ in range(60)]
        first = await tasks.list()
        assert len(first["tasks"]) == 50 and first.get("nextCursor")
        second = await tasks.list(first["nextCursor"])
        assert "nextCursor" not in second
        listed = [t["taskId"] for t in first["tasks"] + second["tasks"]]
        assert listed == list(reversed(made))
        created = [t["createdAt"] for t in first["tasks"] + second["tasks"]]
        assert created == sorted(created, reverse=True)


@pytest.mark.live
async def test_there_is_no_tasks_update(live, mode):
    """There is no tasks/update. A client does not change a task."""
    async with tasks_on(live, mode) as (_, tasks):
        error = await raises(tasks.request("tasks/update", {"taskId": "tsk_x", "status": "completed"}))
        assert error.error.code == -32601


# --- A failure is a failed task ------------------------------------------------------------------


@pytest.mark.live
async def test_failed_task_carries_the_error_and_result_raises(live, mode):
    """A tool that raised ends failed, carrying the error, and tasks/result raises it."""
    name, _ = notebook(live, "x = 1")
    async with tasks_on(live, mode) as (_, tasks):
        task = await tasks.submit("cell_get", {"path": name, "cell_id": "nope"})
        final = await tasks.wait(task["taskId"], timeout=30)
        assert final["status"] == "failed" and "no cell with id 'nope'" in final["statusMessage"]
        error = await raises(tasks.result(task["taskId"]))
        assert "no cell with id 'nope'" in error.error.message


@pytest.mark.live
async def test_result_of_a_working_task_is_refused(live, mode):
    """tasks/result on a task that is still working is refused too."""
    name, ids = notebook(live, SLOW.format(s=3))
    async with tasks_on(live, mode) as (_, tasks):
        task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        error = await raises(tasks.result(task["taskId"]))
        assert "still working" in error.error.message
        await tasks.wait(task["taskId"], timeout=60)


# --- Cancelling stops the work -----------------------------------------------------------------------


@pytest.mark.live
@pytest.mark.parametrize("tool", ["cell_execute", "cell_execute_stream", "code_execute", "code_execute_stream"])
async def test_cancel_interrupts_the_kernel_and_keeps_the_lines(live, mode, tool):
    """tasks/cancel does two things, in this order: it interrupts the work, then it stops
    waiting for it, for every loop that waits for a cell: cell_execute streaming and not,
    code_execute (acceptance: a line every 0.2 s, cancelled after about 2 s)."""
    name, ids = notebook(live, TICKER.format(every=0.2))
    base, _, stream = tool.partition("_stream")
    args = {"path": name, "stream": bool(_)}
    args.update({"cell_id": ids[0]} if base == "cell_execute" else {"code": TICKER.format(every=0.2)})
    async with tasks_on(live, mode) as (client, tasks):
        await warm(client, name)
        task = await tasks.submit(base, args)
        await asyncio.sleep(2.0)
        cancelled = await tasks.cancel(task["taskId"])
        assert cancelled["status"] == "cancelled"
        assert (await tasks.get(task["taskId"]))["status"] == "cancelled"
        result = await tasks.result(task["taskId"])
        text = "".join(c.get("text", "") for c in result["content"] if c["type"] == "text")
        lines = [ln for ln in text.splitlines() if ln.startswith("tick ")]
        assert len(lines) >= 5 and lines == [f"tick {i}" for i in range(len(lines))]
        assert await kernel_is_idle(client, name)
        first = await call(client, "code_execute", path=name, code="print(i)")
        await asyncio.sleep(0.5)
        second = await call(client, "code_execute", path=name, code="print(i)")
        assert first["outputs"][0]["text"] == second["outputs"][0]["text"]  # the loop really stopped


MARK = "open({path!r}, 'w').write('ran')"


@pytest.mark.live
async def test_a_cancelled_run_waiting_behind_another_never_runs(live, mode):
    """A cancelled task never starts its code, whatever stage it is in: here its cell waits
    behind another run on the same kernel. It ends cancelled, its cell is left as it was,
    and the kernel never runs it, not even once the run ahead of it ends."""
    marker = live.root / f"ran-{uuid.uuid4().hex[:8]}"
    name, ids = notebook(live, SLOW.format(s=3), MARK.format(path=str(marker)))
    async with tasks_on(live, mode) as (client, tasks):
        await warm(client, name)
        ahead = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        await asyncio.sleep(0.5)
        queued = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[1]})
        await asyncio.sleep(0.5)
        assert (await tasks.cancel(queued["taskId"]))["status"] == "cancelled"
        assert (await tasks.wait(ahead["taskId"], timeout=60))["status"] == "completed"
        await asyncio.sleep(1.0)
        assert await kernel_is_idle(client, name)
        assert not marker.exists()
        cell = await call(client, "cell_get", path=name, cell_id=ids[1])
        assert cell["execution_count"] is None and cell["outputs"] == []


@pytest.mark.live
async def test_a_cancelled_run_whose_kernel_is_starting_never_runs(live, mode):
    """The same while the notebook's kernel is still starting: cancelled at several moments
    of the start (session being made, kernel not ready yet), the code never runs, and the
    kernel, once up, is there for the next call."""
    cancelled_in_time = 0
    async with tasks_on(live, mode) as (client, tasks):
        for delay in (0.05, 0.3, 0.6, 1.0):
            marker = live.root / f"ran-{uuid.uuid4().hex[:8]}"
            name, ids = notebook(live, MARK.format(path=str(marker)))
            task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0], "timeout": 120})
            await asyncio.sleep(delay)
            try:
                cancelled = await tasks.cancel(task["taskId"])
            except MCPError as exc:  # the kernel was up and the cell ran before the cancel came
                assert "already completed" in exc.error.message
                continue
            assert cancelled["status"] == "cancelled"
            try:  # a result: the code had reached the kernel before the cancel did (the kernel
                ran = await tasks.result(task["taskId"])  # is interrupted, the answer kept)
            except MCPError as exc:
                assert "no result" in exc.error.message  # stopped before it sent anything
            else:  # the cell's own answer, or the output it had made so far
                got = ran["structuredContent"]
                assert got["status"] in ("ok", "interrupted") or got["outputs"], got
                continue
            cancelled_in_time += 1
            await warm(client, name)
            await asyncio.sleep(1.0)
            assert not marker.exists(), f"cancelled {delay}s into the kernel's start, the cell ran anyway"
    assert cancelled_in_time >= 2


@pytest.mark.live
async def test_the_tools_own_result_wins_the_race(live, mode):
    """A tool's own result always wins. If the call returned while the cancellation was
    landing, the complete answer is not replaced by the half that was visible a moment earlier."""
    code = "import time\nprint('started', flush=True)\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    print('cleaned up')"
    name, ids = notebook(live, code)
    async with tasks_on(live, mode) as (client, tasks):
        await warm(client, name)
        task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})

        async def started():
            return "started" in str((await call(client, "cell_get", path=name, cell_id=ids[0]))["outputs"])

        await eventually(started, what="the cell printed 'started'")
        await tasks.cancel(task["taskId"])
        result = await tasks.result(task["taskId"])
        assert result["structuredContent"]["status"] == "ok"  # the tool's complete answer
        assert "partial" not in result["structuredContent"]
        assert [o["text"] for o in result["structuredContent"]["outputs"]] == ["started\ncleaned up\n"]


@pytest.mark.live
async def test_partial_output_becomes_the_result_when_the_work_will_not_stop(live, mode):
    """On cancellation the partial output becomes the result — the task is terminal, so
    tasks/result serves it. (The cell ignores the interrupt: the wait is abandoned.)"""
    code = ("import time\ni = 0\nwhile True:\n    try:\n        print(f'line {i}', flush=True); i += 1\n"
            "        time.sleep(0.2)\n    except KeyboardInterrupt:\n        pass")
    name, ids = notebook(live, code)
    async with tasks_on(live, mode) as (client, tasks):
        await warm(client, name)
        task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        await asyncio.sleep(1.5)
        assert (await tasks.cancel(task["taskId"]))["status"] == "cancelled"
        result = await tasks.result(task["taskId"])
        assert result["structuredContent"]["partial"] is True
        lines = result["structuredContent"]["outputs"][0]["text"].splitlines()
        assert lines[:3] == ["line 0", "line 1", "line 2"]
    await restart_kernel_of(live, name)


@pytest.mark.live
async def test_cancelled_task_that_produced_nothing_keeps_no_result(live, mode):
    """A task that produced nothing keeps no result: an empty list there would read as a
    measured zero rather than as nothing to measure."""
    code = "import time\nwhile True:\n    try:\n        time.sleep(0.1)\n    except KeyboardInterrupt:\n        pass"
    name, ids = notebook(live, code)
    async with tasks_on(live, mode) as (client, tasks):
        await warm(client, name)
        task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        await asyncio.sleep(1.0)
        await tasks.cancel(task["taskId"])
        error = await raises(tasks.result(task["taskId"]))
        assert "no result" in error.error.message
    await restart_kernel_of(live, name)


@pytest.mark.live
async def test_failed_task_keeps_its_partial_output(live, mode):
    """A failed task keeps its partial output too, though tasks/result raises for it.
    (The kernel dies after printing: the tool fails; the lines are in the error.)"""
    code = "import os, signal, time\nprint('diagnosis', flush=True)\ntime.sleep(0.5)\nos.kill(os.getpid(), signal.SIGKILL)"
    name, ids = notebook(live, code)
    async with tasks_on(live, mode) as (_, tasks):
        task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0], "timeout": 60})
        final = await tasks.wait(task["taskId"], timeout=60)
        assert final["status"] == "failed" and "kernel died" in final["statusMessage"]
        error = await raises(tasks.result(task["taskId"]))
        assert "kernel died" in error.error.message
        assert error.error.data["partial"]["structuredContent"]["outputs"][0]["text"] == "diagnosis\n"


@pytest.mark.live
async def test_a_cell_that_raised_ends_its_task_failed_with_its_outputs(live, mode):
    """A cell that printed and then raised is a failed call: as a task it ends failed, its
    status message names the error, and tasks/result raises it with the outputs kept."""
    name, ids = notebook(live, "print('before the error', flush=True)\n1 / 0")
    async with tasks_on(live, mode) as (_, tasks):
        task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0], "timeout": 60})
        final = await tasks.wait(task["taskId"], timeout=60)
        assert final["status"] == "failed" and "ZeroDivisionError" in final["statusMessage"]
        error = await raises(tasks.result(task["taskId"]))
        assert "ZeroDivisionError" in error.error.message
        kept = error.error.data["partial"]
        assert kept["isError"] is True and kept["structuredContent"]["status"] == "error"
        outputs = kept["structuredContent"]["outputs"]
        assert outputs[0]["text"] == "before the error\n" and outputs[1]["ename"] == "ZeroDivisionError"


# --- Retention -----------------------------------------------------------------------------------


@pytest.mark.live
async def test_expired_task_answers_exactly_like_one_that_never_existed(live, mode):
    """Asking for an expired task answers no such task, the same answer as for one that never existed."""
    name, ids = notebook(live, "x = 1")
    async with tasks_on(live, mode) as (_, tasks):
        task = await tasks.submit("cell_get", {"path": name, "cell_id": ids[0]}, ttl=1500)
        await tasks.wait(task["taskId"], timeout=30)
        await asyncio.sleep(1.6)
        gone = await raises(tasks.get(task["taskId"]))
        invented = "tsk_" + uuid.uuid4().hex
        never = await raises(tasks.get(invented))
        assert (gone.error.code, gone.error.message.replace(task["taskId"], "ID")) == \
               (never.error.code, never.error.message.replace(invented, "ID"))
        for method in ("tasks/result", "tasks/cancel"):
            error = await raises(tasks.request(method, {"taskId": task["taskId"]}))
            assert "no such task" in error.error.message
        assert task["taskId"] not in [t["taskId"] for t in (await tasks.list())["tasks"]]


@pytest.mark.live
async def test_running_task_never_expires_and_ttl_is_capped(live, mode):
    """A task that is still running never expires" and the ttl is "15 minutes by default,
    capped at 24 hours"; "Every working task carries a pollInterval in milliseconds."""
    name, ids = notebook(live, SLOW.format(s=3))
    async with tasks_on(live, mode) as (_, tasks):
        task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]}, ttl=1500)
        await asyncio.sleep(2.0)  # older than its ttl, and still running
        alive = await tasks.get(task["taskId"])
        assert alive["status"] == "working" and isinstance(alive["pollInterval"], int)
        await tasks.wait(task["taskId"], timeout=60)
        default = await tasks.submit("cell_get", {"path": name, "cell_id": ids[0]})
        assert default["ttl"] == 15 * 60 * 1000
        capped = await tasks.submit("cell_get", {"path": name, "cell_id": ids[0]}, ttl=10 * 24 * 3600 * 1000)
        assert capped["ttl"] == 24 * 3600 * 1000
        bad = await raises(tasks.submit("cell_get", {"path": name, "cell_id": ids[0]}, ttl=-5))
        assert "ttl" in bad.error.message


# --- Polling, and the notification -----------------------------------------------------------------


@pytest.mark.live
async def test_terminal_notification_carries_status_not_result(live):
    """notifications/tasks/status is an optimisation on top, sent when a task reaches a
    terminal state ... The notification carries the status and never the result. (On
    2025-11-25, where the session's standalone GET stream carries it; a 2026-07-28 client
    has no such stream and learns the status by polling, which every other test does.)"""
    name, ids = notebook(live, "print('x' * 10)")
    seen: list = []

    async def on_status(params):
        seen.append(params)

    async with tasks_on(live, "legacy", on_task_status=on_status) as (_, tasks):
        task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        done = await tasks.wait(task["taskId"], timeout=60)
        assert done["status"] == "completed"
        for _ in range(50):
            if seen:
                break
            await asyncio.sleep(0.1)
        assert seen, "no notifications/tasks/status arrived"
        params = seen[-1].model_dump(by_alias=True)
        assert params["taskId"] == task["taskId"] and params["status"] == "completed"
        assert "result" not in json.dumps(params) and "xxxxxxxxxx" not in json.dumps(params)


# --- Where tasks live -------------------------------------------------------------------------------------


@pytest.mark.live
def test_a_store_that_cannot_be_imported_stops_the_server(tmp_path):
    """A store that cannot be imported is a startup failure, not a fallback to memory."""
    from jupyter_mcp.testing import LiveServer

    server = LiveServer(tmp_path, env={"JUPYTER_MCP_TASK_STORE_CLASS": "no_such_module:Store"})
    with pytest.raises(RuntimeError, match="exited"):
        server.start(timeout=60)
    assert server.proc.returncode != 0
    assert "no_such_module:Store" in server.log() and "cannot be imported" in server.log()


@pytest.mark.live
async def test_redis_store_survives_restart_and_fails_orphans(live_factory, redis_server, mode):
    """With JUPYTER_MCP_TASK_STORE_CLASS=...:RedisTaskStore: a completed task and its result are
    readable after a server restart; a task working when its server died answers failed."""
    server = live_factory(env={"JUPYTER_MCP_TASK_STORE_CLASS": "jupyter_mcp.tasks.redis_store:RedisTaskStore"},
                          args=[f"--JupyterMCPApp.task_store_options=url={redis_server.url}"])
    name, ids = notebook(server, "print('kept in redis')", SLOW.format(s=60))
    async with tasks_on(server, mode) as (_, tasks):
        done = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        await tasks.wait(done["taskId"], timeout=60)
        running = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[1]})
        await asyncio.sleep(1.0)
    server.restart()
    async with tasks_on(server, mode) as (_, tasks):
        result = await tasks.result(done["taskId"])
        assert result["content"][0]["text"] == "kept in redis\n"
        assert (await tasks.get(running["taskId"]))["status"] == "failed"  # SIGTERM: stopped cleanly
    import signal

    orphan_notebook, orphan_ids = notebook(server, SLOW.format(s=60))
    async with tasks_on(server, mode) as (_, tasks):
        orphan = await tasks.submit("cell_execute", {"path": orphan_notebook, "cell_id": orphan_ids[0]})
        await asyncio.sleep(1.0)
    server.stop(sig=signal.SIGKILL)  # killed mid-run: no chance to mark anything
    server.start()
    async with tasks_on(server, mode) as (_, tasks):
        deadline = time.monotonic() + 30
        while (state := await tasks.get(orphan["taskId"]))["status"] == "working":
            assert time.monotonic() < deadline, "the orphaned task kept working"
            await asyncio.sleep(0.5)
        assert state["status"] == "failed" and state["statusMessage"] == "server stopped"


# --- An extension, for now ----------------------------------------------------------------------------------


@pytest.mark.live
async def test_advertised_under_io_datalayer_tasks_on_both_eras(live, mode):
    """the server binds them as an extension advertised under io.datalayer/tasks."""
    async with tasks_on(live, mode) as (client, _):
        tools = (await client.list_tools()).tools
        if mode == "legacy":
            assert all(t.execution and t.execution.task_support == "optional" for t in tools)
            caps = client.session.server_capabilities
            assert "io.datalayer/tasks" in (caps.experimental or {})
            assert caps.tasks is not None and caps.tasks.cancel is not None and caps.tasks.list is not None
        else:
            raw = await Tasks(client).request("server/discover", {})
            assert "io.datalayer/tasks" in raw["capabilities"]["extensions"]


@pytest.mark.unit
def test_binding_refuses_to_construct_once_the_sdk_claims_the_methods(monkeypatch):
    """until then the binding will refuse to construct the moment the SDK claims those
    methods, which is the loud way to find out."""
    import fastmcp.server.extensions as extensions

    from jupyter_mcp.tasks import InMemoryTaskStore, TaskManager, TasksExtension

    manager = TaskManager(InMemoryTaskStore(), default_ttl_ms=1000, max_ttl_ms=1000, poll_interval_ms=1000)
    TasksExtension(manager, lambda request: "me")  # today: fine
    monkeypatch.setattr(extensions, "SPEC_CLIENT_METHODS", extensions.SPEC_CLIENT_METHODS | {"tasks/get"})
    with pytest.raises(ValueError, match="tasks/get"):
        TasksExtension(manager, lambda request: "me")


# --- Users ------------------------------------------------------------------------------------------------


@pytest.mark.live
async def test_tasks_and_keys_are_scoped_to_the_user(live_factory, mode):
    """Keys and tasks are scoped to the authenticated user: one user never sees, replays or
    cancels another's."""
    server = live_factory(token="alice-token", args=["--ServerApp.identity_provider_class=jupyter_mcp.testing.identity.TwoUsers"])
    name, ids = notebook(server, SLOW.format(s=3))
    key = "shared-key"
    async with connect(server.mcp_url, "alice-token", mode=mode) as a, \
            connect(server.mcp_url, "bob-token", mode=mode) as b:
        alice, bob = Tasks(a), Tasks(b)
        mine = await alice.submit("cell_execute", {"path": name, "cell_id": ids[0]}, idempotency_key=key)
        for method in ("tasks/get", "tasks/cancel", "tasks/result"):
            error = await raises(bob.request(method, {"taskId": mine["taskId"]}))
            assert "no such task" in error.error.message
        assert mine["taskId"] not in [t["taskId"] for t in (await bob.list())["tasks"]]
        theirs = await bob.submit("cell_execute", {"path": name, "cell_id": ids[0]}, idempotency_key=key)
        assert theirs["taskId"] != mine["taskId"]  # the same key is bob's own
        assert (await alice.get(mine["taskId"]))["status"] == "working"
        await alice.wait(mine["taskId"], timeout=60)
        await bob.wait(theirs["taskId"], timeout=60)


async def restart_kernel_of(server, name):
    sessions = httpx.get(server.url + "api/sessions", headers=server.headers).json()
    for s in sessions:
        if s["path"] == name:
            httpx.post(server.url + f"api/kernels/{s['kernel']['id']}/restart", headers=server.headers, timeout=60)
