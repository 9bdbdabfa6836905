"""The three task dialects as pure logic: which one a request speaks, and how one record reads in
each (jupyter_mcp/tasks/dialects.py, binding.py). The wire itself is tests/test_task_dialects.py."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from mcp.shared.exceptions import MCPError

from jupyter_mcp.tasks import dialects
from jupyter_mcp.tasks.binding import dialect_of, raw_params
from jupyter_mcp.tasks.dialects import CORE, OFFICIAL, SEED
from jupyter_mcp.tasks.errors import TaskError
from jupyter_mcp.tasks.records import TaskRecord

pytestmark = pytest.mark.unit

ANSWER = {"content": [{"type": "text", "text": "ZeroDivisionError"}], "isError": True}
PARTIAL = {"content": [{"type": "text", "text": "tick 1"}], "isError": False, "structuredContent": {"partial": True}}


def record(status: str, **changes) -> TaskRecord:
    return TaskRecord(task_id="tsk_1", owner="me", tool="cell_execute", status=status, created_at=100.0,
                      last_updated_at=103.5, ttl_ms=60_000, **changes)


def test_ttl_counts_from_creation_and_is_unlimited_while_running():
    assert dialects.ttl_from_creation(record("working")) is None
    assert dialects.ttl_from_creation(record("completed")) == 3_500 + 60_000
    assert dialects.task(CORE, record("completed"))["ttl"] == 63_500
    assert dialects.task(SEED, record("completed"))["ttl"] == 60_000  # the seed's: kept that long after the end


def test_official_task_names_its_fields_and_inlines_the_result():
    working = dialects.task(OFFICIAL, record("working"))
    assert working == {"resultType": "complete", "taskId": "tsk_1", "status": "working", "ttlMs": None,
                       "createdAt": "1970-01-01T00:01:40.000Z", "lastUpdatedAt": "1970-01-01T00:01:43.500Z",
                       "pollIntervalMs": 1000}
    done = dialects.task(OFFICIAL, record("completed", result={"content": [], "isError": False}))
    assert done["result"] == {"resultType": "complete", "content": [], "isError": False}
    assert "pollIntervalMs" not in done and done["ttlMs"] == 63_500
    created = dialects.created(OFFICIAL, record("working"), modern=True)
    assert created["resultType"] == "task" and "result" not in created and created["taskId"] == "tsk_1"


def test_official_a_call_answered_is_error_completed_and_one_without_an_answer_failed():
    answered = dialects.task(OFFICIAL, record("failed", result=ANSWER, status_message="ZeroDivisionError"))
    assert answered["status"] == "completed" and answered["result"]["isError"] and "error" not in answered
    raised = dialects.task(OFFICIAL, record("failed", error={"message": "server stopped", "partial": PARTIAL}))
    assert raised["status"] == "failed" and "result" not in raised
    assert raised["error"] == {"code": -32603, "message": "server stopped",
                               "data": {"partial": {"resultType": "complete", **PARTIAL}}}


def test_official_cancelled_task_keeps_what_it_produced():
    assert dialects.task(OFFICIAL, record("cancelled", result=PARTIAL))["result"]["content"][0]["text"] == "tick 1"
    assert "result" not in dialects.task(OFFICIAL, record("cancelled"))


def test_seed_and_core_created_answers_wrap_the_task():
    for dialect in (SEED, CORE):
        legacy = dialects.created(dialect, record("working"), modern=False)
        assert set(legacy) == {"task", "_meta"} and legacy["task"]["pollInterval"] == 1000
        assert dialects.created(dialect, record("working"), modern=True)["resultType"] == "task"


def test_final_answer_of_a_failed_call_raises_on_the_seed_and_is_the_answer_on_the_core():
    failed = record("failed", result=ANSWER, error={"message": "ZeroDivisionError", "partial": None})
    with pytest.raises(TaskError) as info:
        dialects.final_answer(SEED, failed)
    assert info.value.code == -32603 and info.value.data["partial"] == ANSWER
    answer = dialects.final_answer(CORE, failed)
    assert answer["isError"] and answer["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": "tsk_1"}
    with pytest.raises(TaskError) as info:  # no answer at all: what the call would have raised
        dialects.final_answer(CORE, record("failed", error={"message": "server stopped"}))
    assert info.value.code == -32603 and "server stopped" in info.value.message
    for dialect in (SEED, CORE):
        with pytest.raises(TaskError) as info:
            dialects.final_answer(dialect, record("cancelled"))
        assert info.value.code == -32602


def context(*, per_request=None, session_caps=None, version="2025-11-25"):
    meta = {"io.modelcontextprotocol/clientCapabilities": {"extensions": per_request}} if per_request else {}
    return SimpleNamespace(params={"_meta": meta}, protocol_version=version,
                           session=SimpleNamespace(client_capabilities=session_caps))


def test_which_dialect_a_request_speaks():
    assert dialect_of(context(per_request={OFFICIAL: {}})) == OFFICIAL
    assert dialect_of(context(per_request={OFFICIAL: {}, SEED: {}})) == OFFICIAL
    assert dialect_of(context(per_request={SEED: {}}, version="2026-07-28")) == SEED
    assert dialect_of(context(session_caps=SimpleNamespace(experimental={SEED: {}}, extensions=None))) == SEED
    assert dialect_of(context()) == CORE
    # the official extension is declared per request: an initialize-time declaration is not it
    assert dialect_of(context(session_caps=SimpleNamespace(experimental=None, extensions={OFFICIAL: {}}))) == CORE
    with pytest.raises(MCPError) as info:
        dialect_of(context(version="2026-07-28"))
    assert info.value.error.code == -32021
    assert info.value.error.data == {"requiredCapabilities": {"extensions": {OFFICIAL: {}}}}


def test_the_raw_params_read_fails_loudly_when_fastmcp_moves_them():
    """fastmcp hands an extension the tools/call params without ``task``; the binding reads them
    raw from its request context. If an upgrade moves them, the read raises, not "no task"."""
    from fastmcp.server.dependencies import FastMCPRequestContext
    from mcp.server.context import ServerRequestContext

    assert "_srctx" in {f.name for f in dataclasses.fields(FastMCPRequestContext)}
    assert "params" in {f.name for f in dataclasses.fields(ServerRequestContext)}
    raw = {"name": "cell_execute", "task": {"ttl": 1}}
    assert raw_params(SimpleNamespace(_srctx=SimpleNamespace(params=raw))) is raw
    assert raw_params(None) == {}
    with pytest.raises(RuntimeError, match="_srctx.params"):
        raw_params(SimpleNamespace(meta={}))


def test_the_tools_answered_with_a_task_exist():
    from jupyter_mcp.tools.declarations import RUNS_CODE, TOOLS

    assert RUNS_CODE <= {fn.__name__ for fn, _ in TOOLS}


def test_an_input_required_task_lists_its_questions_on_the_official_extension_only():
    asks = {"input-1": {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {}}}}
    waiting = record("input_required", input_requests=asks)
    assert dialects.task(OFFICIAL, waiting)["inputRequests"] == asks
    for other in (SEED, CORE):  # theirs go out on tasks/result's stream
        assert "inputRequests" not in dialects.task(other, waiting) and dialects.task(other, waiting)["status"] == \
            "input_required"
    assert dialects.task(OFFICIAL, waiting)["pollIntervalMs"] == 1000  # not terminal
    assert "inputRequests" not in dialects.task(OFFICIAL, record("working"))
