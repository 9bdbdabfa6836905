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
from mcp_types import CLIENT_CAPABILITIES_META_KEY, TaskStatusNotificationParams
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .adapters.sdk_client import http_client, send_raw_request, stamp_request

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
    async with http_client(headers) as http:
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
SEED = "io.datalayer/tasks"  # the seed's extension: this server's own, on both eras
CORE = "2025-11-25"  # the core tasks of 2025-11-25 (initialize handshake only)
OFFICIAL = "io.modelcontextprotocol/tasks"  # the official extension (SEP-2663)


class Tasks:
    """Call tools as MCP tasks over an open ``Client``, in one of the three dialects.

    ``SEED`` (the default) and ``OFFICIAL`` are declared in each request's client
    capabilities; ``CORE`` is what a 2025-11-25 client that declares neither speaks.
    ``submit`` starts a call as a task (with an idempotency key, a retry after a dropped
    connection answers the same task); ``get``, ``cancel`` and ``wait`` work on all three;
    ``result`` is tasks/result on the first two and the result inlined by ``tasks/get`` on
    the official one; ``list`` is not official, ``update`` not the core's. Errors from the
    server raise ``mcp.shared.exceptions.MCPError``.

    A task whose code calls ``input()`` asks its client (docs/tasks.md, "Input"). ``on_input``
    answers what ``tasks/get`` lists in ``inputRequests`` (official): it gets an
    elicitation's params and returns its result (``{"action": "accept", "content": {"value":
    …}}``), and ``wait`` sends it with ``tasks/update``. On 2025-11-25 the client's own
    ``elicitation_callback`` (``connect(..., elicitation_callback=…)``) answers the elicitations
    ``tasks/result`` sends on its stream; ``run`` calls it when a task waits on input.
    """

    def __init__(self, client: Client, dialect: str = SEED,
                 on_input: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None) -> None:
        if dialect not in (SEED, CORE, OFFICIAL):
            raise ValueError(f"dialect must be one of {SEED!r}, {CORE!r}, {OFFICIAL!r}")
        self.client = client
        self.dialect = dialect
        self.on_input = on_input
        self._answered: set[tuple[str, str]] = set()  # (taskId, input key) sent

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A raw JSON-RPC request: the SDK's typed calls reject task-shaped results. It declares
        the dialect's extension, and names the task in ``Mcp-Name`` where the official one says so."""
        session = self.client.session
        data: dict[str, Any] = {"method": method, "params": dict(params or {})}
        opts: dict[str, Any] = {}
        stamp_request(session, data, opts)
        if self.dialect != CORE:
            meta = data["params"].setdefault("_meta", {})
            caps = dict(meta.get(CLIENT_CAPABILITIES_META_KEY) or {})
            caps["extensions"] = {**(caps.get("extensions") or {}), self.dialect: {}}
            if self.on_input is not None:
                caps.setdefault("elicitation", {"form": {}})
            meta[CLIENT_CAPABILITIES_META_KEY] = caps
        if self.dialect == OFFICIAL and method.startswith("tasks/") and "taskId" in data["params"]:
            opts.setdefault("headers", {})["Mcp-Name"] = str(data["params"]["taskId"])
        return await send_raw_request(session, method, data.get("params"), opts)

    async def submit(self, tool: str, arguments: dict[str, Any] | None = None, *, ttl: int | None = None,
                     idempotency_key: str | None = None) -> dict[str, Any]:
        """Start ``tool`` as a task; returns the Task (taskId, status, ...). On the official
        extension the server decides: a tool it answers at once gives its CallToolResult
        (``resultType`` "complete") instead."""
        params: dict[str, Any] = {"name": tool, "arguments": arguments or {}}
        if self.dialect != OFFICIAL:
            params["task"] = {} if ttl is None else {"ttl": ttl}
        if idempotency_key is not None:
            params["_meta"] = {IDEMPOTENCY_KEY: idempotency_key}
        created = await self.request("tools/call", params)
        if self.dialect == OFFICIAL:
            return created
        if "task" not in created:
            raise RuntimeError(f"the server answered tools/call without a task: {created!r}")
        return created["task"]

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self.request("tasks/get", {"taskId": task_id})

    async def list(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.request("tasks/list", {"cursor": cursor} if cursor else {})

    async def cancel(self, task_id: str) -> dict[str, Any]:
        return await self.request("tasks/cancel", {"taskId": task_id})

    async def update(self, task_id: str, input_responses: dict[str, Any]) -> dict[str, Any]:
        """Answer a task's input requests (official extension)."""
        return await self.request("tasks/update", {"taskId": task_id, "inputResponses": input_responses})

    async def result(self, task_id: str) -> dict[str, Any]:
        """The CallToolResult of a terminal task (raises for a failed one; on the seed's, for one
        still working too; on the core, it waits)."""
        if self.dialect != OFFICIAL:
            return await self.request("tasks/result", {"taskId": task_id})
        task = await self.get(task_id)
        if task["status"] == "failed":
            raise MCPError(code=task["error"]["code"], message=task["error"]["message"], data=task["error"].get("data"))
        if "result" not in task:
            raise RuntimeError(f"task {task_id} is {task['status']} and has no result")
        return task["result"]

    async def wait(self, task_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Poll tasks/get at the task's poll interval until it is terminal, answering its input
        requests with ``on_input``; a task that waits on input it cannot answer so (no
        ``on_input``, or the core's, which lists none) is returned as it is."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            task = await self.get(task_id)
            if task["status"] in TERMINAL:
                return task
            if task["status"] == "input_required":
                asked = {key: request for key, request in (task.get("inputRequests") or {}).items()
                         if (task_id, key) not in self._answered}
                if self.on_input is None or "inputRequests" not in task:
                    return task
                if asked:
                    answers = {key: await self.on_input(request["params"]) for key, request in asked.items()}
                    await self.update(task_id, answers)
                    self._answered.update((task_id, key) for key in answers)
                    continue
            if deadline is not None and loop.time() > deadline:
                raise TimeoutError(f"task {task_id} still {task['status']} after {timeout}s")
            await asyncio.sleep(task.get("pollInterval", task.get("pollIntervalMs", 1000)) / 1000)

    async def run(self, tool: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
        """submit, wait, result: a tool call that survives as a task."""
        task = await self.submit(tool, arguments, **kwargs)
        if task.get("resultType") == "complete":  # the official extension's answer at once
            return task
        await self.wait(task["taskId"])  # terminal, or waiting on input only tasks/result can deliver
        return await self.result(task["taskId"])


__all__ = ["CORE", "LEGACY", "MODERN", "OFFICIAL", "SEED", "Tasks", "connect"]


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
    inner = getattr(exc, "exceptions", None)
    while inner:
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc


if __name__ == "__main__":
    import sys

    try:
        raise SystemExit(asyncio.run(_cli(sys.argv[1:])))
    except Exception as failure:
        cause = _first_cause(failure)
        print(f"jupyter_mcp.client: {type(cause).__name__}: {cause}", file=sys.stderr)
        raise SystemExit(1) from None
