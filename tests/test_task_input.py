"""A cell that calls input() asks the MCP client that ran it (docs/tasks.md, "Input"), against a real
jupyter lab and real kernels: a task goes input_required and is answered through its dialect's own
mechanism (the official extension's inputRequests and tasks/update; the 2025-11-25 elicitation on
tasks/result's stream), a synchronous call through an elicitation related to it, and the answer
reaches the kernel's stdin. The TypeScript clients' side is in tests/test_task_dialects.py."""

from __future__ import annotations

import asyncio
import json

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult

from jupyter_mcp.client import CORE, OFFICIAL, SEED, Tasks, connect
from jupyter_mcp.testing import call, new_notebook
from jupyter_mcp.testing.ui import UIClient

pytestmark = pytest.mark.live

ASKS = "name = input('Your name: ')\nprint('hello', name)"
RELATED_TASK = "io.modelcontextprotocol/related-task"


def text_of(result: dict) -> str:
    return json.dumps(result)


def stream_text(ycell) -> str:
    return "".join(str(o.get("text", "")) for o in ycell["outputs"].to_py() if o.get("output_type") == "stream")


class Person:
    """The client's side of the question: what it was asked, and what it answers."""

    def __init__(self, answer: dict) -> None:
        self.answer = answer
        self.asked: list[dict] = []

    async def on_input(self, params: dict) -> dict:  # Tasks(on_input=): the elicitation's params
        self.asked.append(params)
        return self.answer

    async def elicitation(self, context, params) -> ElicitResult:  # the SDK's elicitation_callback
        self.asked.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        return ElicitResult.model_validate(self.answer)


ADA = {"action": "accept", "content": {"value": "Ada"}}


def asked_for_a_name(params: dict) -> bool:
    schema = params["requestedSchema"]
    return (params.get("mode", "form") == "form" and "Your name:" in params["message"]
            and schema["properties"]["value"]["type"] == "string" and schema["required"] == ["value"])


async def test_official_task_asks_in_tasks_get_and_is_answered_with_tasks_update(live, mode):
    """input_required with an elicitation/create under a key in inputRequests; tasks/update answers
    it; the cell completes with the answer, which the person's tab sees in the cell too."""
    name, ids = new_notebook(live.root, ASKS, prefix="input")
    person = Person(ADA)
    async with connect(live.mcp_url, live.token, mode=mode) as client, UIClient(live.url, live.token, name) as ui:
        tasks = Tasks(client, OFFICIAL, on_input=person.on_input)
        created = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        asking = None
        for _ in range(300):  # the kernel starts, then the code asks
            asking = await tasks.get(created["taskId"])
            if asking["status"] != "working":
                break
            await asyncio.sleep(0.1)
        assert asking["status"] == "input_required" and asking["resultType"] == "complete"
        [(key, request)] = asking["inputRequests"].items()
        assert request["method"] == "elicitation/create" and asked_for_a_name(request["params"])
        await ui.wait_for(lambda: stream_text(ui.nb.ycells[0]) == "Your name: ")  # the person sees the prompt
        final = await tasks.wait(created["taskId"], timeout=60)
        assert final["status"] == "completed" and not final["result"]["isError"], final
        assert "hello Ada" in text_of(final["result"]) and "inputRequests" not in final
        assert len(person.asked) == 1
        await ui.wait_for(lambda: stream_text(ui.nb.ycells[0]) == "Your name: Ada\nhello Ada\n")


async def test_seed_task_on_2025_gets_its_question_on_tasks_results_stream(live):
    """The 2025-11-25 way, for the seed's and the core's clients alike: tasks/result of a task that
    waits on input sends an elicitation related to the task on its own stream, then answers the
    result at the end."""
    for dialect in (SEED, CORE):
        name, ids = new_notebook(live.root, ASKS, prefix="input")
        person = Person(ADA)
        async with connect(live.mcp_url, live.token, elicitation_callback=person.elicitation) as client:
            tasks = Tasks(client, dialect)
            answer = await tasks.run("cell_execute", {"path": name, "cell_id": ids[0]})
            assert not answer["isError"] and "hello Ada" in text_of(answer), dialect
            [params] = person.asked
            assert asked_for_a_name(params) and params["_meta"][RELATED_TASK]["taskId"], dialect


async def test_a_seed_task_on_2026_cannot_be_asked_and_fails_at_once(live):
    """2026-07-28 has no server-to-client requests and the seed's extension has no tasks/update:
    nobody can answer, so input() fails at once, as it always did (the official extension asks)."""
    name, ids = new_notebook(live.root, ASKS, prefix="input")
    person = Person(ADA)
    async with connect(live.mcp_url, live.token, mode="2026-07-28") as client:
        with pytest.raises(MCPError) as failed:
            await Tasks(client, SEED, on_input=person.on_input).run("cell_execute", {"path": name, "cell_id": ids[0]})
        assert "StdinNotImplementedError" in failed.value.error.message and person.asked == []


