"""What the box tests share: the discovery entry a sibling gets, the tools the docs list, and a
bare MCP probe (an initialize with chosen headers) to run from anywhere."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import yaml

ROOT = Path(__file__).resolve().parents[2]
SIBLING = Path(__file__).with_name("sibling.py")  # run by a sibling: needs only the MCP SDK


def charly_mcp_servers(container_name: str) -> list[dict]:
    """CHARLY_MCP_SERVERS as charly renders it for a sibling of the jupyter box: each of the
    box's mcp_provide entries with its container's name filled in, and the box it came from."""
    box = yaml.safe_load((ROOT / "charly.yml").read_text())["jupyter"]["candy"]
    return [{**{k: str(v).replace("{{.ContainerName}}", container_name) for k, v in entry.items()},
             "source": "jupyter"} for entry in box["mcp_provide"]]


def documented_tools() -> list[str]:
    return sorted(re.findall(r"^## `(\w+)`", (ROOT / "docs" / "tools.md").read_text(), re.M))


PROBE = """
import json, sys, urllib.request, urllib.error
url, headers = sys.argv[1], json.loads(sys.argv[2])
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
                   "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}).encode()
request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json",
                                 "Accept": "application/json, text/event-stream", **headers})
try:
    with urllib.request.urlopen(request, timeout=30) as answer:
        print(json.dumps({"status": answer.status, "body": answer.read(300).decode(errors="replace")}))
except urllib.error.HTTPError as error:
    print(json.dumps({"status": error.code, "body": error.read().decode(errors="replace")}))
"""


def probe(run: Callable[..., subprocess.CompletedProcess[str]], url: str, headers: dict | None = None) -> dict:
    """An MCP initialize POSTed to ``url`` by a process ``run`` starts (here, or in a namespace):
    its status and the start of its body."""
    done = run(sys.executable, "-c", PROBE, url, json.dumps(headers or {}))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
