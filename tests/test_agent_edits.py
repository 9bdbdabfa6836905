"""The agent's finer edits (cell_edit, cell_move, cell_clear_outputs) on the live document, with a
person's client connected: what the person does meanwhile is never lost or duplicated.

A "lagging" client is a real collaborative peer that has not yet received the agent's edit: a copy
of the UI's document that edits on its own, whose update is then sent over the UI's websocket as
the y-protocol update message a browser sends. It makes "the person typed just before the agent's
edit reached them" happen every time, not by chance."""

from __future__ import annotations

import asyncio
import contextlib
import json
import string

import pytest
from jupyter_ydoc import YNotebook
from pycrdt import Doc, create_update_message

from jupyter_mcp.client import LEGACY, MODERN, connect
from jupyter_mcp.testing import UIClient, call, disk_sources, new_notebook, refused

pytestmark = pytest.mark.live


class Lagging:
    """A peer holding the document as the UI has it now, editing without seeing anything newer."""

    def __init__(self, ui: UIClient) -> None:
        self.ui = ui
        self.nb = YNotebook(Doc())
        self.nb.ydoc.apply_update(ui.doc.get_update())
        self.since = self.nb.ydoc.get_state()

    def text(self, index: int):
        return self.nb.ycells[index]["source"]

    async def send(self) -> None:
        """Deliver what this peer did, late, as the y-protocol update a browser sends."""
        await self.ui.channel.send(create_update_message(self.nb.ydoc.get_update(self.since)))


def sources(ui: UIClient) -> list[str]:
    return [str(c["source"]) for c in ui.nb.ycells]


async def settled(ui: UIClient, expected_ids: list[str] | None = None) -> None:
    await asyncio.sleep(0.3)  # the room's broadcasts reach the UI client
    if expected_ids is not None:
        await ui.wait_for(lambda: ui.cell_ids() == expected_ids)


# --- cell_edit --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_cell_edit_replaces_only_its_span_and_keeps_a_persons_concurrent_typing(live, mode):
    source = "def area(r):\n    return 3.14 * r * r\n\nprint(area(2))\n"
    name, ids = new_notebook(live.root, source, "x = 1")
    async with connect(live.mcp_url, live.token, mode=mode) as mcp, UIClient(live.url, live.token, name) as ui:
        person = Lagging(ui)
        person.text(0).insert(len(source.encode()), "# typed by Ada\n")  # at the end, not yet seen by the agent
        answer = await call(mcp, "cell_edit", path=name, cell_id=ids[0], old="3.14", new="math.pi")
        assert answer == {"id": ids[0], "index": 0, "cell_type": "code", "replacements": 1,
                          "source": source.replace("3.14", "math.pi"),
                          "diff": "--- before\n+++ after\n@@ -1,4 +1,4 @@\n def area(r):\n"
                                  "-    return 3.14 * r * r\n+    return math.pi * r * r\n \n print(area(2))\n"}
        await person.send()
        want = source.replace("3.14", "math.pi") + "# typed by Ada\n"
        await ui.wait_for(lambda: ui.source(0) == want)
        got = await call(mcp, "cell_get", path=name, cell_id=ids[0])
        assert got["source"] == want  # both edits, each once, in the agent's view too


async def test_cell_edit_with_the_person_typing_all_along(live):
    """The person types a character every few milliseconds at the end of the cell while the agent
    patches its start, over and over: every character and every patch is there, once."""
    name, ids = new_notebook(live.root, "value = 0\n")
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        typed = "the quick brown fox jumps over the lazy dog"

        async def type_slowly():
            for ch in typed:
                text = ui.nb.ycells[0]["source"]
                text.insert(len(str(text).encode()), ch)
                await asyncio.sleep(0.01)

        typing = asyncio.ensure_future(type_slowly())
        for k in range(8):
            await call(mcp, "cell_edit", path=name, cell_id=ids[0], old=f"value = {k}", new=f"value = {k + 1}")
        await typing
        want = "value = 8\n" + typed
        await ui.wait_for(lambda: ui.source(0) == want)
        assert (await call(mcp, "cell_get", path=name, cell_id=ids[0]))["source"] == want


