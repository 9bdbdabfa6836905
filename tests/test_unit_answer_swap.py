"""How tools/call is answered with a task on the wire (jupyter_mcp/tasks/answer_swap.py): the
placeholder that carries the answer, the swap, the capability at initialize. What the SDK and
fastmcp must keep doing for it is pinned in tests/test_adapters.py (the fastmcp section); the wire
itself, in every dialect, in tests/test_task_dialects.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from jupyter_mcp.tasks import answer_swap

pytestmark = pytest.mark.unit

ANSWER = {"task": {"taskId": "t1", "status": "working"}, "_meta": {"io.modelcontextprotocol/related-task": {}}}


def test_the_placeholder_is_a_tool_result_that_carries_the_answer():
    placeholder = answer_swap.carrying(ANSWER, "t1")
    wire = placeholder.to_mcp_result().model_dump(by_alias=True, mode="json", exclude_none=True)
    assert wire["content"] == [{"type": "text", "text": "task t1 created"}]
    assert answer_swap.carried(wire) == ANSWER


@pytest.mark.parametrize("result", [None, [], {"content": []}, {"_meta": None}, {"_meta": {"other": 1}},
                                    {"_meta": {answer_swap.PLACEHOLDER_KEY: "not an answer"}}])
def test_anything_else_carries_nothing(result):
    assert answer_swap.carried(result) is None


async def test_the_swap_answers_the_task_for_a_placeholder_and_leaves_the_rest():
    swap = answer_swap.TaskAnswerSwap()
    placeholder = {"content": [], "_meta": {answer_swap.PLACEHOLDER_KEY: ANSWER}}

    def answered(result):
        async def call_next(ctx):
            return result
        return call_next

    def ctx(method):
        return SimpleNamespace(method=method)

    assert await swap(ctx("tools/call"), answered(placeholder)) == ANSWER
    plain = {"content": [{"type": "text", "text": "ran"}]}
    assert await swap(ctx("tools/call"), answered(plain)) is plain
    assert await swap(ctx("tools/list"), answered(placeholder)) is placeholder  # only tools/call
    assert await swap(ctx("notifications/initialized"), answered(None)) is None
    initialized = await swap(ctx("initialize"), answered({"capabilities": {"tools": {}}, "protocolVersion": "x"}))
    assert initialized == {"capabilities": {"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {
        "tools": {"call": {}}}}}, "protocolVersion": "x"}
