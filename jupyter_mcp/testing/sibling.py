"""A sibling service of the box, as charly deploys one: it knows only ``CHARLY_MCP_SERVERS``.

It picks the entry named on its command line, connects to its URL with the official MCP SDK
and no header (hermes and openwebui send none; neither does charly's own check), lists the
tools, calls ``notebook_list``, and runs code at the URL without ``/mcp`` as Open WebUI's code
execution does with the ``jupyter`` entry (a kernel started, its channels, the kernel shut down).
Prints one JSON line.

    CHARLY_MCP_SERVERS='[...]' python sibling.py jupyter
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import urllib.request
import uuid


async def run_code(base: str, code: str) -> str:
    """What Open WebUI's code execution does at the URL without /mcp, with no token: start a
    kernel, send one execute_request on its channels websocket, read its stdout until the kernel
    is idle, shut it down. The kernel's stdout."""
    from tornado.websocket import websocket_connect

    request = urllib.request.Request(base + "/api/kernels", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        kernel = json.load(answer)["id"]
    ws = await websocket_connect(base.replace("http", "ws", 1) + f"/api/kernels/{kernel}/channels")
    msg_id, stdout = uuid.uuid4().hex, ""
    ws.write_message(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "user", "session": uuid.uuid4().hex,
                   "date": "", "version": "5.3"},
        "parent_header": {}, "metadata": {}, "channel": "shell",
        "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True}}))
    while True:
        raw = await asyncio.wait_for(ws.read_message(), 60)
        if raw is None:
            raise RuntimeError(f"kernel {kernel}'s channels closed before it was idle")
        message = json.loads(raw)
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if message["msg_type"] == "stream":
            stdout += message["content"]["text"]
        elif message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            break
    ws.close()
    urllib.request.urlopen(urllib.request.Request(f"{base}/api/kernels/{kernel}", method="DELETE"), timeout=60)
    return stdout


async def visit(entry: dict) -> dict:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(entry["url"]) as streams, ClientSession(streams[0], streams[1]) as client:
        init = await client.initialize()
        tools = [t.name for t in (await client.list_tools()).tools]
        listed = await client.call_tool("notebook_list", {})
    ran = await run_code(entry["url"].removesuffix("/mcp"), "print(6 * 7)")
    return {"server": init.server_info.name, "tools": tools, "notebook_list_error": bool(listed.is_error),
            "notebook_list": listed.structured_content, "code_ran": ran}


def main() -> None:
    servers = json.loads(os.environ["CHARLY_MCP_SERVERS"])
    entry = next(s for s in servers if s["name"] == sys.argv[1])
    print(json.dumps(asyncio.run(visit(entry))))


if __name__ == "__main__":
    main()
