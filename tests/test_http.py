"""/mcp over HTTP on an in-process Jupyter server: auth, origin, eras, streaming, sessions."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastmcp import Context

from jupyter_mcp.client import LEGACY, MODERN, connect
from jupyter_mcp.testing import write_notebook

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
EXTENSIONS = {"jupyter_mcp": True, "jupyter_server_ydoc": True, "jupyter_server_fileid": True}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def _initialize(http: httpx.AsyncClient, url: str, auth: dict) -> str:
    r = await http.post(url, json=INIT, headers={**MCP_HEADERS, **auth})
    assert r.status_code == 200, r.text
    return r.headers["mcp-session-id"]


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
async def test_unauthenticated_refused_on_every_method(mcp_url, jp_token, method):
    async with httpx.AsyncClient() as http:
        sid = await _initialize(http, mcp_url, {"Authorization": f"token {jp_token}"})
    for headers in ({}, {"Authorization": "token wrong"}, {"Authorization": "Bearer wrong"}):
        async with httpx.AsyncClient(timeout=5) as http:  # no cookie from the session above
            r = await http.request(method, mcp_url, json=INIT if method == "POST" else None,
                                   headers={**MCP_HEADERS, "mcp-session-id": sid, **headers})
            assert r.status_code in (401, 403), (method, headers, r.status_code)
            assert "jsonrpc" not in r.text  # refused before any MCP processing
            # what was wrong and how to do it right, not Jupyter's "'_xsrf' argument missing"
            assert "missing or invalid token" in r.text and "Authorization: token" in r.text, r.text
            assert "_xsrf" not in r.text


@pytest.mark.parametrize("scheme", ["token", "Bearer"])
async def test_token_and_bearer_open_a_session_and_delete_ends_it(mcp_url, jp_token, scheme):
    auth = {"Authorization": f"{scheme} {jp_token}"}
    async with httpx.AsyncClient() as http:
        sid = await _initialize(http, mcp_url, auth)
        headers = {**MCP_HEADERS, **auth, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        r = await http.post(mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        assert r.status_code == 202
        r = await http.post(mcp_url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers)
        assert r.status_code == 200 and "notebook_list" in r.text
        r = await http.delete(mcp_url, headers=headers)
        assert r.status_code == 200
        r = await http.post(mcp_url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=headers)
        assert r.status_code == 404  # the session is gone


async def test_get_opens_the_standalone_sse_stream(mcp_url, jp_token):
    auth = {"Authorization": f"token {jp_token}"}
    async with httpx.AsyncClient() as http:
        sid = await _initialize(http, mcp_url, auth)
        headers = {**auth, "Accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        async with http.stream("GET", mcp_url, headers=headers, timeout=10) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")


async def test_empty_post_is_400_not_404(mcp_url, jp_token):
    async with httpx.AsyncClient() as http:
        r = await http.post(mcp_url, headers={"Authorization": f"token {jp_token}"})
        assert r.status_code == 400


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
async def test_foreign_origin_refused_even_with_token(mcp_url, jp_token, method):
    async with httpx.AsyncClient() as http:
        headers = {**MCP_HEADERS, "Authorization": f"token {jp_token}", "Origin": "http://evil.example"}
        r = await http.request(method, mcp_url, json=INIT if method == "POST" else None, headers=headers)
        assert r.status_code == 403
        assert "Origin" in r.text


async def test_same_origin_accepted(mcp_url, jp_token):
    host = mcp_url.split("/")[2]
    async with httpx.AsyncClient() as http:
        headers = {**MCP_HEADERS, "Authorization": f"token {jp_token}", "Origin": f"http://{host}"}
        r = await http.post(mcp_url, json=INIT, headers=headers)
        assert r.status_code == 200


class TestAllowedOrigin:
    @pytest.fixture
    def jp_server_config(self):
        return {"ServerApp": {"allow_origin": "https://lab.example.org",
                              "jpserver_extensions": EXTENSIONS}}

    async def test_allow_origin_is_respected(self, mcp_url, jp_token):
        async with httpx.AsyncClient() as http:
            base = {**MCP_HEADERS, "Authorization": f"token {jp_token}"}
            ok = await http.post(mcp_url, json=INIT, headers={**base, "Origin": "https://lab.example.org"})
            bad = await http.post(mcp_url, json=INIT, headers={**base, "Origin": "https://other.example.org"})
            assert (ok.status_code, bad.status_code) == (200, 403)


class TestBaseUrl:
    @pytest.fixture
    def jp_base_url(self):
        return "/prefix/"

    async def test_mcp_lives_under_base_url(self, mcp_url, jp_token):
        assert "/prefix/mcp" in mcp_url
        async with connect(mcp_url, jp_token) as client:
            tools = await client.list_tools()
            assert {"notebook_list", "notebook_create"} <= {t.name for t in tools.tools}
        async with httpx.AsyncClient() as http:
            root = mcp_url.replace("/prefix/mcp", "/mcp")
            r = await http.post(root, headers={"Authorization": f"token {jp_token}"})
            assert r.status_code == 404


class TestAuthorizer:
    """Jupyter's authorizer is asked about the 'mcp' resource: a deployment can deny it."""

    @pytest.fixture
    def jp_server_config(self):
        return {"ServerApp": {"authorizer_class": "test_http.DenyMCP",
                              "jpserver_extensions": EXTENSIONS}}

    async def test_denied_by_authorizer(self, mcp_url, jp_token):
        async with httpx.AsyncClient() as http:
            r = await http.post(mcp_url, json=INIT, headers={**MCP_HEADERS, "Authorization": f"token {jp_token}"})
            assert r.status_code == 403
            status = await http.get(mcp_url.replace("/mcp", "/api/status"),
                                    headers={"Authorization": f"token {jp_token}"})
            assert status.status_code == 200  # only MCP is denied


