"""hermes (NousResearch's hermes-agent, the agent charly's hermes box runs), from PyPI, in a
virtual environment of its own: it pins an MCP SDK of another major version than ours."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERMES = "hermes-agent[mcp]==0.19.0"


def hermes_tool(prefix: Path) -> Path:
    """The ``hermes`` command, installed into the venv ``prefix`` unless it is there."""
    binary = prefix / "bin" / "hermes"
    if binary.exists():
        return binary
    for argv in ([sys.executable, "-m", "venv", "--clear", str(prefix)],
                 [str(prefix / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", HERMES]):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"installing {HERMES} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return binary


def hermes_config(servers: list[dict]) -> str:
    """hermes's config.yaml as charly's hermes box writes it from CHARLY_MCP_SERVERS (its
    entrypoint: ``mcp[srv['name']] = {'url': srv['url']}``, no header, no transport)."""
    lines = ["mcp_servers:"]
    for server in servers:
        lines += [f"  {server['name']}:", f"    url: {server['url']}"]
    return "\n".join(lines) + "\n"
