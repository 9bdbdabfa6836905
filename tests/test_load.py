"""Load: 20 concurrent MCP sessions doing a mix of every tool for 60 s (bounded, on
127.0.0.1). Zero errors, zero lost or duplicated cells, memory flat."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid


from jupyter_mcp.client import Tasks, connect
from jupyter_mcp.testing import write_notebook

SESSIONS = 20
DURATION_SEC = 60


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def test_twenty_sessions_mixing_every_tool_for_a_minute(live_factory):
    server = live_factory()
    notebooks = [f"load-{i}.ipynb" for i in range(4)]
    for name in notebooks:
        write_notebook(server.root / name, ["x = 1", "print('hello')"])
    inserted: dict[str, set[str]] = {name: set() for name in notebooks}
    deleted: set[str] = set()
    errors: list[str] = []
    calls = 0

    async def session(k: int, client) -> None:
        nonlocal calls
        rng = random.Random(k)
        tasks = Tasks(client)
        deadline = time.monotonic() + DURATION_SEC
        while time.monotonic() < deadline:
            name = rng.choice(notebooks)
            action = rng.choice(["get", "insert", "insert", "update", "cell_get", "delete_own", "execute", "code",
                                 "list", "users", "rooms", "watch", "task", "create"])
            try:
                if action == "get":
                    r = await client.call_tool("notebook_get", {"path": name, "include_outputs": False})
                elif action == "insert":
                    r = await client.call_tool("cell_insert", {"path": name, "source": f"s{k}-{uuid.uuid4().hex[:6]}"})
                    if not r.is_error:
                        inserted[name].add(r.structured_content["id"])
                elif action == "update":
                    r = await client.call_tool("cell_update", {"path": name, "index": 0, "source": f"x = {k}"})
                elif action == "cell_get":
                    r = await client.call_tool("cell_get", {"path": name, "index": 1})
                elif action == "delete_own":
                    own = [i for i in inserted[name] if i not in deleted]
                    if not own:
                        continue
                    victim = rng.choice(own)
                    deleted.add(victim)
                    r = await client.call_tool("cell_delete", {"path": name, "cell_id": victim})
                elif action == "execute":
                    r = await client.call_tool("cell_execute", {"path": name, "index": 1, "timeout": 60})
                elif action == "code":
                    r = await client.call_tool("code_execute", {"path": name, "code": f"{k} * 2", "timeout": 60})
                elif action == "list":
                    r = await client.call_tool("notebook_list", {})
                elif action == "users":
                    r = await client.call_tool("notebook_list_users", {"path": name})
                elif action == "rooms":
                    r = await client.call_tool("room_list", {})
                elif action == "watch":
                    r = await client.call_tool("notebook_watch", {"path": name, "timeout": 0.5})
                elif action == "task":
                    task = await tasks.submit("cell_get", {"path": name, "index": 0})
                    await tasks.wait(task["taskId"], timeout=60)
                    await tasks.result(task["taskId"])
                    calls += 1
                    continue
                else:
                    r = await client.call_tool("notebook_create", {"path": f"load-made-{k}-{uuid.uuid4().hex[:6]}.ipynb"})
                calls += 1
                if r.is_error:
                    errors.append(f"{action} {name}: {r.content[0].text}")
            except Exception as exc:  # a transport failure is an error too
                errors.append(f"{action} {name}: {type(exc).__name__}: {exc}")

    async with connect(server.mcp_url, server.token) as warm:
        for name in notebooks:
            await warm.call_tool("cell_execute", {"path": name, "index": 1})
    start_rss = rss_mb(server.proc.pid)
    samples = []

    async def sample_memory():
        while True:
            samples.append(rss_mb(server.proc.pid))
            await asyncio.sleep(5)

    sampler = asyncio.create_task(sample_memory())
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(connect(server.mcp_url, server.token)) for _ in range(SESSIONS)]
        await asyncio.gather(*(session(k, c) for k, c in enumerate(clients)))
        sampler.cancel()
        assert errors == [], errors[:10]
        assert calls > SESSIONS * 20
        for name in notebooks:
            final = await clients[0].call_tool("notebook_get", {"path": name, "include_outputs": False})
            ids = [c["id"] for c in final.structured_content["cells"]]
            assert len(ids) == len(set(ids)), f"duplicate cells in {name}"
            alive = inserted[name] - deleted
            assert alive <= set(ids), f"lost cells in {name}: {alive - set(ids)}"
            assert not (deleted & set(ids)), f"deleted cells came back in {name}"
    first_half = max(samples[: len(samples) // 2] or [start_rss])
    second_half = max(samples[len(samples) // 2:] or [start_rss])
    print(f"\nload: {calls} calls in {DURATION_SEC}s by {SESSIONS} sessions; RSS {start_rss:.0f} MB at start, "
          f"max {first_half:.0f} MB in the first half, {second_half:.0f} MB in the second")
    assert second_half <= first_half * 1.15 + 10, "memory kept growing under a steady load"
