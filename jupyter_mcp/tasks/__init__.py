"""MCP tasks: a tool call that runs in the background, survives its connection, and
can be cancelled for real.

The package wraps ``tools/call`` from the outside and knows nothing of notebooks. A tool
that wants its work to be cancellable, its partial output kept and its progress told uses
the hooks (``register_interrupt``, ``record_output``, ``report_status``, ``ask_input``).
"""

from __future__ import annotations

from .binding import EXTENSION_ID, IDEMPOTENCY_KEY, TasksExtension
from .hooks import PartialResult, ask_input, can_ask, current_task, record_output, register_interrupt, report_status
from .manager import TaskManager
from .records import TaskRecord, TaskStore
from .state import Limits
from .stores import InMemoryTaskStore, load_store

__all__ = ["EXTENSION_ID", "IDEMPOTENCY_KEY", "InMemoryTaskStore", "Limits", "PartialResult", "TaskManager", "TaskRecord",
           "TaskStore", "TasksExtension", "ask_input", "can_ask", "current_task", "load_store", "record_output",
           "register_interrupt", "report_status"]
