"""The notebook:// URIs, an output's resource contents and a citation's cells: pure logic."""

from __future__ import annotations

import base64

import pytest

from jupyter_mcp.errors import NotebookError
from jupyter_mcp.tools.prompts import cited
from jupyter_mcp.tools.resources import Address, output_contents, parse

pytestmark = pytest.mark.unit

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


@pytest.mark.parametrize("address", [
    Address("a.ipynb"), Address("deep/er/My Notes.ipynb"), Address("x:y@z#?.ipynb"),
    Address("d.ipynb/n.ipynb", "c-1_b"), Address("a.ipynb", "abc", 3), Address("100%.ipynb", "id"),
])
def test_an_address_goes_to_its_uri_and_back(address):
    assert parse(address.uri) == address
    assert address.uri.startswith("notebook://") and " " not in address.uri


@pytest.mark.parametrize("uri", ["file://a.ipynb", "notebook://a.txt", "notebook://a.ipynb/cells/",
                                 "notebook://a.ipynb/cells/x/outputs/", "notebook://a.ipynb/cells/x/outputs/-1",
                                 "notebook://a.ipynb/outputs/0", "notebook://"])
def test_a_uri_that_names_no_notebook_part_is_refused_saying_what_one_looks_like(uri):
    with pytest.raises(NotebookError) as refused:
        parse(uri)
    assert "notebook://<path>.ipynb" in str(refused.value)


def test_an_output_is_one_content_per_mime_type_images_decoded():
    rich = {"output_type": "display_data", "data": {"image/png": base64.b64encode(PNG).decode() + "\n",
                                                    "text/plain": ["<Figure ", "size 1x1>"],
                                                    "application/json": {"a": [1, 2]}}, "metadata": {}}
    contents = {c.mime_type: c.content for c in output_contents(rich)}
    assert contents == {"image/png": PNG, "text/plain": "<Figure size 1x1>", "application/json": '{"a": [1, 2]}'}
    error = {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
             "traceback": ["\x1b[0;31mZeroDivisionError\x1b[0m: division by zero"]}
    assert [(c.mime_type, c.content) for c in output_contents(error)] == [
        ("text/plain", "ZeroDivisionError: division by zero")]
    stream = {"output_type": "stream", "name": "stdout", "text": ["a\n", "b\n"]}
    assert [c.content for c in output_contents(stream)] == ["a\nb\n"]
    broken = {"output_type": "display_data", "data": {"image/png": "not base64!"}}
    assert [c.mime_type for c in output_contents(broken)] == ["application/json"]  # as stored, not a bad image


def test_cells_are_cited_by_index_range_or_id_in_order_each_once():
    ids = ["a1", "b2", "c3", "d4", "0-1"]
    assert cited("0-2, 4", ids) == [0, 1, 2, 4]
    assert cited("d4,a1,0,d4", ids) == [3, 0]
    assert cited("3-3", ids) == [3]
    for bad, says in [("7", "the notebook has 5 cells"), ("3-1", "a range goes up"), ("zz", "no cell has that id"),
                      (" , ", "cells is empty"), ("0-4", None)]:
        if says is None:
            assert cited(bad, ids) == [0, 1, 2, 3, 4]
            continue
        with pytest.raises(NotebookError) as refused:
            cited(bad, ids)
        assert says in str(refused.value)
    digits = ["b2", "49428278", "c3"]  # nbformat's random ids are all digits one time in 40
    assert cited("49428278", digits) == [1] and cited("1", digits) == [1] and cited("0-1", digits) == [0, 1]
    with pytest.raises(NotebookError) as refused:
        cited("0-59", [str(i) for i in range(60)])
    assert "60 cells named; a citation holds 50 at most" in str(refused.value)
