"""Unit tests of the document layer against a plain YNotebook (no Jupyter process): in-place
edits (a bounded prefix/suffix diff, exact on any Unicode, one transaction), the source size
cap, insert bounds, change descriptions, the read cache after a deletion, outputs written
as they arrive."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from jupyter_ydoc import YNotebook
from pycrdt import Doc, Text, TextEvent

from jupyter_mcp.notebooks import cells
from jupyter_mcp.notebooks.changes import describe_changes
from jupyter_mcp.errors import NotebookError

pytestmark = pytest.mark.unit


def notebook(*sources: str, cell_type: str = "code") -> YNotebook:
    ynb = YNotebook(Doc())
    cell = {"code": {"outputs": [], "execution_count": None}}.get(cell_type, {})
    ynb.set({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
             "cells": [{"cell_type": cell_type, "source": s, "metadata": {}, "id": f"c{i}", **cell}
                       for i, s in enumerate(sources)]})
    return ynb


def sources(ynb: YNotebook) -> list[str]:
    return [str(c["source"]) for c in ynb.ycells]


def test_update_edits_the_text_in_place_and_keeps_the_id():
    ynb = notebook("a = 1", "b = 2")
    text_before = ynb.ycells[1]["source"]
    cells.update(ynb, 1, "b = 20")
    assert sources(ynb) == ["a = 1", "b = 20"]
    assert cells.id_of(ynb.ycells[1]) == "c1"
    assert str(text_before) == "b = 20"  # the Text the UI holds was edited, not replaced


def test_update_can_change_the_type_in_one_transaction():
    ynb = notebook("# title")
    seen = []
    ynb.ycells.observe_deep(lambda events: seen.append(len(events)))
    cells.update(ynb, 0, "# Title", "markdown")
    assert len(seen) == 1  # one transaction: one batch of events
    cell = ynb.ycells[0].to_py()
    assert cell["cell_type"] == "markdown" and cell["id"] == "c0" and "outputs" not in cell
    cells.set_type(ynb, 0, "code")
    cell = ynb.ycells[0].to_py()
    assert cell["outputs"] == [] and cell["execution_count"] is None and cell["id"] == "c0"


def test_locate_by_id_or_index_and_its_refusals():
    ynb = notebook("a", "b", "c")
    assert cells.locate(ynb, "c2") == 2 and cells.locate(ynb, index=1) == 1 and cells.locate(ynb, "c1", 1) == 1
    for kwargs, message in [({"cell_id": "nope"}, "no cell with id 'nope'"),
                            ({"cell_id": "c1", "index": 2}, "is at index 1, not 2"),
                            ({"index": 3}, "out of range"), ({"index": -1}, "out of range"),
                            ({}, "name the cell"), ({"cell_id": ""}, "non-empty")]:
        with pytest.raises(NotebookError, match=message):
            cells.locate(ynb, **kwargs)
    empty = notebook("x")
    del empty.ycells[0]  # (jupyter-ydoc gives a notebook set with no cells one empty cell)
    with pytest.raises(NotebookError, match="the notebook is empty"):
        cells.locate(empty, index=0)


def test_insert_bounds_and_new_ids():
    ynb = notebook("a", "b")
    first = cells.insert(ynb, 0, "markdown", "# top")
    last = cells.insert(ynb, 3, "code", "end")
    assert sources(ynb) == ["# top", "a", "b", "end"]
    assert len({first, last, "c0", "c1"}) == 4 and all(cells.id_of(c) for c in ynb.ycells)
    for bad in (5, -1, True):
        with pytest.raises(NotebookError, match="out of range for an insert: use 0..4"):
            cells.insert(ynb, bad, "code", "x")
    assert len(ynb.ycells) == 4  # nothing was inserted by a refused call


def test_delete_answers_what_it_was():
    ynb = notebook("a", "b")
    assert cells.delete(ynb, [0]) == [{"id": "c0", "index": 0, "cell_type": "code", "source": "a"}]
    assert sources(ynb) == ["b"]


def test_several_deleted_in_one_transaction_and_the_read_cache_follows():
    ynb = notebook("a", "b", "c", "d", "e")
    cells.snapshot(ynb)  # a current read cache, which the delete patches
    batches: list[list[dict]] = []
    ynb.ycells.observe_deep(lambda events: batches.append(describe_changes(ynb, events)))
    gone = cells.delete(ynb, [4, 0, 2])
    assert [(g["id"], g["index"]) for g in gone] == [("c0", 0), ("c2", 2), ("c4", 4)]
    assert sources(ynb) == ["b", "d"]
    assert [c["source"] for c in cells.snapshot(ynb)] == ["b", "d"]
    assert cells.find(ynb, "c3") == 1 and cells.find(ynb, "c2") is None
    assert batches == [[{"kind": "cells_deleted", "cell_index": 0, "count": 1},
                        {"kind": "cells_deleted", "cell_index": 1, "count": 1},
                        {"kind": "cells_deleted", "cell_index": 2, "count": 1}]]  # one change


def test_diff_of_a_source():
    assert cells.diff("a\nb", "a\nc") == "--- before\n+++ after\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    assert cells.diff("same", "same") == ""
    long = cells.diff("", "x\n" * 20_000)
    assert long.startswith("--- before\n+++ after\n@@ -0,0 +1,20000 @@\n+x\n+x\n")
    assert long.endswith(f"\n[diff cut at {cells.MAX_DIFF_CHARS} of 60041 characters]\n")  # 41 of headers, 20,000 "+x"


def test_change_descriptions():
    ynb = notebook("a", "b")
    batches: list[list[dict]] = []
    ynb.ycells.observe_deep(lambda events: batches.append(describe_changes(ynb, events)))
    cells.update(ynb, 1, "b = 2")
    new_id = cells.insert(ynb, 1, "code", "x")
    cells.delete(ynb, [0])
    cells.begin_run(ynb, 0)
    assert batches[0] == [{"kind": "source", "cell_id": "c1", "cell_index": 1}]
    assert batches[1] == [{"kind": "cells_inserted", "cell_index": 1, "cell_ids": [new_id]}]
    assert batches[2] == [{"kind": "cells_deleted", "cell_index": 0, "count": 1}]
    assert {c["kind"] for c in batches[3]} >= {"execution_count"} and all(c["cell_id"] == new_id for c in batches[3])


def test_the_read_cache_sees_a_deletion_right_after_a_read():
    ynb = notebook("keep", "drop me")
    assert [c["source"] for c in cells.snapshot(ynb)] == ["keep", "drop me"]
    assert cells.snapshot(ynb) is cells.snapshot(ynb)  # unchanged: converted once
    state_before = ynb.ydoc.get_state()
    del ynb.ycells[1]
    assert ynb.ydoc.get_state() == state_before  # a deletion does not advance the state vector...
    assert [c["source"] for c in cells.snapshot(ynb)] == ["keep"]  # ...and the read still sees it
    text = ynb.ycells[0]["source"]
    del text[0:2]  # a person erasing text
    assert [c["source"] for c in cells.snapshot(ynb)] == ["ep"]


def test_outputs_written_as_they_arrive():
    ynb = notebook("print('x')")
    cells.begin_run(ynb, 0)
    assert ynb.ycells[0]["execution_state"] == "running"
    cells.apply_output_event(ynb, 0, {"kind": "output", "output": {"output_type": "stream", "name": "stdout",
                                                                   "text": "one\n"}})
    cells.apply_output_event(ynb, 0, {"kind": "stream", "index": 0, "text": "two\n"})
    cells.apply_output_event(ynb, 0, {"kind": "output", "output": {"output_type": "display_data",
                                                                   "data": {"text/plain": "v1"}, "metadata": {}}})
    cells.apply_output_event(ynb, 0, {"kind": "update", "index": 1,
                                      "output": {"data": {"text/plain": "v2"}, "metadata": {}}})
    outputs = ynb.ycells[0]["outputs"].to_py()
    assert outputs[0]["text"] == "one\ntwo\n" and outputs[1]["data"] == {"text/plain": "v2"}
    cells.apply_output_event(ynb, 0, {"kind": "clear"})
    assert ynb.ycells[0]["outputs"].to_py() == []
    cells.replace_outputs(ynb, 0, [{"output_type": "stream", "name": "stdout", "text": "again\n"}])
    cells.end_run(ynb, 0, 3)
    cell = ynb.ycells[0].to_py()
    assert cell["outputs"][0]["text"] == "again\n" and cell["execution_count"] == 3
    assert cell["execution_state"] == "idle"


# --- the source diff: exact, bounded, one transaction -----------------------------------

#: ASCII, accents, CJK, emoji (4 UTF-8 bytes, a surrogate pair in UTF-16), a combining mark,
#: a zero-width joiner sequence: characters 1 to 4 bytes long, next to each other.
ALPHABET = "ab \n=é中文😀𝄞\u0301👩\u200d💻"


def random_text(rnd: random.Random, n: int) -> str:
    return "".join(rnd.choices(ALPHABET, k=n))


def random_edit(rnd: random.Random, text: str) -> str:
    """One to three insertions, deletions or replacements anywhere, in code points."""
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randint(0, len(text))
        j = rnd.randint(i, min(len(text), i + rnd.randint(0, 6)))
        text = text[:i] + random_text(rnd, rnd.randint(0, 4)) + text[j:]
    return text


def test_pycrdt_indexes_a_text_in_utf8_bytes():
    # what replace_text relies on (jupyter-ydoc's diff too): offsets are UTF-8 bytes
    text = Doc().get("t", type=Text)
    text += "a😀b"
    assert len(text) == 6
    text.insert(5, "X")
    assert str(text) == "a😀Xb"


def test_replace_text_is_exact_on_random_edits_of_any_unicode():
    rnd = random.Random(12)
    for _ in range(2000):
        old = random_text(rnd, rnd.randint(0, 30))
        new = random_edit(rnd, old) if rnd.random() < 0.8 else random_text(rnd, rnd.randint(0, 30))
        doc = Doc()
        text = doc.get("t", type=Text)
        text += old
        events: list[TextEvent] = []
        text.observe(events.append)
        ahead = rnd.random() < 0.5  # a pure insertion then also replaces the character before it
        cells.replace_text(text, new.encode(), ahead_of_others=ahead)
        assert str(text) == new, (old, new, ahead)
        assert len(events) == (old != new)  # one transaction, or none for no change
        peer = Doc()  # another client applying the one update sees the same text
        peer.apply_update(doc.get_update())
        assert str(peer.get("t", type=Text)) == new


def test_a_small_edit_touches_only_what_changed():
    # what keeps a person's cursor elsewhere in the cell where it was
    old = "".join(f"line {i} 中文😀\n" for i in range(2000))
    new = old.replace("line 1000 ", "line 1000 edited ", 1)
    doc = Doc()
    text = doc.get("t", type=Text)
    text += old
    deltas = []
    text.observe(lambda event: deltas.append(event.delta))
    cells.replace_text(text, new.encode())
    assert str(text) == new
    retained = old.index("line 1000 ") + len("line 1000 ")
    assert deltas == [[{"retain": len(old[:retained].encode())}, {"insert": "edited "}]]


@pytest.mark.slow  # a wall-clock threshold (0.2 s) no benchmark measures: out of `-m 'not slow'`
@pytest.mark.alone  # and measured with no other test sharing the CPU
def test_a_big_dissimilar_replacement_is_fast_and_exact():
    rnd = random.Random(4)
    alphabet = "".join(map(chr, range(32, 127))) + "é中😀"  # difflib's slowest case: seconds at 32 KB
    for n in (32_000, 100_000, cells.MAX_SOURCE_CHARS):
        ynb = notebook("".join(rnd.choices(alphabet, k=n)))
        new = "".join(rnd.choices(alphabet, k=n))
        start = time.perf_counter()
        cells.update(ynb, 0, new)
        took = time.perf_counter() - start
        assert sources(ynb) == [new] and cells.id_of(ynb.ycells[0]) == "c0"
        assert took < 0.2, f"{n} characters took {took:.3f} s"


def test_update_is_one_transaction_on_the_same_text_and_map():
    ynb = notebook("x = 1\nprint(x)", "y")
    ycell, text = ynb.ycells[0], ynb.ycells[0]["source"]
    seen = []
    ynb.ydoc.observe(lambda event: seen.append(event))
    cells.update(ynb, 0, "完全に違う 😀 text", "markdown")
    assert len(seen) == 1  # other clients get one update
    assert str(text) == "完全に違う 😀 text"  # the Text the UI holds was edited, not replaced
    assert ynb.ycells[0].to_py()["id"] == "c0" and str(ycell["source"]) == "完全に違う 😀 text"
    assert sources(ynb) == ["完全に違う 😀 text", "y"]
    ynb.ycells[1]["source"] = "legacy"  # a plain string, as old documents may hold
    cells.update(ynb, 1, "y = 2")
    assert sources(ynb) == ["完全に違う 😀 text", "y = 2"] and isinstance(ynb.ycells[1]["source"], Text)


def test_a_source_over_the_cap_is_refused_and_changes_nothing():
    ynb = notebook("keep me", "b")
    state = ynb.ydoc.get_state() + ynb.ydoc.get_update(ynb.ydoc.get_state())
    over = "x" * (cells.MAX_SOURCE_CHARS + 1)
    expected = f"source is {cells.MAX_SOURCE_CHARS + 1:,} characters, over the limit of {cells.MAX_SOURCE_CHARS:,}"
    with pytest.raises(NotebookError, match=expected) as refusal:
        cells.update(ynb, 0, over, "markdown")
    assert "nothing was changed" in str(refusal.value)
    with pytest.raises(NotebookError, match=expected):
        cells.insert(ynb, 1, "code", over)
    with pytest.raises(NotebookError, match="lone surrogate at character 1"):
        cells.update(ynb, 0, "a\ud800b")
    assert ynb.ydoc.get_state() + ynb.ydoc.get_update(ynb.ydoc.get_state()) == state  # not one byte
    assert sources(ynb) == ["keep me", "b"] and ynb.ycells[0]["cell_type"] == "code"
    at_cap = "y" * cells.MAX_SOURCE_CHARS  # the cap itself is allowed
    cells.update(ynb, 1, at_cap)
    cells.insert(ynb, 2, "raw", at_cap)
    assert sources(ynb) == ["keep me", at_cap, at_cap]


def _nbformat_valid(ynb: YNotebook) -> None:
    import nbformat

    nbformat.validate(nbformat.from_dict(ynb.get()))


def test_retyping_gives_each_type_its_valid_shape():
    ynb = notebook("print(1)", "# title")
    cells.begin_run(ynb, 0)
    cells.apply_output_event(ynb, 0, {"kind": "output", "output": {"output_type": "stream", "name": "stdout",
                                                                   "text": "1\n"}})
    cells.end_run(ynb, 0, 3)
    cells.update(ynb, 0, "now prose", cell_type="markdown")
    assert not {"outputs", "execution_count", "execution_state"} & set(ynb.ycells[0].to_py())
    cells.update(ynb, 1, "x = 1", cell_type="code")
    assert ynb.ycells[1]["outputs"].to_py() == [] and ynb.ycells[1]["execution_count"] is None
    _nbformat_valid(ynb)


def test_outputs_of_a_run_go_only_to_a_code_cell():
    ynb = notebook("print(1)")
    cells.begin_run(ynb, 0)
    ycell = ynb.ycells[0]
    ycell["cell_type"] = "markdown"  # retyped in place by someone who left the code cell's fields
    event = {"kind": "output", "output": {"output_type": "stream", "name": "stdout", "text": "1\n"}}
    cells.apply_output_event(ynb, 0, event)  # no KeyError, nothing written
    cells.replace_outputs(ynb, 0, [event["output"]])
    cells.end_run(ynb, 0, 4)  # the run ends: the cell keeps a markdown cell's shape
    assert not {"outputs", "execution_count", "execution_state"} & set(ycell.to_py())
    cells.begin_run(ynb, 0)
    assert "outputs" not in ycell and "execution_state" not in ycell
    _nbformat_valid(ynb)


def test_edit_replaces_only_the_span_and_refuses_absent_or_ambiguous_text():
    ynb = notebook("a = 'é'\na = 'é'\n")
    text = ynb.ycells[0]["source"]
    with pytest.raises(NotebookError, match="not found"):
        cells.edit(ynb, 0, "b = 1", "c")
    with pytest.raises(NotebookError, match="occurs 2 times"):
        cells.edit(ynb, 0, "'é'", "'ü'")
    with pytest.raises(NotebookError, match="non-empty"):
        cells.edit(ynb, 0, "", "x")
    assert sources(ynb) == ["a = 'é'\na = 'é'\n"]  # refusals change nothing
    assert cells.edit(ynb, 0, "'é'", "'ü'", replace_all=True) == 2
    assert sources(ynb) == ["a = 'ü'\na = 'ü'\n"] and str(text) == sources(ynb)[0]  # the same Text, edited


def test_move_keeps_the_cell_and_refuses_out_of_range():
    ynb = notebook("a", "b", "c")
    ynb.ycells[0]["execution_count"] = 3
    cells.snapshot(ynb)  # a read cache exists: the move keeps it right
    cells.move(ynb, 0, 2)
    assert sources(ynb) == ["b", "c", "a"] and [cells.id_of(c) for c in ynb.ycells] == ["c1", "c2", "c0"]
    assert ynb.ycells[2]["execution_count"] == 3
    assert [c["id"] for c in cells.snapshot(ynb)] == ["c1", "c2", "c0"]
    with pytest.raises(NotebookError, match="out of range"):
        cells.move(ynb, 0, 3)


def test_clear_outputs_clears_code_cells_only():
    ynb = notebook("a", "b")
    ynb.ycells[0]["execution_count"] = 1
    assert cells.clear_outputs(ynb, 0) is True and ynb.ycells[0]["execution_count"] is None
    assert cells.clear_outputs(ynb, 0) is False  # nothing left to clear
    md = notebook("# t", cell_type="markdown")
    assert cells.clear_outputs(md, 0) is False


@pytest.mark.parametrize("base, theirs, ours, merged", [
    ("x = 1\n", "x = 1\ny = 2\n", "x = 1\n", "x = 1\ny = 2\n"),  # only they changed it
    ("x = 1\n", "x = 1\n", "x = 10\n", "x = 10\n"),  # only we did
    ("a\nb\n", "a\nb\nthey\n", "we\na\nb\n", "we\na\nb\nthey\n"),  # apart: theirs after ours
    ("a\nb\n", "they\na\nb\n", "a\nb\nwe\n", "they\na\nb\nwe\n"),  # apart: theirs before ours
    ("a = 1", "a = 12", "a = 13", "a = 123"),  # typed at the same place: both kept
    ("x = 1", "x = 2", "x = 3", "x = 32"),  # the same span replaced: ours, then what they typed
])
def test_merge_keeps_what_both_sides_typed(base, theirs, ours, merged):
    from jupyter_mcp.notebooks.moves import merge

    assert merge(base, theirs, ours) == merged


# --- a person typing while the agent edits: two clients' concurrent updates exchanged ---------
#
# Yjs orders two inserts made at one spot at the same time by client id (the lower first); a
# tab's id is random, so each test runs with the tab's id below the server's and above it.

SERVER_ID = 1_000_000
TAB_SIDES = pytest.mark.parametrize("tab_id", [SERVER_ID - 1, SERVER_ID + 1],
                                    ids=["tab-id-below-server", "tab-id-above-server"])


def served(*sources: str) -> YNotebook:
    """The server's document of a notebook (its client id known)."""
    ynb = YNotebook(Doc(client_id=SERVER_ID))
    ynb.set({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
             "cells": [{"cell_type": "code", "source": s, "metadata": {}, "id": f"c{i}", "outputs": [],
                        "execution_count": None} for i, s in enumerate(sources)]})
    return ynb


