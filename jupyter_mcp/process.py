"""What the server changes in its whole process, for every other extension and library sharing it.

Three measures, each on by default and each turned off by its own JupyterMCPApp setting (app.py,
the only module that imports this one):

- ``freeze_startup_objects``: the objects the server started with are left out of every later
  garbage collection (``gc.freeze``). For everyone in the process: those objects' reference cycles
  are never collected.
- ``sigint_stops_server``: SIGINT stops the server as SIGTERM does, when Jupyter left it
  unhandled. For everyone: SIGINT no longer raises KeyboardInterrupt in the main thread.
- ``end_idle_worker_threads``: at exit, idle anyio worker threads are told to end before Python
  waits for the process's threads. For everyone: an idle anyio worker thread of theirs ends too.
"""

from __future__ import annotations

import gc
import signal
from dataclasses import dataclass
from typing import Any

from .adapters.anyio_threads import end_idle_worker_threads
from .adapters.interpreter_exit import before_threads_are_joined
from .adapters.jupyter_server_internals import signal_stop_handler

_exit_hooked = False


@dataclass(frozen=True)
class ProcessMeasures:
    """Which measures the server takes (see the module); each one a JupyterMCPApp setting."""

    freeze_startup_objects: bool = True
    sigint_stops_server: bool = True
    end_idle_worker_threads: bool = True

    def at_setup(self, serverapp: Any) -> None:
        """Once the extension's parts are built."""
        if self.sigint_stops_server:
            stop_on_sigint(serverapp)
        if self.end_idle_worker_threads:
            end_idle_worker_threads_at_exit()

    def at_start(self) -> None:
        """Once the extension has started."""
        if self.freeze_startup_objects:
            freeze_startup_objects()


def freeze_startup_objects() -> None:
    """Leave the objects the server started with out of every later garbage collection.

    A started Jupyter server holds ~300,000 objects the collector tracks (modules, classes,
    handlers, schemas), and each full collection walks them all on the event loop: ~200 ms,
    one every few seconds under a steady stream of MCP calls, about 8% of the loop's busy
    time (docs/performance.md). Frozen (``gc.freeze``), they are still freed by reference
    counting like any object; only a reference cycle among them would never be collected.
    Once per process: a process that starts server after server (a test run) would otherwise
    freeze each one's objects, and its cycles with them, for good."""
    if gc.get_freeze_count():
        return
    gc.collect()  # what is garbage already is not frozen
    gc.freeze()


def stop_on_sigint(serverapp: Any) -> None:
    """Make SIGINT stop the server as SIGTERM does, when Jupyter left it unhandled.

    Jupyter Server handles SIGINT only when stdin is a terminal. JupyterHub's spawner and
    most supervisors stop a server with SIGINT and no terminal: a bare KeyboardInterrupt
    then leaves the event loop with no stop hook run, so no room is saved (and the
    process lingers). Jupyter's own stop handler saves them first. A SIGINT handler someone
    else installed is left as it is."""
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, signal_stop_handler(serverapp))
    except ValueError:  # not the main thread: whoever runs the server there handles signals
        pass


def end_idle_worker_threads_at_exit() -> None:
    """Let the process exit once the server has stopped, with a JupyterLab tab still open.

    anyio ends a worker thread when the task that first used it ends. The rooms a server stop
    saves (jupyter-collaboration's, with a person still in them) are written from the stop task
    itself, which never ends: the event loop stops under it. The thread it used then waits for
    work for ever, and Python waits for it at exit, so the process hung until it was killed.
    Idle, such a thread is told to end at exit; a thread still busy is waited for. Once per
    process (a test run starts server after server)."""
    global _exit_hooked
    if not _exit_hooked:
        before_threads_are_joined(end_idle_worker_threads)
        _exit_hooked = True
