"""Refusals an agent can read: bad input, or a state that forbids the call.

They subclass fastmcp's ToolError, so the agent gets the message as it is (an
``isError`` result) and the server log gets one line, not a traceback. Anything
else a tool raises is a bug and is logged with its traceback.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware

log = logging.getLogger(__name__)


class NotebookError(ToolError):
    """A tool call was refused; the message says what was wrong and what is allowed."""


def logs_its_error(what: str) -> Callable[[asyncio.Future[Any]], None]:
    """A done-callback: work whose caller may have stopped waiting (a kernel start, a shielded
    run) still has its error looked at, and logged as ``what`` failing."""
    def retrieve(future: asyncio.Future[Any]) -> None:
        if not future.cancelled() and future.exception() is not None:
            log.info("jupyter_mcp: %s ended with: %s", what, future.exception())
    return retrieve


def named_failures(tool: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """The tool, whose unexpected failures reach the agent (a plain call or a task) with their kind
    and message, never empty: fastmcp would answer ``Error calling tool 'x': {exc}``, which an
    ``AssertionError()`` leaves blank. Refusals (``ToolError``) pass as they are."""
    @functools.wraps(tool)
    async def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return await tool(*args, **kwargs)
        except ToolError:
            raise
        except Exception as exc:
            log.exception("jupyter_mcp: %s failed", tool.__name__)
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise ToolError(f"{tool.__name__} failed: {detail}. The call was not refused: the server could not "
                            "carry it out (its log has the traceback)") from exc
    return run


class KnownArguments(Middleware):
    """An argument a tool does not take is refused, naming the ones it takes (and the one meant,
    when it is a near miss), before the tool runs or a task is made for it. ``parameters`` maps
    each tool's name to its argument names."""

    def __init__(self, parameters: dict[str, list[str]]) -> None:
        self.parameters = parameters

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        name = context.message.name
        allowed = self.parameters.get(name)
        if allowed is None:  # not a tool of ours: nothing to check
            return await call_next(context)
        unknown = sorted(set(context.message.arguments or {}) - set(allowed))
        if unknown:
            hints = [f"{arg!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(arg, allowed, 1))
                     else repr(arg) for arg in unknown]
            raise NotebookError(f"{name} takes no argument {', '.join(hints)}; its arguments are: "
                                f"{', '.join(allowed)}. Nothing was done")
        return await call_next(context)
