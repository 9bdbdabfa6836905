"""What a tasks/* request that cannot be answered says: a JSON-RPC error code and a message."""

from __future__ import annotations

from typing import Any


class TaskError(Exception):
    """A tasks/* request that cannot be answered; ``code`` is the JSON-RPC error code."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
LIMIT_REACHED = -32000  # JSON-RPC's implementation-defined server error: a per-user bound of tasks


def no_such_task(task_id: str) -> TaskError:
    # Expired and never-existed get the same answer: an invented id learns nothing.
    return TaskError(INVALID_PARAMS, f"no such task: {task_id!r}")
