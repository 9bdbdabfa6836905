"""Kernels: the notebook's own session kernel, as the agent finds, starts and manages it.

The kernel of a notebook is the kernel of its Jupyter session, the one the person's
JupyterLab tab uses; if there is none, we create the session for that path, so the UI joins
the same kernel when it opens the notebook. The kernels MCP started itself (in a session it
made) are kept track of: at most ``max_kernels`` run at once. ``Kernels`` is the one object
the layers above hold: these sessions, the run loop (``runs.RunLoop``) and the reaper
(``reaping.Reaping``) over one state (``state.KernelState``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import defaultdict
from typing import Any

from jupyter_core.utils import ensure_async
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from ..errors import NotebookError, logs_its_error
from .messages import Execution, OnEvent
from .reaping import Reaping
from .runs import OnInput, OnStart, RunLoop
from .state import KernelDied, NotStarted, Started

#: Jupyter Server's events for kernel starts, restarts, interrupts and shutdowns.
KERNEL_ACTIONS = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"


class KernelModel(TypedDict):
    kernel_id: str
    kernel_name: str | None
    execution_state: str | None


class KernelSpec(TypedDict):
    name: str
    display_name: str
    language: str | None


class RunningKernel(TypedDict):
    kernel_id: str
    kernel_name: str | None
    execution_state: str | None  # idle, busy, starting, ...
    last_activity: str | None
    connections: int  # websockets connected (a JupyterLab tab holds one)
    notebooks: list[str]  # the notebooks whose sessions use it
    started_by_mcp: bool  # started by MCP for a notebook that had no session (stopped when idle)


class KernelListing(TypedDict):
    default_kernel_name: str
    kernelspecs: list[KernelSpec]
    kernels: list[RunningKernel]


def session_path(path: str) -> str:
    """A session's notebook path without a drive prefix (JupyterLab's 'RTC:foo.ipynb')."""
    drive, sep, rest = path.partition(":")
    return rest if sep and "/" not in drive else path


class Kernels(Reaping, RunLoop):
    """Finds (or starts) a notebook's kernel and runs code in it."""

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

    async def kernel_of(self, path: str) -> str:
        """The kernel of the notebook's session; refused if it has none (nothing is started)."""
        self._drop_gone()
        kernel_id = self._by_path.get(path) or await self._existing_kernel(path)
        if kernel_id is None:
            raise NotebookError(f"{path!r} has no running kernel (no session): running a cell starts one, and "
                                "kernel_select starts the one you name")
        return kernel_id

    def model(self, kernel_id: str) -> KernelModel:
        kernel = self.km.get_kernel(kernel_id)
        return {"kernel_id": kernel_id, "kernel_name": getattr(kernel, "kernel_name", None),
                "execution_state": getattr(kernel, "execution_state", None)}

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

    async def listing(self) -> KernelListing:
        """Kernelspecs, and running kernels with the notebooks whose sessions use them."""
        specs = await self.specs()
        notebooks: defaultdict[str, list[str]] = defaultdict(list)
        for session in await self.serverapp.session_manager.list_sessions():
            if session.get("kernel"):
                notebooks[session["kernel"]["id"]].append(session_path(session.get("path") or ""))
        kernels: list[RunningKernel] = []
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
