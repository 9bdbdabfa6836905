"""search.py's pure logic: matches in order, bounded, excerpts cut around the match, odd cells survived."""

from __future__ import annotations

import pytest

from jupyter_mcp.notebooks.search import EXCERPT_CHARS, cells_of_file, excerpt, search_cells

pytestmark = pytest.mark.unit


def test_matches_in_cell_then_line_order_with_sources_as_lists_or_text():
    cells = [{"id": "a", "cell_type": "code", "source": ["x = 1\n", "Y = x\n"]},
             {"id": "b", "cell_type": "markdown", "source": "no\nx marks"}]
    found, more = search_cells(cells, "X", case_sensitive=False, include_outputs=False, limit=10)
    assert not more
    assert [(m["cell_id"], m["line"], m["excerpt"]) for m in found] == [("a", 1, "x = 1"), ("a", 2, "Y = x"),
                                                                         ("b", 2, "x marks")]
    found, _ = search_cells(cells, "X", case_sensitive=True, include_outputs=False, limit=10)
    assert found == []


def test_outputs_only_when_asked_as_their_text():
    cells = [{"id": "a", "cell_type": "code", "source": "", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": ["one\n", "\x1b[31mred two\x1b[0m\n"]},
        {"output_type": "execute_result", "data": {"text/plain": "'two'"}, "metadata": {}, "execution_count": 1}]}]
    assert search_cells(cells, "two", False, False, 10) == ([], False)
    found, _ = search_cells(cells, "two", False, True, 10)
    assert [(m["where"], m["line"], m["excerpt"]) for m in found] == [("output", 2, "red two"), ("output", 1, "'two'")]


def test_the_limit_says_there_were_more_and_odd_cells_are_passed_over():
    cells = ["not a cell", {"cell_type": "code", "source": "hit\nhit\nhit"}, {"id": None, "source": 5}]
    found, more = search_cells(cells, "hit", False, False, 2)
    assert len(found) == 2 and more and found[0]["cell_id"] is None and found[0]["index"] == 1
    assert search_cells(cells, "hit", False, False, 0) == ([], True)


def test_excerpts_are_the_line_or_a_window_around_the_match():
    assert excerpt("short line", 0, 5) == "short line"
    line = "a" * 300 + "NEEDLE" + "b" * 300
    cut = excerpt(line, 300, 6)
    assert "NEEDLE" in cut and cut.startswith("…") and cut.endswith("…") and len(cut) == EXCERPT_CHARS + 2
    start = excerpt("NEEDLE" + "b" * 300, 0, 6)
    assert start.startswith("NEEDLE") and start.endswith("…")
    end = excerpt("a" * 300 + "NEEDLE", 300, 6)
    assert end.endswith("NEEDLE") and end.startswith("…")


def test_a_file_without_cells_has_none():
    assert cells_of_file(b'{"cells": [{"source": "x"}]}') == [{"source": "x"}]
    assert cells_of_file(b'{"metadata": {}}') == [] and cells_of_file(b'{"cells": 3}') == []
    with pytest.raises(ValueError):
        cells_of_file(b'[1, 2]')
