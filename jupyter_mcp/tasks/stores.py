"""Task stores: in this process by default, or another one named as module:Class."""

from __future__ import annotations

import importlib
import inspect
import time
from typing import Any

from .records import TaskRecord, TaskStore


class InMemoryTaskStore:
    """Tasks in the server process: right for a single-user server."""

    shared = False  # no other server reads these records

    def __init__(self) -> None:
        self._records: dict[str, TaskRecord] = {}
        self._keys: dict[str, str] = {}
        self._last_purge = 0.0

    def _live(self, task_id: str | None) -> TaskRecord | None:
        record = self._records.get(task_id) if task_id else None
        if record is not None and record.expired():
            self._forget(record)
            return None
        return record

    def _forget(self, record: TaskRecord) -> None:
        self._records.pop(record.task_id, None)
        if record.idempotency_key and self._keys.get(record.idempotency_key) == record.task_id:
            del self._keys[record.idempotency_key]

    def _purge(self) -> None:
        """Drop expired records now and then, so memory stays bounded without readers."""
        now = time.time()
        if now - self._last_purge < 60:
            return
        self._last_purge = now
        for record in [r for r in self._records.values() if r.expired(now)]:
            self._forget(record)

    async def create(self, record: TaskRecord) -> TaskRecord:
        self._purge()
        if record.idempotency_key:
            holder = self._live(self._keys.get(record.idempotency_key))
            if holder is not None:
                return holder
            self._keys[record.idempotency_key] = record.task_id
        self._records[record.task_id] = record
        return record

    async def get(self, task_id: str) -> TaskRecord | None:
        return self._live(task_id)

    async def list(self, *, limit: int = 50, owner: str | None = None,
                   before: tuple[float, str] | None = None) -> list[TaskRecord]:
        self._purge()
        now = time.time()
        found = [r for r in self._records.values()
                 if (owner is None or r.owner == owner) and not r.expired(now)
                 and (before is None or (r.created_at, r.task_id) < before)]
        found.sort(key=lambda r: (r.created_at, r.task_id), reverse=True)
        return found[:limit]

    async def update(self, task_id: str, *, expect_status: str | None = None, **changes: Any) -> TaskRecord | None:
        record = self._live(task_id)
        if record is None or record.terminal or (expect_status is not None and record.status != expect_status):
            return None
        for name, value in changes.items():
            setattr(record, name, value)
        record.last_updated_at = time.time()
        return record

    async def find_by_key(self, idempotency_key: str) -> TaskRecord | None:
        return self._live(self._keys.get(idempotency_key))

    async def count(self, owner: str) -> int:
        self._purge()
        now = time.time()
        return sum(1 for r in self._records.values() if r.owner == owner and not r.expired(now))


def load_store(spec: str | None, **options: Any) -> TaskStore:
    """The store named by ``module:Class`` (default: in memory). A name that cannot be
    loaded is an error, never a silent fallback to memory."""
    if not spec:
        return _construct("in memory", InMemoryTaskStore, options)
    module_name, sep, class_name = spec.partition(":")
    if not sep or not module_name or not class_name:
        raise ValueError(f"task store class must be given as module:Class, not {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"task store {spec!r} cannot be imported: {exc}") from exc
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ValueError(f"task store {spec!r}: module {module_name!r} has no {class_name!r}")
    return _checked(spec, _construct(spec, cls, options))


def _construct(spec: str, cls: Any, options: dict[str, Any]) -> Any:
    """The store, or a clear error naming an option its class does not take."""
    try:
        inspect.signature(cls).bind(**options)
    except TypeError as exc:
        raise ValueError(f"task store {spec!r} does not take the options {sorted(options)}: {exc}") from None
    return cls(**options)


def _checked(spec: str, store: Any) -> TaskStore:
    methods = ("create", "get", "list", "update", "find_by_key", "count")
    missing = [m for m in methods if not callable(getattr(store, m, None))]
    if missing:
        raise ValueError(f"task store {spec!r} lacks {', '.join(missing)}")
    return store
