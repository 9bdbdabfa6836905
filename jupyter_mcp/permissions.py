"""Jupyter's authorizer, asked for every tool call about what the tool really does.

The /mcp handler only lets in users the authorizer allows on the ``mcp`` resource. Each
tool then needs what Jupyter's own handlers would ask for the same work: reading a
notebook is ``read`` on ``contents``; editing, creating and writing outputs is ``write``
on ``contents``; running code is ``execute`` on ``kernels`` (and ``write`` on
``sessions`` when the notebook has no session yet and one is made); interrupting or
restarting a kernel is ``write`` on ``kernels``, changing a notebook's kernel ``write`` on
``sessions``. A refusal is a tool
error naming the permission, before the tool does anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastmcp.server.dependencies import get_http_request
from fastmcp.server.middleware import Middleware
from jupyter_core.utils import ensure_async

from .errors import NotebookError

Need = tuple[str, str]  # (action, resource), as Jupyter's authorizer is asked
READ: tuple[Need, ...] = (("read", "contents"),)
CREATE: tuple[Need, ...] = (("write", "contents"),)
EDIT: tuple[Need, ...] = (("read", "contents"), ("write", "contents"))
RUN_CODE: tuple[Need, ...] = (("read", "contents"), ("execute", "kernels"))
RUN_CELL: tuple[Need, ...] = (*EDIT, ("execute", "kernels"))
START_SESSION: tuple[Need, ...] = (("write", "sessions"),)
LIST_KERNELS: tuple[Need, ...] = (("read", "kernels"), ("read", "kernelspecs"), ("read", "sessions"))
MANAGE_KERNEL: tuple[Need, ...] = (("read", "sessions"), ("write", "kernels"))  # interrupt, restart
SELECT_KERNEL: tuple[Need, ...] = (*EDIT, ("read", "kernelspecs"), ("write", "sessions"))

SCOPE_KEY = "jupyter_mcp.permissions"  # where the /mcp handler puts a request's Permissions


class Permissions:
    """What the authorizer lets the user behind one /mcp request do (answers kept per request)."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.user = handler.current_user
        self._answers: dict[Need, bool] = {}

    async def allows(self, action: str, resource: str) -> bool:
        need = (action, resource)
        if need not in self._answers:
            self._answers[need] = bool(await ensure_async(
                self.handler.authorizer.is_authorized(self.handler, self.user, action, resource)))
        return self._answers[need]

    async def require(self, needs: Iterable[Need], doing: str) -> None:
        """Refuse, naming what is missing, unless every need is allowed."""
        needs = tuple(needs)
        missing = [f"{action} on {resource}" for action, resource in needs if not await self.allows(action, resource)]
        if missing:
            name = getattr(self.user, "username", None) or str(self.user)
            raise NotebookError(f"permission denied: Jupyter's authorizer does not allow user {name!r} "
                                f"{' or '.join(missing)}, which {doing} needs; nothing was done")


class Unrestricted:
    """No HTTP request behind the call (an in-memory client in the server's own process)."""

    async def allows(self, action: str, resource: str) -> bool:
        return True

    async def require(self, needs: Iterable[Need], doing: str) -> None:
        return None


UNRESTRICTED = Unrestricted()


def permissions_of(request: Any) -> Permissions | Unrestricted:
    return (getattr(request, "scope", None) or {}).get(SCOPE_KEY) or UNRESTRICTED


def current_permissions() -> Permissions | Unrestricted:
    """The permissions of the request behind the current tool call."""
    try:
        return permissions_of(get_http_request())
    except RuntimeError:  # no HTTP request (an in-memory client)
        return UNRESTRICTED


class Authorize(Middleware):
    """Before any tool runs (and before a task is made for it), its needs are asked of the
    authorizer; ``needs`` maps each tool's name to what it needs. Listing and reading the
    notebook resources, and getting a prompt (which embeds them), is reading contents."""

    def __init__(self, needs: dict[str, tuple[Need, ...]]) -> None:
        self.needs = needs

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        name = context.message.name
        await current_permissions().require(self.needs.get(name, ()), name)
        return await call_next(context)

    async def on_list_resources(self, context: Any, call_next: Any) -> Any:
        return await _reading("resources/list", context, call_next)

    async def on_list_resource_templates(self, context: Any, call_next: Any) -> Any:
        return await _reading("resources/templates/list", context, call_next)

    async def on_read_resource(self, context: Any, call_next: Any) -> Any:
        return await _reading("resources/read", context, call_next)

    async def on_get_prompt(self, context: Any, call_next: Any) -> Any:
        return await _reading("prompts/get", context, call_next)


async def _reading(doing: str, context: Any, call_next: Any) -> Any:
    await current_permissions().require(READ, doing)
    return await call_next(context)
