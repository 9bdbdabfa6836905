"""An in-process Tornado ⇄ ASGI bridge.

Neither fastmcp nor the MCP SDK ships one. The bridge runs an ASGI app inside the
Jupyter server's own event loop: a Tornado handler turns its request into an ASGI
``http`` scope, streams every body chunk the app sends straight to the socket (so
SSE events reach the client as they are produced), and reports the client going
away as ``http.disconnect``. Whether an event stream goes as one JSON body is not its choice:
it asks ``answers.py`` (``holds_first_event``, ``answer_alone``), the one module that decides
JSON or a stream, because only the bridge sees what a request's handler did. One choice is its
own: a big JSON answer goes gzip-compressed to a client that accepts it (an encoding of the
body, whatever decided its shape). The app's lifespan runs as a task for as long as the
extension lives, because the MCP session manager only works inside it.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from tornado.iostream import StreamClosedError
from tornado.web import RequestHandler

from ..adapters.sse_watchers import stop_shutdown_watchers
from ..adapters.tornado_handler import response_finished
from .answers import answer_alone, holds_first_event

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

log = logging.getLogger(__name__)


class Lifespan:
    """Runs an ASGI app's lifespan protocol as a background task."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._started = asyncio.Event()
        self._stopped = asyncio.Event()
        self._failure: str | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the lifespan and wait until the app reports startup complete."""
        self._task = asyncio.create_task(self._run(), name="jupyter-mcp-asgi-lifespan")
        await self._inbox.put({"type": "lifespan.startup"})
        await self._started.wait()
        if self._failure:
            raise RuntimeError(f"ASGI lifespan startup failed: {self._failure}")

    async def stop(self, timeout: float = 10.0) -> None:
        """Ask the app to shut down and wait for it, then make sure the task is gone."""
        if self._task is None or self._task.done():
            return
        await self._inbox.put({"type": "lifespan.shutdown"})
        try:
            await asyncio.wait_for(self._stopped.wait(), timeout)
        except asyncio.TimeoutError:
            log.warning("ASGI lifespan shutdown did not complete in %ss; cancelling it", timeout)
        if not self._task.done():
            self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await stop_shutdown_watchers()  # nothing left pending when the server's loop closes

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        try:
            await self._app(scope, self._inbox.get, self._send)
        except Exception as exc:  # an app that raises during lifespan never started
            self._failure = self._failure or repr(exc)
            log.exception("ASGI lifespan raised")
        finally:
            self._started.set()
            self._stopped.set()

    async def _send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "lifespan.startup.complete":
            self._started.set()
        elif kind == "lifespan.startup.failed":
            self._failure = message.get("message", "unknown error")
            self._started.set()
        elif kind in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
            self._stopped.set()


class ASGIRequest:
    """One Tornado request served by an ASGI app, streamed as it is produced."""

    def __init__(self, handler: RequestHandler, path: str, extra_scope: dict[str, Any] | None = None) -> None:
        self.handler = handler
        self.path = path
        self.extra_scope = extra_scope or {}
        self.disconnected = asyncio.Event()
        self._body_sent = False
        self._started = False
        self._one_json_body = False  # the answer is one JSON body: gzipped if big and the client accepts it
        # A stream answers.holds_first_event names is held (its headers unsent) until its first
        # event; answers.answer_alone says whether that event goes as one JSON body instead.
        self._held = False
        self._answered = False

    def scope(self) -> Scope:
        request = self.handler.request
        host, _, port = request.host.partition(":")
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.get_all()]
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.version.removeprefix("HTTP/") if request.version else "1.1",
            "method": request.method,
            "scheme": request.protocol,
            "path": self.path,
            "raw_path": self.path.encode(),
            "root_path": "",
            "query_string": request.query.encode("latin-1"),
            "headers": headers,
            "client": (request.remote_ip, 0),
            "server": (host, int(port) if port.isdigit() else (443 if request.protocol == "https" else 80)),
            "state": {},
            **self.extra_scope,
        }

    async def receive(self) -> Message:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": self.handler.request.body or b"", "more_body": False}
        await self.disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.disconnected.is_set() or self._answered:
            return
        kind = message["type"]
        handler = self.handler
        if kind == "http.response.start":
            self._started = True
            handler.set_status(message["status"])
            handler.clear_header("Content-Type")
            headers = {}
            for raw_name, raw_value in message.get("headers", []):
                name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
                handler.add_header(name, value)
                headers[name.lower()] = value
            content_type = headers.get("content-type", "")
            if holds_first_event(handler.request.method, message["status"], content_type):
                self._held = True  # until its first event says whether it is the answer alone
            elif content_type.startswith("text/event-stream"):
                await self._flush()  # a stream's client must see its headers before the first event
            self._one_json_body = content_type.startswith("application/json") and "content-encoding" not in headers
        elif kind == "http.response.body":
            body = message.get("body", b"")
            more = message.get("more_body", False)
            if self._held and body:
                self._held = False
                answer = answer_alone(body)
                if answer is not None:  # the stream would carry nothing else: send it as one JSON body
                    handler.set_header("Content-Type", "application/json")
                    body, more, self._answered, self._one_json_body = answer, False, True, True
            if self._one_json_body and not more and len(body) >= GZIP_MIN_BYTES and _accepts_gzip(
                    handler.request.headers.get("Accept-Encoding")):
                body = await _gzip(body)
                handler.set_header("Content-Encoding", "gzip")
                handler.set_header("Content-Length", str(len(body)))
                handler.add_header("Vary", "Accept-Encoding")
            self._one_json_body = False  # a body sent in parts is sent as it is
            if body:
                handler.write(body)
            if self._answered:
                self._finish()  # the rest of the app's stream (its end) has nothing for the client
            elif more and not self._held:
                await self._flush()

    async def _flush(self) -> None:
        try:
            await self.handler.flush()
        except StreamClosedError:
            self.disconnected.set()

    async def run(self, app: ASGIApp) -> None:
        """Serve the request through ``app``; finish the Tornado response when it is done."""
        try:
            await app(self.scope(), self.receive, self.send)
        finally:
            self.disconnected.set()
        if not self._started:
            self.handler.set_status(500)
        self._finish()

    def _finish(self) -> None:
        if not response_finished(self.handler):
            try:
                self.handler.finish()
            except StreamClosedError:
                pass

    def connection_closed(self) -> None:
        """Called from the handler's ``on_connection_close``: the client went away."""
        self.disconnected.set()


