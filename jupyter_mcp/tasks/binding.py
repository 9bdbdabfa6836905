"""The tasks extension on the wire: ``tools/call`` with task metadata, and tasks/*.

The SDK defines every task shape but routes none of the methods, so they are bound
here as an extension advertised under ``io.datalayer/tasks``: under
``capabilities.extensions`` for 2026-07-28 clients, and, because that map is
stripped on handshake-era connections, under ``capabilities.experimental`` plus
``capabilities.tasks`` and each tool's ``execution.taskSupport`` for 2025-11-25
clients. On those connections the runner validates a tools/call result as a
CallToolResult, so the interceptor answers a placeholder and a server middleware
(whose return value is not validated) swaps in the CreateTaskResult.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from fastmcp.server.extensions import MethodBinding, ServerExtension
from fastmcp.server.middleware import Middleware
from fastmcp.tools.base import ToolResult
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CancelTaskRequestParams,
    GetTaskPayloadRequestParams,
    GetTaskRequestParams,
    PaginatedRequestParams,
    ServerTasksCapability,
    TaskStatusNotification,
    TaskStatusNotificationParams,
    TextContent,
    ToolExecution,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .manager import INTERNAL_ERROR, INVALID_PARAMS, TaskError, TaskManager
from .records import TaskRecord

EXTENSION_ID = "io.datalayer/tasks"
IDEMPOTENCY_KEY = "io.datalayer/idempotency-key"
RELATED_TASK = "io.modelcontextprotocol/related-task"
_PLACEHOLDER = EXTENSION_ID + "#created"
TASK_METHODS = ("tasks/get", "tasks/list", "tasks/cancel", "tasks/result")

Principal = Callable[[Any], str]  # the HTTP request (or None) -> who is asking


def fingerprint(tool: str, arguments: Any) -> str:
    """The identity of a call: the same arguments in another order are the same call."""
    canonical = json.dumps({"tool": tool, "arguments": arguments or {}}, sort_keys=True, separators=(",", ":"),
                           default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def tool_result_wire(result: Any) -> dict[str, Any]:
    """A tool's result as the CallToolResult wire dict (what tasks/result answers)."""
    def dump(block: Any) -> Any:
        return block.model_dump(by_alias=True, mode="json", exclude_none=True) if hasattr(block, "model_dump") else block

    if isinstance(result, ToolResult):
        wire: dict[str, Any] = {"content": [dump(c) for c in result.content], "isError": bool(result.is_error)}
        if result.structured_content is not None:
            wire["structuredContent"] = result.structured_content
        if result.meta:
            wire["_meta"] = dict(result.meta)
        return wire
    if hasattr(result, "model_dump"):
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dict(result)


def _mcp_error(exc: Exception) -> MCPError:
    if isinstance(exc, TaskError):
        return MCPError(code=exc.code, message=exc.message, data=exc.data)
    # anything else is the store failing (Redis down, say): say so, do not guess
    return MCPError(code=INTERNAL_ERROR, message=f"the task store is unavailable: {type(exc).__name__}: {exc}")


