"""MCP tasks: the two hooks a tool uses to make its work cancellable and its
partial output keepable. Outside a task both answer False and do nothing: a
synchronous call has its client on the other end of the connection."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

Interrupt = Callable[[], Awaitable[Any] | Any]

#: The task a tool call is running in, if any (set by the tasks extension).
current_task: ContextVar[Any | None] = ContextVar("jupyter_mcp_current_task", default=None)


async def register_interrupt(interrupt: Interrupt) -> bool:
    """Make ``interrupt`` the way to stop this call's work when its task is cancelled."""
    task = current_task.get()
    if task is None:
        return False
    return await task.register_interrupt(interrupt)


async def record_output(outputs: list[Any]) -> bool:
    """Record the outputs so far (the whole list; it replaces the last one) as partial output."""
    task = current_task.get()
    if task is None:
        return False
    return await task.record_output(outputs)


__all__ = ["current_task", "record_output", "register_interrupt"]

from .binding import EXTENSION_ID, IDEMPOTENCY_KEY, TasksExtension  # noqa: E402
from .manager import TaskManager  # noqa: E402
from .records import TaskRecord, TaskStore  # noqa: E402
from .stores import InMemoryTaskStore, load_store  # noqa: E402

__all__ += ["EXTENSION_ID", "IDEMPOTENCY_KEY", "InMemoryTaskStore", "TaskManager", "TaskRecord", "TaskStore",
            "TasksExtension", "load_store"]
