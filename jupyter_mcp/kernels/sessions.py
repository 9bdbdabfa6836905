"""Kernels: the notebook's own session kernel, and the ONE loop that waits on it.

The kernel of a notebook is the kernel of its Jupyter session, the one the
person's JupyterLab tab uses; if there is none, we create the session for that
path, so the UI joins the same kernel when it opens the notebook. ``Kernels.run``
is the only place that sends code and waits for the kernel: timeouts, interrupts and
dead kernels are handled there once for every tool that executes. It knows nothing of
documents or tasks: its caller passes hooks (``on_start`` gets the way to interrupt this
run, ``on_event`` each output as it arrives).

The kernels MCP started itself (in a session it made) are kept track of: at most
``max_kernels`` run at once, and one that nobody is connected to, that runs nothing and
that nobody used for ``idle_timeout`` is stopped with its session (``stop_idle``, called by
the sweeper), so agents that move on leave no kernels holding memory for ever. A kernel a
person's tab is connected to, or one MCP did not start, is never stopped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import re
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from jupyter_core.utils import ensure_async

from ..errors import NotebookError, logs_its_error
from .clients import ConnectionClosed, is_remote, kernel_client

log = logging.getLogger(__name__)

OutputEvent = dict[str, Any]  # {"kind": "output" | "stream" | "clear" | "update", ...}
#: Called with each event and the whole list of outputs so far (after the event).
OnEvent = Callable[[OutputEvent, list[dict[str, Any]]], Awaitable[None]]
#: Called once the run holds its kernel, just before the code is sent, with the run's interrupt.
OnStart = Callable[[Callable[[], Awaitable[None]]], Awaitable[None]]
#: How a run ended: "aborted" is the kernel refusing a request right after an earlier one failed.
RunStatus = Literal["ok", "error", "timeout", "interrupted", "aborted"]

IDLE_CHECK_SEC = 1.0  # how often a silent kernel is checked for being alive
INTERRUPT_GRACE_SEC = 5.0  # how long to wait for the kernel to settle after an interrupt
READY_TIMEOUT_SEC = 60.0  # a kernel that does not answer by then is broken
#: Jupyter Server's events for kernel starts, restarts, interrupts and shutdowns.
KERNEL_ACTIONS = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"

OnInput = Callable[[str, bool], Awaitable[str]]  # (prompt, password) -> the line to send; raises Refused


class Refused(Exception):
    """The code gets no answer; the message says why (the run is interrupted)."""


class KernelDied(NotebookError):
    """The kernel died while running the code."""


class NotStarted(Exception):
    """The call's time ran out before its code could be sent (nothing was run)."""


@dataclass
class Execution:
    """What one execution produced."""

    status: RunStatus = "ok"
    execution_count: int | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    message: str | None = None  # a note for the agent (timeout, interrupt)


@dataclass
class Started:
    """A kernel MCP started: the notebook and the session it made for it, and when MCP last used it."""

    path: str
    session_id: str
    used: float  # time.monotonic()


def stoppable(*, connections: int, state: str, running: bool, idle_seconds: float, timeout: float) -> bool:
    """Whether an MCP-started kernel may be stopped: nobody connected (a JupyterLab tab holds
    a kernel websocket), nothing running on it (busy, starting, or an MCP run), and idle for
    ``timeout`` seconds (0: never stopped)."""
    return (timeout > 0 and connections == 0 and not running and state not in ("busy", "starting")
            and idle_seconds >= timeout)


def session_path(path: str) -> str:
    """A session's notebook path without a drive prefix (JupyterLab's 'RTC:foo.ipynb')."""
    drive, sep, rest = path.partition(":")
    return rest if sep and "/" not in drive else path


