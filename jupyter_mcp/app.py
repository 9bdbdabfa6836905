"""The Jupyter Server extension: every setting, the parts composed, started and stopped.

This is the one place that reads the environment: the variables of ``ENVIRONMENT`` are the
defaults of their settings, and any other JUPYTER_MCP_* or MCP_* variable is warned about at
start (``unread_variables``); JupyterHub's JUPYTERHUB_PUBLIC_URL and JUPYTERHUB_SERVICE_PREFIX
name the URL the start logs. Everything below gets its settings and collaborators passed in.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from jupyter_server.extension.application import ExtensionApp
from jupyter_server.utils import url_path_join
from traitlets import Bool, Dict, Float, Integer, TraitError, Unicode, default, validate

from . import ystore
from .process import ProcessMeasures
from .kernels.sessions import KERNEL_ACTIONS, Kernels
from .notebooks.activity import Activity
from .notebooks.fileids import prune_stale, running_roots
from .notebooks.presence import AgentPresence
from .notebooks.room_table import file_id_of
from .notebooks.rooms import Rooms
from .notebooks.sweeper import COLLABORATOR_EVENTS, Sweeper
from .tasks import Limits, TaskManager, load_store
from .tools.declarations import RUNS_CODE
from .tools.operations import Notebooks
from .tools.resources import CONTENTS_ACTIONS, MAX_LISTEN_STREAMS, Subscriptions
from .tools.server import build_server
from .transport.answers import choose_per_request
from .transport.handlers import MCP_PATH, MCPHandler, Readiness, SessionLimit
from .transport.tornado_asgi import Lifespan


# The environment variables this server reads: each the default of its setting.
ENVIRONMENT = ("MCP_SERVER_NAME", "MCP_ROOM_IDLE_TIMEOUT_SEC", "MCP_ROOM_SWEEP_INTERVAL_SEC",
               "JUPYTER_MCP_TASK_STORE_CLASS")
# Variables this server once read, and what says the same now.
RETIRED = {"JUPYTER_MCP_REDIS_URL": "--JupyterMCPApp.task_store_options=url=...",
           "MCP_AGENT_IDLE_SEC": "--JupyterMCPApp.agent_idle_timeout=<seconds>"}
# The project's variables that are not the server's: read by MCP clients (.mcp.json) and scripts/serve.
OTHERS = ("JUPYTER_MCP_URL", "JUPYTER_MCP_WORKSPACE", "JUPYTER_MCP_VENV")


def _env(name: str, fallback: str) -> str:
    assert name in ENVIRONMENT, f"{name} is read from the environment: list it in ENVIRONMENT"
    return os.environ.get(name) or fallback


def unread_variables(environ: Mapping[str, str]) -> list[str]:
    """One warning per JUPYTER_MCP_* or MCP_* variable this server does not read: a setting given
    in a form it no longer reads (or never did) would otherwise be ignored without a word. Names
    only, never values (a Redis URL may hold a password)."""
    lines = []
    for name in sorted(environ):
        if not name.startswith(("JUPYTER_MCP_", "MCP_")) or name in ENVIRONMENT or name in OTHERS:
            continue
        if name in RETIRED:
            lines.append(f"jupyter_mcp: ${name} is no longer read, and is ignored; use {RETIRED[name]} instead")
        else:
            lines.append(f"jupyter_mcp: ${name} means nothing to this server, and is ignored; it reads "
                         f"{', '.join('$' + known for known in ENVIRONMENT)}, and every setting is a "
                         "JupyterMCPApp option (jupyter lab --help-all)")
    return lines


class JupyterMCPApp(ExtensionApp):
    """Serves MCP (Streamable HTTP) at /mcp on the Jupyter server itself."""

    name = "jupyter_mcp"
    load_other_extensions = True

    server_name = Unicode(
        config=True,
        help="Name the MCP server advertises to clients. Default: $MCP_SERVER_NAME, else 'jupyter'.",
    )

    @default("server_name")
    def _default_server_name(self) -> str:
        return _env("MCP_SERVER_NAME", "jupyter")

    room_idle_timeout = Float(
        config=True,
        help="Seconds a room with no connected client and no MCP activity stays open before the sweeper "
        "saves and closes it. Default: $MCP_ROOM_IDLE_TIMEOUT_SEC, else 600.",
    )

    @default("room_idle_timeout")
    def _default_room_idle_timeout(self) -> float:
        return self._env_seconds("MCP_ROOM_IDLE_TIMEOUT_SEC", 600)

    room_sweep_interval = Float(
        config=True,
        help="Seconds between two runs of the idle-room sweeper. Default: $MCP_ROOM_SWEEP_INTERVAL_SEC, else 60.",
    )

    @default("room_sweep_interval")
    def _default_room_sweep_interval(self) -> float:
        return self._env_seconds("MCP_ROOM_SWEEP_INTERVAL_SEC", 60)

    agent_idle_timeout = Float(
        60.0, config=True,
        help="Seconds after its last call that an agent stops showing as a collaborator in a notebook "
        "(while its cell runs it stays). Default: 60.",
    )

    max_sessions_per_user = Integer(
        100, config=True,
        help="Most MCP sessions (handshake-era clients) one user may hold open at once; one more is refused "
        "with 429 until one is closed or expires, so one client cannot use up the server's sessions. "
        "Default: 100.",
    )

    max_listen_streams_per_user = Integer(
        32, config=True,
        help="Most subscriptions/listen streams (2026-07-28 resource subscriptions) one user may hold open at "
        f"once; one more is refused, saying so, until one ends. Below the server's {MAX_LISTEN_STREAMS} "
        f"(1 to {MAX_LISTEN_STREAMS - 1}), so one user cannot take them all. Default: 32.",
    )

    @validate("max_listen_streams_per_user")
    def _below_the_servers_listen_streams(self, proposal: Any) -> Any:
        if not 0 < proposal["value"] < MAX_LISTEN_STREAMS:
            raise TraitError(f"JupyterMCPApp.max_listen_streams_per_user must be 1 to {MAX_LISTEN_STREAMS - 1} "
                             f"(below the server's {MAX_LISTEN_STREAMS} listen streams, so that one user cannot "
                             f"take them all), not {proposal['value']!r}")
        return proposal["value"]

    kernel_idle_timeout = Float(
        3600.0, config=True,
        help="Seconds a kernel MCP started (in a session it made) may sit unused before it is shut down and "
        "its session deleted: nobody connected to it (a JupyterLab tab), nothing running, no MCP call on "
        "it. A kernel a tab is connected to, or one MCP did not start, is never stopped. Checked at every "
        "room sweep. 0: never stopped. Default: 3600.",
    )

    max_kernels = Integer(
        16, config=True,
        help="Most kernels MCP-started may run at once; a call that would start one more is refused, saying "
        "so (a notebook that has a kernel is never refused). 0: no cap. Default: 16.",
    )

    @validate("kernel_idle_timeout", "max_kernels")
    def _not_negative(self, proposal: Any) -> Any:
        if proposal["value"] < 0:
            raise TraitError(f"JupyterMCPApp.{proposal['trait'].name} must be 0 (off) or positive, "
                             f"not {proposal['value']!r}")
        return proposal["value"]

    task_store_class = Unicode(
        config=True,
        help="Where MCP tasks are kept, as module:Class, e.g. jupyter_mcp.tasks.redis_store:RedisTaskStore "
        "(shared by servers, survives restarts). Default: $JUPYTER_MCP_TASK_STORE_CLASS, else in this "
        "process. A class that cannot be loaded stops the server at start; there is no fallback.",
    )

    @default("task_store_class")
    def _default_task_store_class(self) -> str:
        return _env("JUPYTER_MCP_TASK_STORE_CLASS", "")

    task_store_options = Dict(
        config=True,
        help="Keyword arguments for the task store class, e.g. {'url': 'redis://host:6379/0'} for the Redis "
        "store (its other option: 'prefix', of its keys). An option the class does not take stops the "
        "server at start. Default: none.",
    )

    task_poll_interval = Integer(
        1000, config=True, help="Milliseconds a client should wait between two polls of a working task "
        "(pollInterval on every working task). Default: 1000.")

    task_default_ttl = Integer(
        15 * 60 * 1000, config=True, help="Milliseconds a finished task is kept when the client asked for no "
        "ttl (clients see it as defaultTtl). Default: 900000 (15 minutes).")

    task_max_ttl = Integer(
        24 * 60 * 60 * 1000, config=True, help="Longest ttl in milliseconds a client may ask for; longer "
        "requests are cut to it (clients see it as maxTtl). Default: 86400000 (24 hours).")

    max_running_tasks_per_user = Integer(
        Limits.running_per_owner, config=True,
        help="Most MCP tasks one user may have running on this server at once; one more is refused with a "
        f"clear error until one ends. Default: {Limits.running_per_owner}.")

    max_tasks_per_user = Integer(
        Limits.kept_per_owner, config=True,
        help="Most MCP tasks one user may have kept in the task store (running, or finished and within their "
        f"ttl); one more is refused with a clear error. Default: {Limits.kept_per_owner}.")

    max_task_result_bytes = Integer(
        Limits.result_bytes, config=True,
        help="Largest result (its JSON, in bytes) a task keeps; a larger one ends the task failed, saying so "
        "(what the call changed stays). The MCP Python SDK client reads no message over 1 MiB. "
        f"Default: {Limits.result_bytes} (1 MiB).")

    freeze_startup_objects = Bool(
        True, config=True,
        help="Once started, leave the objects the server started with out of every later garbage collection "
        "(gc.freeze, once per process): each full collection would walk them all on the event loop. For "
        "every extension in the process, a reference cycle among those objects is then never collected. "
        "Default: True.")

    sigint_stops_server = Bool(
        True, config=True,
        help="When Jupyter leaves SIGINT unhandled (stdin not a terminal: JupyterHub's spawner, most "
        "supervisors), make it stop the server as SIGTERM does, so every room is saved first. For every "
        "extension in the process, SIGINT then no longer raises KeyboardInterrupt. Default: True.")

    end_idle_worker_threads = Bool(
        True, config=True,
        help="At exit, tell idle anyio worker threads to end before Python waits for the process's threads "
        "(a server stopped with a JupyterLab tab open otherwise hung at exit). For every extension in the "
        "process, its idle anyio worker threads end then too. Default: True.")

    @validate("room_idle_timeout", "room_sweep_interval", "agent_idle_timeout", "task_poll_interval",
              "task_default_ttl", "task_max_ttl", "max_sessions_per_user", "max_running_tasks_per_user",
              "max_tasks_per_user", "max_task_result_bytes")
    def _positive(self, proposal: Any) -> Any:
        if proposal["value"] <= 0:
            raise TraitError(f"JupyterMCPApp.{proposal['trait'].name} must be positive, not {proposal['value']!r}")
        return proposal["value"]

    def _env_seconds(self, name: str, fallback: float) -> float:
        raw = _env(name, str(fallback))
        try:
            return float(raw)
        except ValueError:
            raise TraitError(f"${name} must be a number of seconds, not {raw!r}") from None

    # -- composing ---------------------------------------------------------------------

    def initialize_settings(self) -> None:
        for line in unread_variables(os.environ):
            self.log.warning(line)
        assert self.serverapp is not None  # extensions are initialised by their server
        root_dir = os.path.abspath(self.serverapp.root_dir)
        self._batch_room_updates()
        self.readiness = Readiness()
        self.activity = Activity()
        self.rooms = Rooms(self.serverapp, root_dir)
        self.presence = AgentPresence(self.agent_idle_timeout, busy=self.activity.busy)
        self.kernels = Kernels(self.serverapp, idle_timeout=self.kernel_idle_timeout, max_kernels=self.max_kernels,
                               logger=self.log)
        event_logger = getattr(self.serverapp, "event_logger", None)
        if event_logger is not None:  # a person's Restart ends MCP's runs on that kernel
            event_logger.add_listener(schema_id=KERNEL_ACTIONS, listener=self.kernels.on_kernel_action)
        self.sweeper = Sweeper(self.rooms, self.activity, idle_timeout=self.room_idle_timeout,
                               interval=self.room_sweep_interval, on_close=self.presence.forget_room,
                               logger=self.log, stop_idle_kernels=self.kernels.stop_idle)
        if event_logger is not None:  # a person leaving does not close a room MCP is busy in
            event_logger.add_listener(schema_id=COLLABORATOR_EVENTS, listener=self.sweeper.on_collaborator_event)
        try:
            store = load_store(self.task_store_class, **self.task_store_options)
        except Exception as exc:
            self.log.critical("jupyter_mcp: the task store %r cannot be used: %s", self.task_store_class, exc)
            raise SystemExit(1) from None
        limits = Limits(running_per_owner=self.max_running_tasks_per_user, kept_per_owner=self.max_tasks_per_user,
                        result_bytes=self.max_task_result_bytes)
        self.tasks = TaskManager(store, default_ttl_ms=self.task_default_ttl, max_ttl_ms=self.task_max_ttl,
                                 poll_interval_ms=self.task_poll_interval, limits=limits)
        notebooks = Notebooks(self.serverapp, root_dir, self.rooms, self.activity, self.presence, self.kernels)
        self.subscriptions = Subscriptions(notebooks, self.max_listen_streams_per_user)
        if event_logger is not None:  # notebooks created, renamed or deleted change the resource list
            event_logger.add_listener(schema_id=CONTENTS_ACTIONS, listener=self.subscriptions.on_contents_event)
        self.mcp = build_server(self.server_name, notebooks, self.tasks, self.subscriptions)
        self.asgi_app = self.mcp.http_app(path=MCP_PATH)
        self._lifespan = Lifespan(self.asgi_app)

        self.process_measures = ProcessMeasures(freeze_startup_objects=self.freeze_startup_objects,
                                                sigint_stops_server=self.sigint_stops_server,
                                                end_idle_worker_threads=self.end_idle_worker_threads)
        self.process_measures.at_setup(self.serverapp)

    def _batch_room_updates(self) -> None:
        """Rooms keep their updates in jupyter_mcp.ystore.BatchedYStore, unless
        YDocExtension.ystore_class is configured (naming the default store opts out).

        Set on jupyter-collaboration's app itself: Jupyter reads only the extension switches
        from a package's jupyter_server_config.d file, so no config file of ours could. It
        loads after this extension (extensions load in name order) and makes its first room
        later still, so every room gets the store. The store is told the autosave delay and the
        configuration (jupyter-collaboration makes the stores of the rooms MCP opens without it),
        and every save of a room's file writes the room's store first (``flush_before_saves``)."""
        assert self.serverapp is not None
        for app in self.serverapp.extension_manager.extension_apps.get("jupyter_server_ydoc", ()):
            if "ystore_class" not in app.config.get("YDocExtension", {}):
                app.ystore_class = ystore.BatchedYStore
            ystore.BatchedYStore.autosave_delay = app.document_save_delay
            ystore.BatchedYStore.server_config = app.config
        ystore.flush_before_saves()

    def initialize_handlers(self) -> None:
        self.handlers.append((MCP_PATH, MCPHandler, {
            "app": self.asgi_app, "readiness": self.readiness,
            "sessions": SessionLimit(self.asgi_app, self.max_sessions_per_user)}))

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        try:
            await self.rooms.start()
            prune_stale(self.rooms.file_ids, self.rooms.root_dir,
                        {file_id_of(room_id) for room_id, _ in self.rooms.document_rooms()},
                        running_roots(serverapp.runtime_dir))
            self.sweeper.start()
            self.presence.start()
            await self.tasks.start()
            await self._lifespan.start()
            choose_per_request(self.asgi_app, RUNS_CODE)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.log.error("jupyter_mcp could not start: %s", error)
            self.readiness.started(error)
            raise
        self.readiness.started()
        self.process_measures.at_start()
        self.log.info("jupyter_mcp: MCP server %r at %s", self.server_name, self.mcp_location())

    def mcp_location(self) -> str:
        """Where clients reach /mcp. Under JupyterHub that is through the hub's proxy, not this
        process's own address: the hub gives this server's public URL ($JUPYTERHUB_PUBLIC_URL,
        set when JupyterHub.public_url is) or at least its path ($JUPYTERHUB_SERVICE_PREFIX)."""
        assert self.serverapp is not None
        own = url_path_join(self.serverapp.connection_url, MCP_PATH)
        public = os.environ.get("JUPYTERHUB_PUBLIC_URL")
        if public:
            return url_path_join(public, MCP_PATH)
        prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX")
        if prefix:
            return (f"{url_path_join(prefix, MCP_PATH)} on the JupyterHub's public address (JupyterHub.public_url "
                    f"would name it here); this process answers at {own}")
        return own

    async def stop_extension(self) -> None:
        await self.tasks.stop()  # tasks still running here end "failed: server stopped"
        await self.presence.stop()
        self.subscriptions.close()  # listen streams end, saying so; rooms are no longer watched
        await self.sweeper.stop()  # saves every room MCP used, before the rooms go
        await ystore.flush_all()  # and every room's queued updates, people's rooms too
        await self._lifespan.stop()
        self.kernels.close()