from jupyter_server.auth.authorizer import Authorizer  # noqa: E402

pytestmark = pytest.mark.live


class DenyMCP(Authorizer):
    def is_authorized(self, handler, user, action, resource):
        return resource != "mcp"


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_both_protocol_eras(mcp_url, jp_token, mode):
    async with connect(mcp_url, jp_token, mode=mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"notebook_list", "notebook_create"} <= tools
        result = await client.call_tool("notebook_list", {})
        assert result.is_error is False
        assert result.structured_content == {"notebooks": []}


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_notification_reaches_client_before_result(mcp_url, jp_token, mcp_ext, mode):
    """The SSE response is flushed event by event, not buffered until the call ends.

    The tool only returns once the client has seen its progress notification, so a
    buffering bridge would make it answer "notification never arrived".
    """
    client_saw_it = asyncio.Event()

    @mcp_ext.mcp.tool
    async def slow_talker(ctx: Context) -> str:
        await ctx.report_progress(1, 2, "first")
        try:
            await asyncio.wait_for(client_saw_it.wait(), 20)
        except asyncio.TimeoutError:
            return "notification never arrived"
        return "done"

    async def on_progress(progress, total, message):
        assert message == "first"
        client_saw_it.set()

    async with connect(mcp_url, jp_token, mode=mode) as client:
        result = await client.call_tool("slow_talker", {}, progress_callback=on_progress)
    assert result.content[0].text == "done"


async def test_cookieless_token_requests_keep_their_session(mcp_url, jp_token):
    """A client that keeps no cookies (curl, many agents) is still one principal."""
    auth = {"Authorization": f"Bearer {jp_token}"}
    async with httpx.AsyncClient() as http:
        sid = await _initialize(http, mcp_url, auth)
    async with httpx.AsyncClient() as fresh:
        headers = {**MCP_HEADERS, **auth, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        r = await fresh.post(mcp_url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers)
        assert r.status_code == 200 and "notebook_create" in r.text


class TestWithoutYdoc:
    """A server missing jupyter-server-ydoc answers 503 with the reason instead of hanging."""

    @pytest.fixture
    def jp_server_config(self):
        return {"ServerApp": {"jpserver_extensions": {"jupyter_mcp": True, "jupyter_server_ydoc": False}}}

    async def test_clear_503(self, mcp_url, jp_token):
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.post(mcp_url, json=INIT, headers={**MCP_HEADERS, "Authorization": f"token {jp_token}"})
        assert r.status_code == 503
        assert "jupyter-server-ydoc is not enabled" in r.text


async def test_each_answer_is_json_unless_it_may_need_its_stream(mcp_url, jp_token, mcp_ext):
    """A 2025-11-25 request that cannot need its stream is answered with one JSON body; one with a
    progress token, or asking to stream, gets its notifications on an event stream. A log message
    of a request answered with JSON has nowhere to go: the body is still its answer."""

    @mcp_ext.mcp.tool
    async def chatty(ctx: Context, stream: bool = False) -> str:
        await ctx.report_progress(1, 2, "half")
        await ctx.info("a log line")
        return "said"

    auth = {"Authorization": f"token {jp_token}"}
    async with httpx.AsyncClient(timeout=30) as http:
        r = await http.post(mcp_url, json=INIT, headers={**MCP_HEADERS, **auth})
        assert r.headers["content-type"].startswith("application/json") and r.json()["result"]["capabilities"]
        headers = {**MCP_HEADERS, **auth, "mcp-session-id": r.headers["mcp-session-id"],
                   "mcp-protocol-version": "2025-11-25"}

        async def post(id_, method, params=None):
            return await http.post(mcp_url, json={"jsonrpc": "2.0", "id": id_, "method": method,
                                                  **({"params": params} if params else {})}, headers=headers)

        for id_, method, params in ((2, "ping", None), (3, "tools/list", None),
                                    (4, "tools/call", {"name": "chatty", "arguments": {}})):
            r = await post(id_, method, params)
            assert r.headers["content-type"].startswith("application/json"), (method, r.headers)
            assert r.json()["id"] == id_ and "result" in r.json(), r.text
        assert r.json()["result"]["content"][0]["text"] == "said"

        r = await post(5, "tools/call", {"name": "chatty", "arguments": {}, "_meta": {"progressToken": "p5"}})
        assert r.headers["content-type"].startswith("text/event-stream")
        assert '"notifications/progress"' in r.text and '"progressToken":"p5"' in r.text and '"said"' in r.text

        r = await post(6, "tools/call", {"name": "chatty", "arguments": {"stream": True}})
        assert r.headers["content-type"].startswith("text/event-stream")
        assert '"notifications/message"' in r.text and "a log line" in r.text and '"said"' in r.text


async def test_a_stream_whose_first_event_is_its_answer_goes_as_one_json_body(mcp_url, jp_token, mcp_ext):
    """A request given an event stream (it may need one) whose handler then sends nothing before
    its answer is answered with one JSON body: the stream would have carried nothing else. One
    that notifies first keeps its stream, the notification first."""

    @mcp_ext.mcp.tool
    async def quiet(ctx: Context, stream: bool = False, log: bool = False) -> str:
        await asyncio.sleep(0.2)
        if log:
            await ctx.info("on my way")
        return "done"

    auth = {"Authorization": f"token {jp_token}"}
    async with httpx.AsyncClient(timeout=30) as http:
        headers = {**MCP_HEADERS, **auth, "mcp-session-id": await _initialize(http, mcp_url, auth),
                   "mcp-protocol-version": "2025-11-25"}
        r = await http.post(mcp_url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "quiet", "arguments": {"stream": True}}})
        assert r.headers["content-type"].startswith("application/json"), r.headers
        assert r.json()["id"] == 2 and r.json()["result"]["content"][0]["text"] == "done"
        r = await http.post(mcp_url, headers=headers, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "quiet", "arguments": {"stream": True, "log": True}}})
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.text.index("on my way") < r.text.index('"done"')