async def test_cell_edit_refuses_what_it_cannot_do_exactly(live):
    name, ids = new_notebook(live.root, "a = 1\na = 1\n", "b = 'é'")
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        assert "not found" in await refused(mcp, "cell_edit", path=name, cell_id=ids[0], old="c = 1", new="x")
        message = await refused(mcp, "cell_edit", path=name, cell_id=ids[0], old="a = 1", new="x")
        assert "occurs 2 times" in message and "replace_all" in message
        assert "non-empty" in await refused(mcp, "cell_edit", path=name, cell_id=ids[0], old="", new="x")
        assert sources(ui) == ["a = 1\na = 1\n", "b = 'é'"]  # refused: nothing changed
        every = await call(mcp, "cell_edit", path=name, cell_id=ids[0], old="a = 1", new="a = 2", replace_all=True)
        assert every["replacements"] == 2 and every["source"] == "a = 2\na = 2\n"
        # offsets past a multi-byte character land where they should (pycrdt counts UTF-8 bytes)
        await call(mcp, "cell_edit", path=name, cell_id=ids[1], old="'", new='"', replace_all=True)
        await call(mcp, "cell_edit", path=name, index=1, old='"é"', new='"éé" + "ü"')
        await ui.wait_for(lambda: sources(ui) == ["a = 2\na = 2\n", 'b = "éé" + "ü"'])


# --- cell_move ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_cell_move_keeps_id_source_and_outputs(live, mode):
    name, ids = new_notebook(live.root, "print('first')", "b = 2", "c = 3", "d = 4")
    async with connect(live.mcp_url, live.token, mode=mode) as mcp, UIClient(live.url, live.token, name) as ui:
        ran = await call(mcp, "cell_execute", path=name, cell_id=ids[0])
        moved = await call(mcp, "cell_move", path=name, cell_id=ids[0], to_index=2)
        assert moved == {"id": ids[0], "index": 2, "from_index": 0, "cell_count": 4}
        order = [ids[1], ids[2], ids[0], ids[3]]
        await settled(ui, order)
        cell = ui.nb.ycells[2]
        assert str(cell["source"]) == "print('first')" and cell["execution_count"] == ran["execution_count"]
        assert [o["text"] for o in cell["outputs"].to_py()] == ["first\n"]
        back = await call(mcp, "cell_move", path=name, index=2, to_index=0)
        assert back["from_index"] == 2
        await settled(ui, ids)
        read = await call(mcp, "notebook_get", path=name)
        assert [c["id"] for c in read["cells"]] == ids and read["cells"][0]["outputs"][0]["text"] == "first\n"
        assert "out of range" in await refused(mcp, "cell_move", path=name, cell_id=ids[0], to_index=4)
        assert ui.cell_ids() == ids


async def test_typing_that_crosses_a_move_is_carried_into_the_moved_cell(live):
    name, ids = new_notebook(live.root, "total = 0\n", "other = 1", "last = 2")
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        person = Lagging(ui)
        person.text(0).insert(len("total = 0\n".encode()), "total += 1  # Ada\n")
        await call(mcp, "cell_move", path=name, cell_id=ids[0], to_index=2)
        await settled(ui, [ids[1], ids[2], ids[0]])
        await person.send()  # arrives after the move: in Yjs alone it lands in the deleted copy
        await ui.wait_for(lambda: sources(ui) == ["other = 1", "last = 2", "total = 0\ntotal += 1  # Ada\n"])
        read = await call(mcp, "notebook_get", path=name)
        assert [c["id"] for c in read["cells"]] == [ids[1], ids[2], ids[0]]  # one copy: nothing duplicated
        await asyncio.sleep(0.5)
        assert sources(ui) == ["other = 1", "last = 2", "total = 0\ntotal += 1  # Ada\n"]


