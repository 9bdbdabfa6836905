"""What the kernel layer keeps: our clients of the kernels (made ready, closed when their kernel
is gone), the kernels MCP started, and the locks and restart counts every part reads."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from jupyter_core.utils import ensure_async

from ..errors import NotebookError
from .clients import is_remote, kernel_client

log = logging.getLogger(__name__)

READY_TIMEOUT_SEC = 60.0  # a kernel that does not answer by then is broken


class KernelDied(NotebookError):
    """The kernel died while running the code."""


class NotStarted(Exception):
    """The call's time ran out before its code could be sent (nothing was run)."""


@dataclass
class Started:
    """A kernel MCP started: the notebook and the session it made for it, and when MCP last used it."""

    path: str
    session_id: str
    used: float  # time.monotonic()


class KernelState:
    """The state the sessions, the run loop and the reaper share, and our ready clients."""

    def __init__(self, serverapp: Any, *, idle_timeout: float = 0, max_kernels: int = 0,
                 logger: logging.Logger | None = None) -> None:
        self.serverapp = serverapp
        self.idle_timeout = idle_timeout
        self.max_kernels = max_kernels
        self.log = logger or log  # the server's log, so that its lines reach the server's output
        self._clients: dict[str, Any] = {}
        self._by_path: dict[str, str] = {}
        self._started: dict[str, Started] = {}  # kernel id -> what MCP started
        self._starting = 0  # sessions being made right now: counted against max_kernels
        self._run_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._session_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._restarts: defaultdict[str, int] = defaultdict(int)  # kernel id -> restarts seen: ends its runs
        self._client_restarts: dict[str, int] = {}  # kernel id -> restarts seen when our client was made

    @property
    def km(self) -> Any:
        return self.serverapp.kernel_manager

    def _touch(self, kernel_id: str) -> None:
        if kernel_id in self._started:
            self._started[kernel_id].used = time.monotonic()

    async def _client(self, kernel_id: str, timeout: float = READY_TIMEOUT_SEC) -> Any:
        """Our client of the kernel, ready; ``NotStarted`` if it is not ready within ``timeout``
        (which is shorter than the time a kernel gets to answer at all)."""
        client = self._clients.get(kernel_id)
        if client is not None and (getattr(client, "closed", False)  # a gateway's websocket that closed
                                   or self._client_restarts.get(kernel_id) != self._restarts[kernel_id]):
            self.forget(kernel_id)
            client = None
        if client is None:
            try:
                client = await self._ready_client(kernel_id, time.monotonic() + min(timeout, READY_TIMEOUT_SEC))
            except RuntimeError as exc:
                if timeout < READY_TIMEOUT_SEC:
                    raise NotStarted(str(exc)) from None
                raise KernelDied(f"the kernel is not responding: {exc}") from None
            self._clients[kernel_id] = client
            self._client_restarts[kernel_id] = self._restarts[kernel_id]
        return client

    async def _ready_client(self, kernel_id: str, deadline: float) -> Any:
        """A new client of the kernel, once it answers. A kernel can die while it starts (its ports are
        picked before it binds them, and another process may take one meanwhile); its nanny (jupyter_client's
        KernelRestarter) then starts it again on new ports, so that is waited for, up to ``deadline``."""
        while True:
            client = kernel_client(self.km.get_kernel(kernel_id))
            client.allow_stdin = False
            try:
                await ensure_async(client.start_channels())
            except Exception as exc:  # a gateway that does not answer
                raise KernelDied(f"could not connect to the notebook's kernel: {type(exc).__name__}: {exc}; "
                                 "this code was not run") from None
            try:
                await client.wait_for_ready(timeout=max(0.1, deadline - time.monotonic()))
                return client
            except asyncio.CancelledError:
                client.stop_channels()
                raise
            except RuntimeError:
                client.stop_channels()
                if not await self._restarted_by_nanny(kernel_id, deadline):
                    raise

    async def _restarted_by_nanny(self, kernel_id: str, deadline: float) -> bool:
        """Whether a local kernel that died is alive again before ``deadline``: not when it is
        shut down, or its nanny gave up (Jupyter Server then drops it)."""
        kernel = self.km.get_kernel(kernel_id) if kernel_id in self.km else None
        if kernel is None or is_remote(kernel) or getattr(kernel, "shutting_down", False):
            return False
        while time.monotonic() < deadline and kernel_id in self.km:
            if await kernel.is_alive():
                return True
            await asyncio.sleep(0.2)
        return False

    def forget(self, kernel_id: str) -> None:
        client = self._clients.pop(kernel_id, None)
        self._client_restarts.pop(kernel_id, None)
        if client is not None:
            client.stop_channels()

    def _drop_gone(self) -> None:
        """Close our clients of kernels that are gone (shut down from JupyterLab, culled):
        each holds sockets and threads that would otherwise stay open for ever."""
        for kernel_id in [k for k in self._clients if k not in self.km]:
            self.forget(kernel_id)
            self._run_locks.pop(kernel_id, None)
        for path in [p for p, k in self._by_path.items() if k not in self.km]:
            del self._by_path[path]
        for kernel_id in [k for k in self._started if k not in self.km]:
            del self._started[kernel_id]
        for kernel_id in [k for k in self._restarts if k not in self.km]:
            del self._restarts[kernel_id]

    def close(self) -> None:
        """At shutdown: every kernel client closed."""
        for kernel_id in list(self._clients):
            self.forget(kernel_id)

    async def _alive(self, kernel_id: str) -> bool:
        if kernel_id not in self.km:
            return False
        kernel = self.km.get_kernel(kernel_id)
        if not is_remote(kernel):
            return bool(await kernel.is_alive())
        try:  # a gateway kernel's is_alive says yes even when the gateway no longer has it
            return await kernel.refresh_model() is not None
        except Exception as exc:
            raise KernelDied(f"the kernel's gateway does not answer: {exc}") from None

    async def _forget_gone_remote(self) -> None:
        """Kernels the gateway no longer has (it restarted, or culled them) are dropped by the kernel
        manager's listing, and then by us: the next call starts a fresh one."""
        await ensure_async(self.km.list_kernels())
        self._drop_gone()

    async def interrupt(self, kernel_id: str) -> None:
        await self.km.interrupt_kernel(kernel_id)

    def restarted(self, kernel_id: str) -> None:
        """The kernel was (or is being) restarted, by anyone: every run on it ends (its variables, and
        the code it ran, are gone), and the next run connects a new client."""
        self._restarts[kernel_id] += 1
