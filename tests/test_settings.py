"""Every documented setting, given as `--JupyterMCPApp.<name>=` on the server's command line
(pytest-jupyter's jp_argv: an in-process server per test), takes effect where a client sees it."""

from __future__ import annotations

import asyncio
import time

import pytest
from traitlets import TraitError

from jupyter_mcp.app import JupyterMCPApp
from jupyter_mcp.client import Tasks, connect
from jupyter_mcp.testing import call, write_notebook
from jupyter_mcp.tasks import load_store

DOCUMENTED = {"server_name", "room_idle_timeout", "room_sweep_interval", "agent_idle_timeout", "task_store_class",
              "task_store_options", "task_poll_interval", "task_default_ttl", "task_max_ttl", "max_sessions_per_user",
              "kernel_idle_timeout", "max_kernels", "max_running_tasks_per_user", "max_tasks_per_user",
              "max_task_result_bytes"}


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


@with_argv("--JupyterMCPApp.server_name=box-jupyter")
async def test_server_name(mcp_url, jp_token, jp_argv):
    async with connect(mcp_url, jp_token) as client:
        assert client.session.server_info.name == "box-jupyter"


async def test_server_name_defaults_to_the_environment(monkeypatch, jp_environ):
    monkeypatch.setenv("MCP_SERVER_NAME", "from-env")
    assert JupyterMCPApp().server_name == "from-env"
    monkeypatch.setenv("MCP_ROOM_IDLE_TIMEOUT_SEC", "soon")
    with pytest.raises(TraitError, match="MCP_ROOM_IDLE_TIMEOUT_SEC"):
        JupyterMCPApp().room_idle_timeout  # noqa: B018


def test_settings_refuse_nonsense():
    with pytest.raises(TraitError, match="positive"):
        JupyterMCPApp(room_idle_timeout=-1)
    with pytest.raises(TraitError, match="positive"):
        JupyterMCPApp(task_max_ttl=0)
    with pytest.raises(TraitError, match="0 \\(off\\) or positive"):
        JupyterMCPApp(max_kernels=-1)
    assert JupyterMCPApp(kernel_idle_timeout=0).kernel_idle_timeout == 0  # 0: never stopped


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


def test_stores_refuse_options_they_do_not_take():
    with pytest.raises(ValueError, match="colour"):
        load_store("", colour="blue")
    with pytest.raises(ValueError, match="socket_timeout"):
        load_store("jupyter_mcp.tasks.redis_store:RedisTaskStore", url="redis://127.0.0.1:1/0", socket_timeout=1)


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