class Kernels:
    """Finds (or starts) a notebook's kernel and runs code in it."""

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

    async def for_notebook(self, path: str, kernel_name: str | None = None, *, timeout: float | None = None) -> str:
        """The kernel id of the notebook's session, creating the session if there is none.

        With ``timeout``, waiting longer raises ``NotStarted``; the kernel goes on starting
        for the next call (a half-started session would be worse than a slow one)."""
        self._drop_gone()
        known = self._by_path.get(path)  # _drop_gone just removed it if its kernel is gone
        if known is not None:
            self._touch(known)
            return known
        starting = asyncio.ensure_future(self._start_for(path, kernel_name))
        starting.add_done_callback(logs_its_error("starting a kernel"))
        try:
            return await asyncio.wait_for(asyncio.shield(starting), timeout)
        except asyncio.TimeoutError:
            raise NotStarted(f"the notebook's kernel did not start within {timeout:g}s") from None

    async def _start_for(self, path: str, kernel_name: str | None) -> str:
        async with self._session_locks[path]:
            self._by_path[path] = kernel_id = await self._session_kernel(path, kernel_name)
            self._touch(kernel_id)
            return kernel_id

    def _touch(self, kernel_id: str) -> None:
        if kernel_id in self._started:
            self._started[kernel_id].used = time.monotonic()

    def _refuse_over_cap(self, path: str) -> None:
        """One more kernel would pass ``max_kernels``: refused, before anything starts."""
        running = len(self._started) + self._starting
        if self.max_kernels and running >= self.max_kernels:
            held = sorted(s.path for s in self._started.values())
            raise NotebookError(
                f"not starting a kernel for {path!r}: MCP already runs {running} kernel(s) it started, the most "
                f"allowed (JupyterMCPApp.max_kernels = {self.max_kernels}); notebooks holding them: "
                f"{', '.join(held) or '(still starting)'}. Run the code in one of those notebooks, shut one of "
                "their kernels down (JupyterLab's Running panel), or raise JupyterMCPApp.max_kernels. "
                "Nothing was started.")

    async def has_session(self, path: str) -> bool:
        """Whether the notebook has a session with a live kernel (else running code makes one)."""
        self._drop_gone()
        return path in self._by_path or await self._existing_kernel(path) is not None

    async def _session_of(self, path: str) -> dict[str, Any] | None:
        """The notebook's session with a live kernel, if it has one."""
        for session in await self.serverapp.session_manager.list_sessions():
            if (session_path(session.get("path") or "") == path and session.get("kernel")
                    and session["kernel"]["id"] in self.km):
                return session
        return None

    async def _existing_kernel(self, path: str) -> str | None:
        session = await self._session_of(path)
        return session["kernel"]["id"] if session is not None else None

    async def _session_kernel(self, path: str, kernel_name: str | None) -> str:
        """The kernel of the session whose path is the notebook's, or of a new session."""
        existing = await self._existing_kernel(path)
        if existing is not None:
            return existing
        specs = await self.specs()
        return await self._new_session(path, kernel_name if kernel_name in specs else self.km.default_kernel_name)

    async def _new_session(self, path: str, kernel_name: str) -> str:
        """A session MCP makes for the notebook, with a new kernel of ``kernel_name``: its kernel id."""
        self._refuse_over_cap(path)
        self._starting += 1
        try:
            session = await self.serverapp.session_manager.create_session(
                path=path, name=os.path.basename(path), type="notebook", kernel_name=kernel_name)
        except Exception as exc:
            raise NotebookError(f"could not start a {kernel_name!r} kernel for {path!r}: {exc}") from None
        finally:
            self._starting -= 1
        kernel_id = session["kernel"]["id"]
        self._started[kernel_id] = Started(path, session["id"], time.monotonic())
        return kernel_id

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

    # -- a notebook's kernel, as the agent manages it ---------------------------------------

    async def kernel_of(self, path: str) -> str:
        """The kernel of the notebook's session; refused if it has none (nothing is started)."""
        self._drop_gone()
        kernel_id = self._by_path.get(path) or await self._existing_kernel(path)
        if kernel_id is None:
            raise NotebookError(f"{path!r} has no running kernel (no session): running a cell starts one, and "
                                "kernel_select starts the one you name")
        return kernel_id

    def model(self, kernel_id: str) -> dict[str, Any]:
        kernel = self.km.get_kernel(kernel_id)
        return {"kernel_id": kernel_id, "kernel_name": getattr(kernel, "kernel_name", None),
                "execution_state": getattr(kernel, "execution_state", None)}

    def restarted(self, kernel_id: str) -> None:
        """The kernel was (or is being) restarted, by anyone: every run on it ends (its variables, and
        the code it ran, are gone), and the next run connects a new client."""
        self._restarts[kernel_id] += 1

    async def on_kernel_action(self, logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        """Jupyter's kernel action events: a restart by anyone (a person's Restart) ends our runs on it."""
        if data.get("action") == "restart" and data.get("kernel_id"):
            self.restarted(data["kernel_id"])

    async def restart(self, kernel_id: str) -> None:
        self.restarted(kernel_id)  # first: a run waiting on the old process ends as restarted
        try:
            await self.km.restart_kernel(kernel_id, now=True)
        except Exception as exc:
            raise KernelDied(f"the kernel could not be restarted: {type(exc).__name__}: {exc}") from None
        self.restarted(kernel_id)  # and a client made while it restarted is made again

    async def specs(self) -> dict[str, Any]:
        """The kernelspecs this server (or its gateway) can start, by name."""
        return await ensure_async(self.serverapp.kernel_spec_manager.get_all_specs())

    async def listing(self) -> dict[str, Any]:
        """Kernelspecs, and running kernels with the notebooks whose sessions use them."""
        specs = await self.specs()
        notebooks: defaultdict[str, list[str]] = defaultdict(list)
        for session in await self.serverapp.session_manager.list_sessions():
            if session.get("kernel"):
                notebooks[session["kernel"]["id"]].append(session_path(session.get("path") or ""))
        kernels = []
        for model in await ensure_async(self.km.list_kernels()):
            kernels.append({"kernel_id": model["id"], "kernel_name": model.get("name"),
                            "execution_state": model.get("execution_state"),
                            "last_activity": str(model["last_activity"]) if model.get("last_activity") else None,
                            "connections": model.get("connections", 0),
                            "notebooks": sorted(notebooks.get(model["id"], [])),
                            "started_by_mcp": model["id"] in self._started})
        return {"default_kernel_name": self.km.default_kernel_name,
                "kernelspecs": [{"name": name, "display_name": (spec.get("spec") or {}).get("display_name", name),
                                 "language": (spec.get("spec") or {}).get("language")}
                                for name, spec in sorted(specs.items())],
                "kernels": sorted(kernels, key=lambda k: (k["notebooks"], k["kernel_id"]))}

    async def select(self, path: str, kernel_name: str) -> tuple[str, dict[str, Any]]:
        """Give the notebook's session a new kernel of ``kernel_name`` (as JupyterLab's Select
        Kernel does: the session stays, a person's tab follows it to the new kernel, the old kernel
        is shut down), or a new session if it has none. The new kernel id, and its spec."""
        specs = await self.specs()
        if kernel_name not in specs:
            raise NotebookError(f"no kernelspec named {kernel_name!r}; this server has: {', '.join(sorted(specs))}")
        async with self._session_locks[path]:
            sm = self.serverapp.session_manager
            session = await self._session_of(path)
            if session is None:
                kernel_id = await self._new_session(path, kernel_name)
            else:
                old = session["kernel"]["id"]
                try:
                    kernel_id = await sm.start_kernel_for_session(session["id"], path=session["path"],
                                                                  name=session["name"], type=session["type"],
                                                                  kernel_name=kernel_name)
                except Exception as exc:
                    raise NotebookError(f"could not start a {kernel_name!r} kernel for {path!r}: {exc}; the "
                                        "notebook keeps its kernel") from None
                await sm.update_session(session["id"], kernel_id=kernel_id)
                started = self._started.pop(old, None)
                if started is not None:
                    self._started[kernel_id] = Started(path, started.session_id, time.monotonic())
                self.restarted(old)  # a run on the old kernel ends
                await ensure_async(self.km.shutdown_kernel(old))
            self._by_path[path] = kernel_id
        return kernel_id, (specs[kernel_name].get("spec") or {})

    async def run_for(self, path: str, kernel_name: str | None, code: str, *, timeout: float,
                      on_start: OnStart | None = None, on_event: OnEvent | None = None,
                      stop_on_error: bool = True, on_input: OnInput | None = None) -> Execution:
        """Run ``code`` in the notebook's kernel (started if need be): ``run``, with the time
        the kernel takes to start counted against the call's ``timeout``."""
        deadline = time.monotonic() + timeout
        try:
            kernel_id = await self.for_notebook(path, kernel_name, timeout=timeout)
        except NotStarted as exc:
            return Execution(status="timeout", message=f"timed out after {timeout:g}s: {exc}; this code was not run")
        return await self.run(kernel_id, code, timeout=timeout, deadline=deadline, on_start=on_start,
                              on_event=on_event, stop_on_error=stop_on_error, on_input=on_input)

    async def run(self, kernel_id: str, code: str, *, timeout: float, deadline: float | None = None,
                  on_start: OnStart | None = None, on_event: OnEvent | None = None,
                  stop_on_error: bool = True, on_input: OnInput | None = None) -> Execution:
        """Run ``code`` and wait for it: the one loop that waits on a kernel.

        Every output message becomes an event for ``on_event`` as it arrives (so a
        document and a client can show it live) and is collected in the result. Every wait
        counts against ``timeout`` (which ends at ``deadline``, if the call began earlier):
        behind another run on the kernel, for the kernel to be ready, for the code. When it
        runs out before the code is sent, nothing is run; after, the kernel is interrupted
        and the outputs so far are returned. ``stop_on_error``: whether an error makes the
        kernel abort the requests queued behind it (a person's queued cells). ``on_input``: how
        the code's input() is answered; without it the kernel is told there is no stdin.
        """
        deadline = time.monotonic() + timeout if deadline is None else deadline
        lock = self._run_locks[kernel_id]
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                await lock.acquire()
        except TimeoutError:
            return Execution(status="timeout", message=f"timed out after {timeout:g}s waiting behind another "
                                                       "run on this kernel; this code was not run")
        try:
            return await self._run_locked(kernel_id, code, timeout, deadline, on_start, on_event, stop_on_error,
                                          on_input)
        finally:
            self._touch(kernel_id)
            lock.release()

    async def _run_locked(self, kernel_id: str, code: str, timeout: float, deadline: float,
                          on_start: OnStart | None, on_event: OnEvent | None, stop_on_error: bool,
                          on_input: OnInput | None) -> Execution:
        if kernel_id not in self.km:
            raise KernelDied("the notebook's kernel was shut down before this code was sent (it was not run); "
                             "the next call starts a fresh kernel")
        if not await self._alive(kernel_id):
            self.forget(kernel_id)
            if is_remote(self.km.get_kernel(kernel_id)):
                await self._forget_gone_remote()
                raise KernelDied("the notebook's kernel is gone from its gateway (the gateway restarted, or culled "
                                 "it); this code was not run; the next call starts a fresh kernel")
            await self.km.restart_kernel(kernel_id, now=True)
        try:
            client = await self._client(kernel_id, timeout=max(0.1, deadline - time.monotonic()))
        except NotStarted:
            return Execution(status="timeout", message=f"timed out after {timeout:g}s: the kernel was not "
                                                       "ready by then; this code was not run")
        result = Execution()
        collector = _Collector(result, on_event)
        restarts = self._restarts[kernel_id]
        if on_start is not None:
            await on_start(lambda: self.interrupt(kernel_id))
        msg_id = client.execute(code, allow_stdin=on_input is not None, stop_on_error=stop_on_error)
        answering = (asyncio.create_task(self._answer_input(kernel_id, client, msg_id, on_input, collector),
                                         name=f"mcp-stdin-{msg_id}") if on_input is not None else None)
        try:
            settled = await self._wait(kernel_id, client, msg_id, result, collector, timeout, deadline, restarts)
        except asyncio.CancelledError:
            # Cancelled (a task's cancel interrupts first): let the kernel settle before
            # the next run, or it aborts requests that arrive right after the error.
            await self._settle(client, msg_id)
            raise
        finally:
            if answering is not None:  # the code ended: a question still open is withdrawn
                answering.cancel()
                await asyncio.gather(answering, return_exceptions=True)
                if not answering.cancelled() and answering.exception() is not None:
                    self.log.error("jupyter_mcp: answering the code's input requests failed", exc_info=answering.exception())
        reply = await self._reply(client, msg_id) if settled else None
        content = reply.get("content", {}) if reply else {}
        count = content.get("execution_count")
        if isinstance(count, (int, float)):
            result.execution_count = int(count)
        if result.status == "ok" and content.get("status") in ("error", "aborted"):
            result.status = content["status"]
        if result.status == "ok" and reply is None and any(o.get("output_type") == "error" for o in result.outputs):
            result.status = "error"  # no reply (the kernel went down after the error): its outputs tell
        if result.status == "aborted":
            result.message = "the kernel aborted this execution: an earlier one failed just before it"
        if result.status == "error" and any(o.get("ename") == "KeyboardInterrupt" for o in result.outputs):
            result.status = "interrupted"
        return result

    async def _wait(self, kernel_id: str, client: Any, msg_id: str, result: Execution, collector: _Collector,
                    timeout: float, deadline: float, restarts: int) -> bool:
        """Collect the execution's output until it is idle (True), or give up after the
        call's ``timeout`` (its ``deadline``) once the kernel ignored the interrupt (False).
        A restart of the kernel (``restarts`` counted when the code was sent) ends it."""
        interrupted_at: float | None = None
        while True:
            if self._restarts[kernel_id] != restarts:
                raise KernelDied("the kernel was restarted while this code ran (kernel_restart, or a person's "
                                 "Restart): its variables are gone; outputs so far are kept")
            now = time.monotonic()
            if interrupted_at is None and now >= deadline:
                result.status = "timeout"
                result.message = f"timed out after {timeout:g}s; the kernel was interrupted"
                interrupted_at = now
                await self.interrupt(kernel_id)
            if interrupted_at is not None and now - interrupted_at > INTERRUPT_GRACE_SEC:
                result.message = (f"timed out after {timeout:g}s; the kernel did not stop after an "
                                  "interrupt and may still be busy")
                return False
            limit = deadline if interrupted_at is None else interrupted_at + INTERRUPT_GRACE_SEC
            try:
                msg = await client.get_iopub_msg(timeout=max(0.01, min(IDLE_CHECK_SEC, limit - now)))
            except ConnectionClosed:
                self.forget(kernel_id)
                raise KernelDied("the connection to the kernel's gateway closed while this code ran; outputs so "
                                 "far are kept; the next call connects again") from None
            except queue.Empty:
                if self._restarts[kernel_id] != restarts:
                    continue  # said above
                if not await self._alive(kernel_id):
                    self.forget(kernel_id)
                    raise KernelDied("the kernel died while running this code (out of memory, or killed); "
                                     "outputs so far are kept; the next call starts a fresh kernel") from None
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue  # another client's execution (the UI's) on the same kernel
            if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                return True
            await collector.handle(msg)

    async def _answer_input(self, kernel_id: str, client: Any, msg_id: str, on_input: OnInput,
                            collector: _Collector) -> None:
        """Answer the execution's input requests (the kernel's stdin channel) until cancelled.
        The prompt and the line typed are shown in the outputs as a terminal shows them (a
        password is not); a refusal is said in the result and interrupts the kernel."""
        while True:
            try:
                msg = await client.get_stdin_msg(timeout=IDLE_CHECK_SEC)
            except queue.Empty:
                continue
            except ConnectionClosed:
                return
            if msg.get("msg_type") != "input_request" or msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            prompt, password = str(msg["content"].get("prompt", "")), bool(msg["content"].get("password"))
            if prompt:
                await collector.handle({"msg_type": "stream", "content": {"name": "stdout", "text": prompt}})
            try:
                line = await on_input(prompt, password)
            except Refused as exc:
                collector.result.message = str(exc)
                await self.interrupt(kernel_id)
                continue
            client.input(line)
            if not password:
                await collector.handle({"msg_type": "stream", "content": {"name": "stdout", "text": line + "\n"}})

    async def _settle(self, client: Any, msg_id: str) -> None:
        """Read until the execution ``msg_id`` is idle (bounded), discarding its output."""
        deadline = time.monotonic() + INTERRUPT_GRACE_SEC
        while time.monotonic() < deadline:
            try:
                msg = await client.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
            except (queue.Empty, ConnectionClosed):
                return
            if (msg.get("parent_header", {}).get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"].get("execution_state") == "idle"):
                return

    async def _reply(self, client: Any, msg_id: str) -> dict[str, Any] | None:
        """The shell reply to ``msg_id`` (it arrives around the idle status)."""
        deadline = time.monotonic() + INTERRUPT_GRACE_SEC
        while time.monotonic() < deadline:
            try:
                msg = await client.get_shell_msg(timeout=max(0.01, deadline - time.monotonic()))
            except (queue.Empty, ConnectionClosed):
                return None
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                return msg
        return None


class _Collector:
    """Turns iopub messages into nbformat outputs and document events, as JupyterLab does."""

    def __init__(self, result: Execution, on_event: OnEvent | None) -> None:
        self.result = result
        self.on_event = on_event
        self.clear_on_next = False
        self.displays: defaultdict[str, list[int]] = defaultdict(list)

    async def emit(self, event: OutputEvent) -> None:
        if self.on_event is not None:
            await self.on_event(event, self.result.outputs)

    async def handle(self, msg: dict[str, Any]) -> None:
        """Apply one message to the outputs."""
        kind = msg["msg_type"]
        content = msg["content"]
        outputs = self.result.outputs
        if kind == "execute_input":
            count = content.get("execution_count")
            if count is not None:
                self.result.execution_count = int(count)
            return
        if kind == "clear_output":
            if content.get("wait"):
                self.clear_on_next = True
                return
            await self._clear()
        elif kind == "update_display_data":
            indexes = self.displays.get(_display_id(content) or "", [])
            if not indexes:
                return
            update = _output_from_msg("display_data", content)
            for i in indexes:
                outputs[i] = {**outputs[i], "data": update["data"], "metadata": update["metadata"]}
                await self.emit({"kind": "update", "index": i, "output": outputs[i]})
        elif kind in ("stream", "display_data", "execute_result", "error"):
            await self._append(kind, content)

    async def _append(self, kind: str, content: dict[str, Any]) -> None:
        """A new output (or more text for the last stream), after a pending clear_output(wait=True)."""
        outputs = self.result.outputs
        if self.clear_on_next:
            await self._clear()
        output = _output_from_msg(kind, content)
        if kind == "stream" and outputs and outputs[-1].get("output_type") == "stream" \
                and outputs[-1].get("name") == output.get("name"):
            outputs[-1] = {**outputs[-1], "text": outputs[-1]["text"] + output["text"]}
            await self.emit({"kind": "stream", "index": len(outputs) - 1, "text": output["text"]})
            return
        outputs.append(output)
        display_id = _display_id(content)
        if display_id:
            self.displays[display_id].append(len(outputs) - 1)
        await self.emit({"kind": "output", "index": len(outputs) - 1, "output": output})

    async def _clear(self) -> None:
        self.clear_on_next = False
        self.result.outputs.clear()
        self.displays.clear()
        await self.emit({"kind": "clear"})


def _display_id(content: dict[str, Any]) -> str | None:
    """The display id a message is tracked by: only a string is one (anything else a kernel put
    there, a list say, is not used for display tracking; the output is still stored)."""
    transient = content.get("transient")
    display_id = transient.get("display_id") if isinstance(transient, dict) else None
    return display_id if isinstance(display_id, str) else None


#: Mime types whose value may be any JSON (nbformat v4's schema); every other one holds text.
_JSON_MIME = re.compile(r"^application/(.*\+)?json$")


def _text(value: Any) -> str:
    """A value that must be a string, as one: itself, or its JSON text (what the kernel sent)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # not JSON after all (a fake kernel): its repr
        return repr(value)


def _multiline(value: Any) -> str | list[str]:
    """An nbformat multiline string: a string, or a list of strings (each item as text)."""
    if isinstance(value, list):
        return [_text(v) for v in value]
    return _text(value)


def _mimebundle(value: Any) -> dict[str, Any]:
    """A mime bundle that nbformat accepts: JSON mime types keep any JSON, every other value is
    text (a number sent as ``text/plain`` becomes its JSON text, ``5`` → ``"5"``)."""
    if not isinstance(value, dict):
        return {}
    return {str(mime): data if _JSON_MIME.match(str(mime)) else _multiline(data) for mime, data in value.items()}


def _output_from_msg(kind: str, content: dict[str, Any]) -> dict[str, Any]:
    """An nbformat v4 output for an iopub message, valid whatever the kernel put in it (built
    directly: validating every output through nbformat's schema costs more than the kernel
    round trip). A value of the wrong type is stored as its text, so the run that produced it
    still answers, and every later read of the notebook works."""
    if not isinstance(content, dict):
        content = {}
    if kind == "stream":
        name = content.get("name")
        text = content.get("text", "")
        return {"output_type": "stream", "name": name if isinstance(name, str) else "stdout",
                "text": "".join(_multiline(text)) if isinstance(text, list) else _text(text)}
    if kind == "error":
        traceback = content.get("traceback") or []
        return {"output_type": "error", "ename": _text(content.get("ename", "")),
                "evalue": _text(content.get("evalue", "")),
                "traceback": [_text(t) for t in (traceback if isinstance(traceback, list) else [traceback])]}
    metadata = content.get("metadata")
    output = {"output_type": kind, "data": _mimebundle(content.get("data")),
              "metadata": dict(metadata) if isinstance(metadata, dict) else {}}
    if kind == "execute_result":
        count = content.get("execution_count")
        output["execution_count"] = int(count) if isinstance(count, (int, float)) and not isinstance(count, bool) \
            and count >= 0 else None
    return output
