"""Unit tests of finding the cell a Yjs relative position lies in (jupyter_mcp.notebooks.cursors), on a
plain YNotebook: positions before each character, at the end of each text (an empty cell's
included), and ones that name no cell; one copy of the document a call at the most, and
nothing left alive after it."""

from __future__ import annotations

import gc
import random

import pytest
from jupyter_ydoc import YNotebook
from pycrdt import Assoc, Doc, StickyIndex

from jupyter_mcp.notebooks import cursors
from jupyter_mcp.notebooks.cursors import MAX_POSITIONS, Positions, head_of
from jupyter_mcp.notebooks.moves import state_vector

pytestmark = pytest.mark.unit


def notebook(*sources: str) -> YNotebook:
    ynb = YNotebook(Doc())
    ynb.set({"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3"}},
             "cells": [{"cell_type": "code", "source": s, "metadata": {"tags": ["t"]}, "id": f"c{i}",
                        "outputs": [{"output_type": "stream", "name": "stdout", "text": "out"}],
                        "execution_count": None} for i, s in enumerate(sources)]})
    return ynb


def test_a_position_before_a_character_is_in_that_characters_cell():
    ynb = notebook("abc", "naïve = 1", "xyz")
    positions = Positions(ynb.ydoc)
    for i in range(3):
        text = ynb.ycells[i]["source"]
        for offset in (0, 1, 2):
            position = {"type": None, "tname": None, "assoc": 0,  # as JSON.stringify writes Yjs's class
                        **StickyIndex.new(text, offset, Assoc.AFTER).to_json()}
            assert positions.cell_of(position) == f"c{i}", (i, offset)


def test_the_end_of_each_text_an_empty_ones_included_is_in_its_cell():
    """Yjs names the end of a text by the text's own id, which pycrdt does not show: every id the
    writer made is tried, and exactly one lands in each cell's source."""
    ynb = notebook("abc", "", "xyz")
    positions = Positions(ynb.ydoc)
    client = ynb.ydoc.client_id
    landed: dict[str, list[int]] = {}
    for clock in range(200):
        cell = positions.cell_of({"type": {"client": client, "clock": clock}, "assoc": 0})
        if cell is not None:
            landed.setdefault(cell, []).append(clock)
    assert sorted(landed) == ["c0", "c1", "c2"] and all(len(clocks) == 1 for clocks in landed.values())


def test_positions_that_name_no_cell():
    ynb = notebook("abc")
    positions = Positions(ynb.ydoc)
    client = ynb.ydoc.client_id
    for position in [None, "c0", {}, {"tname": "cells", "assoc": 0}, {"item": {"client": 12345, "clock": 0}},
                     {"item": {"client": client, "clock": 10**9}}, {"item": {"client": -1, "clock": 0}},
                     {"item": {"client": 2**80, "clock": 0}}, {"item": {"client": "x", "clock": 0}},
                     {"item": {"client": True, "clock": 0}}]:
        assert positions.cell_of(position) is None, position
    kinds = {positions.cell_of({kind: {"client": client, "clock": clock}})  # a map, an output, metadata...
             for kind in ("item", "type") for clock in range(100)}
    assert kinds == {None, "c0"}


def test_positions_asked_together_do_not_disturb_each_other():
    """Every id the writer made, as an origin and as a parent (some put a character into a cell's
    map or the cell list), asked in one call with a real cursor after each: each real one is
    still found in its cell."""
    ynb = notebook("abc", "xyz")
    client = ynb.ydoc.client_id
    real = {f"c{i}": StickyIndex.new(ynb.ycells[i]["source"], 1, Assoc.AFTER).to_json() for i in range(2)}
    asked = {}
    for clock in range(60):
        for kind in ("item", "type"):
            asked[(kind, clock)] = {kind: {"client": client, "clock": clock}}
            asked[(kind, clock, "real")] = real[f"c{clock % 2}"]
    found = Positions(ynb.ydoc).cells_of(dict(list(asked.items())[:MAX_POSITIONS]))
    assert all(found[key] == f"c{key[1] % 2}" for key in found if key[-1] == "real")
    beyond = Positions(ynb.ydoc).cells_of({i: real["c0"] for i in range(MAX_POSITIONS + 5)})
    assert list(beyond.values()) == ["c0"] * MAX_POSITIONS + [None] * 5  # bounded
    deleted = StickyIndex.new(ynb.ycells[0]["source"], 1, Assoc.AFTER).to_json()
    del ynb.ycells[0]
    assert Positions(ynb.ydoc).cell_of(deleted) is None


def test_made_up_carets_do_not_crowd_out_a_person_who_comes_after_them():
    ynb = notebook("abc", "xyz")
    strangers = {i: {"item": {"client": 7_000 + i, "clock": 0}} for i in range(5 * MAX_POSITIONS)}
    person = StickyIndex.new(ynb.ycells[1]["source"], 2, Assoc.AFTER).to_json()
    found = Positions(ynb.ydoc).cells_of({**strangers, "person": person})
    assert found["person"] == "c1" and set(found.values()) == {None, "c1"}


