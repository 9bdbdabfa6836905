"""The code's questions as pure logic (jupyter_mcp/tools/stdin.py): the elicitation a prompt becomes, the
line an answer gives, who may be asked. The live path is tests/test_task_input.py."""

from __future__ import annotations

import pytest
from mcp_types import ClientCapabilities

from jupyter_mcp.tools.stdin import Refused, _call_asker, line_of, on_input, question
from jupyter_mcp.tasks.binding import offers_elicitation

pytestmark = pytest.mark.unit


def test_a_prompt_becomes_a_form_with_one_required_string():
    asked = question("Your name: ")
    assert asked["method"] == "elicitation/create"
    params = asked["params"]
    assert params["mode"] == "form" and "Your name:" in params["message"]
    assert params["requestedSchema"]["required"] == ["value"]
    assert params["requestedSchema"]["properties"]["value"]["type"] == "string"
    assert question("")["params"]["requestedSchema"]["properties"]["value"]["title"] == "Input"


def test_an_answer_is_its_value_and_a_refusal_says_what_happened():
    assert line_of({"action": "accept", "content": {"value": "Ada"}}) == "Ada"
    assert line_of({"action": "accept", "content": {"value": 42}}) == "42"
    for action in ("decline", "cancel"):
        with pytest.raises(Refused, match=f"{action}d"):
            line_of({"action": action})
    with pytest.raises(Refused, match="without a value"):
        line_of({"action": "accept", "content": {}})
    with pytest.raises(Refused, match="not an elicitation result"):
        line_of({"value": "Ada"})


@pytest.mark.parametrize("capabilities, offers", [
    ({}, False),
    ({"elicitation": {}}, True),  # neither mode named: form
    ({"elicitation": {"form": {}}}, True),
    ({"elicitation": {"url": {}}}, False),  # url mode only: no form to ask with
    ({"elicitation": {"form": {}, "url": {}}}, True),
])
def test_who_may_be_asked(capabilities, offers):
    assert offers_elicitation(capabilities) is offers
    assert offers_elicitation(ClientCapabilities.model_validate(capabilities)) is offers


async def test_a_client_that_fails_to_answer_refuses_and_a_password_is_never_asked():
    asked = []

    async def failing(request):
        asked.append(request)
        raise RuntimeError("the connection closed")

    assert on_input() is None  # nobody to ask: stdin stays off
    token = _call_asker.set(failing)
    try:
        answer = on_input()
        with pytest.raises(Refused, match="connection closed"):
            await answer("Your name: ", False)
        with pytest.raises(Refused, match="getpass"):
            await answer("Password: ", True)
    finally:
        _call_asker.reset(token)
    assert [request["params"]["requestedSchema"]["properties"]["value"]["title"] for request in asked] == ["Your name:"]
