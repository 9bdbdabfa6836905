"""The benchmark scenarios. Each returns a Result whose floor was measured in the same run."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import httpx
import nbformat
from jupyter_client.asynchronous import AsyncKernelClient

from benchmarks.harness import Result, compare
from jupyter_mcp.client import connect

Scenario = Callable[..., Awaitable[Result]]


def write(server, name: str, sources: list[str]) -> list[str]:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, server.root / name)
    return [c.id for c in nb.cells]


async def exec_trivial(server) -> Result:
    """cell_execute of `1+1` vs the same code sent straight to the same kernel with jupyter_client."""
    ids = write(server, "bench_exec.ipynb", ["1+1"])
    async with connect(server.mcp_url, server.token) as mcp:
        first = await mcp.call_tool("cell_execute", {"path": "bench_exec.ipynb", "cell_id": ids[0]})
        assert not first.is_error, first.content
        sessions = httpx.get(server.url + "api/sessions", headers=server.headers).json()
        kernel_id = next(s["kernel"]["id"] for s in sessions if s["path"] == "bench_exec.ipynb")
        kc = AsyncKernelClient()
        kc.load_connection_file(str(server.base / "runtime" / f"kernel-{kernel_id}.json"))
        kc.start_channels()
        await kc.wait_for_ready(timeout=30)
        try:
            async def subject():
                r = await mcp.call_tool("cell_execute", {"path": "bench_exec.ipynb", "cell_id": ids[0]})
                assert r.structured_content["outputs"][0]["text"] == "2"

            async def floor():
                reply = await kc.execute_interactive("1+1", output_hook=lambda msg: None, timeout=30)
                assert reply["content"]["status"] == "ok"

            return await compare("exec_trivial", subject, floor, n=60, target=1.3)
        finally:
            kc.stop_channels()


ALL: dict[str, Scenario] = {
    "exec_trivial": exec_trivial,
}


async def tasks(server) -> Result:
    """tools/call as a task (CreateTaskResult) vs the plain call, for a trivial tool."""
    from jupyter_mcp.client import Tasks

    async with connect(server.mcp_url, server.token) as mcp:
        t = Tasks(mcp)
        args = {"path": "nothing-open.ipynb"}

        async def subject():
            task = await t.submit("notebook_list_users", args)
            assert task["status"] in ("working", "completed")

        async def floor():
            r = await mcp.call_tool("notebook_list_users", args)
            assert not r.is_error

        return await compare("tasks_submit", subject, floor, n=100, target=1.2)


async def tasks_get_10k(server) -> Result:
    """tasks/get with 10,000 stored tasks vs the same with one stored task (a fresh store)."""
    import asyncio
    import contextlib
    import tempfile
    from pathlib import Path

    from live import LiveServer

    from jupyter_mcp.client import Tasks

    with tempfile.TemporaryDirectory() as tmp:
        fresh = LiveServer(Path(tmp)).start()
        try:
            async with connect(fresh.mcp_url, fresh.token) as one_client, \
                    connect(server.mcp_url, server.token) as many_client:
                one, many = Tasks(one_client), Tasks(many_client)
                lonely = (await one.submit("notebook_list", {}))["taskId"]
                async with contextlib.AsyncExitStack() as stack:
                    sessions = [Tasks(await stack.enter_async_context(connect(server.mcp_url, server.token)))
                                for _ in range(8)]

                    async def fill(session, n):
                        return [(await session.submit("notebook_list", {}))["taskId"] for _ in range(n)]

                    filled = await asyncio.gather(*(fill(s, 1250) for s in sessions))
                target_id = filled[3][600]
                assert len((await many.list())["tasks"]) == 50

                async def subject():
                    assert (await many.get(target_id))["taskId"] == target_id

                async def floor():
                    assert (await one.get(lonely))["taskId"] == lonely

                result = await compare("tasks_get_10k", subject, floor, n=150, target=1.5)
                result.note = f"({sum(len(f) for f in filled)} tasks stored vs 1)"
                return result
        finally:
            fresh.stop()


ALL["tasks"] = tasks
ALL["tasks_get_10k"] = tasks_get_10k
