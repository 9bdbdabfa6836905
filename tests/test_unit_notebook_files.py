"""The test parts' reads of a notebook file the server may be saving (jupyter_mcp/testing/notebooks.py):
Jupyter's atomic_writing copies a backup and writes the file in place, so a reader can find it
empty or half-written; the reads wait for a complete notebook, and fail clearly if none comes."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from jupyter_mcp.testing import disk_sources, read_notebook, saved_notebook

pytestmark = pytest.mark.unit

NOTEBOOK = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"id": "a", "cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [],
                       "execution_count": None}]}


def finish_later(path, text: str, after: float = 0.3) -> threading.Timer:
    timer = threading.Timer(after, path.write_text, args=(text,))
    timer.start()
    return timer


@pytest.mark.parametrize("caught", ["", '{"nbformat": 4, "cells": [{"id": "a", "sour', "{}"],
                         ids=["empty", "half-written", "not-a-notebook"])
def test_a_read_during_a_save_waits_for_the_complete_file(tmp_path, caught):
    path = tmp_path / "n.ipynb"
    path.write_text(caught)  # what a reader finds during the save
    timer = finish_later(path, json.dumps(NOTEBOOK))
    assert disk_sources(path) == ["x = 1"]
    timer.join()


def test_a_file_that_never_completes_fails_naming_it(tmp_path):
    path = tmp_path / "n.ipynb"
    path.write_text('{"cells": [')
    with pytest.raises(AssertionError, match=r"n\.ipynb held no complete notebook within 0\.2s"):
        read_notebook(path, timeout=0.2)
    with pytest.raises(AssertionError, match="held no complete notebook"):
        read_notebook(path, timeout=0)  # read once


def test_saved_notebook_waits_for_the_content_and_says_what_it_last_read(tmp_path):
    path = tmp_path / "n.ipynb"
    path.write_text("")

    async def main():
        timer = finish_later(path, json.dumps(NOTEBOOK), after=0.2)
        saved = await saved_notebook(path, lambda nb: nb["cells"][0]["source"] == "x = 1", timeout=5)
        timer.join()
        assert saved == NOTEBOOK
        with pytest.raises(AssertionError, match="did not hold the second cell within 0.2s; last read: {'nbformat'"):
            await saved_notebook(path, lambda nb: len(nb["cells"]) == 2, timeout=0.2, what="the second cell")

    asyncio.run(main())
