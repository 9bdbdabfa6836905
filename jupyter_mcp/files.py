"""Notebooks as files: listing the workspace and creating new notebooks.

Creation goes through the server's contents manager, like JupyterLab's "New
Notebook", so checkpoints, hooks and non-filesystem managers behave as for a person.
"""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timezone
from typing import Any

import nbformat
from jupyter_core.utils import ensure_async
from tornado import web

from .cells import check_source
from .errors import NotebookError
from .paths import NOTEBOOK_SUFFIX, PathError, canonical_path, hidden_part, real_file, to_os_path

_create_lock = asyncio.Lock()


def list_notebooks(root_dir: str, folder: str) -> list[dict[str, Any]]:
    """Every .ipynb under ``folder`` (canonical) that the other tools open, each once, by its
    canonical path: hidden folders and files, checkpoints, symlinks that lead out of the
    workspace (or nowhere) and files with more than one hard link are left out; a symlink to a
    notebook inside is that notebook."""
    base = to_os_path(root_dir, folder)
    if not os.path.isdir(base):
        raise PathError(folder or "/", "folder does not exist in the workspace")
    root = os.path.abspath(root_dir)
    found: dict[str, dict[str, Any]] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name.startswith(".") or not name.endswith(NOTEBOOK_SUFFIX):
                continue
            try:
                canonical = canonical_path(root, os.path.relpath(os.path.join(dirpath, name), root))
                stat = real_file(root, canonical)
            except (PathError, OSError):
                continue  # leads out of the workspace, a hard link, not a file, or unreadable
            if stat is None or hidden_part(canonical) is not None:
                continue  # dangling, removed while walking, or hidden
            found[canonical] = {
                "path": canonical,
                "size": stat.st_size,
                "last_modified": datetime.fromtimestamp(stat.st_mtime, timezone.utc).isoformat(),
            }
    return [found[path] for path in sorted(found)]


def new_notebook(kernel_name: str, display_name: str, language: str,
                 cells: list[dict[str, Any]] | None = None) -> nbformat.NotebookNode:
    """A valid nbformat 4.5 notebook bound to the given kernelspec.

    Without ``cells`` it holds one empty code cell: a notebook with none opens with
    one anyway (jupyter-ydoc adds it), so writing it makes disk and room agree and
    gives the agent its id.
    """
    makers = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
              "raw": nbformat.v4.new_raw_cell}
    for spec in cells or []:
        check_source(spec.get("source", ""))
    made = [makers[spec.get("cell_type", "code")](spec.get("source", ""))
            for spec in cells or [{"cell_type": "code", "source": ""}]]
    nb = nbformat.v4.new_notebook(cells=made)
    nb.metadata["kernelspec"] = {"name": kernel_name, "display_name": display_name, "language": language}
    nb.metadata["language_info"] = {"name": language}
    nbformat.validate(nb)
    return nb


async def create_notebook(serverapp: Any, canonical: str, kernel_name: str | None,
                          cells: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Create ``canonical`` (which must not exist) with the given or default kernelspec."""
    ksm = serverapp.kernel_spec_manager
    name = kernel_name or serverapp.kernel_manager.default_kernel_name
    specs = await ensure_async(ksm.get_all_specs())
    if name not in specs:
        raise NotebookError(f"unknown kernel {name!r}; available: {', '.join(sorted(specs))}")
    spec = specs[name]["spec"]
    cm = serverapp.contents_manager
    parent = os.path.dirname(canonical)
    async with _create_lock:
        if await ensure_async(cm.exists(canonical)):
            raise NotebookError(f"a file already exists at {canonical!r}; nothing was overwritten")
        if parent and not await ensure_async(cm.dir_exists(parent)):
            raise PathError(parent, "folder does not exist in the workspace")
        nb = new_notebook(name, spec.get("display_name", name), spec.get("language", ""), cells)
        # The contents manager writes through a symlink: one put there since the checks above
        # (a dangling one passes cm.exists) is refused here, with no await before its write.
        if real_file(serverapp.root_dir, canonical) is not None:
            raise NotebookError(f"a file already exists at {canonical!r}; nothing was overwritten")
        try:
            await ensure_async(cm.save({"type": "notebook", "format": "json", "content": nb}, canonical))
        except web.HTTPError as exc:
            raise NotebookError(f"could not create {canonical!r}: {exc.log_message or exc.reason}") from None
    return {"path": canonical, "kernel_name": name, "cell_ids": [c.id for c in nb.cells]}