# A person types a letter every 30 ms at the end of a cell, all along, while the agent moves it or
# rewrites it. Yjs orders two inserts made at one spot at the same time by client id, so each test
# runs with the tab's id below the server document's and above it. During each of the agent's
# edits the tab receives nothing (``held_back``, a slow link): the letters typed then cross it.

TAB_SIDES = pytest.mark.parametrize("side", ["tab-id-below-server", "tab-id-above-server"])


def tab_id(server_id: int, side: str) -> int:
    return server_id // 2 if side == "tab-id-below-server" else server_id + (2 ** 53 - server_id) // 2


class Typist:
    """A person typing one letter every 30 ms at the end of a cell (found by its id) in their tab."""

    def __init__(self, ui: UIClient, cell_id: str) -> None:
        self.ui, self.cell_id = ui, cell_id
        self.typed: list[str] = []
        self.stopped = asyncio.Event()

    async def __aenter__(self) -> Typist:
        self.task = asyncio.ensure_future(self._type())
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def _type(self) -> None:
        while not self.stopped.is_set():
            letter = string.ascii_letters[len(self.typed) % len(string.ascii_letters)]
            self.ui.type_into(self.ui.cell_ids().index(self.cell_id), letter)
            self.typed.append(letter)
            await asyncio.sleep(0.03)

    async def more(self, count: int) -> None:
        """Until ``count`` more letters are typed."""
        target = len(self.typed) + count
        await self.ui.wait_for(lambda: len(self.typed) >= target)

    async def stop(self) -> str:
        """Stop typing; all that was typed."""
        self.stopped.set()
        await self.task
        return "".join(self.typed)


async def tab_source(ui: UIClient, cell_id: str, want: str) -> str:
    """The cell's source in a tab once it is ``want`` (or what it is after 20 s)."""
    with contextlib.suppress(AssertionError):
        await ui.wait_for(lambda: cell_id in ui.cell_ids() and ui.source(ui.cell_ids().index(cell_id)) == want)
    return ui.source(ui.cell_ids().index(cell_id))


async def server_source(mcp, name: str, cell_id: str, want: str) -> str:
    """The cell's source in the live document once it is ``want`` (or what it is after 20 s)."""
    deadline = asyncio.get_running_loop().time() + 20
    while (source := (await call(mcp, "cell_get", path=name, cell_id=cell_id))["source"]) != want:
        if asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.1)
    return source


async def file_source(path, index: int, want: str) -> str:
    """The cell's source in the file once autosave wrote ``want`` (or what it holds after 20 s)."""
    deadline = asyncio.get_running_loop().time() + 20
    while (source := disk_sources(path)[index]) != want and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
    return source


@TAB_SIDES
async def test_a_person_typing_all_along_loses_no_keystroke_to_moves(live, side):
    """Issue 40, finding 7: with 1, 4 and 16 moves, letters typed as a move travelled were lost. Four
    moves reach the tab late (every time, letters cross them), then sixteen quick ones."""
    name, ids = new_notebook(live.root, "total = 0\n", "other = 1", "last = 2")
    async with connect(live.mcp_url, live.token) as mcp, \
            UIClient(live.url, live.token, name, name="Idle Tab") as idle:  # a second tab: it echoes all
        server_id = idle.server_client_id()
        async with UIClient(live.url, live.token, name, doc=Doc(client_id=tab_id(server_id, side))) as ui:
            async with Typist(ui, ids[0]) as person:
                await person.more(3)
                for k in range(4):  # each move crossed by the letters typed before the tab saw it
                    to = 2 if k % 2 == 0 else 0
                    async with ui.held_back():
                        await call(mcp, "cell_move", path=name, cell_id=ids[0], to_index=to)
                        await person.more(2)  # into the copy the move deletes: carried into the moved cell
                        carried = "total = 0\n" + "".join(person.typed)
                        with contextlib.suppress(AssertionError):
                            await idle.wait_for(lambda: idle.source(to).startswith(carried))
                        assert idle.source(to).startswith(carried), (idle.source(to), carried)
                        await ui.deliver_until(lambda: ui.cell_ids().index(ids[0]) == to)  # the move alone
                        await person.more(2)  # into the moved cell, before the carried letters reach the tab
                    await person.more(2)
                assert ui.clients() == {0, server_id, ui.doc.client_id}  # the moves' items are the server's
                for k in range(16):  # quick moves, the tab's link as it is
                    await call(mcp, "cell_move", path=name, cell_id=ids[0], to_index=2 if k % 2 == 0 else 0)
                await person.more(3)
                want = "total = 0\n" + await person.stop()
                assert await tab_source(ui, ids[0], want) == want  # each letter once, in the order typed
                assert await tab_source(idle, ids[0], want) == want
                await ui.wait_for(lambda: ui.cell_ids() == ids)
                assert await server_source(mcp, name, ids[0], want) == want
                assert await file_source(live.root / name, 0, want) == want
                assert [c["id"] for c in (await call(mcp, "notebook_get", path=name))["cells"]] == ids  # one copy


