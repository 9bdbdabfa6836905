"""A stand-in for a JupyterLab tab: joins a notebook's room exactly as the UI does.

The UI asks for a collaboration session (PUT /api/collaboration/session/<path>),
then opens the room websocket and syncs a Y document with the y-sync protocol; it
also announces its user through awareness. This client does the same with pycrdt
over a Tornado websocket, so a test can edit "as a person" and observe what a
person would see.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

from jupyter_ydoc import YNotebook
from pycrdt import (Assoc, Awareness, Decoder, Doc, Encoder, Provider, StickyIndex, create_awareness_message,
                    read_message)
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

from ..notebooks.moves import state_vector

_RAW = 2  # jupyter-collaboration's message type of a save and its answer (JSON)


class TornadoChannel:
    """pycrdt Channel over a Tornado websocket client connection."""

    def __init__(self, ws: Any, path: str) -> None:
        self._ws = ws
        self._path = path
        self.on_message: Callable[[bytes], None] | None = None
        self.holding = False  # what the server sends waits (UIClient.held_back) ...
        self.until: Callable[[], bool] | None = None  # ... unless let through until this holds
        self.changed = asyncio.Event()

    @property
    def path(self) -> str:
        return self._path

    def __aiter__(self) -> TornadoChannel:
        return self

    async def __anext__(self) -> bytes:
        while True:
            message = await self._ws.read_message()
            if message is None:
                raise StopAsyncIteration
            data = message if isinstance(message, bytes) else message.encode()
            while self.holding and (self.until is None or self.until()):
                self.changed.clear()
                await self.changed.wait()
            if self.on_message:
                self.on_message(data)
            if data and data[0] == 0:  # only sync messages go to the provider
                return data

    async def send(self, message: bytes) -> None:
        await self._ws.write_message(message, binary=True)

    async def recv(self) -> bytes:
        return await self.__anext__()


class UIClient:
    """``async with UIClient(base_url, token, path) as ui: ui.nb`` is the UI's live YNotebook.

    ``UIClient(..., doc=ui.doc, session_id=ui.session["sessionId"])`` is that same tab coming back
    after the server restarted: it keeps its document and its session, as JupyterLab does."""

    def __init__(self, base_url: str, token: str, path: str, *, name: str = "Ada Person", doc: Doc | None = None,
                 session_id: str | None = None) -> None:
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self.token = token
        self.path = path
        self.name = name
        self.session_id = session_id
        self.doc = Doc() if doc is None else doc
        self.nb = YNotebook(self.doc)
        self.awareness = Awareness(self.doc)
        self.room_id = ""
        self.session: dict[str, Any] = {}
        self._saves: dict[int, asyncio.Future[str]] = {}
        self._save_count = 0

    async def __aenter__(self) -> UIClient:
        http = AsyncHTTPClient()
        response = await http.fetch(
            f"{self.base_url}api/collaboration/session/{quote(self.path)}",
            method="PUT",
            headers={"Authorization": f"token {self.token}"},
            body=json.dumps({"format": "json", "type": "notebook"}),
        )
        self.session = json.loads(response.body)
        self.room_id = f"json:notebook:{self.session['fileId']}"
        ws_url = (self.base_url.replace("http://", "ws://")
                  + f"api/collaboration/room/{self.room_id}?sessionId={self.session_id or self.session['sessionId']}")
        self.ws = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {self.token}"}))
        assert self.ws.protocol is not None  # set once connected
        self.ws.protocol.set_nodelay(True)  # as a browser's websocket: no small message waits for the last one's ACK
        self.channel = TornadoChannel(self.ws, self.room_id)
        self.channel.on_message = self._on_message
        self.provider = Provider(self.doc, self.channel)
        self._provider_cm = self.provider
        await self._provider_cm.__aenter__()
        await asyncio.wait_for(self.provider.synced.wait(), 30)
        user = {"username": self.name.lower().replace(" ", "-"), "name": self.name, "display_name": self.name,
                "initials": "".join(p[0] for p in self.name.split()), "color": "#1f77b4"}
        self.awareness.set_local_state({"user": user})
        await self.channel.send(create_awareness_message(self.awareness.encode_awareness_update([self.doc.client_id])))
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self._provider_cm.__aexit__(None, None, None)
        finally:
            self.ws.close()

    def _on_message(self, data: bytes) -> None:
        """Awareness from the room (other people, agents) updates this client's view of it; the
        answer to a save settles it."""
        if data and data[0] == 1:
            try:
                self.awareness.apply_awareness_update(read_message(data[1:]), "remote")
            except Exception:
                pass
        elif data and data[0] == _RAW:
            answer = json.loads(Decoder(data[1:]).read_var_string())
            saving = self._saves.pop(answer.get("responseTo"), None) if answer.get("type") == "save" else None
            if saving is not None and not saving.done():
                saving.set_result(answer.get("status"))

    async def save(self, *, answered: bool = True) -> str | None:
        """The person's Ctrl+S: JupyterLab's ``save`` message on the room's websocket, which
        jupyter-collaboration answers once it saved the room (``success``, ``skipped`` or
        ``failed``). With ``answered=False``, returns as soon as the message is sent."""
        self._save_count += 1
        save_id = self._save_count
        saving: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._saves[save_id] = saving
        ask = Encoder()
        ask.write_var_uint(_RAW)
        ask.write_var_string("save")
        ask.write_var_uint(save_id)
        await self.channel.send(ask.to_bytes())
        return await asyncio.wait_for(saving, 30) if answered else None

    def clients(self) -> set[int]:
        """The Yjs client ids whose items this tab's document holds (its state vector's)."""
        return set(state_vector(self.doc.get_state()))

    def server_client_id(self) -> int:
        """The client id of the server's document of this room, as this tab received it: the one
        client besides itself and client 0 (jupyter-collaboration loads a file as client 0, so
        that every room rebuilt from it agrees). The server's document writes an item of its own
        when the room opens; ask before any other client wrote (a JupyterLab tab does on load)."""
        others = self.clients() - {0, self.doc.client_id}
        if len(others) != 1:
            raise AssertionError(f"expected the server's client alone besides the file's, got {others}")
        return others.pop()

    @asynccontextmanager
    async def held_back(self) -> AsyncIterator[None]:
        """What the server sends reaches this tab only after the block, in order, as over a slow
        link: what the person types meanwhile crosses the server's edits, every time. What the
        tab sends goes at once."""
        self.channel.holding = True
        try:
            yield
        finally:
            self.channel.holding = False
            self.channel.changed.set()

    async def deliver_until(self, given: Callable[[], bool], timeout: float = 20) -> None:
        """Within ``held_back``: let what the server sent through, message by message, until this
        tab has been ``given`` what it needs (and nothing after it)."""
        self.channel.until = given
        self.channel.changed.set()
        try:
            await self.wait_for(given, timeout)
        finally:
            self.channel.until = None

    def others(self) -> list[dict[str, Any]]:
        """The users this client sees in the room besides itself (what the toolbar shows)."""
        return [state["user"] for cid, state in self.awareness.states.items()
                if cid != self.doc.client_id and state and state.get("user")]

    def cell_ids(self) -> list[str]:
        return [str(c["id"]) for c in self.nb.ycells]

    def source(self, index: int) -> str:
        return str(self.nb.ycells[index]["source"])

    def type_into(self, index: int, text: str) -> None:
        """The person types ``text`` at the end of a cell (Text offsets are UTF-8 bytes)."""
        source = self.nb.ycells[index]["source"]
        source.insert(len(str(source).encode()), text)

    async def put_cursor(self, index: int, offset: int) -> None:
        """Put the person's caret in a cell's source, ``offset`` bytes in (before a character), and
        share it as JupyterLab's editor does: ``cursors`` in the awareness, its ends Yjs relative
        positions."""
        head = {"type": None, "tname": None, "assoc": 0,
                **StickyIndex.new(self.nb.ycells[index]["source"], offset, Assoc.AFTER).to_json()}
        state = self.awareness.get_local_state() or {}
        self.awareness.set_local_state({**state, "cursors": [{"anchor": head, "head": head, "primary": True,
                                                               "empty": True}]})
        await self.channel.send(create_awareness_message(self.awareness.encode_awareness_update([self.doc.client_id])))

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 20) -> None:
        """Wait until the UI's document satisfies ``predicate`` (it syncs in the background)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate():
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"the UI client did not see the expected state in {timeout}s")
            await asyncio.sleep(0.02)


