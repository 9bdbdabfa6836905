"""Task records and the store protocol they live in.

A record is everything a task is: who owns it, its status, when it changed, how
long it is kept, the idempotency key that names it, and its result or error. Stores
keep records; they are responsible for retention (a finished task past its ttl is
absent, exactly like one that never existed) and for never changing a terminal one.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol, runtime_checkable

WORKING = "working"
INPUT_REQUIRED = "input_required"  # working, but waiting for answers to its input_requests
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED})


def new_task_id() -> str:
    return "tsk_" + uuid.uuid4().hex


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class TaskRecord:
    task_id: str
    owner: str
    tool: str
    status: str = WORKING
    created_at: float = field(default_factory=time.time)
    last_updated_at: float = 0.0
    ttl_ms: int = 900_000
    poll_interval_ms: int = 1000
    status_message: str | None = None
    idempotency_key: str | None = None  # already scoped to the owner by the manager
    fingerprint: str | None = None  # the call (tool + canonical arguments) the key names
    server_id: str | None = None  # the server process running it
    result: dict[str, Any] | None = None  # the CallToolResult wire form, when there is one
    error: dict[str, Any] | None = None  # {"message", "partial"} of a failed task
    partial: dict[str, Any] | None = None  # a working task's output so far, as a result (shared stores)
    input_requests: dict[str, Any] | None = None  # key -> the elicitation/create request it waits on
    input_responses: dict[str, Any] | None = None  # key -> an answer given on another server (shared stores)

    def __post_init__(self) -> None:
        if not self.last_updated_at:
            self.last_updated_at = self.created_at

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def expired(self, now: float | None = None) -> bool:
        """A finished task is kept for its ttl after it finished; a running one never expires."""
        if not self.terminal:
            return False
        return (now if now is not None else time.time()) > self.last_updated_at + self.ttl_ms / 1000

    def to_wire(self) -> dict[str, Any]:
        """The protocol's Task object."""
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": iso(self.created_at),
            "lastUpdatedAt": iso(self.last_updated_at),
            "ttl": self.ttl_ms,
        }
        if self.status_message:
            task["statusMessage"] = self.status_message
        if not self.terminal:
            task["pollInterval"] = self.poll_interval_ms
        return task

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskRecord:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@runtime_checkable
class TaskStore(Protocol):
    """Where tasks live. ``get`` and ``find_by_key`` answer an expired task as absent.

    ``create`` with an idempotency key that a live task already holds returns that
    task instead of storing the new one (the caller compares fingerprints). ``update``
    with ``expect_status`` changes the record only if its status is still that one,
    and a terminal record is never changed.
    """

    async def create(self, record: TaskRecord) -> TaskRecord: ...

    async def get(self, task_id: str) -> TaskRecord | None: ...

    async def list(self, *, limit: int = 50, owner: str | None = None,
                   before: tuple[float, str] | None = None) -> list[TaskRecord]: ...

    async def update(self, task_id: str, *, expect_status: str | None = None, **changes: Any) -> TaskRecord | None: ...

    async def find_by_key(self, idempotency_key: str) -> TaskRecord | None: ...

    async def count(self, owner: str) -> int:
        """How many tasks the owner has kept: working, or finished within their ttl."""
        ...