async def test_a_big_json_answer_is_gzipped_for_a_client_that_accepts_it(mcp_url, jp_token, jp_root_dir):
    """A 300-cell notebook's answer (its cells twice: structured, and as JSON text) crosses the
    network gzip-compressed when the client accepts gzip, as every SDK's HTTP client does; sent as
    it is to one that does not, and a small answer is never compressed."""
    write_notebook(jp_root_dir / "wide.ipynb", [f"x_{i} = {i}  # a line of code, long enough" for i in range(300)])
    auth = {"Authorization": f"token {jp_token}"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "notebook_get", "arguments": {"path": "wide.ipynb"}}}
    async with httpx.AsyncClient(timeout=30) as http:
        session = {**MCP_HEADERS, **auth, "mcp-session-id": await _initialize(http, mcp_url, auth),
                   "mcp-protocol-version": "2025-11-25"}
        zipped = await http.post(mcp_url, json=call, headers=session)
        plain = await http.post(mcp_url, json=call, headers={**session, "Accept-Encoding": "identity"})
        small = await http.post(mcp_url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=session)
    assert zipped.headers["content-encoding"] == "gzip" and "accept-encoding" in zipped.headers["vary"].lower()
    assert zipped.json()["result"] == plain.json()["result"]
    assert len(zipped.json()["result"]["structuredContent"]["cells"]) == 300
    assert zipped.num_bytes_downloaded * 4 < plain.num_bytes_downloaded == len(plain.content)
    assert "content-encoding" not in plain.headers and "content-encoding" not in small.headers
    assert small.json()["result"] == {}


async def test_accept_encoding_is_read_by_rfc_9110s_rules(mcp_url, jp_token, jp_root_dir):
    """Which big answers go gzipped is what the client's Accept-Encoding says by RFC 9110's rules
    (12.5.3): q=0 (however written) refuses gzip, a malformed weight is no acceptance, a coding
    named for itself outranks "*", and codings are case-insensitive."""
    write_notebook(jp_root_dir / "wide.ipynb", [f"x_{i} = {i}  # a line of code, long enough" for i in range(300)])
    auth = {"Authorization": f"token {jp_token}"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "notebook_get", "arguments": {"path": "wide.ipynb"}}}
    said = {"gzip;q=0.0000": None, "gzip;q=0.000": None, "gzip;q=2": None, "*;q=0, gzip": "gzip",
            "GZIP": "gzip", "gzip;q=0.5, identity": None, "*": "gzip"}
    async with httpx.AsyncClient(timeout=30) as http:
        session = {**MCP_HEADERS, **auth, "mcp-session-id": await _initialize(http, mcp_url, auth),
                   "mcp-protocol-version": "2025-11-25"}
        for accept, coding in said.items():
            r = await http.post(mcp_url, json=call, headers={**session, "Accept-Encoding": accept})
            assert r.status_code == 200 and len(r.json()["result"]["structuredContent"]["cells"]) == 300
            assert r.headers.get("content-encoding") == coding, accept
