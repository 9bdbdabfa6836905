"""MCP resources: every notebook of the workspace, each of its cells and each cell's outputs,
read from the live collaborative document (what JupyterLab shows now, unsaved edits included),
and subscriptions that are told when that document changes, whoever changed it.

    notebook://<path>                                  the notebook, as its file would hold it now
    notebook://<path>/cells/<cell id>                  one cell (nbformat JSON)
    notebook://<path>/cells/<cell id>/outputs/<n>      one output, one content per mime type
                                                       (an image as a blob: fetched only when read)

The path is percent-encoded, its slashes kept. ``resources/subscribe`` (2025-11-25) and
``subscriptions/listen`` (2026-07-28) both watch the notebook's live room: its changes are
gathered for ``DEBOUNCE_SEC`` and each subscribed URI they touch is sent once. A subscribed
notebook's room stays open (the sweeper leaves it) until its last subscriber goes; a client
holds at most ``MAX_URIS`` subscriptions. Jupyter's file events (a notebook created, copied,
renamed or deleted, by anyone) tell listeners that the resource list changed: a listen stream
that asked for it, and every 2025-11-25 session holding a subscription.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from fastmcp.exceptions import ResourceError
from fastmcp.resources import Resource, ResourceContent, ResourceResult
from fastmcp.resources.template import ResourceTemplate
from fastmcp.server.providers import Provider
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
)
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    UnsubscribeRequestParams,
)
from pydantic import Field

from .. import permissions
from ..adapters.fastmcp_lowlevel import low_level_server
from ..adapters.sdk_server import connection_of
from ..errors import NotebookError, logs_its_error
from ..identity import calling_agent
from ..notebooks import cells, files, outputs
from ..notebooks.changes import describe_changes
from ..notebooks.rooms import LiveNotebook

SCHEME = "notebook://"
NOTEBOOK_MIME = "application/x-ipynb+json"
CELL_MIME = "application/json"
DEBOUNCE_SEC = 0.2  # changes gathered before subscribers are told (a cell printing 10 lines a second: 5 updates)
MAX_URIS = 100  # subscriptions one client (a 2025-11-25 session, or one listen stream) may hold
MAX_LISTEN_STREAMS = 256  # open subscriptions/listen streams on this server (each user holds fewer: a setting)
RELIST_DEBOUNCE_SEC = 0.5  # file events gathered before the workspace's notebooks are listed again
CONTENTS_ACTIONS = "https://events.jupyter.org/jupyter_server/contents_service/v1"  # Jupyter's file events

_URI = re.compile(r"(?P<path>.+\.ipynb)(?:/cells/(?P<cell>[^/]+)(?:/outputs/(?P<output>\d+))?)?")
_BINARY = frozenset(outputs.IMAGE_TYPES) | {"application/pdf"}


@dataclass(frozen=True)
class Address:
    """What a notebook:// URI names."""

    path: str
    cell_id: str | None = None
    output: int | None = None

    @property
    def uri(self) -> str:
        uri = SCHEME + quote(self.path, safe="/")
        if self.cell_id is not None:
            uri += "/cells/" + quote(self.cell_id, safe="")
        if self.output is not None:
            uri += f"/outputs/{self.output}"
        return uri

    @property
    def notebook_uri(self) -> str:
        return Address(self.path).uri


def cell_resource(path: str, cell_id: str) -> str:
    """The URI of a cell (its outputs are this, then /outputs/<n>)."""
    return Address(path, cell_id).uri


def parse(uri: str) -> Address:
    """The notebook, cell or output a URI names; refused, saying what a URI looks like."""
    if not uri.startswith(SCHEME):
        raise NotebookError(f"{uri!r} is not a notebook resource: URIs look like notebook://<path>.ipynb, "
                            "notebook://<path>.ipynb/cells/<cell id> or .../cells/<cell id>/outputs/<n>")
    match = _URI.fullmatch(uri[len(SCHEME):])  # the path is the longest that leaves a cell part (ids have no dot)
    if match is None:
        raise NotebookError(f"{uri!r} names no notebook: URIs look like notebook://<path>.ipynb, "
                            "notebook://<path>.ipynb/cells/<cell id> or .../cells/<cell id>/outputs/<n>")
    cell = unquote(match.group("cell")) if match.group("cell") is not None else None
    output = int(match.group("output")) if match.group("output") is not None else None
    return Address(unquote(match.group("path")), cell, output)


# -- reading -------------------------------------------------------------------------------


