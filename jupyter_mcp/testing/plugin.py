"""pytest fixtures: an in-process Jupyter server with jupyter-mcp (pytest-jupyter's way), a
shared real `jupyter lab` process, extra ones with their own settings, a real Redis, and
both MCP protocol eras. Load it after pytest-jupyter's, whose ``jp_server_config`` it overrides:
``pytest_plugins = ["pytest_jupyter.jupyter_server", "jupyter_mcp.testing.plugin"]``.

The tests come in tiers, each test marked with exactly one of ``unit`` (no Jupyter process, no
kernel, no network server: ``pytest -m unit`` runs in well under a minute) and ``live`` (a Jupyter
server, in-process or a spawned ``jupyter lab``, kernels, Redis, a hub, a browser...); ``slow``
marks the long ones (the crash matrix, soaks, anything over about 30 s). A test with neither or
both, or a ``unit`` test that asks for a fixture that starts a server or a process, is a
collection error (``tier_problems``). A fixture of a test module that starts one says so with
``@starts_process`` under its ``@pytest.fixture``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import pytest

from . import netns
from .live import LiveServer
from .redis import RedisServer


TIERS = ("unit", "live")
MARKERS = (
    "unit: no Jupyter process, no kernel, no network server (`pytest -m unit`: the fast tier)",
    "live: a Jupyter server (in-process or a spawned `jupyter lab`), kernels, Redis, a hub, a browser...",
    "slow: the long ones (the crash matrix, soaks, anything over about 30 s); `-m 'not slow'` leaves them out",
    "crash: the kill matrix (real SIGKILLs and restarts, about 3 minutes); CI runs it, `-m 'not crash'` leaves it out",
    "alone: a wall-clock bound (how long the server is held): the full run runs these after the others, one at a time, so no other test shares the CPU they measure",
)

# Fixtures that start a Jupyter server (in this process or another) or some other process: a
# `unit` test may not ask for them, directly or through another fixture. pytest-jupyter's, and
# this plugin's; a test module's own are marked with @starts_process.
PROCESS_FIXTURES = frozenset({
    "jp_configurable_serverapp", "jp_serverapp", "jp_web_app", "jp_auth_header", "jp_fetch", "jp_ws_fetch",
    "http_server", "http_server_client",
    "mcp_url", "mcp_ext", "jp_token", "live", "live_factory", "redis_server", "outside",
})

F = TypeVar("F", bound=Callable[..., Any])


def starts_process(fixture: F) -> F:
    """Mark a fixture function as one that starts a server or a process (put it under
    ``@pytest.fixture``): a ``unit`` test that asks for it is a collection error."""
    fixture.__starts_process__ = True  # type: ignore[attr-defined]
    return fixture


def _process_fixtures_of(item: pytest.Item) -> list[str]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    found = []
    for name in getattr(item, "fixturenames", ()):  # every fixture the test needs, directly or not
        defs = info.name2fixturedefs.get(name, ())
        if name in PROCESS_FIXTURES or any(getattr(d.func, "__starts_process__", False) for d in defs):
            found.append(name)
    return sorted(found)


def tier_problems(items: Iterable[pytest.Item]) -> list[str]:
    """What is wrong with the tiers of ``items``: one line per test with neither or both of
    ``unit``/``live``, or marked ``unit`` and asking for a fixture that starts a process."""
    problems = []
    for item in items:
        tiers = [tier for tier in TIERS if item.get_closest_marker(tier) is not None]
        if len(tiers) != 1:
            problems.append(f"{item.nodeid}: marked {' and '.join(tiers) or 'neither unit nor live'}; "
                            "mark it with exactly one (pytestmark = pytest.mark.unit or pytest.mark.live)")
        elif tiers == ["unit"]:
            process = _process_fixtures_of(item)
            if process:
                problems.append(f"{item.nodeid}: marked unit but asks for a fixture that starts a server or a "
                                f"process ({', '.join(process)}); mark it live")
    return problems


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:  # the one place they are registered (pyproject turns on --strict-markers)
        config.addinivalue_line("markers", line)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: every collected test is checked
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("crash") is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)  # the kill matrix is slow whatever its module says
    problems = tier_problems(items)
    if problems:
        raise pytest.UsageError("tests in no tier or the wrong one:\n  " + "\n  ".join(problems))


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
@starts_process
def live(tmp_path_factory):
    """One real `jupyter lab` process shared by the integration tests. Hundreds of tests each
    start a notebook's kernel on it, so MCP's cap on the kernels it starts is off here (the
    cap is tested on servers of its own)."""
    server = LiveServer(tmp_path_factory.mktemp("live"), args=["--JupyterMCPApp.max_kernels=0"]).start()
    yield server
    server.stop()


@pytest.fixture
@starts_process
def live_factory(tmp_path):
    """Start extra `jupyter lab` processes with their own settings; all stopped at the end."""
    started: list[LiveServer] = []

    def make(**kwargs: Any) -> LiveServer:
        server = LiveServer(tmp_path / f"server{len(started)}", **kwargs)
        started.append(server)
        return server.start()

    yield make
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
@starts_process
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
@starts_process
def outside():
    """Another network namespace (another machine, as a server here sees it); skipped where one
    cannot be made."""
    problem = netns.problem()
    if problem:
        pytest.skip(problem)
    with netns.outside_namespace() as namespace:
        yield namespace
