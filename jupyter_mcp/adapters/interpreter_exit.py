"""CPython's internals: what runs at interpreter exit, before the threads are joined."""

from __future__ import annotations

import threading
from collections.abc import Callable


def before_threads_are_joined(hook: Callable[[], None]) -> None:
    """Run ``hook`` at exit before Python waits for the process's non-daemon threads
    (``threading._register_atexit``): ``atexit`` hooks run only after that wait, too late to end a
    thread that would wait for ever."""
    threading._register_atexit(hook)  # type: ignore[attr-defined]
