"""Tasks are bounded per user, and a task store that goes away mid-task loses no final state
(issue 12, findings 6 and 7), against a real jupyter lab, real kernels and a real Redis."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest
from mcp.shared.exceptions import MCPError

from jupyter_mcp.client import Tasks, connect
from jupyter_mcp.testing import RedisServer, call, new_notebook

pytestmark = pytest.mark.live

REDIS_STORE = "--JupyterMCPApp.task_store_class=jupyter_mcp.tasks.redis_store:RedisTaskStore"


async def refusal(coro) -> MCPError:
    with pytest.raises(MCPError) as info:
        await coro
    return info.value.error


async def test_running_tasks_are_bounded_per_user(live_factory):
    """One more running task than max_running_tasks_per_user is refused, saying so, and starts
    nothing; once one ends, a new one is taken."""
    server = live_factory(args=["--JupyterMCPApp.max_running_tasks_per_user=2"])
    name, _ = new_notebook(server.root, "None", prefix="bound")
    async with connect(server.mcp_url, server.token) as client:
        tasks = Tasks(client)
        slow = [await tasks.submit("code_execute", {"path": name, "code": f"import time; time.sleep(30); {i}"})
                for i in range(2)]
        error = await refusal(tasks.submit("code_execute", {"path": name, "code": "open('third', 'w')"}))
        assert error.code == -32000
        assert "2 tasks running" in error.message and "max_running_tasks_per_user" in error.message
        assert len((await tasks.list())["tasks"]) == 2  # the refused call made no task
        await tasks.cancel(slow[1]["taskId"])
        after = await tasks.submit("notebook_list", {})
        assert (await tasks.wait(after["taskId"], timeout=30))["status"] == "completed"
        await tasks.cancel(slow[0]["taskId"])
    assert not (server.root / "third").exists()


async def test_kept_tasks_are_bounded_per_user_and_a_retry_still_answers(live_factory):
    """Past max_tasks_per_user kept tasks a new one is refused; a retry with the key of a kept
    task still answers that task; another user is not affected."""
    server = live_factory(token="alice-token", args=[
        "--JupyterMCPApp.max_tasks_per_user=3",
        "--ServerApp.identity_provider_class=jupyter_mcp.testing.identity.TwoUsers"])
    async with connect(server.mcp_url, "alice-token") as client:
        tasks = Tasks(client)
        first = await tasks.submit("notebook_list", {}, idempotency_key="k-1")
        for _ in range(2):
            await tasks.wait((await tasks.submit("notebook_list", {}))["taskId"], timeout=30)
        error = await refusal(tasks.submit("notebook_list", {}))
        assert error.code == -32000 and "3 tasks kept" in error.message and "max_tasks_per_user" in error.message
        again = await tasks.submit("notebook_list", {}, idempotency_key="k-1")
        assert again["taskId"] == first["taskId"]
    async with connect(server.mcp_url, "carol-token") as client:
        other = await Tasks(client).submit("notebook_list", {})
        assert other["status"] == "working"


async def test_a_result_past_the_size_bound_is_not_kept_and_says_so(live_factory):
    """A task whose result is larger than max_task_result_bytes ends failed, naming both sizes and
    the setting; what the run wrote stays in the notebook; the server keeps no copy of it."""
    server = live_factory(args=["--JupyterMCPApp.max_task_result_bytes=20000"])
    name, ids = new_notebook(server.root, "print('x' * 200_000)", "print('small')", prefix="bound")
    async with connect(server.mcp_url, server.token) as client:
        tasks = Tasks(client)
        big = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0], "max_output_chars": 0})
        state = await tasks.wait(big["taskId"], timeout=120)
        assert state["status"] == "failed"
        assert "max_task_result_bytes" in state["statusMessage"] and "20,000" in state["statusMessage"]
        error = await refusal(tasks.result(big["taskId"]))
        assert "more than the 20,000 a task keeps" in error.message and "cell_get" in error.message
        cell = await call(client, "cell_get", path=name, cell_id=ids[0], max_output_chars=0)
        assert cell["outputs"][0]["text"] == "x" * 200_000 + "\n"  # the run itself is all there
        small = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[1]})
        assert (await tasks.wait(small["taskId"], timeout=60))["status"] == "completed"
        assert (await tasks.result(small["taskId"]))["content"][0]["text"] == "small\n"


async def test_a_task_that_ends_while_redis_is_down_gets_its_result_once_redis_is_back(live_factory, tmp_path):
    """Redis stops mid-run and the run ends while it is down: the final state is written once
    Redis answers again (nothing stays working, nothing is lost)."""
    redis = RedisServer(tmp_path / "redis", persist=True)
    (tmp_path / "redis").mkdir()
    redis.start()
    try:
        server = live_factory(args=[REDIS_STORE, f"--JupyterMCPApp.task_store_options=url={redis.url}"])
        name, ids = new_notebook(server.root, "import time\ntime.sleep(4)\nprint('ran through')", prefix="outage")
        async with connect(server.mcp_url, server.token) as client:
            tasks = Tasks(client)
            await call(client, "code_execute", path=name, code="None", timeout=120)  # the kernel is up
            task = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
            await asyncio.sleep(1.0)
            redis.stop()
            await asyncio.sleep(6.0)  # the run ends (at 4 s) with Redis down
            redis.start()
            deadline = time.monotonic() + 30
            while True:
                try:
                    state = await tasks.get(task["taskId"])
                except MCPError:  # Redis still coming up
                    state = {"status": "unreadable"}
                if state["status"] not in ("working", "unreadable") or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
            assert state["status"] == "completed", state
            assert (await tasks.result(task["taskId"]))["content"][0]["text"] == "ran through\n"
        assert "Task exception was never retrieved" not in server.log()
    finally:
        redis.stop()


async def test_working_tasks_of_a_killed_server_end_failed_unread(live_factory, redis_server):
    """A server killed mid-run: another server ends its working tasks within seconds, without
    anyone reading them, so each gets its ttl and expires instead of staying working for ever."""
    import redis.asyncio as aioredis

    args = [REDIS_STORE, f"--JupyterMCPApp.task_store_options=url={redis_server.url}"]
    doomed = live_factory(args=args)
    name, ids = new_notebook(doomed.root, "import time\ntime.sleep(60)", prefix="orphan")
    async with connect(doomed.mcp_url, doomed.token) as client:
        task = await Tasks(client).submit("cell_execute", {"path": name, "cell_id": ids[0]})
        await asyncio.sleep(1.0)
    doomed.stop(sig=signal.SIGKILL)
    live_factory(args=args)  # a live server, which nobody asks about the task
    store = aioredis.from_url(redis_server.url, decode_responses=True)
    try:
        key = f"jupyter-mcp:task:{task['taskId']}"
        deadline = time.monotonic() + 40
        while json.loads(await store.get(key))["status"] == "working":
            assert time.monotonic() < deadline, "the killed server's task stayed working"
            await asyncio.sleep(0.5)
        record = json.loads(await store.get(key))
        assert record["status"] == "failed" and record["status_message"] == "server stopped"
        assert await store.pttl(key) > 0  # it expires with its ttl now
    finally:
        await store.aclose()
