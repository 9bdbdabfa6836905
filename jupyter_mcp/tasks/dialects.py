"""The three ways clients speak tasks, as shapes on the wire. One record, three renderings.

- ``io.datalayer/tasks``, the seed's extension: ``ttl`` is how long a finished task is kept;
  a call answered ``isError`` is a failed task, and ``tasks/result`` refuses a working task
  and raises for a failed one.
- The 2025-11-25 core (SEP-1686): the same Task object, but ``ttl`` counts from creation
  (null while the task runs: a running task never expires), and ``tasks/result`` waits for
  the end, then answers exactly what the call would have answered.
- ``io.modelcontextprotocol/tasks`` (SEP-2663, protocol 2026-07-28): ``ttlMs`` and
  ``pollIntervalMs``, ``resultType`` on every answer, a call answered ``isError`` is a
  completed task, and ``tasks/get`` carries the result (or the error) once the task ends.

Pure functions of a record: which dialect a request speaks is the binding's business.
"""

from __future__ import annotations

from typing import Any

from .errors import INTERNAL_ERROR, INVALID_PARAMS, TaskError
from .records import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, TaskRecord, iso

SEED = "io.datalayer/tasks"
CORE = "2025-11-25"  # the core tasks of that protocol version: no extension identifier
OFFICIAL = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"


def ttl_from_creation(record: TaskRecord) -> int | None:
    """How long after its creation the task may be discarded (what the specs call ttl):
    none while it runs, then its end plus the time a finished task is kept."""
    if not record.terminal:
        return None
    return round((record.last_updated_at - record.created_at) * 1000) + record.ttl_ms


def _core_task(record: TaskRecord) -> dict[str, Any]:
    task = record.to_wire()
    task["ttl"] = ttl_from_creation(record)
    return task


def created(dialect: str, record: TaskRecord, *, modern: bool) -> dict[str, Any]:
    """What ``tools/call`` answers when it made (or found, by its key) a task."""
    if dialect == OFFICIAL:
        return {"resultType": "task", **official_task(record, detailed=False)}
    answer: dict[str, Any] = {"task": record.to_wire() if dialect == SEED else _core_task(record),
                              "_meta": {RELATED_TASK: {"taskId": record.task_id}}}
    if modern:
        answer["resultType"] = "task"
    return answer


def task(dialect: str, record: TaskRecord) -> dict[str, Any]:
    """The task as ``tasks/get`` answers it (and ``tasks/cancel``, ``tasks/list`` and the status
    notifications on the first two dialects)."""
    if dialect == OFFICIAL:
        return {"resultType": "complete", **official_task(record, detailed=True)}
    # the others' questions go out as elicitations on tasks/result's stream
    return record.to_wire() if dialect == SEED else _core_task(record)


def _input_requests(record: TaskRecord) -> dict[str, Any]:
    """What an input_required task asks, by key (answered with tasks/update)."""
    return {"inputRequests": record.input_requests or {}} if record.status == INPUT_REQUIRED else {}


def official_task(record: TaskRecord, *, detailed: bool) -> dict[str, Any]:
    """SEP-2663's Task (``detailed``: its DetailedTask, with the result or error inlined).

    A call answered ``isError`` (a cell that raised) completed, its answer the result; a
    task fails only when there is no answer to give (the tool raised, the server stopped,
    the result was too large to keep). A cancelled task carries the output it produced
    before it stopped, when there was any, as ``result``."""
    status, result, error = record.status, record.result, None
    if record.status == FAILED and record.result is not None:
        status = COMPLETED
    elif record.status == FAILED:
        failure = record.error or {}
        message = failure.get("message") or record.status_message or "the task failed"
        error = {"code": INTERNAL_ERROR, "message": message}
        if failure.get("partial") is not None:
            error["data"] = {"partial": _complete(failure["partial"])}
    wire: dict[str, Any] = {"taskId": record.task_id, "status": status, "createdAt": iso(record.created_at),
                            "lastUpdatedAt": iso(record.last_updated_at), "ttlMs": ttl_from_creation(record)}
    if record.status_message:
        wire["statusMessage"] = record.status_message
    if not record.terminal:
        wire["pollIntervalMs"] = record.poll_interval_ms
    if detailed and result is not None and status in (COMPLETED, CANCELLED):
        wire["result"] = _complete(result)
    if detailed and error is not None:
        wire["error"] = error
    if detailed:
        wire.update(_input_requests(record))
    return wire


def _complete(result: dict[str, Any]) -> dict[str, Any]:
    """A CallToolResult as a 2026-07-28 result: it names its type."""
    return {"resultType": "complete", **result}


def final_answer(dialect: str, record: TaskRecord) -> dict[str, Any]:
    """``tasks/result`` of a terminal task: the CallToolResult, or the TaskError to raise.

    The seed's: a failed task raises its error, the output it produced before failing in
    ``data.partial``. The core's: exactly what the call would have answered, so a call
    answered ``isError`` is that answer, and only a call with no answer raises. On both, a
    task cancelled before it produced anything has no result to give."""
    related = {RELATED_TASK: {"taskId": record.task_id}}
    if record.status == FAILED and (dialect == SEED or record.result is None):
        failure = record.error or {"message": record.status_message or "the task failed"}
        raise TaskError(INTERNAL_ERROR, f"task failed: {failure.get('message')}",
                        {"taskId": record.task_id, "partial": failure.get("partial") or record.result})
    if record.result is None:
        raise TaskError(INVALID_PARAMS, f"task {record.task_id!r} was cancelled before it produced any output; "
                                        "there is no result")
    return {**record.result, "_meta": {**(record.result.get("_meta") or {}), **related}}
