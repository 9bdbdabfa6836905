"""A sibling service of the box, as charly deploys one: it knows only ``CHARLY_MCP_SERVERS``.

It picks the entry named on its command line, connects to its URL with the official MCP SDK
and no header (hermes and openwebui send none; neither does charly's own check), lists the
tools, calls ``notebook_list``, and starts and stops a kernel at the URL without ``/mcp`` (what
openwebui's code execution does with the ``jupyter`` entry). Prints one JSON line.

    CHARLY_MCP_SERVERS='[...]' python sibling.py jupyter
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import urllib.request


async def visit(entry: dict) -> dict:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(entry["url"]) as streams, ClientSession(streams[0], streams[1]) as client:
        init = await client.initialize()
        tools = [t.name for t in (await client.list_tools()).tools]
        listed = await client.call_tool("notebook_list", {})
    base = entry["url"].removesuffix("/mcp")
    request = urllib.request.Request(base + "/api/kernels", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        kernel = json.load(answer)
    urllib.request.urlopen(urllib.request.Request(f"{base}/api/kernels/{kernel['id']}", method="DELETE"), timeout=60)
    return {"server": init.server_info.name, "tools": tools, "notebook_list_error": bool(listed.is_error),
            "notebook_list": listed.structured_content, "kernel_started": bool(kernel.get("id"))}


def main() -> None:
    servers = json.loads(os.environ["CHARLY_MCP_SERVERS"])
    entry = next(s for s in servers if s["name"] == sys.argv[1])
    print(json.dumps(asyncio.run(visit(entry))))


if __name__ == "__main__":
    main()