class Tab:
    """A person's tab on the server's document. Nothing travels until the test delivers it, so
    "typed before the server's edit reached the tab" happens every time."""

    def __init__(self, server: YNotebook, client_id: int) -> None:
        self.server = server
        self.nb = YNotebook(Doc(client_id=client_id))
        self.nb.ydoc.apply_update(server.ydoc.get_update())
        self.sent = self.nb.ydoc.get_state()  # what the server has of this tab's own edits

    def type(self, index: int, text: str) -> None:
        source = self.nb.ycells[index]["source"]
        source.insert(len(str(source).encode()), text)

    def outgoing(self) -> bytes:
        """What the tab has that it has not sent (the person's edits, and what it received: already known)."""
        update = self.nb.ydoc.get_update(self.sent)
        self.sent = self.nb.ydoc.get_state()
        return update

    def receive(self, update: bytes) -> None:
        self.nb.ydoc.apply_update(update)


def test_pycrdt_lets_the_lower_client_id_go_first_at_one_spot():
    # why the order of replace_text's insert and delete matters at all
    for tab_id, tab_first in ((SERVER_ID - 1, True), (SERVER_ID + 1, False)):
        server = served("x")
        tab = Tab(server, tab_id)
        since = server.ydoc.get_state()
        server.ycells[0]["source"].insert(1, "S")
        tab.type(0, "T")
        tab.receive(server.ydoc.get_update(since))
        server.ydoc.apply_update(tab.outgoing())
        assert sources(server) == sources(tab.nb) == ["xTS" if tab_first else "xST"]


