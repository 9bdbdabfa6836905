"""Unit tests (pure logic) of the task manager and the in-process store: retries, cancel,
partial output, the own-result race, failure, ttl bounds, retention."""

from __future__ import annotations

import asyncio

import pytest

from jupyter_mcp.tasks import dialects
from jupyter_mcp.tasks.errors import TaskError
from jupyter_mcp.tasks.manager import TaskManager
from jupyter_mcp.tasks.records import TaskRecord
from jupyter_mcp.tasks.stores import InMemoryTaskStore

pytestmark = pytest.mark.unit


async def test_concurrent_retries_with_one_key_make_one_task_and_leave_no_lock_behind():
    manager = TaskManager(InMemoryTaskStore(), default_ttl_ms=1000, max_ttl_ms=1000, poll_interval_ms=1000)
    started = 0

    async def work():
        nonlocal started
        started += 1
        return {"content": [{"type": "text", "text": "done"}]}

    async def notify(record):
        pass

    async def submit(key):
        return await manager.submit(owner="alice", tool="t", fingerprint="f", ttl=None, key=key,
                                    work=work, notify=notify)

    records = await asyncio.gather(*(submit("retry-1") for _ in range(10)), submit("other"), submit(None))
    assert len({r.task_id for r in records[:10]}) == 1  # ten attempts, one task
    assert len({r.task_id for r in records}) == 3
    await asyncio.sleep(0)
    await asyncio.gather(*(run.done.wait() for run in list(manager.runs.values())))
    assert started == 3
    assert manager._key_locks == {}


async def _notify(record):
    pass


def manager(**kwargs) -> TaskManager:
    return TaskManager(InMemoryTaskStore(), default_ttl_ms=60_000, max_ttl_ms=120_000, poll_interval_ms=100, **kwargs)


def partial_of(lines):
    def render(ending):
        return {"content": [{"type": "text", "text": "".join(lines)}], "ending": ending} if lines else None
    return render


async def started(tasks, work):
    record = await tasks.submit(owner="alice", tool="t", fingerprint="f", ttl=None, key=None, work=work,
                                notify=_notify)
    await asyncio.sleep(0)
    return record


async def test_cancel_interrupts_first_and_keeps_the_partial_output():
    from jupyter_mcp.tasks import record_output, register_interrupt

    tasks, order, lines = manager(), [], []

    async def work():
        await register_interrupt(lambda: order.append("interrupt"))
        record_output(partial_of(lines))
        lines.append("so far\n")
        try:
            await asyncio.sleep(60)  # ignores the interrupt: the manager stops waiting
        except asyncio.CancelledError:
            order.append("cancelled")
            raise

    record = await started(tasks, work)
    final = await tasks.cancel("alice", record.task_id, _notify)
    assert order == ["interrupt", "cancelled"]
    assert final.status == "cancelled"
    assert final.result == {"content": [{"type": "text", "text": "so far\n"}], "ending": "cancelled"}


async def test_the_tools_own_result_wins_over_the_partial():
    from jupyter_mcp.tasks import record_output, register_interrupt

    tasks, interrupted = manager(), asyncio.Event()

    async def work():
        await register_interrupt(interrupted.set)
        record_output(partial_of(["half"]))
        await interrupted.wait()
        return {"content": [{"type": "text", "text": "the whole answer"}], "isError": False}

    record = await started(tasks, work)
    final = await tasks.cancel("alice", record.task_id, _notify)
    assert final.status == "cancelled"
    assert final.result["content"][0]["text"] == "the whole answer"


async def test_a_failed_tool_keeps_its_partial_in_the_error():
    from jupyter_mcp.tasks import record_output

    tasks = manager()

    async def work():
        record_output(partial_of(["diagnosis\n"]))
        raise RuntimeError("the kernel died")

    record = await started(tasks, work)
    await asyncio.gather(*(run.done.wait() for run in list(tasks.runs.values())))
    final = await tasks.get("alice", record.task_id)
    assert final.status == "failed" and final.status_message == "the kernel died"
    assert final.error["partial"]["ending"] == "failed"
    try:
        dialects.final_answer(dialects.SEED, await tasks.finished("alice", record.task_id, wait=False))
    except TaskError as error:
        assert error.code == -32603 and error.data["partial"]["content"][0]["text"] == "diagnosis\n"
    else:
        raise AssertionError("tasks/result of a failed task must raise")


