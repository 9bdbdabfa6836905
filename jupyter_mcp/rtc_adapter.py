"""Rooms: the ONE live collaborative document of each notebook."""

from __future__ import annotations

import asyncio
from typing import Any


def ydoc_extension(serverapp: Any) -> Any:
    """jupyter-server-ydoc's extension app (looked up late: extensions load alphabetically)."""
    ext = serverapp.web_app.settings.get("jupyter_server_ydoc")
    if ext is None:
        raise RuntimeError("jupyter-server-ydoc is not enabled on this server; live notebooks need it")
    return ext


async def ensure_websocket_server(serverapp: Any) -> None:
    """Start the ydoc websocket server now, as its handler does on the first UI connection.

    MCP creates rooms without a websocket, and a server that never started makes
    jupyter-server-ydoc's own shutdown raise "WebsocketServer not running".
    """
    server = ydoc_extension(serverapp).ywebsocket_server
    if not server.started.is_set():
        asyncio.create_task(server.start())
        await server.started.wait()