class TasksExtension(ServerExtension):
    """Binds tasks/get, tasks/list, tasks/cancel, tasks/result and intercepts tools/call."""

    identifier = EXTENSION_ID

    def __init__(self, manager: TaskManager, principal: Principal) -> None:
        self.manager = manager
        self.principal = principal
        # Built here, not lazily: the day the SDK claims tasks/* as spec methods,
        # MethodBinding refuses them and this extension refuses to construct.
        self._bindings = [
            MethodBinding("tasks/get", GetTaskRequestParams, self._get),
            MethodBinding("tasks/list", PaginatedRequestParams, self._list),
            MethodBinding("tasks/cancel", CancelTaskRequestParams, self._cancel),
            MethodBinding("tasks/result", GetTaskPayloadRequestParams, self._result),
        ]

    def settings(self) -> dict[str, Any]:
        return {"methods": list(TASK_METHODS), "idempotencyKeyMeta": IDEMPOTENCY_KEY,
                "defaultTtl": self.manager.default_ttl_ms, "maxTtl": self.manager.max_ttl_ms}

    def methods(self) -> list[MethodBinding]:
        return self._bindings

    def install(self, mcp: Any) -> None:
        """Register on a FastMCP server, with the legacy-era advertising and result swap."""
        mcp.add_extension(self)
        mcp.add_middleware(_TaskSupportInToolList())
        mcp.experimental_capabilities[EXTENSION_ID] = self.settings()
        low = mcp._mcp_server
        low.middleware.append(self._swap_placeholder)
        plain = low.get_capabilities

        def get_capabilities(*args: Any, **kwargs: Any) -> Any:
            caps = plain(*args, **kwargs)
            tasks = ServerTasksCapability.model_validate({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
            return caps.model_copy(update={"tasks": tasks})

        low.get_capabilities = get_capabilities

    # -- tools/call ------------------------------------------------------------------

    async def intercept_tool_call(self, params: Any, context: Any, call_next: Any) -> Any:
        rc = context.request_context
        raw = (rc._srctx.params if rc is not None else None) or {}
        task = raw.get("task")
        if task is None:  # no task metadata: tools/call is exactly what it always was
            return await call_next()
        if not isinstance(task, dict):
            raise MCPError(code=INVALID_PARAMS, message="params.task must be an object like {\"ttl\": 60000}")
        meta = (rc.meta if rc is not None else None) or {}
        key = meta.get(IDEMPOTENCY_KEY)
        if key is not None and (not isinstance(key, str) or not key or len(key) > 256):
            raise MCPError(code=INVALID_PARAMS, message=f"{IDEMPOTENCY_KEY} must be a string of 1-256 characters")
        async def work() -> dict[str, Any]:
            return tool_result_wire(await call_next())

        notify = _notifier(context.session)
        try:
            record = await self.manager.submit(
                owner=self.principal(rc.request if rc is not None else None), tool=params.name,
                fingerprint=fingerprint(params.name, raw.get("arguments")), ttl=task.get("ttl"), key=key,
                work=work, notify=notify)
        except Exception as exc:
            raise _mcp_error(exc) from None
        return ToolResult(content=[TextContent(type="text", text=f"task {record.task_id} created")],
                          meta={_PLACEHOLDER: record.to_wire()})

    async def _swap_placeholder(self, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method != "tools/call" or not isinstance(result, dict):
            return result
        task = (result.get("_meta") or {}).get(_PLACEHOLDER)
        if task is None:
            return result
        created: dict[str, Any] = {"task": task, "_meta": {RELATED_TASK: {"taskId": task["taskId"]}}}
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            created["resultType"] = "task"
        return created

    # -- tasks/* -----------------------------------------------------------------------

    def _owner(self, ctx: Any) -> str:
        return self.principal(getattr(ctx, "request", None))

    async def _get(self, ctx: Any, params: GetTaskRequestParams) -> dict[str, Any]:
        try:
            return (await self.manager.get(self._owner(ctx), params.task_id)).to_wire()
        except Exception as exc:
            raise _mcp_error(exc) from None

    async def _list(self, ctx: Any, params: PaginatedRequestParams) -> dict[str, Any]:
        try:
            page, cursor = await self.manager.list(self._owner(ctx), params.cursor)
        except Exception as exc:
            raise _mcp_error(exc) from None
        answer: dict[str, Any] = {"tasks": [r.to_wire() for r in page]}
        if cursor:
            answer["nextCursor"] = cursor
        return answer

    async def _cancel(self, ctx: Any, params: CancelTaskRequestParams) -> dict[str, Any]:
        try:
            return (await self.manager.cancel(self._owner(ctx), params.task_id, _notifier(ctx.session))).to_wire()
        except Exception as exc:
            raise _mcp_error(exc) from None

    async def _result(self, ctx: Any, params: GetTaskPayloadRequestParams) -> dict[str, Any]:
        try:
            result = dict(await self.manager.result(self._owner(ctx), params.task_id))
        except Exception as exc:
            raise _mcp_error(exc) from None
        result["_meta"] = {**(result.get("_meta") or {}), RELATED_TASK: {"taskId": params.task_id}}
        return result


def _notifier(session: Any) -> Any:
    """notifications/tasks/status to this session, outside any request (the standalone
    stream on 2025-11-25): the Task, never its result."""
    async def notify(record: TaskRecord) -> None:
        await session.send_notification(TaskStatusNotification(
            params=TaskStatusNotificationParams.model_validate(record.to_wire())))
    return notify


class _TaskSupportInToolList(Middleware):
    """Every tool may be called as a task: say so in tools/list (execution.taskSupport)."""

    async def on_list_tools(self, context: Any, call_next: Any) -> Any:
        tools = await call_next(context)
        return [t if t.execution else t.model_copy(update={"execution": ToolExecution(task_support="optional")})
                for t in tools]
