"""Every documented setting, given as `--JupyterMCPApp.<name>=` on the server's command line
(pytest-jupyter's jp_argv: an in-process server per test), takes effect where a client sees it."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from traitlets import TraitError

from jupyter_mcp.app import JupyterMCPApp, unread_variables
from jupyter_mcp.client import Tasks, connect
from jupyter_mcp.testing import call, write_notebook
from jupyter_mcp.tasks import load_store

DOCUMENTED = {"server_name", "room_idle_timeout", "room_sweep_interval", "agent_idle_timeout", "task_store_class",
              "task_store_options", "task_poll_interval", "task_default_ttl", "task_max_ttl", "max_sessions_per_user",
              "kernel_idle_timeout", "max_kernels", "max_running_tasks_per_user", "max_tasks_per_user",
              "max_task_result_bytes", "max_listen_streams_per_user", "freeze_startup_objects", "sigint_stops_server",
              "end_idle_worker_threads"}


@pytest.mark.unit
def test_every_setting_is_a_documented_traitlet():
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    settings = {name for name, trait in JupyterMCPApp.class_traits(config=True).items()
                if trait.this_class is JupyterMCPApp}
    assert settings == DOCUMENTED
    for name in settings:
        trait = JupyterMCPApp.class_traits()[name]
        assert "Default" in trait.help, name  # the help says the default (and the unit)
        assert f"`{name}`" in readme, f"the README's settings table lacks {name}"


def with_argv(*argv):
    return pytest.mark.parametrize("jp_argv", [list(argv)])


@pytest.mark.live
@with_argv("--JupyterMCPApp.server_name=box-jupyter")
async def test_server_name(mcp_url, jp_token, jp_argv):
    async with connect(mcp_url, jp_token) as client:
        assert client.session.server_info.name == "box-jupyter"


@pytest.mark.unit
async def test_server_name_defaults_to_the_environment(monkeypatch, jp_environ):
    monkeypatch.setenv("MCP_SERVER_NAME", "from-env")
    assert JupyterMCPApp().server_name == "from-env"
    monkeypatch.setenv("MCP_ROOM_IDLE_TIMEOUT_SEC", "soon")
    with pytest.raises(TraitError, match="MCP_ROOM_IDLE_TIMEOUT_SEC"):
        JupyterMCPApp().room_idle_timeout  # noqa: B018


@pytest.mark.unit
def test_settings_refuse_nonsense():
    with pytest.raises(TraitError, match="positive"):
        JupyterMCPApp(room_idle_timeout=-1)
    with pytest.raises(TraitError, match="positive"):
        JupyterMCPApp(task_max_ttl=0)
    with pytest.raises(TraitError, match="0 \\(off\\) or positive"):
        JupyterMCPApp(max_kernels=-1)
    assert JupyterMCPApp(kernel_idle_timeout=0).kernel_idle_timeout == 0  # 0: never stopped
    for streams in (0, 256, 1000):  # one user's listen streams stay below the server's 256
        with pytest.raises(TraitError, match="max_listen_streams_per_user must be 1 to 255"):
            JupyterMCPApp(max_listen_streams_per_user=streams)
    assert JupyterMCPApp().max_listen_streams_per_user < 256


@pytest.mark.live
@with_argv("--JupyterMCPApp.room_idle_timeout=0.5", "--JupyterMCPApp.room_sweep_interval=0.2")
async def test_room_idle_timeout_and_sweep_interval(mcp_url, jp_token, jp_root_dir, jp_argv):
    write_notebook(jp_root_dir / "idle.ipynb", ["x = 1"])
    async with connect(mcp_url, jp_token) as client:
        await call(client, "notebook_get", path="idle.ipynb")
        assert [r["path"] for r in (await call(client, "room_list"))["rooms"]] == ["idle.ipynb"]
        deadline = time.monotonic() + 10
        while (await call(client, "room_list"))["rooms"]:
            assert time.monotonic() < deadline, "the idle room was never swept"
            await asyncio.sleep(0.1)


@pytest.mark.live
@with_argv("--JupyterMCPApp.agent_idle_timeout=0.5")
async def test_agent_idle_timeout(mcp_url, jp_token, jp_root_dir, jp_argv):
    write_notebook(jp_root_dir / "seen.ipynb", ["x = 1"])
    async with connect(mcp_url, jp_token) as client:
        await call(client, "notebook_get", path="seen.ipynb")
        assert [u["is_agent"] for u in (await call(client, "notebook_list_users", path="seen.ipynb"))["users"]] == [True]
        deadline = time.monotonic() + 10
        while (await call(client, "notebook_list_users", path="seen.ipynb"))["users"]:
            assert time.monotonic() < deadline, "the idle agent was never withdrawn"
            await asyncio.sleep(0.1)


@pytest.mark.live
@with_argv("--JupyterMCPApp.task_poll_interval=250", "--JupyterMCPApp.task_default_ttl=5000",
           "--JupyterMCPApp.task_max_ttl=6000")
async def test_task_poll_interval_and_ttl_bounds(mcp_url, jp_token, jp_root_dir, jp_argv):
    write_notebook(jp_root_dir / "tasks.ipynb", ["import time; time.sleep(3)"])
    async with connect(mcp_url, jp_token) as client:
        tasks = Tasks(client)
        settings = client.session.server_capabilities.experimental["io.datalayer/tasks"]
        assert (settings["defaultTtl"], settings["maxTtl"]) == (5000, 6000)
        plain = await tasks.submit("notebook_list", {})
        assert plain["ttl"] == 5000
        capped = await tasks.submit("notebook_list", {}, ttl=10_000_000)
        assert capped["ttl"] == 6000
        working = await tasks.submit("code_execute", {"path": "tasks.ipynb", "code": "import time; time.sleep(3)"})
        assert working["pollInterval"] == 250
        await tasks.wait(working["taskId"], timeout=120)


@pytest.mark.unit
def test_stores_refuse_options_they_do_not_take():
    with pytest.raises(ValueError, match="colour"):
        load_store("", colour="blue")
    with pytest.raises(ValueError, match="socket_timeout"):
        load_store("jupyter_mcp.tasks.redis_store:RedisTaskStore", url="redis://127.0.0.1:1/0", socket_timeout=1)


@pytest.mark.live
class TestTaskStore:
    @pytest.fixture
    def jp_argv(self, redis_server):
        """The Redis store on the test's real Redis, with a key prefix of its own."""
        return ["--JupyterMCPApp.task_store_class=jupyter_mcp.tasks.redis_store:RedisTaskStore",
                f"--JupyterMCPApp.task_store_options=url={redis_server.url}",
                "--JupyterMCPApp.task_store_options=prefix=settings-test:"]

    async def test_task_store_class_and_options(self, mcp_url, jp_token, redis_server):
        import redis.asyncio as aioredis

        async with connect(mcp_url, jp_token) as client:
            tasks = Tasks(client)
            task = await tasks.submit("notebook_list", {})
            await tasks.wait(task["taskId"], timeout=30)
        r = aioredis.from_url(redis_server.url, decode_responses=True)
        try:
            assert await r.exists(f"settings-test:task:{task['taskId']}")
        finally:
            await r.aclose()


