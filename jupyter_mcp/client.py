"""A small client helper for jupyter-mcp servers.

``connect`` opens an MCP session over Streamable HTTP with a Jupyter token. The task
helpers (call a tool as a task, poll, fetch the result, cancel) live here too,
because today's SDK clients cannot send task metadata on their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

LEGACY = "legacy"  # the initialize handshake (2025-11-25), what most clients speak today
MODERN = "2026-07-28"


@asynccontextmanager
async def connect(url: str, token: str | None = None, *, mode: str = LEGACY, **kwargs: Any) -> AsyncIterator[Client]:
    """An MCP client session on ``url`` (…/mcp), authenticated with a Jupyter token."""
    headers = {"Authorization": f"token {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, **kwargs) as client:
            yield client


__all__ = ["LEGACY", "MODERN", "connect", "httpx2"]
