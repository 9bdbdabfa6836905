"""What a client is told when a tasks/* handler fails unexpectedly (jupyter_mcp/tasks/binding.py):
"the task store is unavailable" only when the task store failed; anything else says what failed
(its type and message, and the method), logged with its traceback on the server."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import GetTaskRequestParams, PaginatedRequestParams

from jupyter_mcp.tasks import TaskManager
from jupyter_mcp.tasks.binding import TasksExtension

pytestmark = pytest.mark.unit


class DownStore:
    """A task store that cannot be reached (Redis restarting, say)."""

    async def get(self, task_id):
        raise ConnectionError("connection refused")

    async def list(self, *, limit=50, owner=None, before=None):
        raise ConnectionError("connection refused")


class GarbledStore:
    """A task store that answers, with something that is not a task record: what breaks is ours."""

    async def get(self, task_id):
        return "not a record"

    async def list(self, *, limit=50, owner=None, before=None):
        return ["not a record"]


def extension(store):
    manager = TaskManager(store, default_ttl_ms=1000, max_ttl_ms=1000, poll_interval_ms=1000)
    return TasksExtension(manager, principal=lambda request: "alice")


#: A 2025-11-25 client's tasks/* request (the core dialect).
CTX = SimpleNamespace(params=None, meta={}, session=SimpleNamespace(client_capabilities=None),
                      protocol_version="2025-11-25", request=None)


async def test_a_store_failure_says_the_store_is_unavailable():
    tasks = extension(DownStore())
    with pytest.raises(MCPError, match="the task store is unavailable: ConnectionError: connection refused"):
        await tasks._get(CTX, GetTaskRequestParams(task_id="t1"))
    with pytest.raises(MCPError, match="the task store is unavailable: ConnectionError"):
        await tasks._list(CTX, PaginatedRequestParams())


async def test_any_other_failure_says_what_failed(caplog):
    tasks = extension(GarbledStore())
    with caplog.at_level(logging.ERROR, logger="jupyter_mcp.tasks.binding"):
        with pytest.raises(MCPError) as failed:
            await tasks._get(CTX, GetTaskRequestParams(task_id="t1"))
    message = failed.value.error.message
    assert message.startswith("tasks/get failed: AttributeError: ") and "owner" in message, message
    assert "task store" not in message
    logged, = [r for r in caplog.records if r.name == "jupyter_mcp.tasks.binding"]
    assert logged.getMessage() == "jupyter_mcp: tasks/get failed" and logged.exc_info is not None
    with pytest.raises(MCPError, match="^tasks/list failed: AttributeError"):
        await tasks._list(CTX, PaginatedRequestParams())