async def ui_session(base_url: str, token: str, path: str, kernel_name: str = "python3") -> dict[str, Any]:
    """Open a notebook's kernel session the way JupyterLab does (POST /api/sessions)."""
    http = AsyncHTTPClient()
    response = await http.fetch(
        f"{base_url}api/sessions", method="POST", headers={"Authorization": f"token {token}"},
        body=json.dumps({"path": path, "name": path.rsplit("/", 1)[-1], "type": "notebook",
                         "kernel": {"name": kernel_name}}),
    )
    return json.loads(response.body)


async def ui_execute(base_url: str, token: str, kernel_id: str, code: str, timeout: float = 30) -> str:
    """Run code over the kernel websocket as JupyterLab does; returns the stdout text."""
    import uuid

    ws_url = base_url.replace("http://", "ws://") + f"api/kernels/{kernel_id}/channels?session_id={uuid.uuid4()}"
    ws = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {token}"}))
    msg_id = uuid.uuid4().hex
    await ws.write_message(json.dumps({
        "header": {"msg_id": msg_id, "username": "ui", "session": uuid.uuid4().hex, "msg_type": "execute_request",
                   "version": "5.3"},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True},
    }))
    out, idle, replied = [], False, False
    try:
        while not (idle and replied):
            raw = await asyncio.wait_for(ws.read_message(), timeout)
            if raw is None:
                raise AssertionError("kernel websocket closed")
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "execute_reply":
                replied = True
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
    finally:
        ws.close()
    return "".join(out)
