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
