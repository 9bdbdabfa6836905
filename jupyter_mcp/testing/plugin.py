"""pytest fixtures: an in-process Jupyter server with jupyter-mcp (pytest-jupyter's way), a
shared real `jupyter lab` process, extra ones with their own settings, a real Redis, and
both MCP protocol eras. Load it after pytest-jupyter's, whose ``jp_server_config`` it overrides:
``pytest_plugins = ["pytest_jupyter.jupyter_server", "jupyter_mcp.testing.plugin"]``."""

from __future__ import annotations

import pytest

from . import netns
from .live import LiveServer
from .redis import RedisServer


@pytest.fixture(autouse=True)
def _file_ids_of_this_test(jp_data_dir, monkeypatch):
    """Each in-process server keeps its file ids in its test's data directory. jupyter-server-fileid
    reads its default path once, when it is imported (at collection, before pytest-jupyter points
    the data directory at the test's): on a fresh machine that directory does not exist yet."""
    from jupyter_server_fileid.manager import BaseFileIdManager

    monkeypatch.setattr(BaseFileIdManager.class_traits()["db_path"], "default_value",
                        str(jp_data_dir / "file_id_manager.db"))


@pytest.fixture
def jp_server_config():
    return {"ServerApp": {"jpserver_extensions": {"jupyter_mcp": True, "jupyter_server_ydoc": True,
                                                  "jupyter_server_fileid": True}}}


@pytest.fixture
def mcp_url(jp_serverapp, http_server, jp_base_url, http_server_port, jp_asyncio_loop, tmp_path, monkeypatch):
    """The /mcp URL of the in-process server, started as `jupyter server` starts it."""
    monkeypatch.chdir(tmp_path)  # jupyter-collaboration keeps its .jupyter_ystore.db in the working directory
    jp_asyncio_loop.run_until_complete(jp_serverapp.extension_manager.start_all_extensions())
    port = http_server_port[1]
    return f"http://127.0.0.1:{port}{jp_base_url}mcp"


@pytest.fixture
def mcp_ext(jp_serverapp):
    """The running JupyterMCPApp of the in-process server."""
    return jp_serverapp.extension_manager.extension_apps["jupyter_mcp"].copy().pop()


@pytest.fixture
def jp_token(jp_serverapp):
    return jp_serverapp.identity_provider.token


@pytest.fixture(scope="session")
def live(tmp_path_factory):
    """One real `jupyter lab` process shared by the integration tests. Hundreds of tests each
    start a notebook's kernel on it, so MCP's cap on the kernels it starts is off here (the
    cap is tested on servers of its own)."""
    server = LiveServer(tmp_path_factory.mktemp("live"), args=["--JupyterMCPApp.max_kernels=0"]).start()
    yield server
    server.stop()


@pytest.fixture
def live_factory(tmp_path):
    """Start extra `jupyter lab` processes with their own settings; all stopped at the end."""
    started: list[LiveServer] = []

    def make(**kwargs) -> LiveServer:
        server = LiveServer(tmp_path / f"server{len(started)}", **kwargs)
        started.append(server)
        return server.start()

    yield make
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    try:
        server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield server
    server.stop()


@pytest.fixture(params=["legacy", "2026-07-28"], ids=["2025-11-25", "2026-07-28"])
def mode(request):
    """Both protocol eras: the initialize handshake (2025-11-25) and 2026-07-28."""
    return request.param


@pytest.fixture(scope="module")
def outside():
    """Another network namespace (another machine, as a server here sees it); skipped where one
    cannot be made."""
    problem = netns.problem()
    if problem:
        pytest.skip(problem)
    with netns.outside_namespace() as namespace:
        yield namespace
