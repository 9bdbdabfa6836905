"""Refusals an agent can read: bad input, or a state that forbids the call.

They subclass fastmcp's ToolError, so the agent gets the message as it is (an
``isError`` result) and the server log gets one line, not a traceback. Anything
else a tool raises is a bug and is logged with its traceback.
"""

from __future__ import annotations

from fastmcp.exceptions import ToolError


class NotebookError(ToolError):
    """A tool call was refused; the message says what was wrong and what is allowed."""
