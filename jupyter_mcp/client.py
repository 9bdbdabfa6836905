"""A small client helper for jupyter-mcp servers.

``connect`` opens an MCP session over Streamable HTTP with a Jupyter token. The task
helpers (call a tool as a task, poll, fetch the result, cancel) live here too,
because today's SDK clients cannot send task metadata on their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp import Client
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp_types import TaskStatusNotificationParams
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

LEGACY = "legacy"  # the initialize handshake (2025-11-25), what most clients speak today
MODERN = "2026-07-28"


class TaskStatusListener(ClientExtension):
    """Delivers notifications/tasks/status to a callback (they are advisory: poll anyway)."""

    identifier = "io.datalayer/tasks"

    def __init__(self, on_status: Callable[[TaskStatusNotificationParams], Awaitable[None]]) -> None:
        self.on_status = on_status

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [NotificationBinding(method="notifications/tasks/status", params_type=TaskStatusNotificationParams,
                                    handler=self.on_status)]


@asynccontextmanager
async def connect(url: str, token: str | None = None, *, mode: str = LEGACY,
                  on_task_status: Callable[[TaskStatusNotificationParams], Awaitable[None]] | None = None,
                  **kwargs: Any) -> AsyncIterator[Client]:
    """An MCP client session on ``url`` (…/mcp), authenticated with a Jupyter token.

    ``on_task_status`` receives the server's task status notifications."""
    if on_task_status is not None:
        kwargs["extensions"] = [*kwargs.get("extensions", []), TaskStatusListener(on_task_status)]
    headers = {"Authorization": f"token {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http:
        http.event_hooks["response"].append(_refuse_clearly)
        async with Client(streamable_http_client(url, http_client=http), mode=mode, **kwargs) as client:
            yield client


class NotAuthorized(PermissionError):
    """The Jupyter server refused the token (or its authorizer refused the user)."""


async def _refuse_clearly(response: Any) -> None:
    # The SDK reports any HTTP error as "Server returned an error response"; say which, and
    # why, in the server's words (which scope a JupyterHub token lacks, for one).
    if response.status_code in (401, 403):
        await response.aread()
        try:
            body = response.json()
        except ValueError:
            body = None
        reason = body.get("message") if isinstance(body, dict) else None
        raise NotAuthorized(f"{response.request.url} refused the request (HTTP {response.status_code}): "
                            f"{reason or 'check the Jupyter token'}")


TERMINAL = ("completed", "failed", "cancelled")
IDEMPOTENCY_KEY = "io.datalayer/idempotency-key"


class Tasks:
    """Call tools as MCP tasks (io.datalayer/tasks) over an open ``Client``.

    ``submit`` sends tools/call with task metadata (and an idempotency key, so a
    retry after a dropped connection answers the same task); ``get``, ``list``,
    ``cancel`` and ``result`` are the four tasks/* methods; ``wait`` polls at the
    task's pollInterval. Errors from the server raise ``mcp.shared.exceptions.MCPError``.
    """

    def __init__(self, client: Client) -> None:
        self.client = client

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A raw JSON-RPC request: the SDK's typed calls reject task-shaped results."""
        session = self.client.session
        data: dict[str, Any] = {"method": method, "params": params or {}}
        opts: dict[str, Any] = {}
        session._stamp(data, opts)
        return await session._dispatcher.send_raw_request(method, data.get("params"), opts)

    async def submit(self, tool: str, arguments: dict[str, Any] | None = None, *, ttl: int | None = None,
                     idempotency_key: str | None = None) -> dict[str, Any]:
        """Start ``tool`` as a task; returns the Task (taskId, status, pollInterval, ...)."""
        params: dict[str, Any] = {"name": tool, "arguments": arguments or {}, "task": {} if ttl is None else {"ttl": ttl}}
        if idempotency_key is not None:
            params["_meta"] = {IDEMPOTENCY_KEY: idempotency_key}
        created = await self.request("tools/call", params)
        if "task" not in created:
            raise RuntimeError(f"the server answered tools/call without a task: {created!r}")
        return created["task"]

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self.request("tasks/get", {"taskId": task_id})

    async def list(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.request("tasks/list", {"cursor": cursor} if cursor else {})

    async def cancel(self, task_id: str) -> dict[str, Any]:
        return await self.request("tasks/cancel", {"taskId": task_id})

    async def result(self, task_id: str) -> dict[str, Any]:
        """The CallToolResult of a terminal task (raises for a failed one or one still working)."""
        return await self.request("tasks/result", {"taskId": task_id})

    async def wait(self, task_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Poll tasks/get at the task's pollInterval until it is terminal."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            task = await self.get(task_id)
            if task["status"] in TERMINAL:
                return task
            if deadline is not None and loop.time() > deadline:
                raise TimeoutError(f"task {task_id} still {task['status']} after {timeout}s")
            await asyncio.sleep(task.get("pollInterval", 1000) / 1000)

    async def run(self, tool: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
        """submit, wait, result: a tool call that survives as a task."""
        task = await self.submit(tool, arguments, **kwargs)
        await self.wait(task["taskId"])
        return await self.result(task["taskId"])


__all__ = ["LEGACY", "MODERN", "Tasks", "connect"]


async def _cli(argv: list[str]) -> int:
    import json
    import os

    if len(argv) < 3 or argv[0] not in ("call", "task"):
        print("usage: python -m jupyter_mcp.client call|task URL TOOL [JSON-ARGUMENTS]  (token: $JUPYTER_TOKEN)")
        return 2
    action, url, tool = argv[:3]
    arguments = json.loads(argv[3]) if len(argv) > 3 else {}
    async with connect(url, os.environ.get("JUPYTER_TOKEN")) as client:
        if action == "call":
            result = await client.call_tool(tool, arguments)
            print(json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True), indent=1))
            return 1 if result.is_error else 0
        tasks = Tasks(client)
        task = await tasks.submit(tool, arguments)
        final = await tasks.wait(task["taskId"], timeout=3600)
        out: dict[str, Any] = {"task": final}
        if final["status"] == "completed":
            out["result"] = await tasks.result(task["taskId"])
        print(json.dumps(out, indent=1))
        return 0 if final["status"] == "completed" else 1


def _first_cause(exc: BaseException) -> BaseException:
    """The error inside the SDK's nested task-group exception groups, for a one-line message."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]
    return exc


if __name__ == "__main__":
    import sys

    try:
        raise SystemExit(asyncio.run(_cli(sys.argv[1:])))
    except Exception as failure:
        cause = _first_cause(failure)
        print(f"jupyter_mcp.client: {type(cause).__name__}: {cause}", file=sys.stderr)
        raise SystemExit(1) from None
