"""Notebooks on disk and tool calls that fail the test on a refusal: shared by tests and benchmarks."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat


class ToolFailed(AssertionError):
    pass


async def call(client: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool and return its structured result; a tool error fails the test with its message."""
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise ToolFailed(f"{tool}({arguments}) failed: {result.content[0].text}")
    return result.structured_content


async def refused(client: Any, tool: str, **arguments: Any) -> str:
    """Call a tool that must be refused; return the error message."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool}({arguments}) was accepted: {result.structured_content}"
    return result.content[0].text


async def failed_run(client: Any, tool: str, **arguments: Any) -> tuple[dict[str, Any], str]:
    """Run code that must fail (raise, time out): a failed call (isError) that still ran, its
    answer structured as ever. Returns that answer and the content's first text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool}({arguments}) did not fail: {result.structured_content}"
    assert "status" in (result.structured_content or {}), f"{tool}({arguments}) was refused: {result.content}"
    return result.structured_content, result.content[0].text


def write_notebook(path: Path, sources: list[str], cell_type: str = "code") -> list[str]:
    """Write a notebook to disk (before any room exists for it); returns the cell ids."""
    path.parent.mkdir(parents=True, exist_ok=True)
    maker = nbformat.v4.new_code_cell if cell_type == "code" else nbformat.v4.new_markdown_cell
    nb = nbformat.v4.new_notebook(cells=[maker(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return [c.id for c in nb.cells]


class Incomplete(ValueError):
    pass


def _complete(path: Path) -> dict[str, Any]:
    """The notebook in ``path`` if the file holds a whole one (JSON, nbformat's top-level shape)."""
    content = json.loads(path.read_text())
    if not (isinstance(content, dict) and isinstance(content.get("cells"), list)
            and isinstance(content.get("metadata"), dict) and isinstance(content.get("nbformat"), int)):
        raise Incomplete(f"not a notebook: {str(content)[:200]}")
    return content


def read_notebook(path: Path, timeout: float = 10) -> dict[str, Any]:
    """The notebook in ``path``, read once the file holds a complete one. Jupyter's
    ``atomic_writing`` copies a backup and then writes the file in place, so a reader can find
    it empty or half-written while the server saves it: never read a notebook the server may be
    writing just once. Fails saying what it last read if none is complete within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return _complete(path)
        except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} held no complete notebook within {timeout}s: {exc!r}") from exc
        time.sleep(0.02)


async def saved_notebook(path: Path, ready: Callable[[dict[str, Any]], Any] = bool, timeout: float = 20,
                         what: str = "the expected content") -> dict[str, Any]:
    """The notebook in ``path`` once a complete one is there and ``ready(notebook)`` holds (a
    room saves after its debounce): polled without holding the event loop; fails with the last
    complete notebook read, or the last error, after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while True:
        try:
            notebook = _complete(path)
            if ready(notebook):
                return notebook
            last = notebook
        except (OSError, ValueError) as exc:
            last = exc
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{path} did not hold {what} within {timeout}s; last read: {last!r}"[:4000])
        await asyncio.sleep(0.05)


def sources_of(notebook: dict[str, Any]) -> list[str]:
    return [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in notebook["cells"]]


def disk_sources(path: Path, timeout: float = 10) -> list[str]:
    """The cell sources of the notebook in ``path``, once the file holds a complete one."""
    return sources_of(read_notebook(path, timeout))


def new_notebook(root: Path, *sources: str, prefix: str = "nb") -> tuple[str, list[str]]:
    """A notebook with a name of its own in ``root`` (one code cell per source): (path, cell ids)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}.ipynb"
    return name, write_notebook(root / name, list(sources))


def big_notebook(path: Path, count: int) -> list[dict]:
    """Code cells with a small output or two, and markdown cells, written as plain JSON."""
    cells: list[dict[str, Any]] = []
    for i in range(count):
        cell_id = f"c{i:05d}-{uuid.uuid4().hex[:6]}"
        if i % 3 == 2:
            cells.append({"id": cell_id, "cell_type": "markdown", "metadata": {},
                          "source": f"## Section {i}\nSome *text* for cell {i}."})
            continue
        outputs: list[dict[str, Any]] = [{"output_type": "stream", "name": "stdout", "text": f"{i * 2}\n"}]
        if i % 3 == 1:
            outputs.append({"output_type": "execute_result", "execution_count": i + 1, "metadata": {},
                            "data": {"text/plain": str(i)}})
        cells.append({"id": cell_id, "cell_type": "code", "metadata": {}, "execution_count": i + 1,
                      "source": f"x_{i} = {i}\nprint(x_{i} * 2)", "outputs": outputs})
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": cells, "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}}))
    return cells
