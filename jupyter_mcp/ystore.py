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
two pieces (each is written through a worker thread).

The promise, under a SIGKILL at any instant: the store is never behind the room's file. A room
is loaded from its store only when the store holds exactly what the file holds; otherwise the
file wins, and jupyter-collaboration rebuilds the room's content from it with new items, beside
which a tab still open from before the crash puts its own copies of the same text back (a
duplicated cell, a doubled line). So:

- The store takes each update of its room's document in the transaction that makes it (it
  observes the document it loaded), not when the room's broadcast loop passes it on a few loop
  turns later: at any instant, what is written plus what is queued is the whole document.
- Every save of the file, whoever makes it (the person's Ctrl+S, jupyter-collaboration's
  autosave, jupyter-mcp's own), writes the queue first: ``flush_before_saves`` wraps the file
  loader that every save goes through, after the content was taken from the document.
- A room rebuilt from its file (at load, or when the file changed on disk) is written at once,
  before any tab can sync with it: a second crash would otherwise rebuild it again, with other
  new items, and the tabs that synced with the first rebuild would double its text.
- Nothing waits past a stop: the server's stop flushes every store (``flush_all``), and a store
  that is read (a room reopening) first takes in what other stores of the same document still hold.
- A write that fails is logged, as jupyter-collaboration's store logs each of its own; a flush
  that is interrupted (cancelled) keeps its updates for the next one (writing an update twice
  changes nothing: a Y update applies once).

What a crash can still take is what no save reached, as with the default store: the file wins
over edits made after the last save.

Use it with ``--YDocExtension.ystore_class=jupyter_mcp.ystore.BatchedYStore`` (jupyter-mcp's
config file sets it); ``jupyter_server_ydoc.stores.SQLiteYStore`` is the default it replaces.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from jupyter_server_ydoc.stores import SQLiteYStore
from pycrdt import Doc, merge_updates
from traitlets import Float
from traitlets.config import Config

from .adapters.pycrdt_doc import observe_natively
from .adapters.ydoc_rooms import around_saves_and_loads

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
    autosave_delay: ClassVar[float | None] = 1.0
    # the server's configuration, for the stores jupyter-collaboration makes without it (the rooms
    # its get_document opens, which are the rooms MCP opens), told by the extension too
    server_config: ClassVar[Config | None] = None

    _pending: list[bytes] | None = None
    _loop: asyncio.AbstractEventLoop | None = None  # the server's, where this store writes
    _timer: asyncio.TimerHandle | None = None
    _flushing: asyncio.Lock | None = None
    _observed: Any = None  # the subscription to the room's document, once it is loaded
    _at_once = False  # the next update is written without waiting: the room takes its file's content

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("config") is None and BatchedYStore.server_config is not None:
            kwargs["config"] = BatchedYStore.server_config
        super().__init__(*args, **kwargs)

    async def write(self, data: bytes) -> None:
        """Queue an update; it is written with the others after ``flush_delay`` at most. (The
        room's broadcast loop writes each update here too; a store that observes the document
        already has it.)"""
        if self._observed is None:
            self._queue(data)

    def _queue(self, data: bytes) -> None:
        if self._pending is None:
            self._register()
        assert self._pending is not None
        self._pending.append(data)
        if self._at_once:
            self._at_once = False
            self._arm(0)
        elif self._timer is None:
            self._arm(self._delay())

    def _register(self) -> None:
        self._pending = []
        self._loop = asyncio.get_running_loop()
        _stores.add(self)

    def _arm(self, delay: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        loop = self._loop
        assert loop is not None
        self._timer = loop.call_later(delay, lambda: _keep(loop.create_task(self._flush_logged())))

    def _delay(self) -> float:
        save_delay = BatchedYStore.autosave_delay
        return self.flush_delay if save_delay is None else min(self.flush_delay, save_delay / 2)

    def _observe(self, ydoc: Doc) -> None:
        """Take every later update of the room's document as its transaction ends. Subscribed on
        pycrdt's native document (``observe_natively``: no cycle through the Python document);
        this callback holds the store weakly and the document not at all."""
        if self._observed is not None:
            return
        if self._pending is None:
            self._register()
        store = weakref.ref(self)

        def taken(event: Any) -> None:
            alive = store()
            if alive is not None:
                alive._queue(event.update)

        self._observed = observe_natively(ydoc, taken)

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
        """Load the room's document (jupyter-collaboration calls this once, on the room's own
        document, before anyone syncs with it), then observe it."""
        await flush_path(self.path)
        try:
            await super().apply_updates(ydoc)
        finally:
            self._observe(ydoc)

    async def encode_state_as_update(self, ydoc: Doc) -> None:
        """The room was just built from its file: written now, before any tab syncs with it."""
        if self._observed is None:  # the rebuild's updates were not seen: write the whole state
            await super().encode_state_as_update(ydoc)
        await self.flush()

    async def read(self) -> AsyncIterator[tuple[bytes, bytes, float]]:
        await flush_path(self.path)
        async for item in super().read():
            yield item


_tasks: set[asyncio.Task] = set()


def _keep(task: asyncio.Task) -> None:
    """Hold a flush task until it ends (the loop keeps only weak references)."""
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


def _of_file(file_id: str) -> list[BatchedYStore]:
    """The stores of one file's rooms (jupyter-collaboration names a store ``.<type>:<file id>.y``)."""
    return [store for store in _here() if store.path.endswith(f":{file_id}.y")]


def flush_before_saves() -> None:
    """Make every save of a collaborative file write its rooms' stores first, and every load of it
    into a room write that room's next update at once.

    jupyter-collaboration saves a room through its file loader (``FileLoader.maybe_save_content``):
    the person's Ctrl+S, the autosave, and jupyter-mcp's ``Rooms.save`` alike, each with the content
    already taken from the document. It reloads a room through ``FileLoader.load_content`` when the
    file changed on disk, then sets the room's content in one transaction. Wrapped on the class once
    (``around_saves_and_loads``): the loaders are made inside jupyter-collaboration, one per file,
    whoever opens the room."""
    around_saves_and_loads(_flush_file, _write_next_update_at_once)


async def _flush_file(file_id: str) -> None:
    await _flush(_of_file(file_id))


def _write_next_update_at_once(file_id: str) -> None:
    for store in _of_file(file_id):
        store._at_once = True


async def flush_path(path: str) -> None:
    """Write what every store of one document still holds (a room closed and reopened has two)."""
    await _flush([s for s in _here() if s.path == path])


async def flush_all() -> None:
    """At the server's stop: nothing queued is left behind."""
    await _flush(_here())


def _here() -> list[BatchedYStore]:
    """The stores of this event loop (a process that ran several servers, a test run, may still
    hold stores of a loop that is gone)."""
    loop = asyncio.get_running_loop()
    return [store for store in list(_stores) if store._loop is loop]


async def _flush(stores: list[BatchedYStore]) -> None:
    """Flush each store, one with nothing queued too: it waits for a flush under way, whose
    updates are no longer queued but not yet written. Each in a task of its own (gather makes
    one): the store writes through anyio's worker threads, and anyio ends such a thread when the
    task that used it ends; a thread used by the server's stop task itself would outlive the
    event loop, and the process would wait for it."""
    await asyncio.gather(*(store._flush_logged() for store in stores))
