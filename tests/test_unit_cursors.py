"""Unit tests of finding the cell a Yjs relative position lies in (jupyter_mcp.cursors), on a
plain YNotebook: positions before each character, at the end of each text (an empty cell's
included), and ones that name no cell."""

from __future__ import annotations

from jupyter_ydoc import YNotebook
from pycrdt import Assoc, Doc, StickyIndex

from jupyter_mcp.cursors import MAX_POSITIONS, Positions, head_of


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


def test_the_primary_cursors_head_is_the_caret():
    first, second = {"item": {"client": 1, "clock": 1}}, {"item": {"client": 2, "clock": 2}}
    assert head_of({"cursors": [{"head": first}, {"head": second, "primary": True}]}) == second
    assert head_of({"cursors": [{"anchor": second, "head": first}]}) == first
    for state in [None, {}, {"cursors": None}, {"cursors": []}, {"cursors": ["x"]}, {"cursors": {"head": first}}]:
        assert head_of(state) is None, state