def dumps(value: Any) -> str:
    """JSON as nbformat writes it."""
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def output_contents(output: dict[str, Any]) -> list[ResourceContent]:
    """One output as resource contents: a stream or error as its text, a rich output as one
    content per mime type of its bundle (binary ones decoded, as a blob)."""
    kind = output.get("output_type")
    if kind in ("stream", "error"):
        return [ResourceContent(outputs.output_text(output), mime_type="text/plain")]
    bundle = output.get("data")
    data: dict[str, Any] = bundle if isinstance(bundle, dict) else {}
    contents = []
    for mime, value in data.items():
        if mime in _BINARY:
            try:
                blob = base64.b64decode(outputs.image_bytes(data, mime), validate=True)
            except (binascii.Error, ValueError):
                continue  # not base64: not an image a client could show
            contents.append(ResourceContent(blob, mime_type=mime))
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):  # nbformat's multiline text
            contents.append(ResourceContent("".join(value), mime_type=mime))
        elif isinstance(value, str):
            contents.append(ResourceContent(value, mime_type=mime))
        else:  # JSON data (application/json, vega, widget state...)
            contents.append(ResourceContent(json.dumps(value, ensure_ascii=False), mime_type=mime))
    return contents or [ResourceContent(dumps(output), mime_type=CELL_MIME)]


class NotebookPart(Resource):
    """A notebook, cell or output, read when asked for."""

    notebooks: Any = Field(exclude=True)

    async def read(self) -> ResourceResult:
        try:
            return await read(self.notebooks, parse(str(self.uri)))
        except NotebookError as exc:
            raise ResourceError(f"{self.uri}: {exc}") from None


async def read(notebooks: Any, address: Address) -> ResourceResult:
    nb = await notebooks.open(address.path, calling_agent())
    if address.cell_id is None:
        content = await notebooks.rooms.content(nb)
        return ResourceResult([ResourceContent(await asyncio.to_thread(dumps, content), mime_type=NOTEBOOK_MIME)])
    index = cells.locate(nb.doc, address.cell_id)
    cell = nb.doc.get_cell(index)
    if address.output is None:
        return ResourceResult([ResourceContent(dumps(cell), mime_type=CELL_MIME)])
    found = cell.get("outputs") or []
    if address.output >= len(found):
        raise NotebookError(f"cell {address.cell_id!r} has {len(found)} outputs (0..{len(found) - 1}); "
                            f"there is no output {address.output}" if found else
                            f"cell {address.cell_id!r} has no outputs")
    return ResourceResult(output_contents(found[address.output]))


class NotebookResources(Provider):
    """The notebooks of the workspace as resources (listed), and any notebook:// URI (read)."""

    def __init__(self, notebooks: Any) -> None:
        super().__init__()
        self.notebooks = notebooks

    def _part(self, address: Address) -> NotebookPart:
        if address.cell_id is None:
            name, mime = address.path, NOTEBOOK_MIME
        elif address.output is None:
            name, mime = f"{address.path}: cell {address.cell_id}", CELL_MIME
        else:
            name, mime = f"{address.path}: cell {address.cell_id}, output {address.output}", "application/octet-stream"
        return NotebookPart(uri=address.uri, name=name, mime_type=mime,  # type: ignore[arg-type]  # pydantic
                            notebooks=self.notebooks)                     # validates the str into its AnyUrl

    async def _list_resources(self) -> Sequence[Resource]:
        if self.notebooks is None:
            return []
        found = await asyncio.to_thread(files.list_notebooks, self.notebooks.root_dir, "")
        return [self._part(Address(entry["path"])).model_copy(update={
            "description": "The notebook's live document (unsaved edits included), as nbformat JSON."})
            for entry in found]

    async def _get_resource(self, uri: str, version: Any = None) -> Resource | None:
        if self.notebooks is None or not uri.startswith(SCHEME):
            return None
        try:
            return self._part(parse(uri))
        except NotebookError:  # read, it says what is wrong with the URI
            return NotebookPart(uri=uri, name=uri, notebooks=self.notebooks)  # type: ignore[arg-type]  # str -> AnyUrl

    async def _list_resource_templates(self) -> Sequence[ResourceTemplate]:
        return [
            ResourceTemplate(uri_template=SCHEME + "{path}/cells/{cell_id}", name="cell", mime_type=CELL_MIME,
                             description="One cell of a notebook, by its id (notebook_get lists them), as nbformat "
                                         "JSON from the live document.", parameters={}),
            ResourceTemplate(uri_template=SCHEME + "{path}/cells/{cell_id}/outputs/{n}", name="output",
                             mime_type="application/octet-stream", parameters={},
                             description="The n-th output (0-based) of a cell: a stream or error as text, a rich "
                                         "output as one content per mime type (images as blobs, fetched only "
                                         "when read)."),
        ]


