"""The contents manager as an MCP-opened room's file loader uses it: a read hash-checked against
the workspace's own file read without following a symlink, a write refused through one."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from jupyter_server.utils import ensure_async

from ..errors import NotebookError
from .paths import read_real_file, real_file


class CheckedFiles:
    """The contents manager as one file's loader uses it, checking the file it actually read or
    is about to write, not only the path: the contents manager opens by path and follows
    symlinks (its atomic writing writes a symlink's target, and a hard link's other names, in
    place), so a notebook swapped for a symlink after its path was checked would bring a file
    from outside the workspace into the room, or have the room written into it.

    A read asks for the hash of the bytes the contents manager parsed, and compares it with the
    hash of the workspace's own file, read without following a symlink (``read_real_file``):
    anything else read is refused before the room gets it. A write first checks the file
    (``real_file``), with no await between the check and the contents manager's open."""

    def __init__(self, contents: Any, root_dir: str) -> None:
        self._contents = contents
        self._root_dir = root_dir

    def __getattr__(self, name: str) -> Any:
        return getattr(self._contents, name)

    async def get(self, path: str, content: bool = True, **kwargs: Any) -> dict[str, Any]:
        if not content:
            return await ensure_async(self._contents.get(path, content=False, **kwargs))
        kwargs["require_hash"] = True
        model = await ensure_async(self._contents.get(path, content=True, **kwargs))
        algorithm = model["hash_algorithm"]
        own = await asyncio.to_thread(lambda: hashlib.new(algorithm, read_real_file(self._root_dir, path)).hexdigest())
        if own != model["hash"]:
            raise NotebookError(f"{path!r} changed while it was read (the file read was not the workspace's own "
                                "file at that path, or it was written meanwhile); nothing read was used, try again")
        return model

    async def save(self, model: dict[str, Any], path: str) -> dict[str, Any]:
        real_file(self._root_dir, path)  # a symlink or a hard link there now: refused, nothing written
        return await ensure_async(self._contents.save(model, path))
