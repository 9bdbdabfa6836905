"""The FastMCP server: the tools, the tasks extension, and the operations the tools call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastmcp import FastMCP
from fastmcp.tools import FunctionTool

from .._version import __version__
from ..errors import KnownArguments, named_failures
from ..identity import principal_of
from ..permissions import Authorize
from ..tasks import TaskManager, TasksExtension
from .declarations import NEEDS, RUNS_CODE, TOOLS
from .operations import Notebooks
from .progress import KeepAlive
from .prompts import PROMPTS
from .resources import NotebookResources, Subscriptions
from .stdin import ElicitInput

INSTRUCTIONS = """\
Tools for the live Jupyter notebooks of this server. Every notebook and cell tool
works on the same collaborative document the people in JupyterLab are editing:
your edits appear in their browsers as you make them, and theirs in your reads.
Paths are relative to the workspace root ("analysis/report.ipynb"). Name cells by
their id (from notebook_get) rather than by index: indexes shift when anyone
inserts or deletes a cell, ids never change.
"""


def build_server(name: str, notebooks: Notebooks | None, tasks: TaskManager,
                 subscriptions: Subscriptions | None = None) -> FastMCP:
    """The MCP server: every tool, injected with ``notebooks`` while the server runs, and
    every tool callable as a task of ``tasks``; the notebooks as resources, which
    ``subscriptions`` serves subscriptions to. (``notebooks`` may be None to only list tools.)"""

    @asynccontextmanager
    async def lifespan(server: Any) -> AsyncIterator[dict[str, Any]]:
        yield {"notebooks": notebooks}

    mcp = FastMCP(name, instructions=INSTRUCTIONS, version=__version__, mask_error_details=False, lifespan=lifespan)
    parameters = {}
    for fn, options in TOOLS:
        mcp.tool(named_failures(fn), **options)
        # the arguments it takes, as its input schema lists them (injected ones are not there)
        parameters[fn.__name__] = list(FunctionTool.from_function(fn).parameters.get("properties", {}))
    for prompt in PROMPTS:
        mcp.prompt(prompt)
    mcp.add_middleware(KnownArguments(parameters))
    mcp.add_middleware(Authorize(NEEDS))
    mcp.add_middleware(KeepAlive(RUNS_CODE))
    mcp.add_middleware(ElicitInput(RUNS_CODE))
    TasksExtension(tasks, principal_of, task_tools=RUNS_CODE).install(mcp)
    mcp.add_provider(NotebookResources(notebooks))
    if subscriptions is not None:
        subscriptions.install(mcp)
    return mcp