@TAB_SIDES
def test_a_letter_typed_while_an_update_travels_stays_after_the_agents_text(tab_id):
    server = served("x = 1  # note: AB")
    tab = Tab(server, tab_id)
    tab.type(0, "C")
    server.ydoc.apply_update(tab.outgoing())  # C reached the server after the agent read the cell
    since = server.ydoc.get_state()
    cells.update(server, 0, "x = 2  # note: AB")  # what the agent read, with x = 2: C is replaced (its diff says so)
    tab.type(0, "D")  # typed before the update reached the tab, after C
    tab.receive(server.ydoc.get_update(since))
    server.ydoc.apply_update(tab.outgoing())
    assert sources(server) == sources(tab.nb) == ["x = 2  # note: ABD"]  # not "x = D2  # note: AB"


@TAB_SIDES
def test_a_letter_typed_while_an_edit_travels_stays_after_the_agents_text(tab_id):
    server = served("total = 1")
    tab = Tab(server, tab_id)
    since = server.ydoc.get_state()
    assert cells.edit(server, 0, "1", "25") == 1
    tab.type(0, "0")  # the person typed right after the text the agent replaced
    tab.receive(server.ydoc.get_update(since))
    server.ydoc.apply_update(tab.outgoing())
    assert sources(server) == sources(tab.nb) == ["total = 250"]  # not "total = 025"


