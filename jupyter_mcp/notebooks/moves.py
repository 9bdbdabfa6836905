"""Moving a cell as JupyterLab does, with nothing a person did to it meanwhile lost.

JupyterLab moves a cell by deleting it and inserting a copy (same id, source, outputs)
in one transaction: Yjs has no move every client can decode (yrs has one; the browser's
Yjs cannot read it). An edit a person made to the cell before the move reached them lands,
when it arrives, in the deleted copy, and Yjs drops it; a person who moved or deleted the
same cell meanwhile leaves two copies, or one they deleted.

So for ``CARRY_SEC`` after a move, while other clients are in the room, every update a
client sends the room is also taken as it arrives (the room's ``on_message``) and applied
to a shadow of the document as it was just before the move. There an edit made before the
move reached its author lands in the cell it was meant for, and is carried over: text
typed into the cell is merged into the moved copy (with what was typed there since), and a
person's move of the same cell keeps their copy only. Updates made after the move name the
copy, which the shadow does not have; Yjs keeps them pending there, so they change nothing.

What reaches the shadow of an update is the part it lacks, less everything we (the server's
client) wrote from the move on: the move itself, the carried text and their echoes. That part
is found with ``get_update`` against the shadow's state vector, never from an update's own
state vector: Yjs counts a client there only from clock 0, so it is empty for a person's every
keystroke but their first (every keystroke that crossed a move was dropped for that reason).

Carried text goes in ahead of what the person types into the copy once the move reached them
(their next keystrokes, at the same spot, before the carried text reached them): it replaces
the character before it (``replace_text``'s ``ahead_of_others``), since Yjs orders two inserts
at one spot by client id. Someone's delete of that very character meanwhile is undone.

Updates whose part inserts nothing are not applied: a client that echoes what it receives
(pycrdt's provider does; the browser's y-websocket does not) sends back the move's own
deletion, and the carried edit as the room deleted it (it landed in the deleted copy), and
Yjs cannot tell either from a person deleting. So a backspace, or a person's delete of the
cell, that crosses the move is not carried: the moved cell stays as it was (nothing is lost;
the person deletes again).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from pycrdt import Array, Decoder, Doc, Encoder, Text, YMessageType, YSyncMessageType, get_update, read_message

from . import cells

log = logging.getLogger(__name__)

CARRY_SEC = 10.0  # how long after a move an edit made before it may still arrive
_NO_CLOCK = 0xFFFFFFFF  # past any clock (Yjs clocks are 32-bit): "all of this client's items"


def merge(base: str, theirs: str, ours: str) -> str:
    """``ours`` with the change that made ``theirs`` from ``base`` applied to it as well.

    Each side's change is one span (what lies between the common start and end). Spans apart:
    both apply. Spans that overlap: ours stays and their new text follows it, so nothing either
    side typed is dropped."""
    if theirs == base:
        return ours
    if ours == base:
        return theirs
    start, end, new = _span(base, theirs)
    o_start, o_end, o_new = _span(base, ours)
    if end <= o_start:  # theirs lies before ours
        return ours[:start] + new + ours[end:]
    shift = len(o_new) - (o_end - o_start)
    if start >= o_end:  # theirs lies after ours
        return ours[:start + shift] + new + ours[end + shift:]
    cut = o_start + len(o_new)
    return ours[:cut] + new + ours[cut:]


def state_vector(encoded: bytes) -> dict[int, int]:
    """A Yjs state vector (client id -> the next clock it has) from its encoding."""
    decoder = Decoder(encoded)
    return dict((decoder.read_var_uint(), decoder.read_var_uint()) for _ in range(decoder.read_var_uint()))


def encode_state_vector(clocks: dict[int, int]) -> bytes:
    encoder = Encoder()
    encoder.write_var_uint(len(clocks))
    for client, clock in clocks.items():
        encoder.write_var_uint(client)
        encoder.write_var_uint(clock)
    return encoder.to_bytes()


def inserts_anything(update: bytes) -> bool:
    """Whether a Yjs update holds any item (its first number counts the clients it has items of;
    a client with none is not written), rather than deletions alone."""
    return Decoder(update).read_var_uint() > 0


def _span(base: str, changed: str) -> tuple[int, int, str]:
    """``changed`` as ``base[:start] + new + base[end:]``: the one span that differs."""
    limit = min(len(base), len(changed))
    start = 0
    while start < limit and base[start] == changed[start]:
        start += 1
    tail = 0
    while tail < limit - start and base[len(base) - 1 - tail] == changed[len(changed) - 1 - tail]:
        tail += 1
    return start, len(base) - tail, changed[start:len(changed) - tail]


class MoveGuard:
    """Carries into a moved cell what other clients did to it before they saw the move."""

    def __init__(self, room: Any, ynb: Any, cell_id: str, was_at: int, follows: str | None, before: bytes,
                 source: str) -> None:
        self.room = room
        self.follows = follows  # the id of the cell it came after, where it was
        self.ours = ynb.ydoc.client_id
        self.ynb = ynb
        self.cell_id = cell_id
        self.hint = was_at  # where the cell is in the shadow
        self.before: bytes | None = before  # the document just before the move
        self.shadow: Doc | None = None  # made from ``before`` when the first update arrives
        self.seen = source  # the cell's source in the shadow, as last carried over
        self.updates: list[bytes] = []
        self.scheduled = False
        self.active = True
        self.chained = room.on_message  # another guard's (an earlier move), or None
        room.on_message = self._received
        self.timer = asyncio.get_running_loop().call_later(CARRY_SEC, self.stop)

    def stop(self) -> None:
        if self.active:
            self.active = False
            self.timer.cancel()
            if self.room.on_message == self._received:
                after = self.chained  # skipping guards that ended before this one
                while isinstance(getattr(after, "__self__", None), MoveGuard) and not after.__self__.active:
                    after = after.__self__.chained
                self.room.on_message = after
            self.shadow = self.before = None

    def _received(self, message: bytes) -> Any:
        """A message from a client, before the room handles it (the room's ``on_message``)."""
        if self.active and len(message) > 2 and message[0] == YMessageType.SYNC \
                and message[1] in (YSyncMessageType.SYNC_STEP2, YSyncMessageType.SYNC_UPDATE):
            self.updates.append(read_message(message[2:]))
            if not self.scheduled:  # after the room has applied it: its effect on the copy is known then
                self.scheduled = True
                asyncio.get_running_loop().call_soon(self._carry)
        return self.chained(message) if self.chained is not None else False

    def _carry(self) -> None:
        self.scheduled = False
        if not self.active:
            return
        try:
            self._carry_updates()
        except Exception:  # the move itself is done; only this carrying-over failed
            log.exception("jupyter_mcp: carrying edits into moved cell %s failed", self.cell_id)
            self.stop()

    def _carry_updates(self) -> None:
        if self.shadow is None:
            assert self.before is not None  # kept until the shadow is made from it (or the guard stops)
            self.shadow = Doc()
            self.shadow.apply_update(self.before)
            self.before = None
        updates, self.updates = self.updates, []
        for update in updates:
            known = {**state_vector(self.shadow.get_state()), self.ours: _NO_CLOCK}  # ours from the move on: left out
            new = get_update(update, encode_state_vector(known))
            if inserts_anything(new):  # else an echo, whose deletions would undo what was carried
                self.shadow.apply_update(new)
        shadow_cells = self.shadow.get("cells", type=Array)
        at = self._in_shadow(shadow_cells)
        if at is None:  # moved by someone else before they saw our move, or gone with a reconnecting client's past
            self.stop()
            if self.hint == -2:
                self._keep_theirs(shadow_cells)
            return
        text = str(shadow_cells[at].get("source", ""))
        if text == self.seen:
            return
        live = cells.find(self.ynb, self.cell_id)
        if live is None:
            return
        source = self.ynb.ycells[live].get("source")
        if isinstance(source, Text):
            cells.replace_text(source, merge(self.seen, text, str(source)).encode("utf-8"), ahead_of_others=True)
        self.seen = text

    def _in_shadow(self, shadow_cells: Array) -> int | None:
        """The cell's index in the shadow where it was (unless cells before it came or went), or
        None: not there any more (``hint`` -2: elsewhere, moved by someone else; -1: gone)."""
        if 0 <= self.hint < len(shadow_cells) and cells.id_of(shadow_cells[self.hint]) == self.cell_id:
            return self.hint
        ids = _ids(json.loads(str(shadow_cells)))
        found = [i for i, cell_id in enumerate(ids) if cell_id == self.cell_id]
        if len(found) == 1 and (ids[found[0] - 1] if found[0] else None) == self.follows:  # shifted, not moved
            self.hint = found[0]
            return self.hint
        self.hint = -2 if found else -1
        return None

    def _keep_theirs(self, shadow_cells: Array) -> None:
        """Someone moved the cell too, before they saw our move: the document has two copies.
        Theirs stays (it follows, in the live document, the cell it follows in theirs)."""
        shadow_ids = _ids(json.loads(str(shadow_cells)))
        live_ids = _ids(cells.snapshot(self.ynb))
        copies = [i for i, cell_id in enumerate(live_ids) if cell_id == self.cell_id]
        if len(copies) < 2:
            return
        at = shadow_ids.index(self.cell_id)
        follows = shadow_ids[at - 1] if at else None
        keep = next((i for i in copies if (live_ids[i - 1] if i else None) == follows), copies[0])
        cells.delete(self.ynb, [i for i in copies if i != keep])


def _ids(plain_cells: list[Any]) -> list[Any]:
    return [c.get("id") if isinstance(c, dict) else None for c in plain_cells]


def move(room: Any, ynb: Any, index: int, to: int) -> MoveGuard | None:
    """Move the cell at ``index`` of the room's document to ``to``, as JupyterLab does; with
    other clients in the room, a guard carries over what they did to it before the move
    reached them."""
    cell_id = cells.id_of(ynb.ycells[index])
    before = ynb.ydoc.get_update() if room.clients and cell_id else None
    source = str(ynb.ycells[index].get("source", ""))
    follows = cells.id_of(ynb.ycells[index - 1]) if index else None
    cells.move(ynb, index, to)
    if before is None or cell_id is None or index == to:  # (no id: no ``before`` either)
        return None
    return MoveGuard(room, ynb, cell_id, index, follows, before, source)
