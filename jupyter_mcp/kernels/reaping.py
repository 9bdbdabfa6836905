"""Stopping the kernels MCP started once nobody needs them: one nobody is connected to, that
runs nothing and that nobody used for ``idle_timeout`` is stopped with its session
(``stop_idle``, called by the sweeper). A kernel a person's tab is connected to, or one MCP
did not start, is never stopped."""

from __future__ import annotations

import time
from datetime import datetime, timezone

from jupyter_core.utils import ensure_async

from .clients import is_remote
from .state import KernelState, Started


def stoppable(*, connections: int, state: str, running: bool, idle_seconds: float, timeout: float) -> bool:
    """Whether an MCP-started kernel may be stopped: nobody connected (a JupyterLab tab holds
    a kernel websocket), nothing running on it (busy, starting, or an MCP run), and idle for
    ``timeout`` seconds (0: never stopped)."""
    return (timeout > 0 and connections == 0 and not running and state not in ("busy", "starting")
            and idle_seconds >= timeout)


class Reaping(KernelState):
    """``stop_idle``: the kernels MCP started and nobody needs, stopped with their sessions."""

    async def stop_idle(self) -> list[str]:
        """Stop every kernel MCP started that ``stoppable`` allows, deleting the session MCP made
        for it (JupyterLab opening the notebook later makes a fresh one); the notebooks' paths."""
        self._drop_gone()
        stopped = []
        for kernel_id, started in list(self._started.items()):
            if kernel_id not in self.km or kernel_id not in self._started:
                continue
            connections = await self._others_connected(kernel_id)
            if kernel_id not in self.km or kernel_id not in self._started:  # gone while the gateway answered
                continue
            run_lock, session_lock = self._run_locks[kernel_id], self._session_locks[started.path]
            idle = self._idle_seconds(kernel_id, started)
            if not stoppable(connections=connections,
                             state=getattr(self.km.get_kernel(kernel_id), "execution_state", ""),
                             running=run_lock.locked() or session_lock.locked(), idle_seconds=idle,
                             timeout=self.idle_timeout):
                continue
            # Both locks are free, so taking them does not wait: a run or a start that comes
            # meanwhile waits for the stop, then finds no kernel and starts a fresh one.
            async with session_lock, run_lock:
                await self._stop(kernel_id, started)
            self.log.info("jupyter_mcp: stopped the kernel MCP started for %s (idle %.0fs, nobody connected); "
                          "its session is deleted", started.path, idle)
            stopped.append(started.path)
        return stopped

    async def _others_connected(self, kernel_id: str) -> int:
        """Websockets connected to the kernel other than MCP's own client: JupyterLab tabs. (A
        gateway counts every websocket to the kernel, MCP's among them, and tells only when asked.)"""
        kernel = self.km.get_kernel(kernel_id)
        if not is_remote(kernel):
            return (await ensure_async(self.km.kernel_model(kernel_id)) or {}).get("connections", 0)
        try:
            model = await kernel.refresh_model() or {}
        except Exception as exc:  # the gateway does not answer: a kernel nobody can see is not stopped
            self.log.warning("jupyter_mcp: could not ask the gateway about kernel %s (%s); not stopping it",
                             kernel_id, exc)
            return 1
        return model.get("connections", 0) - (1 if kernel_id in self._clients else 0)

    def _idle_seconds(self, kernel_id: str, started: Started) -> float:
        """Since MCP's last use or the kernel's last activity (a person's run), whichever is later."""
        idle = time.monotonic() - started.used
        last = getattr(self.km.get_kernel(kernel_id), "last_activity", None)
        if isinstance(last, datetime):
            last = last if last.tzinfo else last.replace(tzinfo=timezone.utc)
            idle = min(idle, (datetime.now(timezone.utc) - last).total_seconds())
        return idle

    async def _stop(self, kernel_id: str, started: Started) -> None:
        del self._started[kernel_id]
        if self._by_path.get(started.path) == kernel_id:
            del self._by_path[started.path]
        self.forget(kernel_id)
        sm = self.serverapp.session_manager
        try:
            session = await sm.get_session(session_id=started.session_id)
        except Exception:  # the session is gone (deleted from the UI): only the kernel is left
            session = None
        if session is not None and (session.get("kernel") or {}).get("id") == kernel_id:
            await sm.delete_session(started.session_id)  # shuts the kernel down too
        elif kernel_id in self.km:
            await self.km.shutdown_kernel(kernel_id)