def test_a_persons_cursor_stays_on_its_side_of_the_replaced_text():
    from pycrdt import Assoc, StickyIndex

    def caret(text, after: str) -> StickyIndex:  # after ``after``, tied to its last character (ASCII:
        return StickyIndex.new(text, len(after), Assoc.BEFORE)  # a sticky index counts characters)

    ynb = served("x = 1  # note", "x = 1  # note: ABC")
    digit, tail = ynb.ycells[0]["source"], ynb.ycells[1]["source"]
    carets = [caret(digit, "x"), caret(digit, "x = 1"), caret(digit, "x = 1  # note"),
              caret(tail, "x = 1  # note: ABC")]
    cells.update(ynb, 0, "x = 22  # note")  # the digit alone is replaced
    cells.update(ynb, 1, "x = 22  # note: AB")  # stale: C is replaced too, the span runs to the end
    assert [c.get_index() for c in carets] == [len(s) for s in ("x", "x = 22", "x = 22  # note", "x = 22  # note: AB")]


class Room:
    """What a MoveGuard uses of a room: whether clients are in, and its hook for their messages,
    called before the room applies what came (as pycrdt's YRoom does)."""

    def __init__(self, ynb: YNotebook) -> None:
        self.ynb = ynb
        self.clients = {"a tab"}
        self.on_message = None

    async def receive(self, update: bytes) -> None:
        from pycrdt import create_update_message

        if self.on_message is not None:
            self.on_message(create_update_message(update))
        self.ynb.ydoc.apply_update(update)
        await asyncio.sleep(0)  # the guard carries once the room has applied the update