# Answers this big or bigger go gzip-compressed to a client that accepts it (every MCP SDK's HTTP
# client does): a notebook's answer holds its cells twice (the structured content and, for
# clients that read only text, the same JSON as text), and JSON compresses ~8x at level 1 in
# ~1 ms per 400 KB. Smaller answers fit in a packet or two and are sent as they are.
GZIP_MIN_BYTES = 16 * 1024
GZIP_IN_THREAD_BYTES = 512 * 1024  # above this, compressed in a worker thread, off the event loop

_QVALUE = re.compile(r"0(\.[0-9]{0,3})?|1(\.0{0,3})?")  # RFC 9110's qvalue: at most three decimals, 0 to 1


def _accepts_gzip(header: str | None) -> bool:
    """Whether an ``Accept-Encoding`` value lets an answer go gzip-compressed, by RFC 9110's rules
    (section 12.5.3): gzip (or x-gzip), else ``*``, listed with a weight above 0, and wanted at least
    as much as identity (no coding: its own entry, else ``*``'s). Codings are case-insensitive. A
    weight that is not a qvalue (``q=0.0000``, ``q=2``, ``q=x``) counts as 0: that coding is never
    sent by mistake. No header, or an empty one: no coding."""
    weights: dict[str, float] = {}
    for element in (header or "").split(","):
        coding, *params = (part.strip() for part in element.split(";"))
        if not coding:
            continue
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                value = value.strip()
                weight = min(weight, float(value) if _QVALUE.fullmatch(value) else 0.0)
        coding = "gzip" if coding.lower() == "x-gzip" else coding.lower()
        weights[coding] = min(weight, weights.get(coding, weight))  # listed twice: the lower weight
    gzip_weight = weights.get("gzip", weights.get("*", 0.0))
    identity_weight = weights.get("identity", weights.get("*"))
    return gzip_weight > 0 and (identity_weight is None or gzip_weight >= identity_weight)


async def _gzip(body: bytes) -> bytes:
    if len(body) >= GZIP_IN_THREAD_BYTES:
        return await asyncio.to_thread(gzip.compress, body, 1, mtime=0)
    return gzip.compress(body, 1, mtime=0)
