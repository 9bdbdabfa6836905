"""Live objects of a Jupyter server with jupyter-mcp, counted by the server itself.

``count(app)`` counts, in the process it runs in, what a notebook's room and MCP's work on it
leave in memory: Y documents (pycrdt's, native and Python, and jupyter-ydoc's), rooms and the
websocket handlers that served them, kernel clients, jupyter-mcp's own objects, and the entries
of jupyter-mcp's tables kept per room, path or kernel. The in-process tests call it directly.

For a real `jupyter lab` process (``LiveServer``), this module is also a small Jupyter server
extension, for tests and benchmarks only: ``enable(server)`` before the server starts, then
``read(server)`` asks it (``GET /api/mcp-census``, authenticated) for the same counts, its RSS
and its heap in use; ``read(server, release=True)`` first does what the sweeper does after
closing rooms (a full collection, the heap's free pages given back), so that RSS says what is
still held.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

ENDPOINT = "api/mcp-census"

#: Counts that belong to open rooms: none is left once every room is closed.
PER_ROOM = ("rooms", "room websocket handlers", "room documents", "Y documents", "Y documents (native)",
            "awareness", "undo managers (native)", "file loaders", "update stores")


def _kinds() -> list[tuple[str, type]]:
    """(name, class) of what is counted by kind (a subclass counts as its class)."""
    import pycrdt
    from jupyter_client.client import KernelClient
    from jupyter_server_ydoc.handlers import YDocWebSocketHandler
    from jupyter_server_ydoc.loaders import FileLoader
    from jupyter_ydoc.ybasedoc import YBaseDoc
    from pycrdt import _pycrdt
    from pycrdt.store import BaseYStore
    from pycrdt.websocket import YRoom

    return [("rooms", YRoom), ("room websocket handlers", YDocWebSocketHandler), ("room documents", YBaseDoc),
            ("Y documents", pycrdt.Doc), ("Y documents (native)", _pycrdt.Doc), ("awareness", pycrdt.Awareness),
            ("undo managers (native)", _pycrdt.UndoManager), ("Y shared types (native)", (_pycrdt.Map, _pycrdt.Array,
                                                                                       _pycrdt.Text)),
            ("file loaders", FileLoader), ("update stores", BaseYStore), ("kernel clients", KernelClient)]


def _tables(app: Any) -> dict[str, int]:
    """Entries of jupyter-mcp's (and jupyter-collaboration's) tables kept per room, path or kernel."""
    from jupyter_mcp.notebooks import cells

    def size(owner: Any, *names: str) -> int:
        for name in names:
            owner = getattr(owner, name, None)
            if owner is None:
                return 0
        try:
            return len(owner)
        except TypeError:
            return 0

    found = {"read caches (cells)": size(cells, "_snapshots") + size(cells, "_positions")}
    if app is None:
        return found
    ydoc = app.serverapp.web_app.settings.get("jupyter_server_ydoc")
    found.update({
        "open rooms": size(ydoc, "ywebsocket_server", "rooms"),
        "activity": sum(size(app.activity, n) for n in ("_last_used", "_first_seen", "_running", "_save_errors")),
        "presence": size(app.presence, "_entries"),
        "resolved paths": size(app.rooms, "_resolved"),
        "room loads": size(app.rooms, "_loads"),
        "kernel clients (MCP's)": size(app.kernels, "_clients"),
        "kernels by path": size(app.kernels, "_by_path"),
        "resource watchers": size(getattr(app, "subscriptions", None), "_watchers"),
    })
    return found


def count(app: Any = None) -> dict[str, int]:
    """What is alive in this process now (after a full collection), by kind; with the jupyter-mcp
    extension app, the entries of its tables too; and every class of jupyter-mcp's own, as
    ``jupyter_mcp.<module>.<class>``."""
    gc.collect()
    kinds = _kinds()
    counts: Counter[str] = Counter({name: 0 for name, _ in kinds})
    names_of: dict[type, list[str]] = {}  # each class's names, found once
    for obj in gc.get_objects():
        cls = type(obj)
        names = names_of.get(cls)
        if names is None:
            names = names_of[cls] = [name for name, kind in kinds if issubclass(cls, kind)]
            module = getattr(cls, "__module__", "") or ""
            if module.startswith("jupyter_mcp.") and not module.startswith("jupyter_mcp.testing"):
                names.append(f"{module}.{cls.__qualname__}")
        for name in names:
            counts[name] += 1
    return {**counts, **_tables(app)}


def rss_mb(pid: int | str = "self") -> float:
    """A process's resident memory (MB), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def heap_mb() -> float | None:
    """Bytes the C heap has handed out and not had back (glibc's mallinfo2), MB; None elsewhere."""
    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                         "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return None
    return (info.uordblks + info.hblkhd) / 2**20


def snapshot(app: Any = None, release: bool = False) -> dict[str, Any]:
    """The counts, RSS and heap in use of this process (``release``: after the sweeper's
    ``release_memory``)."""
    if release:
        from jupyter_mcp.notebooks.sweeper import release_memory
        release_memory()
    counts = count(app)
    return {"counts": counts, "rss_mb": round(rss_mb(), 1), "heap_mb": heap_mb(), "pid": os.getpid()}


# -- the server extension -------------------------------------------------------------------


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "jupyter_mcp.testing.census"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from jupyter_server.base.handlers import APIHandler
    from jupyter_server.utils import url_path_join
    from tornado import web

    class CensusHandler(APIHandler):
        @web.authenticated
        async def get(self) -> None:
            apps = serverapp.extension_manager.extension_apps.get("jupyter_mcp", set())
            app = next(iter(apps), None)
            self.finish(json.dumps(snapshot(app, release=self.get_argument("release", "") == "1")))

    serverapp.web_app.add_handlers(".*$", [(url_path_join(serverapp.base_url, ENDPOINT), CensusHandler)])


def enable(server: Any) -> None:
    """Have ``server`` (a ``LiveServer`` not started yet) load the census extension."""
    config = Path(server.base) / "config" / "jupyter_server_config.d"
    config.mkdir(parents=True, exist_ok=True)
    (config / "jupyter_mcp_census.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {"jupyter_mcp.testing.census": True}}}))


def read(server: Any, release: bool = False, timeout: float = 60) -> dict[str, Any]:
    """The census of a running ``LiveServer`` that ``enable`` prepared."""
    import httpx

    response = httpx.get(server.url + ENDPOINT, params={"release": "1"} if release else {},
                         headers=server.headers, timeout=timeout)
    response.raise_for_status()
    return response.json()