@TAB_SIDES
async def test_keystrokes_that_cross_a_move_are_carried_in_the_order_typed(tab_id):
    from jupyter_mcp.notebooks.moves import move

    server = served("total = 0\n", "other = 1", "last = 2")
    room, tab = Room(server), Tab(server, tab_id)
    tab.type(0, "a")
    await room.receive(tab.outgoing())  # the person has typed before: their next update starts past clock 0
    tab.type(0, "b")  # typed before the move reached the tab: it lands in the copy the move deletes
    since = server.ydoc.get_state()
    guard = move(room, server, 0, 2)
    try:
        the_move = server.ydoc.get_update(since)
        await room.receive(tab.outgoing())  # b arrives: carried into the moved cell
        tab.receive(the_move)  # the tab sees the move (and b gone), not yet b carried
        tab.type(2, "c")  # so the person types c into the moved cell, at the same spot as the carried b
        tab.receive(server.ydoc.get_update(tab.nb.ydoc.get_state()))
        await room.receive(tab.outgoing())
        assert sources(server) == sources(tab.nb) == ["other = 1", "last = 2", "total = 0\nabc"]
        assert [cells.id_of(c) for c in server.ycells] == ["c1", "c2", "c0"]
    finally:
        guard.stop()


async def test_an_echo_of_the_move_and_of_the_carried_text_undoes_nothing():
    """A tab that sends back what it receives (pycrdt's provider does) echoes the move's deletion
    and the carried letter as the room deleted it: neither may undo what was carried."""
    from jupyter_mcp.notebooks.moves import move

    server = served("total = 0\n", "other = 1")
    room, tab = Room(server), Tab(server, SERVER_ID + 7)
    echoes: list[bytes] = []
    tab.nb.ydoc.observe(lambda event: echoes.append(event.update))
    tab.type(0, "a")
    await room.receive(tab.outgoing())
    tab.type(0, "b")
    since = server.ydoc.get_state()
    guard = move(room, server, 0, 1)
    try:
        await room.receive(tab.outgoing())
        echoes.clear()
        tab.receive(server.ydoc.get_update(since))  # the move, b in the deleted copy and b carried
        for echo in echoes:
            await room.receive(echo)
        tab.type(1, "c")
        await room.receive(tab.outgoing())
        assert sources(server) == sources(tab.nb) == ["other = 1", "total = 0\nabc"]
    finally:
        guard.stop()
