"""Tasks on the wire: ``tools/call`` answered with a task, and the tasks/* methods, in the
three dialects clients speak (``dialects``), over one task manager and one store.

Which dialect a request speaks is read from the request itself: a request that lists
``io.modelcontextprotocol/tasks`` in its per-request client capabilities speaks the official
extension; a client that declared ``io.datalayer/tasks`` (per request, or at initialize)
speaks the seed's; any other client on a 2025-11-25 connection speaks that version's core
tasks. On 2026-07-28, which has no core tasks, a client that declared neither is refused
(-32021), as the official extension says.

The SDK defines the shapes of 2025-11-25 but routes none of the methods, so they are bound
here as extension methods. The SDK checks a 2025-11-25 tools/call result as a CallToolResult, so
how the task answer gets on the wire (a placeholder the interceptor answers, swapped by a server
middleware, and the ``tasks`` capability at initialize) is ``answer_swap.py``'s, and only its.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from fastmcp.server.extensions import MethodBinding, ServerExtension
from fastmcp.server.middleware import Middleware
from fastmcp.tools.base import ToolResult
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CancelTaskRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    GetTaskPayloadRequestParams,
    GetTaskRequestParams,
    PaginatedRequestParams,
    RequestParams,
    TaskStatusNotification,
    TaskStatusNotificationParams,
    ToolExecution,
)
from mcp_types.jsonrpc import HEADER_MISMATCH, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..adapters.fastmcp_lowlevel import raw_request_params
from . import answer_swap, dialects
from .dialects import CORE, OFFICIAL, RELATED_TASK, SEED
from .errors import INTERNAL_ERROR, INVALID_PARAMS, TaskError
from .manager import TaskManager
from .records import TaskRecord

log = logging.getLogger(__name__)

EXTENSION_ID = SEED
IDEMPOTENCY_KEY = "io.datalayer/idempotency-key"
TASK_METHODS = ("tasks/get", "tasks/list", "tasks/cancel", "tasks/result")
# methods the official extension does not have, and what its clients do instead
NOT_OFFICIAL = {"tasks/list": "it has no list, by design; keep the ids you are given",
                "tasks/result": "tasks/get answers the result once the task is terminal"}

Principal = Callable[[Any], str]  # the HTTP request (or None) -> who is asking


class UpdateTaskRequestParams(RequestParams):
    """``tasks/update`` (io.modelcontextprotocol/tasks): answers to a task's input requests."""

    task_id: str
    input_responses: dict[str, Any] = {}


