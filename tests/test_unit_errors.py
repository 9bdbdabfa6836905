"""An unexpected failure inside a tool reaches the agent with its kind and message, never as
fastmcp's bare ``Error calling tool 'x': `` (a remote kernel's client once failed with an empty
``AssertionError``), and a refusal passes as it is. On a real FastMCP server, in memory."""

from __future__ import annotations

import logging

import pytest
from fastmcp import Client, FastMCP

from jupyter_mcp.errors import NotebookError, named_failures

pytestmark = pytest.mark.unit


async def broken(path: str) -> str:
    """Fails the way a library's bare ``assert`` does: with no message at all."""
    raise AssertionError()


async def broken_with_message(path: str) -> str:
    raise ConnectionError(f"the gateway for {path} went away")


async def refusing(path: str) -> str:
    raise NotebookError(f"{path!r} is not a notebook")


def server() -> FastMCP:
    mcp = FastMCP("errors", mask_error_details=False)
    for tool in (broken, broken_with_message, refusing):
        mcp.tool(named_failures(tool))
    return mcp


async def test_an_empty_failure_is_named_and_logged_with_its_traceback(caplog):
    caplog.set_level(logging.ERROR, logger="jupyter_mcp.errors")
    async with Client(server()) as client:
        result = await client.call_tool("broken", {"path": "x.ipynb"}, raise_on_error=False)
    assert result.is_error
    text = result.content[0].text
    assert text.startswith("broken failed: AssertionError.") and "not refused" in text, text
    assert any(r.exc_info and r.exc_info[0] is AssertionError for r in caplog.records)


async def test_a_failure_keeps_its_message():
    async with Client(server()) as client:
        result = await client.call_tool("broken_with_message", {"path": "x.ipynb"}, raise_on_error=False)
    assert result.content[0].text.startswith("broken_with_message failed: ConnectionError: the gateway for x.ipynb")


async def test_a_refusal_is_not_rewritten():
    async with Client(server()) as client:
        result = await client.call_tool("refusing", {"path": "x.txt"}, raise_on_error=False)
    assert result.is_error and result.content[0].text == "'x.txt' is not a notebook"


async def test_the_wrapped_tool_keeps_its_schema():
    async with Client(server()) as client:
        tools = {t.name: t for t in await client.list_tools()}
    assert tools["broken"].inputSchema["properties"] == {"path": {"type": "string"}}
    assert tools["broken"].description.startswith("Fails the way")


async def test_an_unknown_argument_is_refused_naming_the_valid_ones():
    from jupyter_mcp.errors import KnownArguments

    async def cell_get(path: str, cell_id: str | None = None, index: int | None = None) -> str:
        return "read"

    mcp = FastMCP("arguments", mask_error_details=False)
    mcp.tool(cell_get)
    mcp.add_middleware(KnownArguments({"cell_get": ["path", "cell_id", "index"]}))
    async with Client(mcp) as client:
        result = await client.call_tool("cell_get", {"path": "a.ipynb", "idx": 3, "zzz": 1}, raise_on_error=False)
        assert result.is_error
        assert result.content[0].text == ("cell_get takes no argument 'idx' (did you mean 'index'?), 'zzz'; its "
                                          "arguments are: path, cell_id, index. Nothing was done")
        assert (await client.call_tool("cell_get", {"path": "a.ipynb", "index": 3})).data == "read"
