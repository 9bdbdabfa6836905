"""The code's questions, put to the MCP client that ran it: Python's ``input()`` gets an answer.

A kernel asks with an ``input_request`` on its stdin channel, sent only to the client whose
execute request allowed stdin. Our runs allow it only where someone can answer:

- a task whose client can answer input requests: the task goes ``input_required`` and the
  question reaches the client its dialect's way (``tasks/get``'s ``inputRequests`` answered
  by ``tasks/update``, or an elicitation on the stream of its ``tasks/result``);
- a synchronous call on a 2025-11-25 connection whose client declared elicitation: an
  ``elicitation/create`` related to the call.

Anywhere else the run does not allow stdin and ``input()`` fails at once, as it does under any
Jupyter frontend without stdin (``StdinNotImplementedError``).

The question is a form with one string field, ``value``. A password prompt (``getpass``) is
never asked: the MCP specification forbids asking for secrets through a form, so the run is
interrupted, and says why. A declined or cancelled question interrupts the run too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from fastmcp.server.middleware import Middleware
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..kernels.runs import OnInput, Refused
from ..tasks import hooks
from ..tasks.binding import offers_elicitation

Ask = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]  # an elicitation/create request -> its result

_call_asker: ContextVar[Ask | None] = ContextVar("jupyter_mcp_call_asker", default=None)


def question(prompt: str) -> dict[str, Any]:
    """The elicitation/create request that puts the code's ``prompt`` to the client."""
    label = prompt.strip()
    return {"method": "elicitation/create", "params": {
        "mode": "form",
        "message": f"The running code asks for input: {label}" if label else "The running code waits for a line of input",
        "requestedSchema": {"type": "object", "required": ["value"], "properties": {"value": {
            "type": "string", "title": label or "Input",
            "description": "The line the code's input() receives (without its newline)"}}}}}


def line_of(result: Any) -> str:
    """The line an elicitation result answers; ``Refused`` for a declined or cancelled one."""
    if not isinstance(result, dict) or result.get("action") not in ("accept", "decline", "cancel"):
        raise Refused(f"the answer to the code's input request is not an elicitation result: {result!r}")
    if result["action"] != "accept":
        raise Refused(f"the input request was {result['action']}d, so the code got no input; "
                      "the kernel was interrupted")
    value = (result.get("content") or {}).get("value")
    if value is None:
        raise Refused("the input request was accepted without a value; the kernel was interrupted")
    return value if isinstance(value, str) else str(value)


def on_input() -> OnInput | None:
    """How this call answers its code's input requests, or None: nobody can (stdin stays off).
    A task asks its own client; a call that is not a task asks the client of the call."""
    if hooks.current_task.get() is not None:
        ask: Ask | None = hooks.ask_input if hooks.can_ask() else None
    else:
        ask = _call_asker.get()
    if ask is None:
        return None

    async def answer(prompt: str, password: bool) -> str:
        if password:
            raise Refused("the code asked for a password (getpass); MCP forbids asking for secrets through "
                          "elicitation, so the kernel was interrupted: pass secrets another way (an environment "
                          "variable, a file the kernel reads)")
        try:
            result = await ask(question(prompt))
        except Exception as exc:  # the client failed to answer: the kernel must not wait on for a line
            raise Refused(f"asking the client for the code's input failed ({exc}); the kernel was interrupted") from exc
        return line_of(result)

    return answer


class ElicitInput(Middleware):
    """A synchronous call of ``tools`` (those that run code) on a 2025-11-25 connection whose
    client declared elicitation answers its code's input requests with elicitations related to
    the call. (2026-07-28 has no server-to-client requests; a task asks there instead.)"""

    def __init__(self, tools: frozenset[str]) -> None:
        self.tools = tools

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        ctx = context.fastmcp_context
        session = getattr(ctx, "session", None) if ctx is not None else None
        if (context.message.name not in self.tools or session is None
                or session.protocol_version in MODERN_PROTOCOL_VERSIONS
                or not offers_elicitation(session.client_capabilities)):
            return await call_next(context)

        async def ask(request: dict[str, Any]) -> dict[str, Any]:
            params = request["params"]
            result = await session.elicit_form(params["message"], params["requestedSchema"],
                                               related_request_id=ctx.request_id)
            return result.model_dump(by_alias=True, mode="json", exclude_none=True)

        token = _call_asker.set(ask)
        try:
            return await call_next(context)
        finally:
            _call_asker.reset(token)
