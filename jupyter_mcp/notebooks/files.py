"""Notebooks as files: listing the workspace (its notebooks, or all its files) and creating new notebooks.

Creation goes through the server's contents manager, like JupyterLab's "New
Notebook", so checkpoints, hooks and non-filesystem managers behave as for a person.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import stat
from datetime import datetime, timezone
from typing import Any, Literal

import nbformat
from jupyter_core.utils import ensure_async
from tornado import web
from typing_extensions import NotRequired, TypedDict  # pydantic needs these on Python < 3.12

from ..errors import NotebookError
from .cells import CellType, check_source
from .paths import NOTEBOOK_SUFFIX, PathError, canonical_path, hidden_part, real_file, to_os_path

_create_lock = asyncio.Lock()


class NotebookFile(TypedDict):
    path: str
    size: int
    last_modified: str  # ISO 8601, UTC


class FileEntry(TypedDict):
    path: str
    type: Literal["directory", "notebook", "file"]
    last_modified: str  # ISO 8601, UTC
    size: NotRequired[int]  # files only


class NewCell(TypedDict):
    cell_type: NotRequired[CellType]
    source: NotRequired[str]


class CreatedNotebook(TypedDict):
    path: str
    kernel_name: str
    cell_ids: list[str]


def _folder(root_dir: str, folder: str) -> str:
    """The OS path of a canonical folder a listing may show: it exists and is not hidden
    (what is in a hidden folder is never listed, as Jupyter's contents manager hides it)."""
    if hidden_part(folder) is not None:
        raise PathError(folder, "hidden folders are not listed")
    base = to_os_path(root_dir, folder)
    if not os.path.isdir(base):
        raise PathError(folder or "/", "folder does not exist in the workspace")
    return base


def list_notebooks(root_dir: str, folder: str) -> list[NotebookFile]:
    """Every .ipynb under ``folder`` (canonical) that the other tools open, each once, by its
    canonical path: hidden folders and files, checkpoints, symlinks that lead out of the
    workspace (or nowhere) and files with more than one hard link are left out; a symlink to a
    notebook inside is that notebook."""
    base = _folder(root_dir, folder)
    root = os.path.abspath(root_dir)
    found: dict[str, NotebookFile] = {}
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


class _Enough(Exception):
    """The listing has every entry the page needs (and one more)."""


def list_files(root_dir: str, folder: str, pattern: str, max_depth: int, start: int,
               limit: int) -> tuple[list[FileEntry], bool]:
    """The files and folders under ``folder`` (canonical), ``max_depth`` levels down, as the file
    browser shows them: folders first visited in name order, each entry once by its canonical path
    (a symlink inside the workspace is what it points to), hidden ones and symlinks leading out of
    the workspace (or nowhere) left out; only those whose path matches ``pattern`` (a glob, ``*``
    crossing folders), if one is given. Answers the entries from ``start`` (``limit`` at most) and
    whether there are more; the walk stops as soon as it knows."""
    base = _folder(root_dir, folder)
    root = os.path.abspath(root_dir)
    seen: set[str] = {folder}
    found: list[FileEntry] = []

    def visit(directory: str, depth: int) -> None:
        try:
            with os.scandir(directory) as listing:
                names = sorted(entry.name for entry in listing if not entry.name.startswith("."))
        except OSError:
            return  # unreadable: nothing in it is listed
        for name in names:
            try:
                canonical = canonical_path(root, os.path.relpath(os.path.join(directory, name), root), notebook=False)
                info = os.stat(to_os_path(root, canonical))
            except (PathError, OSError):
                continue  # leads out of the workspace, nowhere, or went away
            if canonical in seen or hidden_part(canonical) is not None:
                continue
            seen.add(canonical)
            is_folder = stat.S_ISDIR(info.st_mode)
            if not pattern or fnmatch.fnmatchcase(canonical, pattern):
                entry: FileEntry = {
                    "path": canonical,
                    "type": "directory" if is_folder else "notebook" if canonical.endswith(NOTEBOOK_SUFFIX) else "file",
                    "last_modified": datetime.fromtimestamp(info.st_mtime, timezone.utc).isoformat()}
                if not is_folder:
                    entry["size"] = info.st_size
                found.append(entry)
                if len(found) > start + limit:
                    raise _Enough
            if is_folder and depth < max_depth:
                visit(to_os_path(root, canonical), depth + 1)

    try:
        visit(base, 1)
    except _Enough:
        pass
    return found[start:start + limit], len(found) > start + limit


def new_notebook(kernel_name: str, display_name: str, language: str,
                 cells: list[NewCell] | None = None) -> nbformat.NotebookNode:
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
                          cells: list[NewCell] | None = None) -> CreatedNotebook:
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
