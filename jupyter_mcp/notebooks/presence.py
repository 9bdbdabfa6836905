"""Agents as collaborators: while an MCP client works on a notebook, the notebook's room
awareness holds a user for it (``notebook_list_users`` lists it, marked as an agent), and
JupyterLab's global awareness holds it too, with the notebooks it works on, so the
Collaborators panel shows the agent next to the people.

Each agent in each room gets an awareness client of its own (a fresh client id), with a
name that says it is an agent and a colour of its own. Its state is re-sent while the
agent is active (awareness states time out after 30 s on every peer) and withdrawn once
it has been idle for ``idle_after`` seconds. The tools that act announce their agent
(``seen``); ``users`` reads a room's awareness back.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pycrdt import Awareness, Doc, create_awareness_message
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from ..identity import Agent
from .cursors import head_of

log = logging.getLogger(__name__)

GLOBAL = "global"  # the key of an agent's entry in JupyterLab's global awareness
COLOURS = ("#7e57c2", "#00897b", "#f4511e", "#3949ab", "#c0ca33", "#8d6e63", "#d81b60", "#039be5")
REFRESH_SEC = 10.0


def preferred_colour(client_name: str) -> int:
    """The colour an agent gets when no other agent present has it (stable across restarts)."""
    return hashlib.sha256(client_name.encode()).digest()[0] % len(COLOURS)


def agent_user(client_name: str, colour: str) -> dict[str, Any]:
    """The awareness ``user`` of an agent: a name that says what it is, and its colour."""
    name = f"jupyter agent ({client_name})"
    return {
        "username": f"agent-{hashlib.sha256(client_name.encode()).hexdigest()[:12]}",
        "name": name,
        "display_name": name,
        "initials": "AI",
        "color": colour,
        "avatar_url": None,
        "is_agent": True,
    }


class User(TypedDict):
    """Someone in a room's awareness, as JupyterLab's user object names them."""

    client_id: int
    name: str | None
    display_name: str | None
    username: str | None
    initials: str | None
    color: str | None
    is_agent: bool


def users(room: Any) -> list[User]:
    """The people (and agents) in a room's awareness, without the room's own entry."""
    people: list[User] = []
    for client_id, state in room.awareness.states.items():
        user = (state or {}).get("user")
        if not user:
            continue
        people.append({
            "client_id": client_id,
            "name": user.get("name"),
            "display_name": user.get("display_name") or user.get("name"),
            "username": user.get("username"),
            "initials": user.get("initials"),
            "color": user.get("color"),
            "is_agent": bool(user.get("is_agent") or state.get("agent")),
        })
    return people


def cursors(room: Any) -> dict[int, Any]:
    """Each client's text cursor in the room, as JupyterLab shares it (``cursors.head_of``)."""
    heads = {client_id: head_of(state) for client_id, state in room.awareness.states.items()}
    return {client_id: head for client_id, head in heads.items() if head is not None}


@dataclass
class _Presence:
    room: Any
    awareness: Awareness
    last_active: float = field(default_factory=time.monotonic)
    documents: list[str] = field(default_factory=list)  # global entries: the notebooks it works on


class AgentPresence:
    def __init__(self, idle_after: float = 60.0, busy: Callable[[str], bool] = lambda room_id: False) -> None:
        self.idle_after = idle_after
        self.busy = busy  # a running execution keeps its agent present
        self._entries: dict[tuple[str, str], _Presence] = {}
        self._task: asyncio.Task[None] | None = None

    def seen(self, agent: Agent, room_id: str, room: Any, path: str, global_room: Any = None) -> None:
        """``agent`` acts in this room: announce it (or keep it announced)."""
        key, client_name = agent.key, agent.client
        now = time.monotonic()
        entry = self._entries.get((room_id, key))
        if entry is not None and entry.room is room:
            entry.last_active = now
        else:
            entry = self._entries[(room_id, key)] = self._new(room, key, client_name)
            self._announce(entry)
        if global_room is not None:
            self._seen_globally(key, client_name, path, global_room, now)

    def _new(self, room: Any, key: str, client_name: str) -> _Presence:
        awareness = Awareness(Doc())
        awareness.set_local_state({"user": agent_user(client_name, self._colour(key, client_name)), "agent": True})
        return _Presence(room, awareness)

    def _colour(self, key: str, client_name: str) -> str:
        """The agent's colour: the one it had if it is present, else its preferred one, else
        the next one no other present agent has (the same in every room it is in)."""
        held: dict[str, str] = {}
        for (_, other), entry in self._entries.items():
            held.setdefault(other, (entry.awareness.get_local_state() or {}).get("user", {}).get("color"))
        if key in held:
            return held[key]
        taken = set(held.values())
        first = preferred_colour(client_name)
        for step in range(len(COLOURS)):
            colour = COLOURS[(first + step) % len(COLOURS)]
            if colour not in taken:
                return colour
        return COLOURS[first]  # more agents than colours

    def _seen_globally(self, key: str, client_name: str, path: str, room: Any, now: float) -> None:
        entry = self._entries.get((GLOBAL, key))
        if entry is None or entry.room is not room:
            entry = self._entries[(GLOBAL, key)] = self._new(room, key, client_name)
        entry.last_active = now
        changed = path not in entry.documents
        if changed:
            entry.documents.append(path)
        state = entry.awareness.get_local_state() or {}
        if changed or state.get("current") != f"notebook:{path}":
            entry.awareness.set_local_state({**state, "current": f"notebook:{path}", "documents": list(entry.documents)})
            self._announce(entry)

    def _announce(self, entry: _Presence, withdraw: bool = False) -> None:
        """Send the agent's awareness state (or its withdrawal) to the room and its clients."""
        awareness = entry.awareness
        if withdraw:
            awareness.set_local_state(None)
        else:
            awareness.set_local_state(awareness.get_local_state())  # a fresh clock: not outdated
        update = awareness.encode_awareness_update([awareness.client_id])
        try:
            entry.room.awareness.apply_awareness_update(update, "jupyter_mcp")
        except Exception:
            log.debug("could not apply agent awareness to the room", exc_info=True)
        message = create_awareness_message(update)
        for client in list(getattr(entry.room, "clients", ())):
            asyncio.ensure_future(self._send(client, message))

    @staticmethod
    async def _send(client: Any, message: bytes) -> None:
        try:
            await client.send(message)
        except Exception:  # a client that went away: the room drops it
            pass

    def refresh(self) -> None:
        """Re-announce active agents; withdraw the idle ones."""
        now = time.monotonic()
        for key, entry in list(self._entries.items()):
            busy = self.busy_somewhere(key[1]) if key[0] == GLOBAL else self.busy(key[0])
            if now - entry.last_active > self.idle_after and not busy:
                self._announce(entry, withdraw=True)
                del self._entries[key]
            else:
                self._announce(entry)

    def forget_room(self, room_id: str) -> None:
        for key in [k for k in self._entries if k[0] == room_id]:
            del self._entries[key]

    def busy_somewhere(self, agent_key: str) -> bool:
        return any(self.busy(room_id) for room_id, key in self._entries if key == agent_key and room_id != GLOBAL)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(min(REFRESH_SEC, self.idle_after / 2))
            try:
                self.refresh()
            except Exception:
                log.exception("jupyter_mcp: refreshing agent presence failed")

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="jupyter-mcp-agent-presence")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for entry in list(self._entries.values()):
            self._announce(entry, withdraw=True)
        self._entries.clear()
