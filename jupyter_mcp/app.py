"""The Jupyter Server extension: settings, the /mcp handler, start and stop."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.application import ExtensionApp
from jupyter_server.utils import url_path_join
from mcp.server.streamable_http_manager import DEFAULT_SESSION_IDLE_TIMEOUT
from tornado import web
from traitlets import Dict, Float, Integer, Unicode, default

from .kernels import Kernels
from .rtc_adapter import Rooms
from .tasks import TaskManager, load_store
from .tornado_asgi import ASGIRequest, Lifespan

MCP_PATH = "/mcp"
AUTH_RESOURCE = "mcp"


@dataclass
class _Session:
    user: str
    last_seen: float
    in_flight: int = 0


class SessionOwners:
    """Who opened each MCP session, so that no other user can use it.

    An entry goes with the client's DELETE, or once its session has been idle (no request
    in flight) for twice the SDK's own idle timeout: the SDK has reaped it by then, and a
    client that never said goodbye must not grow this map for the life of the server.
    """

    PRUNE_EVERY_SEC = 60.0

    def __init__(self, forget_after: float = 2 * DEFAULT_SESSION_IDLE_TIMEOUT) -> None:
        self.forget_after = forget_after
        self._owners: dict[str, _Session] = {}
        self._pruned_at = time.monotonic()

    def __len__(self) -> int:
        return len(self._owners)

    def allows(self, session_id: str | None, user: str) -> bool:
        entry = self._owners.get(session_id or "")
        return entry is None or entry.user == user

    @contextmanager
    def request(self, session_id: str | None) -> Iterator[None]:
        """One request on a session (a long SSE stream included): never forgotten meanwhile."""
        entry = self._owners.get(session_id or "")
        if entry is None:
            yield
            return
        entry.last_seen, entry.in_flight = time.monotonic(), entry.in_flight + 1
        try:
            yield
        finally:
            entry.last_seen, entry.in_flight = time.monotonic(), entry.in_flight - 1

    def claim(self, session_id: str, user: str) -> None:
        """A session the SDK just opened for ``user``."""
        now = time.monotonic()
        self._owners.setdefault(session_id, _Session(user, now))
        if now - self._pruned_at >= self.PRUNE_EVERY_SEC:
            self._pruned_at = now
            stale = [sid for sid, entry in self._owners.items()
                     if not entry.in_flight and now - entry.last_seen > self.forget_after]
            for sid in stale:
                del self._owners[sid]

    def end(self, session_id: str) -> None:
        self._owners.pop(session_id, None)


class MCPHandler(APIHandler):
    """Serves GET, POST and DELETE on /mcp through the MCP Streamable HTTP app.

    Jupyter authenticates the request and its authorizer is asked about the
    ``mcp`` resource before any byte reaches MCP. A browser Origin that Jupyter's
    ``allow_origin`` settings do not allow is refused with 403 even when a token is
    sent, as the MCP spec asks of servers (DNS-rebinding protection).
    """

    auth_resource = AUTH_RESOURCE

    def initialize(self, extension: JupyterMCPApp) -> None:
        self.extension = extension
        self._asgi: ASGIRequest | None = None

    def skip_check_origin(self) -> bool:
        # Jupyter skips the Origin check for token-authenticated requests; MCP must not.
        return self.request.method == "OPTIONS"

    async def prepare(self) -> None:  # type: ignore[override]
        if not self.check_origin():
            raise web.HTTPError(403, "Origin not allowed: %s" % self.request.headers.get("Origin"))
        await super().prepare()

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self._serve()

    @web.authenticated
    @authorized
    async def post(self) -> None:
        await self._serve()

    @web.authenticated
    @authorized
    async def delete(self) -> None:
        await self._serve()

    def principal(self) -> str:
        """Who is asking, for scoping sessions and tasks.

        With Jupyter's shared server token every holder of the token is the same
        principal (Jupyter would otherwise invent a new anonymous user per request
        that carries no cookie); any other identity is the user's own name.
        """
        provider = self.identity_provider
        server_token = getattr(provider, "token", "")
        if server_token and self.token_authenticated and provider.get_token(self) == server_token:
            return "token:" + hashlib.sha256(server_token.encode()).hexdigest()[:16]
        user = self.current_user
        return getattr(user, "username", None) or str(user)

    async def _serve(self) -> None:
        username = self.principal()
        session_id = self.request.headers.get("Mcp-Session-Id")
        sessions = self.extension.session_owners
        if not sessions.allows(session_id, username):
            # Another user's session: answer as the transport does for an unknown one.
            self.set_status(404)
            self.finish({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}})
            return
        await self.extension.ready.wait()
        if self.extension.start_error:
            raise web.HTTPError(503, "jupyter_mcp failed to start: %s" % self.extension.start_error)
        self._asgi = ASGIRequest(self, MCP_PATH, {"jupyter_user": username})
        with sessions.request(session_id):
            await self._asgi.run(self.extension.asgi_app)
        for name, value in self._asgi.response_headers:
            if name == "mcp-session-id":
                sessions.claim(value, username)
        if self.request.method == "DELETE" and session_id and self.get_status() < 300:
            sessions.end(session_id)

    def on_connection_close(self) -> None:
        if self._asgi is not None:
            self._asgi.connection_closed()

    def finish(self, *args: Any, **kwargs: Any):  # type: ignore[override]
        if self._asgi is not None:
            kwargs.setdefault("set_content_type", self._headers.get("Content-Type") or "application/json")
        return super().finish(*args, **kwargs)


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
        return os.environ.get("MCP_SERVER_NAME", "jupyter")

    room_idle_timeout = Float(
        config=True,
        help="Seconds a room with no connected client and no MCP activity stays open before "
        "the sweeper saves and closes it. Default: $MCP_ROOM_IDLE_TIMEOUT_SEC, else 600.",
    )

    @default("room_idle_timeout")
    def _default_room_idle_timeout(self) -> float:
        return float(os.environ.get("MCP_ROOM_IDLE_TIMEOUT_SEC", "600"))

    room_sweep_interval = Float(
        config=True,
        help="Seconds between two runs of the idle-room sweeper. "
        "Default: $MCP_ROOM_SWEEP_INTERVAL_SEC, else 60.",
    )

    @default("room_sweep_interval")
    def _default_room_sweep_interval(self) -> float:
        return float(os.environ.get("MCP_ROOM_SWEEP_INTERVAL_SEC", "60"))

    agent_idle_timeout = Float(
        config=True,
        help="Seconds after its last call that an agent stops showing as a collaborator in a "
        "notebook. Default: $MCP_AGENT_IDLE_SEC, else 60.",
    )

    @default("agent_idle_timeout")
    def _default_agent_idle_timeout(self) -> float:
        return float(os.environ.get("MCP_AGENT_IDLE_SEC", "60"))

    task_store_class = Unicode(
        config=True,
        help="Where MCP tasks are kept, as module:Class (e.g. jupyter_mcp.tasks.redis_store:RedisTaskStore). "
        "Default: $JUPYTER_MCP_TASK_STORE_CLASS, else in this process. A class that cannot be loaded "
        "stops the server at start; there is no fallback.",
    )

    @default("task_store_class")
    def _default_task_store_class(self) -> str:
        return os.environ.get("JUPYTER_MCP_TASK_STORE_CLASS", "")

    task_store_options = Dict(
        config=True, help="Keyword arguments for the task store class (e.g. {'url': 'redis://host:6379/0'}).")

    task_poll_interval = Integer(1000, config=True, help="pollInterval (ms) advertised on every working task.")

    def initialize_settings(self) -> None:
        from .mcp_server import build_server, partial_result

        self.session_owners = SessionOwners()
        self.ready = asyncio.Event()
        self.start_error: str | None = None
        self.rooms = Rooms(self.serverapp, self.root_dir, idle_timeout=self.room_idle_timeout,
                           sweep_interval=self.room_sweep_interval, agent_idle=self.agent_idle_timeout)
        self.kernels = Kernels(self.serverapp)
        try:
            self.task_store = load_store(self.task_store_class, **self.task_store_options)
        except Exception as exc:
            self.log.critical("jupyter_mcp: the task store %r cannot be used: %s", self.task_store_class, exc)
            raise SystemExit(1) from None
        self.tasks = TaskManager(self.task_store, render_partial=partial_result,
                                 poll_interval_ms=self.task_poll_interval)
        self.mcp = build_server(self)
        self.asgi_app = self.mcp.http_app(path=MCP_PATH)
        self._lifespan = Lifespan(self.asgi_app)

    def initialize_handlers(self) -> None:
        self.handlers.append((MCP_PATH, MCPHandler, {"extension": self}))

    @property
    def root_dir(self) -> str:
        return os.path.abspath(self.serverapp.root_dir)

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        try:
            await self.rooms.start()
            await self.tasks.start()
            await self._lifespan.start()
        except Exception as exc:
            self.start_error = f"{type(exc).__name__}: {exc}"
            self.log.error("jupyter_mcp could not start: %s", self.start_error)
            raise
        finally:
            self.ready.set()
        self.log.info("jupyter_mcp: MCP server %r at %s", self.server_name, self.mcp_url)

    @property
    def mcp_url(self) -> str:
        return url_path_join(self.serverapp.connection_url, MCP_PATH)

    async def stop_extension(self) -> None:
        await self.tasks.stop()  # tasks still running here end "failed: server stopped"
        await self.rooms.stop()  # first: every edit MCP made is written before rooms go
        await self._lifespan.stop()
        self.kernels.close()