async def test_a_synchronous_call_asks_with_an_elicitation_where_the_client_offers_it(live):
    name, ids = new_notebook(live.root, ASKS, "input('again: ')", prefix="input")
    person = Person(ADA)
    async with connect(live.mcp_url, live.token, elicitation_callback=person.elicitation) as client:
        result = await call(client, "cell_execute", path=name, cell_id=ids[0], timeout=120)
        assert result["status"] == "ok" and result["outputs"][0]["text"] == "Your name: Ada\nhello Ada\n"
        assert len(person.asked) == 1 and asked_for_a_name(person.asked[0])
    async with connect(live.mcp_url, live.token) as client:  # no elicitation: it fails at once, as before
        result = await client.call_tool("cell_execute", {"path": name, "cell_id": ids[1], "timeout": 60})
        assert result.is_error and "StdinNotImplementedError" in text_of(result.structured_content)


@pytest.mark.parametrize("answer", [{"action": "decline"}, {"action": "cancel"}])
async def test_a_declined_question_interrupts_the_code_and_says_so(live, answer):
    name, ids = new_notebook(live.root, ASKS, prefix="input")
    person = Person(answer)
    async with connect(live.mcp_url, live.token) as client:
        answer_ = await Tasks(client, OFFICIAL, on_input=person.on_input).run("cell_execute",
                                                                            {"path": name, "cell_id": ids[0]})
        assert answer_["isError"] and answer_["structuredContent"]["status"] == "interrupted"
        assert f"the input request was {answer['action']}d" in answer_["structuredContent"]["message"]
        after = await call(client, "code_execute", path=name, code="print('free')", timeout=30)
        assert after["outputs"][0]["text"] == "free\n"  # the kernel does not wait on stdin any more


async def test_a_password_prompt_is_never_asked(live):
    """getpass: MCP forbids asking secrets through a form; the code is interrupted and told why."""
    name, ids = new_notebook(live.root, "import getpass\nsecret = getpass.getpass('Token: ')", prefix="input")
    person = Person(ADA)
    async with connect(live.mcp_url, live.token) as client:
        answer = await Tasks(client, OFFICIAL, on_input=person.on_input).run("cell_execute",
                                                                           {"path": name, "cell_id": ids[0]})
        assert answer["isError"] and "password" in answer["structuredContent"]["message"]
        assert person.asked == []


async def test_cancel_while_waiting_on_input_stops_the_code(live):
    name, ids = new_notebook(live.root, ASKS, prefix="input")
    async with connect(live.mcp_url, live.token) as client:
        tasks = Tasks(client, OFFICIAL, on_input=Person(ADA).on_input)  # declares it can answer; never does
        created = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0]})
        for _ in range(300):
            if (await tasks.get(created["taskId"]))["status"] == "input_required":
                break
            await asyncio.sleep(0.1)
        await tasks.cancel(created["taskId"])
        final = await tasks.get(created["taskId"])
        assert final["status"] == "cancelled" and "inputRequests" not in final
        assert "Your name: " in text_of(final.get("result", {}))
        after = await call(client, "code_execute", path=name, code="print('free')", timeout=30)
        assert after["outputs"][0]["text"] == "free\n"


async def test_a_question_nobody_answers_ends_with_the_calls_timeout(live):
    """The call's timeout counts while the code waits on input: interrupted, the task not left
    input_required."""
    name, ids = new_notebook(live.root, ASKS, prefix="input")
    async with connect(live.mcp_url, live.token) as client:
        tasks = Tasks(client, OFFICIAL, on_input=Person(ADA).on_input)
        created = await tasks.submit("cell_execute", {"path": name, "cell_id": ids[0], "timeout": 8})
        for _ in range(300):
            if (await tasks.get(created["taskId"]))["status"] != "working":
                break
            await asyncio.sleep(0.1)
        final = await asyncio.wait_for(_terminal(tasks, created["taskId"]), 60)
        assert final["status"] == "completed" and final["result"]["structuredContent"]["status"] == "timeout"
        assert "inputRequests" not in final


async def _terminal(tasks: Tasks, task_id: str) -> dict:
    """Poll without answering (Tasks.wait would answer)."""
    while True:
        task = await tasks.get(task_id)
        if task["status"] in ("completed", "failed", "cancelled"):
            return task
        await asyncio.sleep(0.2)
