"""The FastMCP server and its tools.

Tools are thin: validate, call one layer, shape the answer. Their docstrings are
the descriptions an agent reads, so they say what the tool does, what it returns
and what its errors mean.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from . import __version__, files
from .paths import PathError, canonical_path

if TYPE_CHECKING:
    from .app import JupyterMCPApp

INSTRUCTIONS = """\
Tools for the live Jupyter notebooks of this server. Every notebook and cell tool
works on the same collaborative document the people in JupyterLab are editing:
your edits appear in their browsers as you make them, and theirs in your reads.
Paths are relative to the workspace root ("analysis/report.ipynb"); prefer cell
ids over indexes, because indexes shift when someone inserts a cell.
"""


def build_server(ext: JupyterMCPApp) -> FastMCP:
    """The MCP server of one extension instance, with every tool bound to it."""
    mcp = FastMCP(ext.server_name, instructions=INSTRUCTIONS, version=__version__, mask_error_details=False)

    def notebook_path(path: str) -> str:
        try:
            return canonical_path(ext.root_dir, path)
        except PathError as exc:
            raise ToolError(str(exc)) from None

    @mcp.tool
    async def notebook_list(
        folder: Annotated[str, Field(description="Workspace sub-folder to list; empty for the whole workspace.")] = "",
    ) -> dict[str, Any]:
        """List every notebook (.ipynb) in the workspace, or under one sub-folder.

        Hidden folders and .ipynb_checkpoints are skipped. Returns
        {"notebooks": [{"path", "size", "last_modified"}, ...]} sorted by path; each
        path can be passed to any other tool as is.
        """
        try:
            folder_path = canonical_path(ext.root_dir, folder, notebook=False)
            return {"notebooks": files.list_notebooks(ext.root_dir, folder_path)}
        except PathError as exc:
            raise ToolError(str(exc)) from None

    @mcp.tool
    async def notebook_create(
        path: Annotated[str, Field(description="Workspace path of the new notebook, ending in .ipynb.")],
        kernel_name: Annotated[
            str | None, Field(description="Kernelspec name (e.g. 'python3'); default: the server's default kernel.")
        ] = None,
    ) -> dict[str, Any]:
        """Create a new, empty notebook (nbformat 4.5) at `path`.

        The folder must exist. An existing file is never overwritten: creating a
        path that exists is an error. Returns {"path", "kernel_name", "cells": 0};
        add cells with cell_insert.
        """
        canonical = notebook_path(path)
        try:
            return await files.create_notebook(ext.serverapp, canonical, kernel_name)
        except (PathError, FileExistsError, ValueError) as exc:
            raise ToolError(str(exc)) from None

    return mcp