def removed_line(diff: str) -> str:
    lines = [line[1:] for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert len(lines) == 1, diff
    return lines[0]


@TAB_SIDES
async def test_a_person_typing_all_along_keeps_each_letter_after_the_agents_update(live, side):
    """Issue 40, finding 8: the letter typed as an update travelled went between "x = " and the agent's
    digit for a tab whose client id is below the server's. Each round the agent reads the cell and
    writes it back with x one more; by then the person typed on (the agent's read is stale, so the
    update replaces those letters: its diff says which), and they type on while it travels."""
    name, ids = new_notebook(live.root, "x = 0  # note: ", "other = 1")
    async with connect(live.mcp_url, live.token) as mcp, \
            UIClient(live.url, live.token, name, name="Idle Tab") as idle:
        server_id = idle.server_client_id()
        async with UIClient(live.url, live.token, name, doc=Doc(client_id=tab_id(server_id, side))) as ui, \
                Typist(ui, ids[0]) as person:
            replaced_letters: set[int] = set()  # those an update replaced (its diff shows them), by when typed

            def cell_letters() -> list[int]:  # the letters the cell should hold, by when typed
                return [i for i in range(len(person.typed)) if i not in replaced_letters]

            for n in range(5):
                await person.more(2)
                read = (await call(mcp, "cell_get", path=name, cell_id=ids[0]))["source"]
                prefix = f"x = {n}  # note: "
                assert read.startswith(prefix), read  # the agent's text intact, nothing typed inside it
                seen = len(read) - len(prefix)
                assert read[len(prefix):] == "".join(person.typed[i] for i in cell_letters()[:seen])
                while len((await call(mcp, "cell_get", path=name, cell_id=ids[0]))["source"]) == len(read):
                    await asyncio.sleep(0.01)  # until a letter reached the server after the read
                async with ui.held_back():
                    answer = await call(mcp, "cell_update", path=name, cell_id=ids[0],
                                        source=read.replace(prefix, f"x = {n + 1}  # note: ", 1))
                    await person.more(2)  # typed before the update reached the tab
                replaced = removed_line(answer["diff"])[len(read):]  # what reached the server after the read
                letters = cell_letters()[seen:seen + len(replaced)]
                assert replaced and replaced == "".join(person.typed[i] for i in letters)
                replaced_letters.update(letters)
            assert ui.clients() == {0, server_id, ui.doc.client_id}  # the updates' items are the server's
            await person.more(2)
            await person.stop()
            want = "x = 5  # note: " + "".join(person.typed[i] for i in cell_letters())
            assert await tab_source(ui, ids[0], want) == want  # each letter once, in the order typed
            assert await tab_source(idle, ids[0], want) == want
            assert await server_source(mcp, name, ids[0], want) == want
            assert await file_source(live.root / name, 0, want) == want


async def test_a_persons_move_that_crosses_the_agents_move_wins_and_nothing_is_doubled(live):
    name, ids = new_notebook(live.root, "a = 1", "b = 2", "c = 3", "d = 4")
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        person = Lagging(ui)
        with person.nb.ydoc.transaction():  # the person moves cell b to the end, as JupyterLab does
            cell = json.loads(str(person.nb.ycells[1]))
            del person.nb.ycells[1]
            person.nb.ycells.insert(3, person.nb.create_ycell(cell))
        await call(mcp, "cell_move", path=name, cell_id=ids[1], to_index=0)
        await person.send()
        await ui.wait_for(lambda: ui.cell_ids() == [ids[0], ids[2], ids[3], ids[1]])
        assert sources(ui) == ["a = 1", "c = 3", "d = 4", "b = 2"]  # theirs stayed, ours went: one b

        # A delete that crosses the move cannot be told from the move's own deletion echoed back
        # (moves.py): the moved cell stays, once; nothing is lost, the person deletes it again.
        person = Lagging(ui)
        del person.nb.ycells[0]  # the person deletes a
        await call(mcp, "cell_move", path=name, cell_id=ids[0], to_index=3)
        await person.send()
        await settled(ui, [ids[2], ids[3], ids[1], ids[0]])
        read = await call(mcp, "notebook_get", path=name)
        assert [c["id"] for c in read["cells"]] == [ids[2], ids[3], ids[1], ids[0]]


async def test_moving_a_running_cell_its_outputs_follow(live):
    code = "import time\nfor i in range(4):\n    print(i, flush=True)\n    time.sleep(0.3)"
    name, ids = new_notebook(live.root, code, "x = 1", "y = 2")
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        run = asyncio.ensure_future(call(mcp, "cell_execute", path=name, cell_id=ids[0]))
        await ui.wait_for(lambda: ui.nb.ycells[0].get("execution_state") == "running")
        await call(mcp, "cell_move", path=name, cell_id=ids[0], to_index=2)
        await ui.wait_for(lambda: ui.cell_ids() == [ids[1], ids[2], ids[0]])
        assert ui.nb.ycells[2].get("execution_state") == "running"  # the moved copy still shows [*]
        result = await run
        assert result["status"] == "ok"
        await ui.wait_for(lambda: ui.cell_ids() == [ids[1], ids[2], ids[0]]
                          and ui.nb.ycells[2].get("execution_count") == result["execution_count"])
        text = "".join(o.get("text", "") for o in ui.nb.ycells[2]["outputs"].to_py())
        assert text == "0\n1\n2\n3\n"


# --- cell_clear_outputs --------------------------------------------------------------------------


async def test_clear_outputs_of_one_cell_or_all(live):
    name, ids = new_notebook(live.root, "print(1)", "print(2)", "import time; time.sleep(3)")
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        for cell_id in ids[:2]:
            await call(mcp, "cell_execute", path=name, cell_id=cell_id)
        one = await call(mcp, "cell_clear_outputs", path=name, cell_id=ids[0])
        assert one == {"path": name, "cleared": [ids[0]], "running": []}
        await ui.wait_for(lambda: ui.nb.ycells[0]["outputs"].to_py() == []
                          and ui.nb.ycells[0].get("execution_count") is None)
        assert [o["text"] for o in ui.nb.ycells[1]["outputs"].to_py()] == ["2\n"]  # the other is untouched
        sleeping = asyncio.ensure_future(call(mcp, "cell_execute", path=name, cell_id=ids[2]))
        await ui.wait_for(lambda: ui.nb.ycells[2].get("execution_state") == "running")
        assert "running" in await refused(mcp, "cell_clear_outputs", path=name, cell_id=ids[2])
        both = await refused(mcp, "cell_clear_outputs", path=name, cell_id=ids[0], all_cells=True)
        assert "not both" in both
        every = await call(mcp, "cell_clear_outputs", path=name, all_cells=True)
        assert every == {"path": name, "cleared": [ids[1]], "running": [ids[2]]}
        await sleeping
        await ui.wait_for(lambda: all(c["outputs"].to_py() == [] for c in list(ui.nb.ycells)[:2]))
