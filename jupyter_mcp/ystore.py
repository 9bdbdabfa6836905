"""A room's update store that writes its updates together, not one by one.

jupyter-collaboration keeps every document update of every room in an SQLite store
(``.jupyter_ystore.db``), so that a room reopened after a restart keeps its history and the
JupyterLab tabs still open on it merge back without duplicating anything. Its store writes each
update on its own: three or four worker-thread hops, each waking the event loop. That was 20-35%
of the server CPU of an agent's edit and of a person's keystroke alike (docs/performance.md).

``BatchedYStore`` is that store, with one change: a room's updates wait up to ``flush_delay``
seconds, then go in merged, a row per ``MAX_MERGED_UPDATES`` updates (or ``MAX_MERGED_BYTES``).
pycrdt's merge runs on the event loop and grows faster than linearly with the updates it is given
(10,000 one-character updates: 0.66 s; 40,000: 15 s); it holds the GIL, so a worker thread would
hold the loop just the same. A piece that size merges in about 7 ms, and the loop runs between
two pieces (each is written through a worker thread). It keeps what the default keeps:

- A room is loaded from its store only when the store holds exactly what the file holds;
  otherwise the file wins (jupyter-collaboration's rule). So a store may be ahead of its file
  (unsaved edits, as with the default store), but must never be behind it: the store is flushed
  before every save we make (``Rooms.save``), and it flushes sooner than jupyter-collaboration's
  own autosave runs (``flush_delay`` is at most half of ``YDocExtension.document_save_delay``).
- Nothing waits past a stop: the server's stop flushes every store (``flush_all``), and a store
  that is read (a room reopening) first takes in what other stores of the same document still hold.
- A write that fails is logged, as jupyter-collaboration's store logs each of its own; a flush
  that is interrupted (cancelled) keeps its updates for the next one (writing an update twice
  changes nothing: a Y update applies once).

Use it with ``--YDocExtension.ystore_class=jupyter_mcp.ystore.BatchedYStore`` (jupyter-mcp's
config file sets it); ``jupyter_server_ydoc.stores.SQLiteYStore`` is the default it replaces.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from typing import Any

from jupyter_server_ydoc.stores import SQLiteYStore
from pycrdt import Doc, merge_updates
from traitlets import Float

_stores: weakref.WeakSet[BatchedYStore] = weakref.WeakSet()

MAX_MERGED_UPDATES = 1000  # updates merged into one row: ~7 ms of one-character updates, the worst case measured
MAX_MERGED_BYTES = 1 << 20  # nor more than 1 MiB of them (~25 ms); an update bigger than that is written alone


def pieces(updates: list[bytes]) -> list[list[bytes]]:
    """Queued updates, in order, cut into the pieces that are each merged into one row."""
    cut: list[list[bytes]] = []
    size = 0
    for update in updates:
        if not cut or len(cut[-1]) >= MAX_MERGED_UPDATES or size + len(update) > MAX_MERGED_BYTES:
            cut.append([])
            size = 0
        cut[-1].append(update)
        size += len(update)
    return cut


class BatchedYStore(SQLiteYStore):
    """jupyter-collaboration's SQLite store, writing a room's updates in batches."""

    flush_delay = Float(0.5, config=True, help="""Seconds a document update may wait to be written
        with the next ones; at most half of YDocExtension.document_save_delay is used, so that an
        autosave never finds the store behind the file.""")

    # jupyter-collaboration's autosave delay (YDocExtension.document_save_delay; None: no
    # autosave), told by jupyter-mcp's extension when it starts
    autosave_delay: float | None = 1.0

    _pending: list[bytes] | None = None
    _loop: asyncio.AbstractEventLoop | None = None  # the server's, where this store writes
    _timer: asyncio.TimerHandle | None = None
    _flushing: asyncio.Lock | None = None

    async def write(self, data: bytes) -> None:
        """Queue an update; it is written with the others after ``flush_delay`` at most."""
        loop = asyncio.get_running_loop()
        if self._pending is None:
            self._pending = []
            self._loop = loop
            _stores.add(self)
        self._pending.append(data)
        if self._timer is None:
            self._timer = loop.call_later(self._delay(), lambda: _keep(loop.create_task(self._flush_logged())))

    def _delay(self) -> float:
        save_delay = BatchedYStore.autosave_delay
        return self.flush_delay if save_delay is None else min(self.flush_delay, save_delay / 2)

    async def flush(self) -> None:
        """Write every queued update now, a row per piece."""
        if self._flushing is None:
            self._flushing = asyncio.Lock()
        async with self._flushing:  # flushes go in order, one at a time
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self._pending:
                return
            todo, self._pending = pieces(self._pending), []
            for done, piece in enumerate(todo):
                try:
                    await super().write(piece[0] if len(piece) == 1 else merge_updates(*piece))
                except BaseException:
                    self._pending[:0] = [update for unwritten in todo[done:] for update in unwritten]
                    raise

    async def _flush_logged(self) -> None:
        try:
            await self.flush()
        except Exception:
            self.log.exception("jupyter_mcp: the update store of %s could not be written; retrying with the next "
                               "flush", self.path)

    async def apply_updates(self, ydoc: Doc) -> None:
        await flush_path(self.path)
        await super().apply_updates(ydoc)

    async def read(self) -> AsyncIterator[tuple[bytes, bytes, float]]:
        await flush_path(self.path)
        async for item in super().read():
            yield item


_tasks: set[asyncio.Task] = set()


def _keep(task: asyncio.Task) -> None:
    """Hold a flush task until it ends (the loop keeps only weak references)."""
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


async def flush_path(path: str) -> None:
    """Write what every store of one document still holds (a room closed and reopened has two)."""
    await _flush([s for s in _queued() if s.path == path])


async def flush_room(room: Any) -> None:
    """Before a save: the room's store takes in every update the file is about to hold."""
    store = getattr(room, "ystore", None)
    if isinstance(store, BatchedYStore):
        await _flush([store])


async def flush_all() -> None:
    """At the server's stop: nothing queued is left behind."""
    await _flush(_queued())


def _queued() -> list[BatchedYStore]:
    """The stores of this event loop with updates to write (a process that ran several servers,
    a test run, may still hold stores of a loop that is gone)."""
    loop = asyncio.get_running_loop()
    return [store for store in _stores if store._pending and store._loop is loop]


async def _flush(stores: list[BatchedYStore]) -> None:
    """Each flush in a task of its own (gather makes one). The store writes through anyio's worker
    threads, and anyio ends such a thread when the task that used it ends: a thread used by the
    server's stop task itself would outlive the event loop, and the process would wait for it."""
    await asyncio.gather(*(store._flush_logged() for store in stores))
