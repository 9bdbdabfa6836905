"""Two real `jupyter lab` servers sharing one real Redis task store (issue 16), as two replicas
of one user's server would run behind a load balancer: a task made on one is answered by the
other, one idempotency key makes one task whichever server gets the call, a killed server's
task ends failed with the output it had printed, a cancel sent to the other server stops the
kernel that runs it, and clients of both protocol eras go on across a restart.

The two servers share the token (one user) and the workspace folder: a call names a notebook by
its path, and a replica that got the call must find the same notebook there. Each notebook
here is still opened by one server only: a notebook's room lives in one server.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import pytest
from mcp.shared.exceptions import MCPError

from jupyter_mcp.client import CORE, LEGACY, MODERN, Tasks, connect
from jupyter_mcp.testing import LiveServer, call, new_notebook
from jupyter_mcp.testing.plugin import starts_process

pytestmark = pytest.mark.live

REDIS_STORE = "--JupyterMCPApp.task_store_class=jupyter_mcp.tasks.redis_store:RedisTaskStore"
TICKER = "import time\nfor i in range(300):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.2)"


@pytest.fixture(scope="module")
@starts_process
def pair(tmp_path_factory, redis_server):
    """Servers A and B: one token, one Redis, one workspace folder."""
    base = tmp_path_factory.mktemp("pair")
    token = secrets.token_hex(16)
    args = [REDIS_STORE, f"--JupyterMCPApp.task_store_options=url={redis_server.url}"]
    a = LiveServer(base / "a", token=token, args=args)
    b = LiveServer(base / "b", token=token, args=args)
    b.root = a.root
    with ThreadPoolExecutor(2) as pool:
        started = [pool.submit(server.start) for server in (a, b)]
    try:
        for future in started:
            future.result()
        yield a, b
    finally:
        a.stop()
        b.stop()


@asynccontextmanager
async def tasks_on(server, mode=LEGACY):
    async with connect(server.mcp_url, server.token, mode=mode) as client:
        yield client, Tasks(client)


def text_of(result) -> str:
    return "".join(c.get("text", "") for c in result["content"] if c["type"] == "text")


def ticks(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if line.startswith("tick ")]
    assert lines == [f"tick {i}" for i in range(len(lines))], lines  # in order, none lost
    return lines


async def partial_in_store(redis_server, task_id, at_least=3, within=30):
    """Wait until the running task's output so far (at least ``at_least`` ticks) is in Redis:
    what another server serves if this one dies or the task is cancelled there."""
    import redis.asyncio as aioredis

    store = aioredis.from_url(redis_server.url, decode_responses=True)
    try:
        deadline = time.monotonic() + within
        while True:
            record = json.loads(await store.get(f"jupyter-mcp:task:{task_id}"))
            if record["status"] == "working" and record["partial"] and \
                    len(ticks(text_of(record["partial"]))) >= at_least:
                return
            assert record["status"] == "working", record["status"]
            assert time.monotonic() < deadline, f"the running task's output did not reach the store within {within}s"
            await asyncio.sleep(0.3)
    finally:
        await store.aclose()


# --- What one server made, the other answers ------------------------------------------------------


async def test_a_task_made_on_one_server_is_answered_by_the_other(pair, mode):
    """tasks/get, tasks/list and tasks/result on B answer a task made on A, and the other way."""
    a, b = pair
    name, ids = new_notebook(a.root, "import time\ntime.sleep(2)\nprint('ran on A')", prefix="seen")
    async with tasks_on(a, mode) as (_, on_a), tasks_on(b, mode) as (_, on_b):
        task = await on_a.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        assert (await on_b.get(task["taskId"]))["status"] == "working"
        assert task["taskId"] in [t["taskId"] for t in (await on_b.list())["tasks"]]
        assert (await on_b.wait(task["taskId"], timeout=120))["status"] == "completed"
        assert text_of(await on_b.result(task["taskId"])) == "ran on A\n"

        made_on_b = await on_b.submit("notebook_list", {})
        assert (await on_a.wait(made_on_b["taskId"], timeout=60))["status"] == "completed"
        listed = (await on_a.result(made_on_b["taskId"]))["structuredContent"]["notebooks"]
        assert name in [nb["path"] for nb in listed]  # B lists the shared workspace
        assert {task["taskId"], made_on_b["taskId"]} <= {t["taskId"] for t in (await on_a.list())["tasks"]}


async def test_the_cores_tasks_result_on_the_other_server_waits_for_the_end(pair):
    """2025-11-25 core: tasks/result sent to B for a task A runs waits until it ends, then answers it."""
    a, b = pair
    name, ids = new_notebook(a.root, "import time\ntime.sleep(3)\nprint('ran on A')", prefix="wait")
    async with connect(a.mcp_url, a.token) as on_a, connect(b.mcp_url, b.token) as on_b:
        task = await Tasks(on_a, CORE).submit("cell_execute", {"path": name, "cell_id": ids[0]})
        assert text_of(await Tasks(on_b, CORE).result(task["taskId"])) == "ran on A\n"


# --- One key, one task, whichever server gets the call --------------------------------------------


async def test_a_retry_sent_to_the_other_server_answers_the_first_task(pair, mode):
    """The same call with the same key sent to B while A runs it answers A's task, and the cell
    runs once (B never opens the notebook); the key on another call is refused on B too."""
    a, b = pair
    name, ids = new_notebook(a.root, "import time\ntime.sleep(3)\nprint('once')", prefix="retry")
    key = f"retry-{uuid.uuid4().hex}"
    async with tasks_on(a, mode) as (client_a, on_a), tasks_on(b, mode) as (client_b, on_b):
        first = await on_a.submit("cell_execute", {"path": name, "cell_id": ids[0]}, idempotency_key=key)
        again = await on_b.submit("cell_execute", {"cell_id": ids[0], "path": name}, idempotency_key=key)
        assert again["taskId"] == first["taskId"]
        with pytest.raises(MCPError) as other_call:
            await on_b.submit("code_execute", {"path": name, "code": "1"}, idempotency_key=key)
        assert other_call.value.error.code == -32602 and "already names a different call" in other_call.value.error.message
        assert (await on_b.wait(first["taskId"], timeout=120))["status"] == "completed"
        assert text_of(await on_b.result(first["taskId"])) == "once\n"
        assert (await call(client_a, "cell_get", path=name, cell_id=ids[0]))["execution_count"] == 1
        assert name not in [room["path"] for room in (await call(client_b, "room_list"))["rooms"]]


async def test_the_same_key_sent_to_both_servers_at_once_makes_one_task(pair):
    """Two servers racing with one key: both answer the same task, every time."""
    a, b = pair
    async with tasks_on(a) as (_, on_a), tasks_on(b) as (_, on_b):
        for _ in range(20):
            key = f"race-{uuid.uuid4().hex}"
            made = await asyncio.gather(on_a.submit("notebook_list", {}, idempotency_key=key),
                                        on_b.submit("notebook_list", {}, idempotency_key=key))
            assert made[0]["taskId"] == made[1]["taskId"]



# --- A server dies, a cancel crosses servers, a server restarts --------------------------------------


async def test_a_killed_servers_task_ends_failed_on_the_other_with_its_output(pair, redis_server):
    """SIGKILL A mid-run: within seconds B answers the task failed, "server stopped", and its
    error carries the lines the cell had printed (A wrote its output so far to Redis as it ran)."""
    a, b = pair
    name, ids = new_notebook(a.root, TICKER, prefix="failover")
    try:
        async with tasks_on(a) as (_, on_a):
            task = await on_a.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        await partial_in_store(redis_server, task["taskId"], within=120)
        a.stop(sig=signal.SIGKILL)
        killed = time.monotonic()
        async with tasks_on(b) as (_, on_b):
            while (state := await on_b.get(task["taskId"]))["status"] == "working":
                assert time.monotonic() - killed < 40, "B still answers working 40 s after A was killed"
                await asyncio.sleep(0.25)
            print(f"\nfailover: B answered {state['status']} {time.monotonic() - killed:.1f} s after the kill")
            assert state["status"] == "failed" and state["statusMessage"] == "server stopped"
            with pytest.raises(MCPError) as failed:
                await on_b.result(task["taskId"])
        error = failed.value.error
        assert error.code == -32603 and error.message == "task failed: server stopped"
        partial = error.data["partial"]
        assert partial["structuredContent"]["partial"] is True
        assert len(ticks(text_of(partial))) >= 3
    finally:
        if a.proc.poll() is not None:
            a.start()


async def test_a_cancel_sent_to_the_other_server_stops_the_kernel(pair, redis_server, mode):
    """tasks/cancel on B of a task running on A answers cancelled at once, with the output
    A had stored; A sees the cancel at its next poll and interrupts its kernel for real: the
    cell ends in KeyboardInterrupt and the loop stops."""
    a, b = pair
    name, ids = new_notebook(a.root, TICKER, prefix="cancel")
    async with tasks_on(a, mode) as (client_a, on_a), tasks_on(b, mode) as (_, on_b):
        task = await on_a.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        await partial_in_store(redis_server, task["taskId"], within=120)
        asked = time.monotonic()
        assert (await on_b.cancel(task["taskId"]))["status"] == "cancelled"
        assert (await on_a.get(task["taskId"]))["status"] == "cancelled"
        assert len(ticks(text_of(await on_b.result(task["taskId"])))) >= 3
        deadline = time.monotonic() + 30
        while True:  # the interrupt lands in the cell A runs
            outputs = (await call(client_a, "cell_get", path=name, cell_id=ids[0]))["outputs"]
            if any(o.get("ename") == "KeyboardInterrupt" for o in outputs):
                print(f"\ncancel on B: A's cell interrupted within {time.monotonic() - asked:.1f} s")
                break
            assert time.monotonic() < deadline, f"A's kernel was not interrupted within 30 s: {outputs[-2:]}"
            await asyncio.sleep(0.5)
        first = await call(client_a, "code_execute", path=name, code="print(i)", timeout=20)
        await asyncio.sleep(0.5)
        second = await call(client_a, "code_execute", path=name, code="print(i)", timeout=20)
        assert first["outputs"][0]["text"] == second["outputs"][0]["text"]  # the loop really stopped
    assert "Task exception was never retrieved" not in a.log()


async def test_clients_of_both_eras_go_on_across_a_restart_and_tasks_survive(pair):
    """A restarts (SIGTERM, same address). A 2026-07-28 client has no session and simply goes on.
    A 2025-11-25 client's session is gone: its next request answers HTTP 404 with the JSON-RPC
    error "Session not found", which the SDK raises and does not recover from by itself (neither
    does jupyter_mcp.client); the client re-initializes (a new connection, as the spec says) and
    goes on. A task finished before the restart is read by both."""
    a, _ = pair
    name, ids = new_notebook(a.root, "print('before the restart')", prefix="restart")
    async with tasks_on(a, MODERN) as (modern, on_modern), tasks_on(a, LEGACY) as (legacy, _):
        task = await on_modern.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        assert (await on_modern.wait(task["taskId"], timeout=120))["status"] == "completed"
        await call(legacy, "notebook_list")
        a.stop()
        a.start()
        assert text_of(await on_modern.result(task["taskId"])) == "before the restart\n"
        assert name in [nb["path"] for nb in (await call(modern, "notebook_list"))["notebooks"]]
        with pytest.raises(MCPError) as gone:
            await legacy.call_tool("notebook_list", {})
        assert (gone.value.error.code, gone.value.error.message) == (-32600, "Session not found")
    async with tasks_on(a, LEGACY) as (legacy, on_legacy):  # re-initialized
        assert text_of(await on_legacy.result(task["taskId"])) == "before the restart\n"
        assert name in [nb["path"] for nb in (await call(legacy, "notebook_list"))["notebooks"]]


async def test_racing_stores_claim_a_key_once(redis_server):
    """The claim itself, many times over: two task managers on two Redis connections (two
    servers) submit under each of 2,000 keys at once; each key makes exactly one task, run
    once. (Before the claim was one transaction, a reader could find a key whose record was
    not written yet, take it for expired and make a second task: a few in a thousand.)"""
    from jupyter_mcp.tasks.manager import TaskManager
    from jupyter_mcp.tasks.redis_store import RedisTaskStore

    prefix = f"race-{uuid.uuid4().hex[:8]}:"
    servers = [TaskManager(RedisTaskStore(url=redis_server.url, prefix=prefix), default_ttl_ms=60_000,
                           max_ttl_ms=60_000, poll_interval_ms=1000) for _ in range(2)]
    runs = 0

    async def work():
        nonlocal runs
        runs += 1
        return {"content": []}

    async def notify(record):
        pass

    async def submit(server, key, delay):
        await asyncio.sleep(delay)
        return await server.submit(owner=f"user-{key}", tool="t", fingerprint="f", ttl=None, key=key,
                                   work=work, notify=notify)

    for server in servers:
        await server.start()
    try:
        doubled = 0
        for batch in range(40):
            keys = [f"k{batch}-{i}" for i in range(50)]
            made = await asyncio.gather(*(asyncio.gather(submit(servers[0], k, i % 7 / 1000),
                                                         submit(servers[1], k, i % 5 / 1000)) for i, k in enumerate(keys)))
            doubled += sum(first.task_id != second.task_id for first, second in made)
        assert doubled == 0, f"{doubled} of 2000 keys made two tasks"
        await asyncio.gather(*(run.done.wait() for server in servers for run in list(server.runs.values())))
        assert runs == 2000
    finally:
        for server in servers:
            await server.stop()


async def test_a_cancel_made_on_another_server_reaches_the_run_and_leaves_nothing_behind(redis_server):
    """B marks the task cancelled in Redis; A, which runs it, sees that at its next poll,
    interrupts the work and then forgets the run (it does not linger in A's table of runs)."""
    from jupyter_mcp.tasks import register_interrupt
    from jupyter_mcp.tasks.manager import TaskManager
    from jupyter_mcp.tasks.redis_store import RedisTaskStore

    prefix = f"cancel-{uuid.uuid4().hex[:8]}:"
    a, b = (TaskManager(RedisTaskStore(url=redis_server.url, prefix=prefix), default_ttl_ms=60_000,
                        max_ttl_ms=60_000, poll_interval_ms=100) for _ in range(2))
    interrupted, running = asyncio.Event(), asyncio.Event()

    async def work():
        await register_interrupt(interrupted.set)
        running.set()
        await interrupted.wait()
        return {"content": [{"type": "text", "text": "stopped by the interrupt"}]}

    async def notify(record):
        pass

    await a.start()
    await b.start()
    try:
        task = await a.submit(owner="alice", tool="t", fingerprint="f", ttl=None, key=None, work=work, notify=notify)
        await asyncio.wait_for(running.wait(), 10)  # A runs it
        assert (await b.cancel("alice", task.task_id, notify)).status == "cancelled"
        await asyncio.wait_for(interrupted.wait(), 10)
        deadline = time.monotonic() + 10
        while a.runs:
            assert time.monotonic() < deadline, "A still holds the cancelled run"
            await asyncio.sleep(0.05)
        assert (await a.get("alice", task.task_id)).status == "cancelled"
    finally:
        await a.stop()
        await b.stop()
