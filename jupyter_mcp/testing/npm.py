"""Command-line tools from the npm registry (the MCP Inspector, configurable-http-proxy),
installed once into a folder of the checkout, never globally."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def npm_tool(package: str, prefix: Path, command: str) -> Path:
    """``package`` (``name@version``) installed into ``prefix`` unless it is there; its ``command``."""
    binary = prefix / "node_modules" / ".bin" / command
    if binary.exists():
        return binary
    if shutil.which("npm") is None:
        raise RuntimeError("npm is not installed (bash scripts/test installs Node.js with apt-get)")
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), package],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"npm install {package} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return binary
