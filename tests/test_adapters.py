"""The private surfaces of dependencies that jupyter_mcp/adapters/ stands on, checked on the real
classes, with no Jupyter process: when an upgrade removes or changes one, the test of its adapter
fails, naming the dependency and the surface. Read the upgrade's changes, then fix the adapter
(and only it: nothing else reaches a dependency's internals, tests/test_layers.py)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from jupyter_mcp.adapters import (
    anyio_threads,
    fastmcp_lowlevel,
    file_ids,
    interpreter_exit,
    jupyter_server_internals,
    jupyterhub_auth,
    pycrdt_doc,
    sdk_client,
    sdk_server,
    sse_watchers,
    tornado_handler,
    ydoc_rooms,
)

pytestmark = pytest.mark.unit


def moved(dependency: str, surface: str, adapter: Any) -> str:
    return (f"{dependency} changed {surface}, which {adapter.__name__.replace('.', '/')}.py stands on: read the "
            "upgrade's changes and fix that adapter")


def parameters(func: Any) -> list[str]:
    """The parameters ``func`` takes, ``self`` left out."""
    return [name for name in inspect.signature(func).parameters if name != "self"]


def sets_in_source(cls: type, attribute: str) -> bool:
    """Whether a class of the dependency (or a base) assigns ``<something>.<attribute>`` in its source."""
    return any(f".{attribute} =" in inspect.getsource(base) or f".{attribute}:" in inspect.getsource(base)
               for base in cls.__mro__ if base.__module__.split(".")[0] not in ("builtins", "abc", "typing"))



# -- the MCP Python SDK, server side ----------------------------------------------------------------


def test_sdk_server_session_manager():
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    manager = StreamableHTTPSessionManager(app=Server("t"))
    assert parameters(StreamableHTTPSessionManager._admit_session) == ["requestor"], \
        moved("mcp (the SDK)", "StreamableHTTPSessionManager._admit_session(requestor)", sdk_server)
    assert isinstance(sdk_server.session_owners(manager), dict), \
        moved("mcp (the SDK)", "StreamableHTTPSessionManager._session_owners (a dict)", sdk_server)
    seen = []
    sdk_server.adopt_new_transports(manager, lambda transport: seen.append(transport) or transport)
    assert manager._admit_session.__name__ == "admit_adopting"


def test_sdk_server_transport():
    from mcp.server.streamable_http import StreamableHTTPServerTransport

    assert parameters(StreamableHTTPServerTransport._handle_post_request) == ["scope", "request", "receive", "send"], \
        moved("mcp (the SDK)", "StreamableHTTPServerTransport._handle_post_request(scope, request, receive, send)",
              sdk_server)
    transport = StreamableHTTPServerTransport("s1")
    assert transport.__dict__.get("is_json_response_enabled") is False and transport._request_streams == {}, \
        moved("mcp (the SDK)", "the transport's is_json_response_enabled attribute and _request_streams dict",
              sdk_server)
    adopted = sdk_server.JsonPerRequestTransport.adopt(transport)
    token = sdk_server.answering_json.set(True)
    try:  # the SDK's own choice point reads the mode per request: no back channel when answering JSON
        assert adopted._message_metadata(None).can_send_request is False, \
            moved("mcp (the SDK)", "reading is_json_response_enabled per request", sdk_server)
    finally:
        sdk_server.answering_json.reset(token)
    assert adopted._message_metadata(None).can_send_request is True


def test_sdk_server_session_connection():
    from mcp.server.session import ServerSession

    session = ServerSession(SimpleNamespace(), connection := SimpleNamespace(protocol_version="2025-11-25"))
    assert sdk_server.connection_of(session) is connection, \
        moved("mcp (the SDK)", "ServerSession._connection (the client connection)", sdk_server)


# -- the MCP Python SDK, client side ----------------------------------------------------------------


def test_sdk_client():
    from mcp.client.session import ClientSession

    client = sdk_client.http_client({"Authorization": "token t"})
    assert client.headers["Authorization"] == "token t", \
        moved("mcp (the SDK)", "mcp.shared._httpx_utils.create_mcp_http_client(headers=)", sdk_client)
    send, receive = anyio.create_memory_object_stream(1)
    session = ClientSession(receive, send)
    data, opts = {"method": "tasks/get", "params": {}}, {}
    sdk_client.stamp_request(session, data, opts)  # the pre-connect stamp
    assert parameters(session._dispatcher.send_raw_request)[:3] == ["method", "params", "opts"], \
        moved("mcp (the SDK)", "ClientSession._dispatcher.send_raw_request(method, params, opts)", sdk_client)


# -- fastmcp ----------------------------------------------------------------------------------------


def test_fastmcp_low_level_server():
    from fastmcp import FastMCP

    mcp = FastMCP("t")
    low = fastmcp_lowlevel.low_level_server(mcp)
    assert parameters(low.add_request_handler)[:3] == ["method", "params_type", "handler"] \
        and isinstance(low.middleware, list), \
        moved("fastmcp", "FastMCP._mcp_server (the SDK's Server: add_request_handler, middleware)", fastmcp_lowlevel)
    mine = object()
    fastmcp_lowlevel.add_server_middleware(mcp, mine)
    assert low.middleware[-1] is mine  # innermost: it sees the result as the runner shaped it


# What tasks/answer_swap.py stands on: fastmcp hands an interceptor's non-ToolResult to the SDK's
# runner; the runner refuses a task in a 2025-11-25 tools/call result (so the placeholder), keeps a
# placeholder's _meta, and does not check what a server middleware returns (so the swap).

_TASK = {"taskId": "t1", "status": "working", "createdAt": "2026-01-01T00:00:00Z",
         "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": None}


def _server_answering(answer_slow: Any, swap: bool) -> Any:
    """A FastMCP server whose ``slow`` tool is answered by an interceptor (as the tasks binding's is)."""
    from fastmcp import FastMCP
    from fastmcp.server.extensions import ServerExtension

    from jupyter_mcp.tasks import answer_swap

    class Answering(ServerExtension):
        identifier = "test.example/answering"

        async def intercept_tool_call(self, params: Any, context: Any, call_next: Any) -> Any:
            return answer_slow() if params.name == "slow" else await call_next()

    mcp = FastMCP("t")
    mcp.tool(lambda: "ran", name="slow")
    mcp.tool(lambda: "quick", name="quick")
    mcp.add_extension(Answering())
    if swap:
        answer_swap.install(mcp)
    return fastmcp_lowlevel.low_level_server(mcp)


async def _call(server: Any, mode: str, name: str) -> Any:
    from mcp import Client

    from jupyter_mcp.client import CORE, SEED, Tasks

    from mcp.shared.exceptions import MCPError

    async with Client(server, mode=mode) as client:
        caps = client.session.server_capabilities if mode == "legacy" else None
        try:
            return caps, await Tasks(client, CORE if mode == "legacy" else SEED).request(
                "tools/call", {"name": name, "arguments": {}})
        except MCPError as exc:  # the error the client was answered, not the session's teardown
            return caps, exc


async def test_sdk_refuses_a_task_as_a_2025_tools_call_result():
    from mcp.shared.exceptions import MCPError
    from mcp_types import CreateTaskResult

    server = _server_answering(lambda: CreateTaskResult.model_validate({"task": _TASK}), swap=False)
    _, answered = await _call(server, "legacy", "slow")
    if not isinstance(answered, MCPError) or "invalid result" not in str(answered):
        pytest.fail("mcp (the SDK) now accepts a CreateTaskResult as a 2025-11-25 tools/call result: "
                    "jupyter_mcp/tasks/answer_swap.py's placeholder and swap can give way to fastmcp's "
                    "interceptor returning it (read the upgrade's changes)")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_sdk_keeps_the_placeholder_and_puts_the_swapped_answer_on_the_wire(mode):
    from jupyter_mcp.tasks import answer_swap

    answer = {"task": _TASK, **({"resultType": "task"} if mode != "legacy" else {})}
    _, placeholder = await _call(_server_answering(lambda: answer_swap.carrying(answer, "t1"), swap=False),
                                 mode, "slow")
    assert placeholder["_meta"][answer_swap.PLACEHOLDER_KEY] == answer, \
        moved("fastmcp or mcp (the SDK)", "a ToolResult's meta reaching the wire as _meta, unchanged", fastmcp_lowlevel)
    server = _server_answering(lambda: answer_swap.carrying(answer, "t1"), swap=True)
    caps, swapped = await _call(server, mode, "slow")
    assert swapped == answer, \
        moved("mcp (the SDK)", "Server.middleware's result going on the wire unchecked", fastmcp_lowlevel)
    _, quick = await _call(server, mode, "quick")
    assert quick["content"][0]["text"] == "quick" and answer_swap.PLACEHOLDER_KEY not in quick.get("_meta", {})
    if mode == "legacy":
        assert caps.tasks is not None and caps.tasks.list is not None and caps.tasks.cancel is not None \
            and caps.tasks.requests.tools.call is not None, \
            moved("mcp (the SDK)", "the initialize result passing through Server.middleware", fastmcp_lowlevel)


def test_fastmcp_raw_request_params():
    import dataclasses

    from fastmcp.server.dependencies import FastMCPRequestContext

    assert "_srctx" in {f.name for f in dataclasses.fields(FastMCPRequestContext)}, \
        moved("fastmcp", "FastMCPRequestContext._srctx (the SDK's request context, its params)", fastmcp_lowlevel)
    raw = {"name": "t", "task": {}}
    assert fastmcp_lowlevel.raw_request_params(SimpleNamespace(_srctx=SimpleNamespace(params=raw))) is raw
    with pytest.raises(RuntimeError, match="_srctx.params"):
        fastmcp_lowlevel.raw_request_params(SimpleNamespace())


# -- jupyter_server, tornado, JupyterHub ------------------------------------------------------------


def test_jupyter_server_internals():
    from jupyter_server.auth.identity import IdentityProvider
    from jupyter_server.base.handlers import JupyterHandler
    from jupyter_server.gateway.managers import GatewayKernelClient
    from jupyter_server.serverapp import ServerApp

    assert parameters(ServerApp._signal_stop) == ["sig", "frame"], \
        moved("jupyter_server", "ServerApp._signal_stop(sig, frame)", jupyter_server_internals)
    assert sets_in_source(IdentityProvider, "_token_authenticated"), \
        moved("jupyter_server", "handler._token_authenticated (set by its token check)", jupyter_server_internals)
    assert "_jupyter_current_user" in inspect.getsource(JupyterHandler), \
        moved("jupyter_server", "JupyterHandler._jupyter_current_user", jupyter_server_internals)
    assert parameters(GatewayKernelClient._route_responses) == [], \
        moved("jupyter_server", "GatewayKernelClient._route_responses()", jupyter_server_internals)
    assert jupyter_server_internals.user_found_so_far(SimpleNamespace()) is jupyter_server_internals.NOT_LOOKED_YET
    assert jupyter_server_internals.user_found_so_far(SimpleNamespace(_jupyter_current_user=None)) is None


def test_tornado_handler():
    from tornado.httputil import HTTPServerRequest
    from tornado.web import Application, RequestHandler

    request = HTTPServerRequest(method="GET", uri="/", connection=SimpleNamespace(set_close_callback=lambda cb: None))
    handler = RequestHandler(Application(), request)
    assert tornado_handler.response_finished(handler) is False, \
        moved("tornado", "RequestHandler._finished", tornado_handler)
    handler.set_header("Content-Type", "application/json")
    assert tornado_handler.response_header(handler, "Content-Type") == "application/json", \
        moved("tornado", "RequestHandler._headers", tornado_handler)


def test_jupyterhub_auth():
    auth = pytest.importorskip("jupyterhub.services.auth")
    assert sets_in_source(auth.HubAuth, "_cached_hub_user"), \
        moved("jupyterhub", "handler._cached_hub_user (HubAuth's user of the request)", jupyterhub_auth)
    assert jupyterhub_auth.hub_user_of_request(SimpleNamespace(_cached_hub_user={"name": "a"})) == {"name": "a"}


# -- jupyter-server-fileid --------------------------------------------------------------------------


@pytest.mark.parametrize("manager", ["ArbitraryFileIdManager", "LocalFileIdManager"])
def test_file_ids(manager, tmp_path):
    from jupyter_server_fileid import manager as managers

    cls = getattr(managers, manager)
    assert parameters(cls._normalize_path) == ["path"] and parameters(cls._from_normalized_path) == ["path"], \
        moved("jupyter-server-fileid", f"{manager}._normalize_path(path), ._from_normalized_path(path)", file_ids)
    ids = cls(root_dir=str(tmp_path), db_path=str(tmp_path / "ids.db"))
    stored = file_ids.row_path_of(ids, "sub/a.ipynb")
    assert file_ids.workspace_path_of_row(ids, stored) == "sub/a.ipynb", \
        moved("jupyter-server-fileid", f"{manager}'s stored path round trip", file_ids)


# -- jupyter-server-ydoc, jupyter-ydoc, pycrdt-websocket --------------------------------------------


def test_ydoc_extension_and_websocket_server():
    from jupyter_server_ydoc.app import YDocExtension
    from jupyter_server_ydoc.websocketserver import JupyterWebsocketServer

    assert "_room_locks" in vars(YDocExtension) and sets_in_source(YDocExtension, "ywebsocket_server") \
        and sets_in_source(YDocExtension, "file_loaders"), \
        moved("jupyter-server-ydoc", "YDocExtension._room_locks, .ywebsocket_server, .file_loaders", ydoc_rooms)
    assert parameters(JupyterWebsocketServer._monitor) == [] and sets_in_source(JupyterWebsocketServer, "monitor_task"), \
        moved("pycrdt-websocket", "WebsocketServer._monitor(), .monitor_task", ydoc_rooms)
    assert "room" in parameters(JupyterWebsocketServer.delete_room), \
        moved("pycrdt-websocket", "WebsocketServer.delete_room(room=)", ydoc_rooms)


async def test_ydoc_room_and_loader():
    from jupyter_server_ydoc.loaders import FileLoader
    from jupyter_server_ydoc.rooms import DocumentRoom
    from jupyter_ydoc import YNotebook

    contents, ids = SimpleNamespace(), SimpleNamespace(get_path=lambda file_id: "a.ipynb")
    loader = FileLoader("abc", ids, contents)
    assert ydoc_rooms.loader_contents(loader) is contents and ydoc_rooms.loader_file_ids(loader) is ids \
        and ydoc_rooms.last_path_of(loader) == "a.ipynb", \
        moved("jupyter-server-ydoc", "FileLoader._contents_manager, ._file_id_manager, ._current_path", ydoc_rooms)
    assert parameters(FileLoader.maybe_save_content) == ["model"] \
        and parameters(FileLoader.load_content) == ["format", "file_type"], \
        moved("jupyter-server-ydoc", "FileLoader.maybe_save_content(model), .load_content(format, file_type)",
              ydoc_rooms)
    room = DocumentRoom("json:notebook:abc", "json", "notebook", loader, SimpleNamespace(emit=lambda **kw: None),
                        None, logging.getLogger(__name__))
    surfaces = "DocumentRoom._document, ._file, ._file_format, ._file_type, ._update_lock, .cleaner, " \
               "._document_load_progressively, ._on_outofband_change()"
    assert isinstance(ydoc_rooms.document_of(room), YNotebook) and ydoc_rooms.is_document_room(room), \
        moved("jupyter-server-ydoc", surfaces, ydoc_rooms)
    assert ydoc_rooms.loader_of(room) is loader and ydoc_rooms.file_format_and_type(room) == ("json", "notebook"), \
        moved("jupyter-server-ydoc", surfaces, ydoc_rooms)
    assert ydoc_rooms.is_reloading(room) is False and hasattr(room, "cleaner") \
        and hasattr(room, "_document_load_progressively") and parameters(room._on_outofband_change) == [], \
        moved("jupyter-server-ydoc", surfaces, ydoc_rooms)
    await ydoc_rooms.mark_saved(room, "h")
    assert ydoc_rooms.document_of(room).hash == "h"
    assert ydoc_rooms.notebook_meta(YNotebook()) is not None, moved("jupyter-ydoc", "YNotebook._ymeta", ydoc_rooms)


# -- pycrdt, anyio, CPython, sse-starlette ----------------------------------------------------------


def test_pycrdt_native_observe():
    from pycrdt import Doc, Text

    doc, updates = Doc(), []
    subscription = pycrdt_doc.observe_natively(doc, lambda event: updates.append(event.update))
    doc["t"] = Text("x")
    assert subscription is not None and updates and isinstance(updates[-1], bytes), \
        moved("pycrdt", "Doc._doc.observe(callback) (event.update: bytes)", pycrdt_doc)


async def test_anyio_idle_worker_threads_end():
    from anyio._backends._asyncio import WorkerThread

    await anyio.to_thread.run_sync(lambda: None)
    workers = [t for t in threading.enumerate() if isinstance(t, WorkerThread)]
    assert workers and all(hasattr(t, "queue") for t in workers), \
        moved("anyio", "anyio._backends._asyncio.WorkerThread (its queue)", anyio_threads)
    anyio_threads.end_idle_worker_threads()
    deadline = time.monotonic() + 5
    while any(t.is_alive() for t in workers) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not any(t.is_alive() for t in workers), \
        moved("anyio", "a None on a WorkerThread's queue ending it", anyio_threads)


def test_interpreter_exit_hook():
    assert parameters(threading._register_atexit)[0] == "func", \
        moved("CPython", "threading._register_atexit(func)", interpreter_exit)


async def test_sse_starlette_shutdown_watcher():
    from sse_starlette import sse

    assert sse._shutdown_watcher.__qualname__ == sse_watchers.WATCHER_QUALNAME, \
        moved("sse-starlette", "sse_starlette.sse._shutdown_watcher", sse_watchers)
    sse._ensure_watcher_started_on_this_loop()
    assert any(getattr(t.get_coro(), "__qualname__", "") == sse_watchers.WATCHER_QUALNAME
               for t in asyncio.all_tasks()), \
        moved("sse-starlette", "the shutdown watcher task per event loop", sse_watchers)
    await sse_watchers.stop_shutdown_watchers()
    assert not any(getattr(t.get_coro(), "__qualname__", "") == sse_watchers.WATCHER_QUALNAME
                   for t in asyncio.all_tasks() if not t.done())
