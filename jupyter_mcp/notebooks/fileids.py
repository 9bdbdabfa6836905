"""The file-id database, shared with every other server of the same user.

jupyter-server-fileid keeps one database per user (``file_id_manager.db`` in the data
directory), not per server: a second ``jupyter lab`` in another folder uses the same rows. A
room finds its file only through its id's row, so a row another server still needs must never
be removed, and a room whose row was removed anyway (by an older server, or any other program)
must not lose its edits:

- ``prune_stale``, at start, drops only rows of files that no longer exist and that no running
  server of this user could be holding a room for (none of their roots contains the path; in
  our own root, none of our rooms uses the id). A row of a file that exists is never dropped,
  wherever it is.
- ``reattach`` puts a room's row back, with the same id, when its file is still where the room
  last saw it and no other id has taken that path meanwhile. ``Reattaching`` does it as the
  room's file loader asks for its path (every second, as it polls the file), so a row removed
  under a room comes back within about a second.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Container, Iterable
from typing import Any

from jupyter_server.serverapp import list_running_servers

from ..adapters.file_ids import row_path_of, workspace_path_of_row
from ..adapters.ydoc_rooms import last_path_of
from .paths import to_os_path

log = logging.getLogger(__name__)


def running_roots(runtime_dir: str) -> list[str]:
    """The root folders of the Jupyter servers of this user that run now (their server files)."""
    try:
        return [os.path.abspath(info["root_dir"]) for info in list_running_servers(runtime_dir)
                if isinstance(info.get("root_dir"), str)]
    except OSError:
        return []


def _under(path: str, root: str) -> bool:
    root = root.rstrip(os.sep) or os.sep
    return path == root or path.startswith(root if root.endswith(os.sep) else root + os.sep)


def prune_stale(file_ids: Any, root_dir: str, keep: Container[str], other_roots: Iterable[str] = ()) -> int:
    """Drop the rows of files that no longer exist, except those a room may hold: in our root,
    an id in ``keep`` (our open rooms); anywhere else, a path under one of ``other_roots``
    (other servers that run now). How many rows were dropped."""
    con = getattr(file_ids, "con", None)
    if con is None:  # not the sqlite-backed manager: nothing we know how to prune
        return 0
    root = os.path.abspath(root_dir)
    others = [os.path.abspath(r) for r in other_roots if os.path.abspath(r) != root]
    stale = []
    for file_id, stored in con.execute("SELECT id, path FROM Files").fetchall():
        rel = workspace_path_of_row(file_ids, stored)
        if rel is not None and not rel.startswith("../"):
            full = to_os_path(root_dir, rel)
        elif isinstance(stored, str) and os.path.isabs(stored):
            full = os.path.normpath(stored)
        else:
            continue  # a path we cannot place: not ours to judge
        if os.path.lexists(full) or file_id in keep or any(_under(full, other) for other in others):
            continue
        stale.append(file_id)
    if stale:
        with con:
            con.executemany("DELETE FROM Files WHERE id = ?", [(i,) for i in stale])
        log.info("jupyter_mcp: pruned %d file-id rows of files that no longer exist", len(stale))
    return len(stale)


def reattach(file_ids: Any, file_id: str, path: str | None, root_dir: str) -> str | None:
    """Put back the row of ``file_id`` at ``path`` (workspace-relative), if the row is gone, the
    file is there and no other id holds the path; the path it has now, or None."""
    now = file_ids.get_path(file_id)
    if now is not None or path is None or getattr(file_ids, "con", None) is None:
        return now
    if not os.path.isfile(to_os_path(root_dir, path)) or file_ids.get_id(path) is not None:
        return None
    with file_ids.con:
        file_ids.con.execute("INSERT OR IGNORE INTO Files (id, path) VALUES (?, ?)",
                             (file_id, row_path_of(file_ids, path)))
    now = file_ids.get_path(file_id)
    if now is not None:
        log.warning("jupyter_mcp: the file-id row of %r (id %s) was removed by another program sharing the "
                    "file-id database; it is put back, and the room saves to its file again", now, file_id)
    return now


def lost_path(file_ids: Any, file_id: str, path: str | None, root_dir: str) -> str:
    """Why a room whose id has no row (and could not get it back) cannot save."""
    if path is None or not os.path.lexists(to_os_path(root_dir, path)):
        return f"the file of room json:notebook:{file_id}{f' ({path!r})' if path else ''} was deleted"
    return (f"the file-id row of {path!r} (id {file_id}) was removed by another program sharing the file-id "
            "database, and the path now has another id (opened since in another room): this room keeps its "
            "edits but cannot save them into the file; copy them out (notebook_get) before the server stops")


class Reattaching:
    """The file-id manager as one room's file loader uses it: the loader asks for its path before
    every read, poll and save, and gets the row put back (``reattach``) instead of an error when
    another program removed it."""

    def __init__(self, file_ids: Any, loader: Any, root_dir: str) -> None:
        self._file_ids = file_ids
        self._loader = loader
        self._root_dir = root_dir

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file_ids, name)

    def get_path(self, file_id: str) -> str | None:
        path = self._file_ids.get_path(file_id)
        if path is None and file_id == self._loader.file_id:
            path = reattach(self._file_ids, file_id, last_path_of(self._loader), self._root_dir)
        return path