async def test_a_cancel_of_a_task_that_produced_nothing_keeps_no_result():
    tasks = manager()

    async def work():
        await asyncio.sleep(60)

    record = await started(tasks, work)
    final = await tasks.cancel("alice", record.task_id, _notify)
    assert final.status == "cancelled" and final.result is None


async def test_ttl_is_bounded_and_checked():
    tasks = manager()
    assert tasks.ttl(None) == 60_000 and tasks.ttl(10**9) == 120_000 and tasks.ttl(5) == 5
    for bad in (-1, "soon", True):
        try:
            tasks.ttl(bad)
        except TaskError as error:
            assert "milliseconds" in error.message
        else:
            raise AssertionError(f"ttl {bad!r} accepted")


async def test_store_retention_and_terminal_records(monkeypatch):
    from jupyter_mcp.tasks import records, stores

    now = [1_000_000.0]
    monkeypatch.setattr(records.time, "time", lambda: now[0])
    monkeypatch.setattr(stores.time, "time", lambda: now[0])
    store = InMemoryTaskStore()
    await store.create(TaskRecord(task_id="t1", owner="a", tool="x", ttl_ms=1000, idempotency_key="k"))
    assert (await store.create(TaskRecord(task_id="t2", owner="a", tool="x", idempotency_key="k"))).task_id == "t1"
    assert await store.update("t1", expect_status="completed", status="failed") is None  # not in that state
    done = await store.update("t1", expect_status="working", status="completed", result={"content": []})
    assert done.terminal
    assert await store.update("t1", status="cancelled") is None  # a terminal record never changes
    now[0] += 0.9
    assert (await store.get("t1")).status == "completed"  # kept for its ttl after it finished...
    now[0] += 0.2
    assert await store.get("t1") is None and await store.find_by_key("k") is None  # ...then absent
    assert [r.task_id for r in await store.list(owner="a")] == []
    fresh = await store.create(TaskRecord(task_id="t3", owner="a", tool="x", idempotency_key="k"))
    assert fresh.task_id == "t3"  # the key is free again


# --- Bounds, and a store that goes away (issue 12, findings 6 and 7) ---------------------------------


async def test_concurrent_submits_cannot_slip_past_the_running_bound():
    from jupyter_mcp.tasks.errors import LIMIT_REACHED
    from jupyter_mcp.tasks.state import Limits

    tasks = manager(limits=Limits(running_per_owner=3))
    release = asyncio.Event()

    async def work():
        await release.wait()
        return {"content": []}

    outcomes = await asyncio.gather(*(tasks.submit(owner="alice", tool="t", fingerprint=str(i), ttl=None, key=None,
                                                   work=work, notify=_notify) for i in range(10)),
                                    return_exceptions=True)
    refused = [o for o in outcomes if isinstance(o, TaskError)]
    assert len(refused) == 7 and all(e.code == LIMIT_REACHED for e in refused)
    assert len(tasks.runs) == 3
    other = await tasks.submit(owner="bob", tool="t", fingerprint="b", ttl=None, key=None, work=work, notify=_notify)
    assert other.status == "working"  # one user's bound is not another's
    release.set()


class Flaky(InMemoryTaskStore):
    """The in-process store, unreachable for its first ``down`` writes (as Redis restarting)."""

    def __init__(self, down: int, reads: bool = False) -> None:
        super().__init__()
        self.down, self.reads = down, reads

    async def update(self, task_id, **changes):
        if self.down:
            self.down -= 1
            raise ConnectionError("Connection refused")
        return await super().update(task_id, **changes)

    async def get(self, task_id):
        if self.down and not self.reads:
            raise ConnectionError("Connection refused")
        return await super().get(task_id)


async def test_a_final_state_lands_once_the_store_is_back(monkeypatch):
    from jupyter_mcp.tasks import running

    monkeypatch.setattr(running, "FINAL_WRITE_RETRY_SEC", (0.01, 0.02))
    store = Flaky(down=5)
    tasks = TaskManager(store, default_ttl_ms=60_000, max_ttl_ms=60_000, poll_interval_ms=100)

    async def work():
        return {"content": [{"type": "text", "text": "done"}]}

    record = await started(tasks, work)
    await asyncio.wait_for(asyncio.gather(*(run.done.wait() for run in list(tasks.runs.values()))), 5)
    final = await tasks.get("alice", record.task_id)
    assert final.status == "completed" and final.result["content"][0]["text"] == "done"


