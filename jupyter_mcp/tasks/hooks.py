"""The hooks a tool uses to make its work cancellable, its partial output keepable, its
progress readable in the task's status, and its questions put to the task's client.

Outside a task they answer False (or None) and do nothing: a synchronous call has its
client on the other end of the connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

Interrupt = Callable[[], Awaitable[Any] | Any]
#: The result to keep if the task ends before the tool returns: called with how it ended
#: ("cancelled" or "failed"), it answers a CallToolResult wire dict, or None (nothing to keep).
PartialResult = Callable[[str], "dict[str, Any] | None"]

#: The task a tool call is running in, if any (set by the task manager).
current_task: ContextVar[Any | None] = ContextVar("jupyter_mcp_current_task", default=None)


async def register_interrupt(interrupt: Interrupt) -> bool:
    """Make ``interrupt`` the way to stop this call's work when its task is cancelled."""
    task = current_task.get()
    if task is None:
        return False
    task.interrupts.append(interrupt)
    return True


def record_output(partial: PartialResult) -> bool:
    """Say how to render this call's output so far, should its task end without its answer."""
    task = current_task.get()
    if task is None:
        return False
    task.partial = partial
    return True


async def report_status(message: str) -> bool:
    """Make ``message`` the task's status message (what ``tasks/get`` says while it works)."""
    task = current_task.get()
    if task is None or task.say is None:
        return False
    await task.say(message)
    return True


def can_ask() -> bool:
    """Whether this call runs in a task whose client can answer input requests."""
    task = current_task.get()
    return task is not None and task.can_ask and task.ask is not None


async def ask_input(request: dict[str, Any]) -> dict[str, Any]:
    """Put ``request`` (an elicitation/create: method and params) to the task's client: the
    task is input_required until it answers. Only where ``can_ask``."""
    task = current_task.get()
    if task is None or task.ask is None:
        raise RuntimeError("ask_input outside a task that can ask")
    return await task.ask(request)
