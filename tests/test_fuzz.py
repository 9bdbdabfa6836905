"""Hostile input: arguments generated from every tool's published input schema, and from
outside it (wrong types, huge strings, unicode, control characters, escaping paths).
No crash, no 500, always a clear error; a refused call leaves the workspace unchanged."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path

import pytest
from helpers import write_notebook
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

from jupyter_mcp.client import connect

HOSTILE_STRINGS = st.one_of(
    st.sampled_from(["../escape.ipynb", "../../etc/passwd.ipynb", "/etc/passwd.ipynb", "a\x00b.ipynb", "\n",
                     "sub/../../x.ipynb", "fuzz.ipynb/../../x.ipynb", "~/x.ipynb", "\u202e.ipynb", "CON.ipynb",
                     "x" * 5000 + ".ipynb", "💥" * 300, "", " ", "/" * 300, "%2e%2e/x.ipynb"]),
    st.text(max_size=50),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=31), max_size=20),
    st.integers(min_value=10_000, max_value=300_000).map(lambda n: "ab" * n),  # huge strings
)
HOSTILE_VALUES = st.one_of(HOSTILE_STRINGS, st.integers(), st.floats(allow_nan=True), st.booleans(), st.none(),
                           st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(),
                                                                                max_size=3))


def strategy_for(schema: dict) -> st.SearchStrategy:
    """Values that satisfy a (simple) JSON schema: what the tools publish."""
    if "anyOf" in schema:
        return st.one_of([strategy_for(s) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "string":
        return st.one_of(st.text(max_size=40), st.sampled_from(["fuzz.ipynb", "sub/inner.ipynb", "sub", ""]))
    if kind == "integer":
        return st.integers(min_value=schema.get("minimum", -10), max_value=schema.get("maximum", 10_000))
    if kind == "number":
        low = schema.get("exclusiveMinimum", schema.get("minimum", 0))
        return st.floats(min_value=low, max_value=min(schema.get("maximum", 5), 5), exclude_min="exclusiveMinimum" in schema)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(strategy_for(schema.get("items", {"type": "string"})), max_size=3)
    if kind == "object":
        props = schema.get("properties", {})
        if not props:
            return st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)
        required = set(schema.get("required", []))
        return st.fixed_dictionaries({k: strategy_for(v) for k, v in props.items() if k in required},
                                     optional={k: strategy_for(v) for k, v in props.items() if k not in required})
    return st.text(max_size=10)


class BackgroundClient:
    """One MCP session, on an event loop of its own, in one task for its whole life (the
    SDK's cancel scopes want that), so hypothesis can drive it synchronously."""

    def __init__(self, url: str, token: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.requests: asyncio.Queue | None = None
        opened = asyncio.run_coroutine_threadsafe(self._serve(url, token), self.loop)
        self.done = opened
        while self.requests is None:
            if opened.done():
                opened.result()
            threading.Event().wait(0.05)

    async def _serve(self, url: str, token: str) -> None:
        async with connect(url, token) as client:
            self.requests = asyncio.Queue()
            while True:
                job, reply = await self.requests.get()
                if job is None:
                    return
                try:
                    reply.set_result(await job(client))
                except BaseException as exc:  # handed to the caller
                    reply.set_exception(exc)

    def _run(self, job):
        import concurrent.futures

        reply: concurrent.futures.Future = concurrent.futures.Future()
        self.loop.call_soon_threadsafe(self.requests.put_nowait, (job, reply))
        return reply.result(120)

    def call(self, tool: str, arguments: dict) -> tuple[bool, str]:
        """(refused, message) of one call; raises only on what is not a clear answer."""
        async def go(client):
            try:
                result = await client.call_tool(tool, arguments, read_timeout_seconds=60)
            except MCPError as exc:  # a protocol-level refusal (invalid params): must say why
                return True, exc.error.message
            text = " ".join(c.text for c in result.content if getattr(c, "type", "") == "text")
            return bool(result.is_error), text
        return self._run(go)

    def tools(self):
        async def go(client):
            return (await client.list_tools()).tools
        return self._run(go)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.requests.put_nowait, (None, None))
        self.done.result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*")) if ".ipynb_checkpoints" not in p.parts}


@pytest.fixture(scope="module")
def fuzz_box(tmp_path_factory):
    from live import LiveServer

    # no autosave: an accepted edit stays in its room, so a refused call that follows cannot
    # be blamed for the save of an earlier one
    server = LiveServer(tmp_path_factory.mktemp("fuzz"), args=["--YDocExtension.document_save_delay=3600"]).start()
    (server.root / "sub").mkdir()
    write_notebook(server.root / "fuzz.ipynb", ["x = 1", "y = 2"])
    write_notebook(server.root / "sub" / "inner.ipynb", ["z = 3"])
    client = BackgroundClient(server.mcp_url, server.token)
    tools = {t.name: t.input_schema for t in client.tools()}
    yield server, client, tools
    client.close()
    server.stop()


SLOW = {"notebook_watch": {"timeout": 0.2}, "cell_execute": {"timeout": 5}, "code_execute": {"timeout": 5}}


def check_one(server, client, tool, arguments, hostile):
    before = snapshot(server.root)
    refused, message = client.call(tool, arguments)
    if refused:
        assert message.strip(), f"{tool}({arguments!r:.200}) refused without a reason"
        assert "Traceback" not in message, message[:500]
        assert snapshot(server.root) == before, f"a refused {tool} call changed the workspace: {arguments!r:.300}"
    elif hostile:
        # hostile arguments may still be valid by accident (a harmless string); they never
        # escape: nothing outside the workspace root was created
        assert not (server.root.parent / "escape.ipynb").exists()


@pytest.mark.parametrize("tool", ["notebook_list", "notebook_create", "notebook_get", "notebook_watch",
                                  "notebook_list_users", "cell_get", "cell_update", "cell_insert", "cell_delete",
                                  "cell_execute", "code_execute", "room_list"])
def test_fuzz_every_tool(fuzz_box, tool):
    server, client, tools = fuzz_box
    schema = tools[tool]

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.data())
    def inside(data):
        arguments = data.draw(strategy_for(schema), label="within the schema")
        arguments.update({k: v for k, v in SLOW.get(tool, {}).items() if k in arguments or k == "timeout"})
        check_one(server, client, tool, arguments, hostile=False)

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.data())
    def outside(data):
        names = list(schema.get("properties", {})) + ["unexpected_argument"]
        arguments = data.draw(st.dictionaries(st.sampled_from(names), HOSTILE_VALUES, max_size=len(names)),
                              label="outside the schema")
        if tool in SLOW and isinstance(arguments.get("timeout"), (int, float)):
            arguments["timeout"] = SLOW[tool]["timeout"]
        check_one(server, client, tool, arguments, hostile=True)

    inside()
    outside()
    assert client.tools()  # the server still answers
    assert " 500 " not in server.log()