# -- subscriptions -------------------------------------------------------------------------


class _Watcher:
    """One notebook's live room, observed while anyone is subscribed to it or to its parts:
    each change names the subscribed URIs it touches, and those are published, once per
    ``DEBOUNCE_SEC``."""

    def __init__(self, nb: LiveNotebook, publish: Any, running: Any) -> None:
        self.nb = nb
        self.uris: Counter[str] = Counter()
        self._publish = publish
        self._running = running  # Activity.running(room_id): the sweeper leaves the room open
        self._touched: set[str] = set()
        self._structure_changed = False
        self._flush: asyncio.TimerHandle | None = None
        ynb = nb.doc
        self._observed = [(ynb.ycells, ynb.ycells.observe_deep(self._on_cells)),
                          (nb.ymeta, nb.ymeta.observe_deep(self._on_meta))]
        running.__enter__()

    def close(self) -> None:
        for shared, subscription in self._observed:
            shared.unobserve(subscription)
        if self._flush is not None:
            self._flush.cancel()
        self._running.__exit__(None, None, None)

    def _on_meta(self, events: list[Any]) -> None:
        self._touch({Address(self.nb.path).uri})

    def _on_cells(self, events: list[Any]) -> None:
        # a cell's running mark alone is no change: no resource holds it
        changes = [c for c in describe_changes(self.nb.doc, events) if c["kind"] != "execution_state"]
        if not changes:
            return
        touched = {Address(self.nb.path).uri}
        for change in changes:
            if change["kind"] in ("cells_inserted", "cells_deleted"):
                self._structure_changed = True
            elif change.get("cell_id"):
                cell_uri = Address(self.nb.path, change["cell_id"]).uri
                touched.add(cell_uri)
                if change["kind"] == "outputs":
                    touched.update(u for u in self.uris if u.startswith(cell_uri + "/outputs/"))
        self._touch(touched)

    def _touch(self, uris: set[str]) -> None:
        self._touched |= uris
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(DEBOUNCE_SEC, self._send)

    def _send(self) -> None:
        self._flush = None
        touched, self._touched = self._touched, set()
        if self._structure_changed:  # a deleted cell: its subscribers are told (reading it now says it is gone)
            self._structure_changed = False
            for uri in self.uris:
                cell_id = parse(uri).cell_id
                if cell_id is not None and cells.find(self.nb.doc, cell_id) is None:
                    touched.add(uri)
        for uri in sorted(touched & set(self.uris)):
            task = asyncio.ensure_future(self._publish(ResourceUpdated(uri=uri)))
            task.add_done_callback(logs_its_error(f"publishing an update of {uri}"))


_LIST = ""  # what a 2025-11-25 client is sent for a change in the list of notebooks


class _LegacyClient:
    """A 2025-11-25 session's subscriptions (``resources/subscribe``), told on its connection's
    standalone stream; released when the connection goes, or once a send to it fails."""

    def __init__(self, connection: Any) -> None:
        self.connection = weakref.ref(connection)
        self.uris: set[str] = set()
        self.release: Any = None  # set by Subscriptions: ends every subscription of this client
        self._pending: set[str] = set()
        self._sending: asyncio.Task[None] | None = None

    def deliver(self, event: ServerEvent) -> None:
        if isinstance(event, ResourcesListChanged):
            self._pending.add(_LIST)
        elif isinstance(event, ResourceUpdated) and event.uri in self.uris:
            self._pending.add(event.uri)
        else:
            return
        if self._sending is None or self._sending.done():
            self._sending = asyncio.ensure_future(self._send())

    async def _send(self) -> None:
        while self._pending:
            uri = min(self._pending)
            self._pending.discard(uri)
            connection = self.connection()
            try:
                if connection is None:
                    raise ConnectionError("the session is gone")
                if uri == _LIST:
                    await connection.send_resource_list_changed()
                else:
                    await connection.send_resource_updated(uri)
            except Exception:
                self._pending.clear()
                self.release()


def _connection_of(ctx: Any) -> Any:
    """The client's connection (one per MCP session): the request context's session object is
    made anew for each request."""
    return connection_of(ctx.session)