async def test_a_store_that_answers_but_refuses_the_state_gets_a_failed_one(monkeypatch):
    store = Flaky(down=2, reads=True)
    tasks = TaskManager(store, default_ttl_ms=60_000, max_ttl_ms=60_000, poll_interval_ms=100)

    async def work():
        return {"content": [{"type": "text", "text": "done"}]}

    record = await started(tasks, work)
    await asyncio.wait_for(asyncio.gather(*(run.done.wait() for run in list(tasks.runs.values()))), 5)
    final = await tasks.get("alice", record.task_id)
    assert final.status == "failed" and "could not be stored" in final.status_message


async def test_a_working_record_without_its_run_answers_failed():
    tasks = manager()
    record = await tasks.store.create(TaskRecord(task_id="tsk_lost", owner="alice", tool="t",
                                                 server_id=tasks.server_id))
    assert record.status == "working"
    assert (await tasks.get("alice", "tsk_lost")).status == "failed"
    page, _ = await tasks.list("alice", None)
    assert [r.status for r in page] == ["failed"]


QUESTION = {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {"type": "object"}}}


async def asking(tasks):
    """A task whose work asks once and returns the answer it got."""
    from jupyter_mcp.tasks import ask_input

    async def work():
        answer = await ask_input(QUESTION)
        return {"content": [{"type": "text", "text": answer["content"]["value"]}]}

    record = await tasks.submit(owner="alice", tool="t", fingerprint="f", ttl=None, key=None, work=work,
                                notify=_notify, can_ask=True)
    for _ in range(100):
        record = await tasks.get("alice", record.task_id)
        if record.status == "input_required":
            return record
        await asyncio.sleep(0.01)
    raise AssertionError("the task never asked")


async def test_a_question_makes_the_task_input_required_until_its_key_is_answered():
    tasks = manager()
    record = await asking(tasks)
    [(key, request)] = record.input_requests.items()
    assert request == QUESTION
    await tasks.answer("alice", record.task_id, {"not-asked": {"action": "accept"}})  # ignored
    assert (await tasks.get("alice", record.task_id)).status == "input_required"
    await tasks.answer("alice", record.task_id, {key: {"action": "accept", "content": {"value": "Ada"}}})
    final = await tasks.finished("alice", record.task_id, wait=True)
    assert final.status == "completed" and final.result["content"][0]["text"] == "Ada"
    assert final.input_requests is None


async def test_tasks_result_delivers_each_question_once_then_answers_the_end():
    tasks = manager()
    record = await asking(tasks)
    delivered = []

    async def deliver(request):
        delivered.append(request)
        return {"action": "accept", "content": {"value": "Ada"}}

    final = await tasks.finished("alice", record.task_id, wait=False, deliver=deliver)  # input_required: it waits
    assert final.status == "completed" and delivered == [QUESTION]


async def test_a_delivery_stops_when_the_run_withdraws_its_question():
    tasks = manager()
    record = await asking(tasks)
    never, delivering = asyncio.Event(), asyncio.Event()

    async def deliver(request):
        delivering.set()
        await never.wait()  # the client never answers

    waiting = asyncio.create_task(tasks.finished("alice", record.task_id, wait=True, deliver=deliver))
    await asyncio.wait_for(delivering.wait(), 5)  # the question is out: the wait is on the client
    cancelled = await tasks.cancel("alice", record.task_id, _notify)
    assert cancelled.status == "cancelled" and cancelled.input_requests is None
    assert (await asyncio.wait_for(waiting, 5)).status == "cancelled"


async def test_an_answer_given_to_another_server_reaches_the_run_through_the_store():
    store = InMemoryTaskStore()
    store.shared = True  # as Redis is: the running server's supervisor reads the store
    running = TaskManager(store, default_ttl_ms=60_000, max_ttl_ms=60_000, poll_interval_ms=50)
    other = TaskManager(store, default_ttl_ms=60_000, max_ttl_ms=60_000, poll_interval_ms=50)
    record = await asking(running)
    [key] = record.input_requests
    await other.answer("alice", record.task_id, {key: {"action": "accept", "content": {"value": "Ada"}}})
    final = await other.finished("alice", record.task_id, wait=True)
    assert final.status == "completed" and final.result["content"][0]["text"] == "Ada"
