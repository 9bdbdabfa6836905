"""The foundation against a real `jupyter lab` process started from the installed package."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time

import httpx
import nbformat
import pytest

import jupyter_mcp
from jupyter_mcp.client import LEGACY, MODERN, connect
from jupyter_mcp.testing import call, new_notebook, read_notebook

pytestmark = pytest.mark.live


def test_extension_is_enabled_and_ok():
    """`jupyter server extension list` shows the installed package enabled, and its
    validation (importing it and loading its extension points) passes."""
    out = subprocess.run([sys.executable, "-m", "jupyter", "server", "extension", "list"],
                         capture_output=True, text=True, timeout=120)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)  # its colours
    assert re.search(r"^\s*jupyter_mcp enabled$", text, re.M), text
    assert re.search(rf"^\s*jupyter_mcp {re.escape(jupyter_mcp.__version__)} OK$", text, re.M), text


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_client_lists_tools_and_creates_a_notebook(live, mode):
    name = f"created-{mode}.ipynb"
    async with connect(live.mcp_url, live.token, mode=mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"notebook_list", "notebook_create"} <= tools
        created = await client.call_tool("notebook_create", {"path": name})
        assert created.is_error is False, created.content
        assert created.structured_content["path"] == name
        assert len(created.structured_content["cell_ids"]) == 1
        listed = await client.call_tool("notebook_list", {})
        assert name in [n["path"] for n in listed.structured_content["notebooks"]]
    nb = nbformat.reads(json.dumps(read_notebook(live.root / name)), as_version=4)  # once complete
    nbformat.validate(nb)
    assert (nb.nbformat, nb.nbformat_minor) == (4, 5)
    assert nb.metadata.kernelspec.name == "python3"
    assert [(c.cell_type, c.source) for c in nb.cells] == [("code", "")]


async def test_create_refuses_existing_and_bad_paths(live):
    target = live.root / "keep.ipynb"
    target.write_text(json.dumps(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("precious")])))
    before = target.read_bytes()
    async with connect(live.mcp_url, live.token) as client:
        again = await client.call_tool("notebook_create", {"path": "/keep.ipynb"})
        assert again.is_error and "already exists" in again.content[0].text
        for bad, reason in [("../x.ipynb", "escapes"), ("/etc/x.ipynb", "outside the workspace"),
                            ("notes.txt", "not a notebook"), ("nofolder/x.ipynb", "folder does not exist"),
                            ("", "empty")]:
            result = await client.call_tool("notebook_create", {"path": bad})
            assert result.is_error, bad
            assert reason in result.content[0].text, (bad, result.content[0].text)
        unknown = await client.call_tool("notebook_create", {"path": "k.ipynb", "kernel_name": "nope"})
        assert unknown.is_error and "unknown kernel" in unknown.content[0].text
    assert target.read_bytes() == before
    assert not (live.root / "k.ipynb").exists()


async def test_notebook_list_skips_hidden_and_checkpoints(live):
    (live.root / "lst" / ".hidden").mkdir(parents=True)
    (live.root / "lst" / ".ipynb_checkpoints").mkdir()
    (live.root / "lst" / "deep" / "er").mkdir(parents=True)
    for rel in ["lst/a.ipynb", "lst/deep/er/b.ipynb", "lst/.hidden/h.ipynb", "lst/.ipynb_checkpoints/a-checkpoint.ipynb",
                "lst/.dot.ipynb", "lst/notes.txt"]:
        (live.root / rel).write_text("{}")
    async with connect(live.mcp_url, live.token) as client:
        result = await client.call_tool("notebook_list", {"folder": "lst"})
        assert [n["path"] for n in result.structured_content["notebooks"]] == ["lst/a.ipynb", "lst/deep/er/b.ipynb"]
        missing = await client.call_tool("notebook_list", {"folder": "nope"})
        assert missing.is_error and "does not exist" in missing.content[0].text


async def test_file_list_shows_the_workspace_as_the_file_browser_does(live, tmp_path):
    """Data and scripts beside the notebooks, folders and depth, a glob, pages that join up, and
    nothing hidden or outside the workspace; a bad argument is an error."""
    top = live.root / "fl"
    (top / "data" / "raw").mkdir(parents=True)
    (top / ".secret").mkdir()
    (top / "data" / "raw" / "a.csv").write_text("x,y\n1,2\n")
    (top / "data" / "b.csv").write_text("x\n")
    (top / "run.py").write_text("print(1)\n")
    (top / "nb.ipynb").write_text("{}")
    (top / ".env").write_text("TOKEN=1")
    (top / ".secret" / "key.csv").write_text("k")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "o.csv").write_text("o")
    (top / "out").symlink_to(outside)
    (top / "same.py").symlink_to(top / "run.py")
    async with connect(live.mcp_url, live.token) as client:
        async def listed(**args):
            result = await client.call_tool("file_list", {"folder": "fl", **args})
            assert not result.is_error, result.content
            return result.structured_content

        one = await listed()
        assert one["folder"] == "fl" and one["next_index"] is None
        assert [(e["path"], e["type"]) for e in one["entries"]] == [
            ("fl/data", "directory"), ("fl/nb.ipynb", "notebook"), ("fl/run.py", "file")]
        assert one["entries"][2]["size"] == len("print(1)\n") and "size" not in one["entries"][0]
        deep = await listed(max_depth=3)
        assert [e["path"] for e in deep["entries"]] == [
            "fl/data", "fl/data/b.csv", "fl/data/raw", "fl/data/raw/a.csv", "fl/nb.ipynb", "fl/run.py"]
        assert [e["path"] for e in (await listed(max_depth=3, pattern="*.csv"))["entries"]] == [
            "fl/data/b.csv", "fl/data/raw/a.csv"]
        pages, start = [], 0
        while start is not None:
            page = await listed(max_depth=3, start_index=start, max_entries=4)
            pages.append([e["path"] for e in page["entries"]])
            start = page["next_index"]
        assert pages == [[e["path"] for e in deep["entries"]][:4], [e["path"] for e in deep["entries"]][4:]]
        for bad, reason in [({"folder": "nope"}, "does not exist"), ({"folder": "../"}, "escapes"),
                            ({"folder": "fl/.secret"}, "hidden"), ({"max_depth": 11}, "max_depth"),
                            ({"max_entries": 0}, "max_entries")]:
            result = await client.call_tool("file_list", bad)
            assert result.is_error and reason in result.content[0].text, (bad, result.content[0].text)


def test_unauthenticated_methods_refused(live):
    for method in ("GET", "POST", "DELETE"):
        r = httpx.request(method, live.mcp_url, timeout=10)
        assert r.status_code in (401, 403), method
    assert httpx.post(live.mcp_url, headers=live.headers, timeout=10).status_code == 400


def test_sigterm_exits_quickly_without_traceback(live_factory):
    server = live_factory()

    async def use_it():
        async with connect(server.mcp_url, server.token) as client:
            await client.call_tool("notebook_create", {"path": "t.ipynb"})
            await client.list_tools()

    asyncio.run(use_it())
    held_open = httpx.Client(headers={**server.headers, "Accept": "application/json, text/event-stream"})
    init = held_open.post(server.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    sid = init.headers["mcp-session-id"]
    stream = held_open.stream("GET", server.mcp_url, headers={"mcp-session-id": sid,
                                                              "mcp-protocol-version": "2025-11-25",
                                                              "Accept": "text/event-stream"})
    stream.__enter__()  # an open standalone SSE stream must not hold the shutdown up
    started = time.monotonic()
    rc = server.stop(timeout=30)
    elapsed = time.monotonic() - started
    log = server.log()
    assert elapsed < 10, f"shutdown took {elapsed:.1f}s"
    assert rc == 0, log[-3000:]
    for bad in ("Traceback", "Task was destroyed", "never retrieved", "Exception in callback"):
        assert bad not in log, log[-3000:]


def test_command_line_client_calls_a_tool_and_explains_a_failure(live):
    """The README's shell line: `python -m jupyter_mcp.client call URL TOOL ARGS`."""
    (live.root / "cli.ipynb").write_text(json.dumps(nbformat.v4.new_notebook()))
    env = {"JUPYTER_TOKEN": live.token, "PATH": ""}
    done = subprocess.run([sys.executable, "-m", "jupyter_mcp.client", "call", live.mcp_url, "notebook_list", "{}"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert "cli.ipynb" in [n["path"] for n in answer["structuredContent"]["notebooks"]]
    refused = subprocess.run([sys.executable, "-m", "jupyter_mcp.client", "call", live.mcp_url, "notebook_list"],
                             capture_output=True, text=True, timeout=60, env={**env, "JUPYTER_TOKEN": "wrong"})
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "403" in refused.stderr or "401" in refused.stderr, refused.stderr


def test_another_users_request_on_a_session_is_refused(live_factory):
    """An MCP session belongs to the user who opened it; another user's request on it
    answers as for an unknown session, and the owner's session goes on working."""
    server = live_factory(token="alice-token", args=["--ServerApp.identity_provider_class=jupyter_mcp.testing.identity.TwoUsers"])
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    with httpx.Client(timeout=30) as http:
        alice = {**accept, "Authorization": "token alice-token"}
        sid = http.post(server.mcp_url, json=init, headers=alice).headers["mcp-session-id"]
        session = {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        http.post(server.mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers={**alice, **session})
        bob = {**accept, "Authorization": "token bob-token", **session}
        for method in ("POST", "GET", "DELETE"):
            r = http.request(method, server.mcp_url, json=listing if method == "POST" else None, headers=bob)
            assert r.status_code == 404, (method, r.status_code, r.text)
        r = http.post(server.mcp_url, json=listing, headers={**alice, **session})
        assert r.status_code == 200 and "notebook_list" in r.text


async def test_a_server_with_auth_off_serves_mcp_without_a_token(live_factory):
    """With `--IdentityProvider.token=''` (auth off, as some trusted boxes run) an MCP client
    with no header works (anyone who reaches the port runs code: README, Security), and a
    browser page from another origin is still refused."""
    server = live_factory(token="")
    name, _ = new_notebook(server.root, "print('no auth')")
    async with connect(server.mcp_url) as mcp:
        assert name in [n["path"] for n in (await call(mcp, "notebook_list"))["notebooks"]]
        ran = await call(mcp, "cell_execute", path=name, index=0)
        assert ran["outputs"][0]["text"] == "no auth\n"
    r = httpx.post(server.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                   headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                            "Origin": "http://evil.example"})
    assert r.status_code == 403 and "Origin not allowed" in r.text  # what still keeps browsers out
    # A client that keeps no cookie (charly's Go client, curl) stays in its own session: with
    # auth off Jupyter invents a new user per cookie-less request, MCP holds them all as one.
    accept = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bare", "version": "1"}}}
    opened = httpx.post(server.mcp_url, json=init, headers=accept)
    assert opened.status_code == 200 and "set-cookie" in opened.headers  # the cookie is offered, and dropped
    session = {**accept, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
    listed = httpx.post(server.mcp_url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session)
    assert listed.status_code == 200 and "notebook_list" in listed.text


def test_one_user_cannot_use_up_the_sessions(live_factory):
    """Sessions are capped per user: alice's fourth open session is refused, clearly, while
    bob still opens his; once alice ends one she may open another."""
    server = live_factory(token="alice-token", args=[
        "--ServerApp.identity_provider_class=jupyter_mcp.testing.identity.TwoUsers",
        "--JupyterMCPApp.max_sessions_per_user=3"])
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    alice = {**accept, "Authorization": "token alice-token"}
    with httpx.Client(timeout=30) as http:
        opened = [http.post(server.mcp_url, json=init, headers=alice) for _ in range(3)]
        assert [r.status_code for r in opened] == [200, 200, 200]
        refused = http.post(server.mcp_url, json=init, headers=alice)
        assert refused.status_code == 429
        assert "too many open MCP sessions" in refused.text and "max_sessions_per_user" in refused.text
        bob = http.post(server.mcp_url, json=init, headers={**accept, "Authorization": "token bob-token"})
        assert bob.status_code == 200
        sid = opened[0].headers["mcp-session-id"]
        ended = http.delete(server.mcp_url, headers={**alice, "mcp-session-id": sid,
                                                     "mcp-protocol-version": "2025-11-25"})
        assert ended.status_code == 200
        assert http.post(server.mcp_url, json=init, headers=alice).status_code == 200
        # requests on an open session are never refused by the cap
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        sid = opened[1].headers["mcp-session-id"]
        on_session = {**alice, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        http.post(server.mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=on_session)
        assert http.post(server.mcp_url, json=listing, headers=on_session).status_code == 200


async def test_the_session_cap_holds_whatever_form_the_initialize_takes(live_factory):
    """The cap decides on the request as parsed, not its bytes: an initialize whose method name is
    escaped (the same JSON string), one inside a batch, and a burst of initializes sent at once
    never open more than max_sessions_per_user sessions."""
    server = live_factory(token="alice-token", args=[
        "--ServerApp.identity_provider_class=jupyter_mcp.testing.identity.TwoUsers",
        "--JupyterMCPApp.max_sessions_per_user=3"])
    alice = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
             "Authorization": "token alice-token"}
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    escaped = ('{"jsonrpc": "2.0", "id": 1, "method": "\\u0069nitialize", "params": %s}' % json.dumps(params)).encode()
    batch = json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}]).encode()
    assert json.loads(escaped)["method"] == "initialize" and b'"initialize"' not in escaped
    async with httpx.AsyncClient(timeout=60) as http:
        async def post(body: bytes) -> httpx.Response:
            return await http.post(server.mcp_url, content=body, headers=alice)

        opened = [await post(escaped) for _ in range(5)]
        assert [r.status_code for r in opened] == [200, 200, 200, 429, 429]
        assert "too many open MCP sessions" in opened[3].text and "JupyterMCPApp.max_sessions_per_user" in opened[3].text
        refused = await post(batch)
        assert refused.status_code == 429 and "mcp-session-id" not in refused.headers
        for r in opened[:3]:
            ended = await http.delete(server.mcp_url, headers={**alice, "mcp-session-id": r.headers["mcp-session-id"],
                                                               "mcp-protocol-version": "2025-11-25"})
            assert ended.status_code == 200
        burst = await asyncio.gather(*(post(escaped) for _ in range(8)))
        assert sorted(r.status_code for r in burst) == [200] * 3 + [429] * 5