class Subscriptions:
    """Who is subscribed to which notebook:// URI, and the watchers that tell them."""

    def __init__(self, notebooks: Any, max_streams_per_user: int) -> None:
        self.notebooks = notebooks
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus, max_subscriptions=MAX_LISTEN_STREAMS)
        self.max_streams_per_user = max_streams_per_user  # below MAX_LISTEN_STREAMS: one user cannot take them all
        self._streams_of: Counter[str] = Counter()  # open listen streams, by principal
        self._watchers: dict[str, _Watcher] = {}  # by notebook path
        self._legacy: weakref.WeakKeyDictionary[Any, _LegacyClient] = weakref.WeakKeyDictionary()  # by connection
        self._list_listeners = 0  # listen streams asking for list changes
        self._listing: set[str] | None = None  # the notebooks last listed, while anyone may be told of changes
        self._relist: asyncio.TimerHandle | None = None

    def install(self, mcp: Any) -> None:
        low = low_level_server(mcp)
        low.add_request_handler("resources/subscribe", SubscribeRequestParams, self._subscribe)
        low.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, self._unsubscribe)
        low.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, self._listen)

    # -- the watchers, shared by every subscriber of a notebook -----------------------------

    async def _watch(self, uri: str) -> None:
        """Count a subscriber of ``uri``: its notebook is watched (its room opened) and the cell
        it names must exist; refused with a clear error otherwise, and nothing changes."""
        try:
            address = parse(uri)
            nb = await self.notebooks.open(address.path, calling_agent())
            if address.cell_id is not None:
                cells.locate(nb.doc, address.cell_id)
        except NotebookError as exc:
            raise MCPError(INVALID_PARAMS, f"cannot subscribe to {uri}: {exc}") from None
        # from here on, no await: the watcher found is the one counted
        watcher = self._watchers.get(nb.path)
        if watcher is None or watcher.nb.room is not nb.room:  # none yet, or its room was made anew
            watcher = self._watch_room(nb, watcher)
        watcher.uris[Address(nb.path, address.cell_id, address.output).uri] += 1

    def _watch_room(self, nb: LiveNotebook, before: _Watcher | None) -> _Watcher:
        """The notebook's watcher on its room now, taking over the subscriptions of the one on
        the room before (the room closed and was made again)."""
        watcher = _Watcher(nb, self.bus.publish, self.notebooks.activity.running(nb.room_id))
        if before is not None:
            watcher.uris = before.uris
            before.close()
        self._watchers[nb.path] = watcher
        return watcher

    def _unwatch(self, uri: str) -> None:
        address = parse(uri)
        watcher = self._watchers.get(address.path)
        if watcher is None or not watcher.uris[uri]:
            return
        watcher.uris[uri] -= 1
        if not watcher.uris[uri]:
            del watcher.uris[uri]
        if not watcher.uris:
            watcher.close()
            del self._watchers[address.path]

    def _canonical(self, uri: str) -> str:
        address = parse(uri)
        return Address(self.notebooks.rooms.canonical(address.path), address.cell_id, address.output).uri

    @staticmethod
    async def _may_read(doing: str) -> None:
        try:
            await permissions.current_permissions().require(permissions.READ, doing)
        except NotebookError as exc:
            raise MCPError(INVALID_REQUEST, str(exc)) from None

    # -- 2025-11-25: resources/subscribe and resources/unsubscribe -------------------------

    async def _subscribe(self, ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
        await self._may_read("resources/subscribe")
        connection = _connection_of(ctx)
        client = self._legacy.get(connection)
        uri = self._canonical_or_refuse(str(params.uri))
        if client is not None and uri in client.uris:
            return EmptyResult()  # subscribing twice is subscribing once
        if client is not None and len(client.uris) >= MAX_URIS:
            raise MCPError(INVALID_REQUEST, f"this session already holds {MAX_URIS} subscriptions (the most one "
                                            "client may); unsubscribe from some first")
        await self._watch(uri)
        if client is None:
            client = self._legacy[connection] = _LegacyClient(connection)
            unsubscribe_bus = self.bus.subscribe(client.deliver)

            def release() -> None:
                unsubscribe_bus()
                alive = client.connection()
                if alive is not None and self._legacy.get(alive) is client:
                    del self._legacy[alive]
                for held in list(client.uris):
                    self._unwatch(held)
                client.uris.clear()
                if not self._legacy and not self._list_listeners:
                    self._listing = None

            client.release = release
            connection.exit_stack.callback(release)  # run when the session ends, however it ends
            if self._listing is None:  # a 2025-11-25 client is told of list changes too
                self._listing = await self._notebook_paths()
        client.uris.add(uri)
        return EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
        client = self._legacy.get(_connection_of(ctx))
        uri = self._canonical_or_refuse(str(params.uri))
        if client is not None and uri in client.uris:
            client.uris.discard(uri)
            self._unwatch(uri)
        return EmptyResult()

    def _canonical_or_refuse(self, uri: str) -> str:
        try:
            return self._canonical(uri)
        except NotebookError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None

    # -- 2026-07-28: subscriptions/listen ----------------------------------------------------

    async def _listen(self, ctx: Any, params: SubscriptionsListenRequestParams) -> Any:
        """One listen stream, counted against its user's cap (checked and counted with no await
        between, so streams opened at once are counted one by one)."""
        principal = calling_agent().principal
        if self._streams_of[principal] >= self.max_streams_per_user:
            raise MCPError(INVALID_REQUEST, f"subscriptions/listen refused: user {principal!r} already holds "
                                            f"{self.max_streams_per_user} open listen streams, the most one user may "
                                            "(JupyterMCPApp.max_listen_streams_per_user); end one, then listen again")
        self._streams_of[principal] += 1
        try:
            return await self._listen_counted(ctx, params)
        finally:
            self._streams_of[principal] -= 1
            if not self._streams_of[principal]:
                del self._streams_of[principal]

    async def _listen_counted(self, ctx: Any, params: SubscriptionsListenRequestParams) -> Any:
        requested = list(params.notifications.resource_subscriptions or [])
        if requested:
            await self._may_read("subscriptions/listen")
        if len(requested) > MAX_URIS:
            raise MCPError(INVALID_PARAMS, f"{len(requested)} resource subscriptions requested; one stream may hold "
                                           f"{MAX_URIS} at most")
        uris = list(dict.fromkeys(self._canonical_or_refuse(u) for u in requested))
        wants_list = bool(params.notifications.resources_list_changed)
        if wants_list:
            await self._may_read("subscriptions/listen")
        async with self._watching(uris):
            filters = params.notifications.model_copy(update={"resource_subscriptions": uris or None})
            if wants_list:
                await self._listen_for_list_changes(+1)
            try:
                return await self.listen(ctx, params.model_copy(update={"notifications": filters}))
            finally:
                if wants_list:
                    await self._listen_for_list_changes(-1)

    # -- the list of notebooks -------------------------------------------------------------

    async def _listen_for_list_changes(self, delta: int) -> None:
        self._list_listeners += delta
        if self._list_listeners and self._listing is None:
            self._listing = await self._notebook_paths()  # what a change is a change from
        elif not self._list_listeners and not self._legacy:
            self._listing = None

    async def _notebook_paths(self) -> set[str]:
        found = await asyncio.to_thread(files.list_notebooks, self.notebooks.root_dir, "")
        return {entry["path"] for entry in found}

    async def on_contents_event(self, logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        """Jupyter's file events (any client's: JupyterLab's, MCP's own, the REST API's): a notebook
        created, copied, renamed or deleted changes the resource list. Saving a notebook that is
        listed already does not; the list is read again only if something may have changed."""
        if self._listing is None:
            return
        action, path = data.get("action"), str(data.get("path") or "").lstrip("/")
        if action in ("delete", "rename", "copy") or (action == "save" and path.endswith(".ipynb")
                                                      and path not in self._listing):
            if self._relist is None:
                self._relist = asyncio.get_running_loop().call_later(RELIST_DEBOUNCE_SEC, self._list_again)

    def _list_again(self) -> None:
        self._relist = None

        async def relist() -> None:
            if self._listing is None:
                return
            found = await self._notebook_paths()
            if self._listing is not None and found != self._listing:
                self._listing = found
                await self.bus.publish(ResourcesListChanged())

        asyncio.ensure_future(relist()).add_done_callback(logs_its_error("listing the notebooks again"))

    @asynccontextmanager
    async def _watching(self, uris: list[str]) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for uri in uris:
                await self._watch(uri)
                stack.callback(self._unwatch, uri)
            yield

    def close(self) -> None:
        """At shutdown: every listen stream ended, every watcher stopped."""
        self.listen.close()
        for watcher in self._watchers.values():
            watcher.close()
        self._watchers.clear()