def fingerprint(tool: str, arguments: Any) -> str:
    """The identity of a call: the same arguments in another order are the same call."""
    canonical = json.dumps({"tool": tool, "arguments": arguments or {}}, sort_keys=True, separators=(",", ":"),
                           default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def tool_result_wire(result: Any) -> dict[str, Any]:
    """A tool's result as the CallToolResult wire dict (what a finished task answers)."""
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


def raw_params(request_context: Any) -> Mapping[str, Any]:
    """The tools/call params as the client sent them, ``task`` included.

    fastmcp rebuilds the params it hands an extension without ``task``, so they are read from
    its private request context (``adapters.fastmcp_lowlevel``), which fails loudly, not quietly
    as "no task", the day an upgrade moves them."""
    if request_context is None:
        return {}
    params = raw_request_params(request_context)
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise RuntimeError(f"the raw request params are a {type(params).__name__}, not a mapping")
    return params


def request_meta(request_context: Any) -> Mapping[str, Any]:
    """The request's ``_meta`` as sent: from the SDK's request context (a tasks/* method's) or
    fastmcp's (a tool call's, which lifts it whole)."""
    params = getattr(request_context, "params", None)
    if isinstance(params, Mapping):
        meta = params.get("_meta")
        return meta if isinstance(meta, Mapping) else {}
    meta = getattr(request_context, "meta", None)
    return meta if isinstance(meta, Mapping) else {}


def declared(request_context: Any, identifier: str) -> bool:
    """Whether the client declared the extension ``identifier``: in this request's capabilities
    (its ``_meta``), or, for any but the official one (which is declared per request only), at
    initialize (``extensions`` or ``experimental``)."""
    per_request = request_meta(request_context).get(CLIENT_CAPABILITIES_META_KEY)
    if isinstance(per_request, Mapping) and isinstance(per_request.get("extensions"), Mapping) \
            and identifier in per_request["extensions"]:
        return True
    if identifier == OFFICIAL:
        return False
    session = getattr(request_context, "session", None)
    caps = getattr(session, "client_capabilities", None)
    return any(identifier in (getattr(caps, field, None) or {}) for field in ("extensions", "experimental"))


def offers_elicitation(capabilities: Any) -> bool:
    """Whether client capabilities (a model or a dict) offer form elicitation: ``elicitation``
    present, with ``form`` or with neither mode named (which means form)."""
    elicitation = (capabilities.get("elicitation") if isinstance(capabilities, dict)
                   else getattr(capabilities, "elicitation", None))
    if elicitation is None:
        return False
    modes = elicitation if isinstance(elicitation, dict) else elicitation.model_dump(exclude_none=True)
    return "form" in modes or "url" not in modes


def can_answer_input(request_context: Any) -> bool:
    """Whether the client of this request can answer input requests (form elicitation): said
    in the request's own capabilities, or, on 2025-11-25, at initialize."""
    per_request = request_meta(request_context).get(CLIENT_CAPABILITIES_META_KEY)
    if isinstance(per_request, Mapping) and offers_elicitation(dict(per_request)):
        return True
    if getattr(request_context, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        return False
    session = getattr(request_context, "session", None)
    return offers_elicitation(getattr(session, "client_capabilities", None))


def dialect_of(request_context: Any) -> str:
    """The dialect this request speaks (see the module docstring)."""
    if declared(request_context, OFFICIAL):
        return OFFICIAL
    if declared(request_context, SEED):
        return SEED
    if getattr(request_context, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
        return CORE
    raise MCPError(code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                   message=f"tasks on 2026-07-28 need the tasks extension in the request's client capabilities: "
                           f"{OFFICIAL!r} (or this server's {SEED!r})",
                   data={"requiredCapabilities": {"extensions": {OFFICIAL: {}}}})


def raised_by(exc: BaseException, obj: object) -> bool:
    """Whether ``exc`` was raised in (or passed through) a method of ``obj``: one frame of its
    traceback runs with ``obj`` as its ``self``."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_locals.get("self") is obj:
            return True
        tb = tb.tb_next
    return False


def _mcp_error(exc: Exception, method: str, store: object) -> MCPError:
    """What the client is told of a failed ``method``: a task error as it is; an error of the task
    store (Redis down, say) as the store being unavailable; anything else, logged with its
    traceback, as what failed."""
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, TaskError):
        return MCPError(code=exc.code, message=exc.message, data=exc.data)
    if raised_by(exc, store):
        return MCPError(code=INTERNAL_ERROR, message=f"the task store is unavailable: {type(exc).__name__}: {exc}")
    log.error("jupyter_mcp: %s failed", method, exc_info=exc)
    return MCPError(code=INTERNAL_ERROR, message=f"{method} failed: {type(exc).__name__}: {exc}")


class _Advertised(ServerExtension):
    """The official extension's capability: exactly ``{}`` (its clients read anything else as
    "not supported"); its methods are the TasksExtension's, which dispatches on the dialect."""

    identifier = OFFICIAL


class TasksExtension(ServerExtension):
    """Binds tasks/get, tasks/list, tasks/cancel, tasks/result and tasks/update and intercepts
    tools/call. ``task_tools``: the tools answered with a task when the client speaks the
    official extension (there the server decides; the other dialects ask with ``params.task``)."""

    identifier = EXTENSION_ID

    def __init__(self, manager: TaskManager, principal: Principal, task_tools: frozenset[str] = frozenset()) -> None:
        self.manager = manager
        self.principal = principal
        self.task_tools = task_tools
        # Built here, not lazily: the day the SDK claims tasks/* as spec methods,
        # MethodBinding refuses them and this extension refuses to construct.
        self._bindings = [
            MethodBinding("tasks/get", GetTaskRequestParams, self._get),
            MethodBinding("tasks/list", PaginatedRequestParams, self._list),
            MethodBinding("tasks/cancel", CancelTaskRequestParams, self._cancel),
            MethodBinding("tasks/result", GetTaskPayloadRequestParams, self._result),
            MethodBinding("tasks/update", UpdateTaskRequestParams, self._update),
        ]

    def settings(self) -> dict[str, Any]:
        return {"methods": list(TASK_METHODS), "idempotencyKeyMeta": IDEMPOTENCY_KEY,
                "defaultTtl": self.manager.default_ttl_ms, "maxTtl": self.manager.max_ttl_ms}

    def methods(self) -> list[MethodBinding]:
        return self._bindings

    def install(self, mcp: Any) -> None:
        """Register on a FastMCP server, with the task answer's way onto the wire (``answer_swap``)."""
        mcp.add_extension(self)
        mcp.add_extension(_Advertised())
        mcp.add_middleware(_TaskSupportInToolList())
        mcp.experimental_capabilities[EXTENSION_ID] = self.settings()
        answer_swap.install(mcp)

    # -- tools/call ------------------------------------------------------------------

    async def intercept_tool_call(self, params: Any, context: Any, call_next: Any) -> Any:
        rc = context.request_context
        raw = raw_params(rc)
        task = raw.get("task")
        official = declared(rc, OFFICIAL)
        if official and params.name not in self.task_tools:
            return await call_next()  # the server decides: a quick tool answers at once
        if task is None and not official:  # no task asked for: tools/call is what it always was
            return await call_next()
        dialect = dialect_of(rc)
        if dialect != OFFICIAL and not isinstance(task, dict):
            raise MCPError(code=INVALID_PARAMS, message="params.task must be an object like {\"ttl\": 60000}")
        key = request_meta(rc).get(IDEMPOTENCY_KEY)
        if key is not None and (not isinstance(key, str) or not key or len(key) > 256):
            raise MCPError(code=INVALID_PARAMS, message=f"{IDEMPOTENCY_KEY} must be a string of 1-256 characters")

        async def work() -> dict[str, Any]:
            return tool_result_wire(await call_next())

        try:
            record = await self.manager.submit(
                owner=self.principal(rc.request if rc is not None else None), tool=params.name,
                fingerprint=fingerprint(params.name, raw.get("arguments")),
                ttl=task.get("ttl") if isinstance(task, dict) else None, key=key, work=work,
                notify=_notifier(context.session, dialect), can_ask=self._can_ask(rc, dialect))
        except Exception as exc:
            raise _mcp_error(exc, "tools/call", self.manager.store) from None
        answer = dialects.created(dialect, record, modern=rc.protocol_version in MODERN_PROTOCOL_VERSIONS)
        return answer_swap.carrying(answer, record.task_id)

    @staticmethod
    def _can_ask(rc: Any, dialect: str) -> bool:
        """Whether the task's client can be asked for input in its dialect: the official one
        lists questions for tasks/update; the others send them on tasks/result's stream, which
        2026-07-28 (no server-to-client requests) does not have, and the seed has no tasks/update."""
        if dialect != OFFICIAL and rc.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return False
        return can_answer_input(rc)

    # -- tasks/* -----------------------------------------------------------------------

    def _asker(self, ctx: Any, method: str, task_id: str | None = None) -> tuple[str, str]:
        """Who asks, and in which dialect. A method the official extension does not have is -32601
        before anything else is looked at (so it has no routing header to check either); one it has
        must name its task in ``Mcp-Name`` on 2026-07-28, read as the SDK reads that header for
        tools/call (a ``=?base64?...?=`` value decoded)."""
        dialect = dialect_of(ctx)
        if dialect == OFFICIAL and method in NOT_OFFICIAL:
            raise self._not_in(OFFICIAL, method, NOT_OFFICIAL[method])
        if dialect == OFFICIAL and task_id is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            request = getattr(ctx, "request", None)
            named = decode_header_value(request.headers.get(MCP_NAME_HEADER)) if request is not None else None
            if named != task_id:
                raise MCPError(code=HEADER_MISMATCH, message=f"the Mcp-Name header ({named!r}) must be the taskId "
                                                             f"of the request ({task_id!r})")
        return self.principal(getattr(ctx, "request", None)), dialect

    @staticmethod
    def _not_in(dialect: str, method: str, instead: str) -> MCPError:
        return MCPError(code=METHOD_NOT_FOUND, message=f"{method} is not a method of {dialect}: {instead}")

    async def _get(self, ctx: Any, params: GetTaskRequestParams) -> dict[str, Any]:
        try:
            owner, dialect = self._asker(ctx, "tasks/get", params.task_id)
            return dialects.task(dialect, await self.manager.get(owner, params.task_id))
        except Exception as exc:
            raise _mcp_error(exc, "tasks/get", self.manager.store) from None

    async def _list(self, ctx: Any, params: PaginatedRequestParams) -> dict[str, Any]:
        try:
            owner, dialect = self._asker(ctx, "tasks/list")
            page, cursor = await self.manager.list(owner, params.cursor)
        except Exception as exc:
            raise _mcp_error(exc, "tasks/list", self.manager.store) from None
        answer: dict[str, Any] = {"tasks": [dialects.task(dialect, r) for r in page]}
        if cursor:
            answer["nextCursor"] = cursor
        return answer

    async def _cancel(self, ctx: Any, params: CancelTaskRequestParams) -> dict[str, Any]:
        try:
            owner, dialect = self._asker(ctx, "tasks/cancel", params.task_id)
            notify = _notifier(ctx.session, dialect)
            if dialect != OFFICIAL:
                return dialects.task(dialect, await self.manager.cancel(owner, params.task_id, notify))
            # acknowledged, and cooperative: a task that already ended stays as it ended
            if not (await self.manager.get(owner, params.task_id)).terminal:
                try:
                    await self.manager.cancel(owner, params.task_id, notify)
                except TaskError as exc:
                    if exc.code != INVALID_PARAMS:  # it ended meanwhile: still acknowledged
                        raise
            return {"resultType": "complete"}
        except Exception as exc:
            raise _mcp_error(exc, "tasks/cancel", self.manager.store) from None

    async def _result(self, ctx: Any, params: GetTaskPayloadRequestParams) -> dict[str, Any]:
        try:
            owner, dialect = self._asker(ctx, "tasks/result", params.task_id)
            deliver = (_elicitation_on_stream(ctx, params.task_id)
                       if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and can_answer_input(ctx) else None)
            record = await self.manager.finished(owner, params.task_id, wait=dialect == CORE, deliver=deliver)
            return dialects.final_answer(dialect, record)
        except Exception as exc:
            raise _mcp_error(exc, "tasks/result", self.manager.store) from None

    async def _update(self, ctx: Any, params: UpdateTaskRequestParams) -> dict[str, Any]:
        """Answers to a task's input requests (its ``inputRequests``), by key; keys that are not
        outstanding are ignored, as the official extension says."""
        try:
            owner, dialect = self._asker(ctx, "tasks/update", params.task_id)
            if dialect != OFFICIAL:  # the seed's says so: a client does not change a task
                raise self._not_in(dialect, "tasks/update", "tasks/result delivers a task's input requests as "
                                                            "elicitations, answered on its stream")
            responses = {}
            for key, response in params.input_responses.items():
                try:
                    responses[key] = ElicitResult.model_validate(response).model_dump(by_alias=True, mode="json",
                                                                                     exclude_none=True)
                except ValueError:
                    raise TaskError(INVALID_PARAMS, f"inputResponses[{key!r}] is not an elicitation result "
                                                    "({action: accept|decline|cancel, content})") from None
            await self.manager.answer(owner, params.task_id, responses)
            return {"resultType": "complete"}
        except Exception as exc:
            raise _mcp_error(exc, "tasks/update", self.manager.store) from None


def _elicitation_on_stream(ctx: Any, task_id: str) -> Any:
    """How tasks/result puts a task's input request to its client (2025-11-25): an elicitation
    related to the task, sent on the stream of the tasks/result request itself."""
    async def deliver(request: dict[str, Any]) -> dict[str, Any]:
        params = {**request["params"], "_meta": {RELATED_TASK: {"taskId": task_id}}}
        result = await ctx.session.send_request(
            ElicitRequest(params=ElicitRequestFormParams.model_validate(params)), ElicitResult,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return deliver


def _notifier(session: Any, dialect: str) -> Any:
    """notifications/tasks/status to this session, outside any request (the standalone
    stream on 2025-11-25): the Task, never its result. The official extension pushes status
    through subscriptions/listen instead, so its tasks notify nobody here."""
    async def notify(record: TaskRecord) -> None:
        if dialect == OFFICIAL:
            return
        await session.send_notification(TaskStatusNotification(
            params=TaskStatusNotificationParams.model_validate(dialects.task(dialect, record))))
    return notify


class _TaskSupportInToolList(Middleware):
    """Every tool may be called as a task: say so in tools/list (execution.taskSupport)."""

    async def on_list_tools(self, context: Any, call_next: Any) -> Any:
        tools = await call_next(context)
        return [t if t.execution else t.model_copy(update={"execution": ToolExecution(task_support="optional")})
                for t in tools]
