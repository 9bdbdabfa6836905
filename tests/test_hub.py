"""jupyter-mcp inside a real JupyterHub 6: the hub from PyPI, configurable-http-proxy from npm,
one `jupyterhub-singleuser` per user (jupyter_mcp enabled in it as in any install), tokens
made through the hub's REST API with chosen scopes (jupyter_mcp.testing.hub).

Each user reaches /mcp at <hub>/user/<name>/mcp with a JupyterHub token. Another user's
token, a token without access:servers and no token are refused, each saying what is wrong.
Granular scopes (custom:jupyter_server:<action>:<resource>) decide each tool call as they
decide Jupyter's REST API. Stopping a server through the hub right after MCP edits keeps
every edit, promptly. One hub serves the whole module.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from pathlib import Path

import httpx
import nbformat
import pytest

from jupyter_mcp.client import NotAuthorized, connect
from jupyter_mcp.testing import call, disk_sources, new_notebook, read_notebook, refused
from jupyter_mcp.testing.hub import Hub, install_proxy, scope
from jupyter_mcp.testing.npm import npm_tool
from jupyter_mcp.testing.plugin import starts_process

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent
INSPECTOR = "@modelcontextprotocol/inspector@0.17.5"  # has --header (0.15, in test_inspector, has not)
INSPECTOR_PREFIX = ROOT / "build" / "inspector-header"


@pytest.fixture(scope="module")
@starts_process
def hub(tmp_path_factory):
    hub = Hub(tmp_path_factory.mktemp("hub"), proxy=install_proxy(ROOT / "build" / "chp"),
              users=("alice", "bob", "carol"))
    try:
        hub.start().start_servers("alice", "carol")  # carol's is stopped by the stop test
        yield hub
    finally:
        hub.stop()


def refusal(url: str, token: str | None) -> str:
    """What a client is told when /mcp refuses it (nothing reached MCP)."""
    r = httpx.post(url, headers={"Authorization": f"token {token}"} if token else {}, timeout=30,
                   json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 403 and "jsonrpc" not in r.text, (r.status_code, r.text)
    return r.json()["message"]


async def test_a_users_token_reaches_their_server_and_runs_a_cell(hub):
    name, ids = new_notebook(hub.workspace("alice"), "print('hello from the hub')")
    async with connect(hub.mcp_url("alice"), hub.token("alice")) as alice:
        tools = {tool.name for tool in (await alice.list_tools()).tools}
        assert {"notebook_list", "cell_execute", "cell_update"} <= tools
        assert name in [n["path"] for n in (await call(alice, "notebook_list"))["notebooks"]]
        ran = await call(alice, "cell_execute", path=name, cell_id=ids[0])
        assert ran["status"] == "ok" and ran["outputs"][0]["text"] == "hello from the hub\n"


async def test_other_users_scopeless_and_missing_tokens_are_refused_saying_why(hub):
    url = hub.mcp_url("alice")
    without_access = hub.token("alice", [scope(action, user="alice") for action in ("read", "write", "execute")])
    told = {"bob": refusal(url, hub.token("bob")), "without access": refusal(url, without_access),
            "none": refusal(url, None), "unknown": refusal(url, "not-a-token")}
    assert "user 'bob'" in told["bob"] and "access:servers!user=alice" in told["bob"]
    assert "user 'alice'" in told["without access"] and "access:servers!user=alice" in told["without access"]
    assert "no token" in told["none"] and "Authorization: token" in told["none"]
    assert "does not know it" in told["unknown"]
    for message in told.values():
        assert "_xsrf" not in message and "JupyterHub token" in message
    with pytest.raises(ExceptionGroup) as raised:  # an MCP SDK client is told the same
        async with connect(url, hub.token("bob")) as client:
            await client.list_tools()
    assert raised.group_contains(NotAuthorized, match=r"user 'bob' .* access:servers!user=alice")


async def test_hub_scopes_decide_each_tool_a_reader_reads_and_changes_nothing(hub):
    """A token with read on contents (and the /mcp endpoint) reads through MCP; editing and
    running code are refused naming the permission, before anything changes."""
    name, ids = new_notebook(hub.workspace("alice"), "x = 1")
    path = hub.workspace("alice") / name
    before = path.read_bytes()
    reader = hub.token("alice", ["access:servers!user=alice", scope("read", "contents", "alice"),
                                 scope("read", "mcp", "alice")])
    async with connect(hub.mcp_url("alice"), reader) as client:
        assert [c["source"] for c in (await call(client, "notebook_get", path=name))["cells"]] == ["x = 1"]
        assert (await call(client, "cell_get", path=name, cell_id=ids[0]))["source"] == "x = 1"
        for tool, args in [("cell_update", {"cell_id": ids[0], "source": "x = 2"}), ("cell_insert", {"source": "y"})]:
            message = await refused(client, tool, path=name, **args)
            assert "permission denied" in message and "write on contents" in message and "'alice'" in message
        assert "execute on kernels" in await refused(client, "code_execute", path=name, code="open('pwned', 'w')")
        assert "execute on kernels" in await refused(client, "cell_execute", path=name, cell_id=ids[0])
    assert path.read_bytes() == before and not (hub.workspace("alice") / "pwned").exists()
    sessions = httpx.get(hub.server_url("alice") + "api/sessions", headers={"Authorization": f"token {hub.token('alice')}"})
    assert name not in [s["path"] for s in sessions.json()]  # no kernel was started for the reader
    # JupyterHub's read-only example grants read:* only: that user reads through MCP too
    read_only = hub.token("alice", ["access:servers!user=alice", scope("read", user="alice")])
    async with connect(hub.mcp_url("alice"), read_only) as client:
        assert (await call(client, "cell_get", path=name, cell_id=ids[0]))["source"] == "x = 1"
        assert "write on contents" in await refused(client, "cell_update", path=name, cell_id=ids[0], source="x = 3")
    # without read on mcp, /mcp is closed before MCP sees anything
    no_mcp = hub.token("alice", ["access:servers!user=alice", scope("read", "contents", "alice")])
    assert "not authorized to read on resource: mcp" in refusal(hub.mcp_url("alice"), no_mcp)
    assert path.read_bytes() == before


def test_the_start_log_names_the_url_through_the_hub(hub):
    """The URL a client uses (the one the other tests connect to), not the server's own port."""
    logged = re.findall(r"jupyter_mcp: MCP server 'jupyter' at (\S+/user/alice/mcp)", hub.log())
    assert logged == [hub.mcp_url("alice")], hub.log()[-3000:]