def test_the_primary_cursors_head_is_the_caret():
    first, second = {"item": {"client": 1, "clock": 1}}, {"item": {"client": 2, "clock": 2}}
    assert head_of({"cursors": [{"head": first}, {"head": second, "primary": True}]}) == second
    assert head_of({"cursors": [{"anchor": second, "head": first}]}) == first
    for state in [None, {}, {"cursors": None}, {"cursors": []}, {"cursors": ["x"]}, {"cursors": {"head": first}}]:
        assert head_of(state) is None, state


def caret(text, offset: int) -> dict:
    """A caret before the character at ``offset``, as JupyterLab shares it."""
    return {"type": None, "tname": None, "assoc": 0, **StickyIndex.new(text, offset, Assoc.AFTER).to_json()}


def end_of(text) -> dict:
    """A caret at the end of a text: Yjs names the text itself (its id, as ``type``)."""
    return {"assoc": 0, "type": StickyIndex.new(text, 0, Assoc.BEFORE).to_json()["type"]}


def live_docs() -> int:
    gc.collect()
    return sum(isinstance(o, Doc) for o in gc.get_objects())


def copies(monkeypatch) -> list[int]:
    """How many copies of the document each call makes, as they are made."""
    made: list[int] = []
    copy = cursors._Copy

    def counted(update: bytes):
        made.append(1)
        return copy(update)

    monkeypatch.setattr(cursors, "_Copy", counted)
    return made


def test_known_carets_are_in_their_cells():
    """The start of a cell, its middle, the end of its text, an empty cell, and a caret left
    on a character since deleted (the text keeps it as a tombstone)."""
    ynb = notebook("abcdef", "", "xyz")
    first, empty, last = (ynb.ycells[i]["source"] for i in range(3))
    on_deleted = caret(last, 1)
    del last[1:2]
    assert str(last) == "xz"
    asked = {"start": caret(first, 0), "middle": caret(first, 3), "end": end_of(first), "empty": end_of(empty),
             "deleted char": on_deleted, "after it": caret(last, 1), "end of last": end_of(last)}
    assert Positions(ynb.ydoc).cells_of(asked) == {"start": "c0", "middle": "c0", "end": "c0", "empty": "c1",
                                                   "deleted char": "c2", "after it": "c2", "end of last": "c2"}


def test_unknown_positions_name_no_cell_and_cost_no_copy(monkeypatch):
    """Ids the document does not have (a stranger's client, a clock at or past the document's
    state vector) and shapes no caret has are answered without copying the document; ids it
    has that name no source (a cell's map, as a caret's text or its character; an output's
    text) share one copy."""
    ynb = notebook("abc", "xyz")
    rng = random.Random(41)
    client = ynb.ydoc.client_id
    top = state_vector(ynb.ydoc.get_state())[client]
    unknown = [{"item": {"client": rng.getrandbits(53), "clock": rng.randrange(10**6)}} for _ in range(40)]
    unknown += [{kind: {"client": client, "clock": clock}}
                for kind in ("item", "type") for clock in (top, top + 1, 10**9)]
    unknown += [None, 3, "c0", [], {}, {"item": None}, {"item": [client, 0]}, {"item": {"client": client}},
                {"type": {"client": client, "clock": -1}}, {"item": {"client": client, "clock": 1.0}},
                {"type": "cells", "tname": "cells"}, {"item": {"client": 2**53, "clock": 0}}]
    made = copies(monkeypatch)
    found = Positions(ynb.ydoc).cells_of(dict(enumerate(unknown)))
    assert set(found.values()) == {None} and made == []
    cell_map = StickyIndex.new(ynb.ycells, 1, Assoc.AFTER).to_json()["item"]
    output_text = ynb.ycells[0]["outputs"][0]["text"]
    named = {"map as text": {"type": cell_map}, "map as character": {"item": cell_map}, "output": caret(output_text, 1),
             "output's end": end_of(output_text), "real": caret(ynb.ycells[1]["source"], 2)}
    assert Positions(ynb.ydoc).cells_of(named) == {**dict.fromkeys(named, None), "real": "c1"}
    assert made == [1]


def test_a_call_leaves_no_document_alive(monkeypatch):
    """Resolving a call's positions (real ones, ones yrs refuses, unknown ones) leaves no
    pycrdt Doc behind, not even when something fails half way."""
    ynb = notebook(*(f"cell {i}" for i in range(20)))
    client = ynb.ydoc.client_id
    real = {i: caret(ynb.ycells[i % 20]["source"], i % 6) for i in range(50)}
    refused = {50 + i: {"type": real[i]["item"]} for i in range(25)}  # a character is no text: yrs raises
    unknown = {75 + i: {"item": {"client": client, "clock": 10**6 + i}} for i in range(25)}
    asked = {**real, **refused, **unknown}
    positions = Positions(ynb.ydoc)
    before = live_docs()
    for _ in range(3):
        found = positions.cells_of(asked)
        assert found == {**{i: f"c{i % 20}" for i in real}, **dict.fromkeys([*refused, *unknown])}
    assert live_docs() == before

    landing, calls = cursors._Copy.landing, []

    def failing(self, update):
        calls.append(1)
        if len(calls) == 3:
            raise KeyError("a probe that fails unexpectedly")
        return landing(self, update)

    monkeypatch.setattr(cursors._Copy, "landing", failing)
    with pytest.raises(KeyError):
        positions.cells_of(asked)
    assert live_docs() == before
