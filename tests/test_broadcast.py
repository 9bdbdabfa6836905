"""The people in a room are sent an agent's edit before the agent hears back.

jupyter-server-ydoc's room (pycrdt-websocket's ``YRoom``) broadcasts a document update from a
task of its own: the transaction queues the update, the room's broadcast loop takes it on a
later loop turn and starts one send per tab, and each send writes to its websocket a turn
after that. ``Notebooks.edited`` gives the room those turns before the answer is put
together. This test is the guard of that timing: should an upgrade need more turns, the
count of updates handed to the tab by the time ``edited`` returns is zero and it fails.
"""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_mcp.client import connect
from jupyter_mcp.testing import UIClient, call, write_notebook
from jupyter_mcp.tools.operations import Notebooks

pytestmark = pytest.mark.live

SYNC, SYNC_UPDATE = 0, 2  # Yjs's message type and sync step of a document update

EDITS = {
    "cell_update": lambda ids: {"cell_id": ids[0], "source": "a = 10"},
    "cell_edit": lambda ids: {"cell_id": ids[0], "old": "1", "new": "11"},
    "cell_insert": lambda ids: {"source": "c = 3", "index": 1},
    "cell_move": lambda ids: {"cell_id": ids[0], "to_index": 1},
    "cell_delete": lambda ids: {"cell_id": ids[1]},
}


@pytest.mark.parametrize("tool", sorted(EDITS))
async def test_the_tab_is_sent_the_edit_before_the_agent_hears_back(mcp_url, jp_token, jp_root_dir, mcp_ext,
                                                                    monkeypatch, tool):
    name = f"broadcast_{tool}.ipynb"
    ids = write_notebook(jp_root_dir / name, ["a = 1", "b = 2"])
    updates_to_tab: list[bytes] = []
    when_answered: list[int] = []  # updates the tab had been sent when each edit step returned
    edited = Notebooks.edited

    async def edited_then_counted(self: Notebooks, nb: Any) -> None:
        await edited(self, nb)
        when_answered.append(len(updates_to_tab))

    monkeypatch.setattr(Notebooks, "edited", edited_then_counted)
    async with UIClient(mcp_url.removesuffix("mcp"), jp_token, name) as ui, connect(mcp_url, jp_token) as mcp:
        live = mcp_ext.rooms.find(name)
        assert live is not None, "the tab's room is open"
        (tab,) = live.room.clients
        send = tab.send

        async def counted_send(message: bytes) -> None:
            if message[:2] == bytes([SYNC, SYNC_UPDATE]):
                updates_to_tab.append(message)
            await send(message)

        tab.send = counted_send
        await ui.wait_for(lambda: len(ui.cell_ids()) == 2)
        before = ui.cell_ids(), [ui.source(i) for i in range(2)]
        await call(mcp, tool, path=name, **EDITS[tool](ids))
        await ui.wait_for(lambda: (ui.cell_ids(), [ui.source(i) for i in range(len(ui.cell_ids()))]) != before)
    assert when_answered and when_answered[0] >= 1, (
        f"{tool}: the agent's answer was put together before the room sent the edit to the tab "
        f"(updates sent by then: {when_answered})")