def test_without_the_hubs_public_url_the_log_names_the_path_through_it(mcp_ext, monkeypatch):
    """What JupyterHub gives a server when JupyterHub.public_url is not set (its default)."""
    monkeypatch.setenv("JUPYTERHUB_PUBLIC_URL", "")
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/dana/")
    where = mcp_ext.mcp_location()
    assert where.startswith("/user/dana/mcp on the JupyterHub's public address") and "answers at http://" in where


async def test_stopping_a_server_through_the_hub_keeps_every_edit_promptly(hub):
    """The hub stops a server with SIGINT and no terminal, an agent still connected: the edits
    and outputs of its open room are saved, and the stop does not wait for the hub's SIGTERM
    (after 10 s) or SIGKILL."""
    name, ids = new_notebook(hub.workspace("carol"), "a = 1")
    notebook = hub.workspace("carol") / name
    async with connect(hub.mcp_url("carol"), hub.token("carol")) as carol:
        await call(carol, "cell_update", path=name, cell_id=ids[0], source="print('ran before the stop')")
        await call(carol, "cell_execute", path=name, cell_id=ids[0])
        for n in range(3):
            await call(carol, "cell_insert", path=name, source=f"b{n} = {n}")
        assert name in [r["path"] for r in (await call(carol, "room_list"))["rooms"]]
        assert disk_sources(notebook) == ["a = 1"]  # the edits are in the open room only
        started = time.monotonic()
        await asyncio.to_thread(hub.stop_server, "carol")
        took = time.monotonic() - started
    print(f"carol's server stopped through the hub in {took:.1f} s")
    assert took < 10, f"the stop took {took:.1f} s:\n{hub.log(skip='GET /hub/api/users/')[-5000:]}"
    assert disk_sources(notebook) == ["print('ran before the stop')", "b0 = 0", "b1 = 1", "b2 = 2"]
    assert nbformat.reads(json.dumps(read_notebook(notebook)), as_version=4).cells[0].outputs[0].text == "ran before the stop\n"
    # the README says what a client then meets: the hub itself, with its own words
    r = httpx.post(hub.mcp_url("carol"), headers={"Authorization": f"token {hub.token('carol')}"}, json={})
    assert r.status_code == 403 and "_xsrf" in r.text


@pytest.fixture(scope="module")
def inspector():
    return npm_tool(INSPECTOR, INSPECTOR_PREFIX, "mcp-inspector")


def test_the_readme_inspector_recipe_works_through_the_hub(hub, inspector):
    """The README's hub recipe: the token in a header (JupyterHub 5+ ignores one in the URL)."""
    name, _ = new_notebook(hub.workspace("alice"), "1")
    token = hub.token("alice")
    done = subprocess.run([str(inspector), "--cli", hub.mcp_url("alice"), "--transport", "http",
                           "--header", f"Authorization: token {token}",
                           "--method", "tools/call", "--tool-name", "notebook_list"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert name in [n["path"] for n in json.loads(done.stdout)["structuredContent"]["notebooks"]]
    in_url = subprocess.run([str(inspector), "--cli", f"{hub.mcp_url('alice')}?token={token}", "--transport", "http",
                             "--method", "tools/list"], capture_output=True, text=True, timeout=120)
    assert in_url.returncode != 0 and "notebook_list" not in in_url.stdout
