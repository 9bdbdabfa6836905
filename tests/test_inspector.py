"""An external client no one here wrote: the MCP Inspector's CLI, against a live server.

The Inspector CLI has no header option, so the Jupyter token rides in the URL
(`?token=`), which Jupyter accepts as token authentication."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from jupyter_mcp.testing import write_notebook
from jupyter_mcp.testing.npm import npm_tool

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent
INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"
PREFIX = ROOT / "build" / "inspector"


@pytest.fixture(scope="module")
def inspector():
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("Node.js and npm are not installed")
    return npm_tool(INSPECTOR, PREFIX, "mcp-inspector")


def run(inspector, live, *args) -> dict:
    url = f"{live.mcp_url}?token={live.token}"
    done = subprocess.run([str(inspector), "--cli", url, "--transport", "http", *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_inspector_lists_the_tools(inspector, live):
    tools = {t["name"] for t in run(inspector, live, "--method", "tools/list")["tools"]}
    assert {"notebook_list", "notebook_get", "cell_get", "cell_execute", "room_list"} <= tools


def test_inspector_calls_notebook_list_and_cell_get(inspector, live):
    name = f"inspector-{uuid.uuid4().hex[:6]}.ipynb"
    ids = write_notebook(live.root / name, ["print('seen by the inspector')"])
    listed = run(inspector, live, "--method", "tools/call", "--tool-name", "notebook_list")
    assert name in [n["path"] for n in listed["structuredContent"]["notebooks"]]
    cell = run(inspector, live, "--method", "tools/call", "--tool-name", "cell_get",
               "--tool-arg", f"path={name}", "--tool-arg", f"cell_id={ids[0]}")
    assert cell["isError"] is False and cell["structuredContent"]["source"] == "print('seen by the inspector')"


def test_inspector_without_token_is_refused(inspector, live):
    done = subprocess.run([str(inspector), "--cli", live.mcp_url, "--transport", "http", "--method", "tools/list"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "notebook_list" not in done.stdout