@pytest.mark.unit
def test_variables_the_server_does_not_read_are_named_with_what_to_use_instead():
    lines = unread_variables({"JUPYTER_MCP_REDIS_URL": "redis://:secret@redis:6379/0", "MCP_AGENT_IDLE_SEC": "5",
                              "MCP_ROOM_IDEL_TIMEOUT_SEC": "5", "MCP_SERVER_NAME": "box", "JUPYTER_MCP_URL": "x",
                              "JUPYTER_MCP_WORKSPACE": "/w", "JUPYTER_MCP_TASK_STORE_CLASS": "", "HOME": "/root",
                              "CHARLY_MCP_SERVERS": "{}"})
    assert lines == [
        "jupyter_mcp: $JUPYTER_MCP_REDIS_URL is no longer read, and is ignored; use "
        "--JupyterMCPApp.task_store_options=url=... instead",
        "jupyter_mcp: $MCP_AGENT_IDLE_SEC is no longer read, and is ignored; use "
        "--JupyterMCPApp.agent_idle_timeout=<seconds> instead",
        "jupyter_mcp: $MCP_ROOM_IDEL_TIMEOUT_SEC means nothing to this server, and is ignored; it reads "
        "$MCP_SERVER_NAME, $MCP_ROOM_IDLE_TIMEOUT_SEC, $MCP_ROOM_SWEEP_INTERVAL_SEC, $JUPYTER_MCP_TASK_STORE_CLASS, "
        "and every setting is a JupyterMCPApp option (jupyter lab --help-all)"]
    assert unread_variables({"MCP_SERVER_NAME": "box", "PATH": "/bin"}) == []


@pytest.mark.live
def test_the_server_warns_at_start_of_each_variable_it_does_not_read(live_factory):
    """A real server started with a Redis URL in the variable it no longer reads says so, once,
    with what to use instead (and not the URL, which may hold a password); a misspelt variable is
    named too; a variable it reads, or one of the project's scripts and clients, is not."""
    server = live_factory(env={"JUPYTER_MCP_REDIS_URL": "redis://:hunter2@redis.invalid:6379/0",
                               "MCP_ROOM_IDEL_TIMEOUT_SEC": "5", "MCP_SERVER_NAME": "named",
                               "JUPYTER_MCP_WORKSPACE": "/tmp"})
    warned = [line for line in server.log().splitlines() if "jupyter_mcp: $" in line]
    named = {line.split("jupyter_mcp: $", 1)[1].split(" ", 1)[0]: line for line in warned}
    assert len(named) == len(warned), warned  # one line per variable
    assert set(named) - {"JUPYTER_MCP_REDIS_URL", "MCP_ROOM_IDEL_TIMEOUT_SEC"} <= set(os.environ)  # the runner's own
    assert "is no longer read" in named["JUPYTER_MCP_REDIS_URL"]
    assert "use --JupyterMCPApp.task_store_options=url=... instead" in named["JUPYTER_MCP_REDIS_URL"]
    assert "means nothing to this server" in named["MCP_ROOM_IDEL_TIMEOUT_SEC"]
    assert "MCP_SERVER_NAME" not in named and "JUPYTER_MCP_WORKSPACE" not in named
    assert all(line.startswith("[W ") for line in warned), warned  # warnings, in the server's log
    assert "hunter2" not in server.log()
