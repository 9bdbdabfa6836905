"""How ``tools/call`` is answered with a task on the wire: a placeholder carries the task's answer
past the SDK's result check, and a server middleware swaps it in. The one place that does it.

What the dependencies offer, and why it is not enough:

- fastmcp lets a ``tools/call`` interceptor (``ServerExtension.intercept_tool_call``) return a
  result that is not a ``ToolResult`` (its docstring names a tasks extension's CreateTaskResult),
  and hands it to the SDK's runner as it is.
- The SDK's runner then checks a spec method's result against the negotiated version's schema.
  Its 2025-11-25 schema has no tasks at all ("tasks/* deliberately absent"): a tools/call
  result must be a ``CallToolResult``, so a CreateTaskResult is refused as "Handler returned an
  invalid result" (-32603). On 2026-07-28 a result with an extension ``resultType`` ("task")
  passes unchecked, but 2025-11-25 clients need the task answer as much, and one way for both
  eras keeps the two from drifting apart (``tests/test_adapters.py`` fails the day the SDK
  accepts it on 2025-11-25: then this module can go).
- The SDK's 2025-11-25 ``ServerCapabilities`` has a ``tasks`` field, but nothing of the SDK or
  fastmcp fills it (fastmcp's low-level server advertises extensions, not core capabilities).

So three steps, each the smallest the SDK allows:

1. ``carrying``: the interceptor answers a valid ``CallToolResult`` (a ``ToolResult`` with one
   text) whose ``_meta`` holds the real answer under ``PLACEHOLDER_KEY``. fastmcp copies a
   ``ToolResult``'s ``meta`` to the result's ``_meta``, and the runner's check keeps ``_meta``.
2. ``TaskAnswerSwap``, a server middleware (``Server.middleware``, the SDK's documented hook
   around every inbound request): it runs after the runner shaped and checked the result, and
   its own return value is not checked again. It puts the answer in place of a tools/call result
   that carries one; any other result goes as it is.
3. The same middleware adds ``capabilities.tasks`` to the ``initialize`` result (only a
   2025-era ``initialize`` exists; 2026-07-28's ``server/discover`` has no such field).

The low-level server is reached through fastmcp's private ``_mcp_server``
(``adapters/fastmcp_lowlevel.add_server_middleware``): fastmcp has no public way to add an SDK
server middleware.
"""

from __future__ import annotations

from typing import Any

from fastmcp.tools.base import ToolResult
from mcp_types import ServerTasksCapability, TextContent

from ..adapters.fastmcp_lowlevel import add_server_middleware

#: Where a placeholder result's ``_meta`` carries the task's answer (never seen by a client).
PLACEHOLDER_KEY = "io.datalayer/tasks#created"

#: What a 2025-era ``initialize`` advertises: tasks listed and cancelled, tools/call as a task.
TASKS_CAPABILITY: dict[str, Any] = ServerTasksCapability.model_validate(
    {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}).model_dump(by_alias=True, mode="json",
                                                                                exclude_none=True)


def carrying(answer: dict[str, Any], task_id: str) -> ToolResult:
    """Step 1: a valid ``CallToolResult`` that carries ``answer`` (what tools/call answers when it
    made a task) to the swap."""
    return ToolResult(content=[TextContent(type="text", text=f"task {task_id} created")],
                      meta={PLACEHOLDER_KEY: answer})


def carried(result: Any) -> dict[str, Any] | None:
    """The answer a tools/call wire result carries, if it is a placeholder."""
    if not isinstance(result, dict):
        return None
    meta = result.get("_meta")
    answer = meta.get(PLACEHOLDER_KEY) if isinstance(meta, dict) else None
    return answer if isinstance(answer, dict) else None


def with_tasks_capability(result: Any) -> Any:
    """Step 3: an ``initialize`` result with ``capabilities.tasks``."""
    if not isinstance(result, dict) or not isinstance(result.get("capabilities"), dict):
        return result
    return {**result, "capabilities": {**result["capabilities"], "tasks": dict(TASKS_CAPABILITY)}}


class TaskAnswerSwap:
    """Step 2 (and 3): the SDK server middleware that puts a task's answer on the wire."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method == "tools/call":
            answer = carried(result)
            return result if answer is None else answer
        if ctx.method == "initialize":
            return with_tasks_capability(result)
        return result


def install(mcp: Any) -> None:
    """Make a FastMCP server answer tools/call with a task where an interceptor answered
    ``carrying(...)``, and advertise tasks at initialize."""
    add_server_middleware(mcp, TaskAnswerSwap())
