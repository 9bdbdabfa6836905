"""Task behaviour that needs a hand inside the server: a real Jupyter server and kernel in
this process, the real MCP client over HTTP."""

from __future__ import annotations

import asyncio
import logging

import nbformat
import pytest

from jupyter_mcp.client import Tasks, connect

pytestmark = pytest.mark.live


async def test_an_interrupt_that_fails_does_not_stop_the_cancellation(mcp_url, jp_token, mcp_ext, jp_root_dir,
                                                                      caplog, mode):
    """An interrupt that fails does not stop the cancellation. Half of what the client asked
    for is better than none of it, and the failure is logged at error."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import time\nprint('working', flush=True)\ntime.sleep(30)")])
    nbformat.write(nb, jp_root_dir / "stuck.ipynb")
    real_interrupt = mcp_ext.kernels.interrupt

    async def broken(kernel_id):
        raise RuntimeError("the kernel's interrupt channel is gone")

    mcp_ext.kernels.interrupt = broken
    caplog.set_level(logging.ERROR, logger="jupyter_mcp.tasks.running")
    try:
        async with connect(mcp_url, jp_token, mode=mode) as client:
            tasks = Tasks(client)
            task = await tasks.submit("cell_execute", {"path": "stuck.ipynb", "index": 0})
            for _ in range(100):
                run = mcp_ext.tasks.runs.get(task["taskId"])
                if run is not None and run.partial_result("cancelled") is not None:
                    break
                await asyncio.sleep(0.1)
            cancelled = await tasks.cancel(task["taskId"])
            assert cancelled["status"] == "cancelled"
            result = await tasks.result(task["taskId"])
            assert "working" in result["content"][0]["text"]
        errors = [r for r in caplog.records if r.levelno == logging.ERROR and "interrupting" in r.getMessage()]
        assert errors and errors[0].exc_info is not None
    finally:
        mcp_ext.kernels.interrupt = real_interrupt
        for kernel_id in list(mcp_ext.serverapp.kernel_manager.list_kernel_ids()):
            await mcp_ext.serverapp.kernel_manager.shutdown_kernel(kernel_id, now=True)
