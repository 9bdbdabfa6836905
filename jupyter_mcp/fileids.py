"""Pruning the file-id database at start: rows outside the root, or of files gone.

jupyter-server-fileid mints an id for any path it is asked about and never forgets one,
so rows for deleted files and escapes pile up for the life of the workspace.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Container
from typing import Any

from .paths import to_os_path

log = logging.getLogger(__name__)


def prune_stale(file_ids: Any, root_dir: str, keep: Container[str]) -> int:
    """Drop rows outside the root, and rows of files gone whose id is not in ``keep``."""
    con = getattr(file_ids, "con", None)
    if con is None:  # not the sqlite-backed manager: nothing we know how to prune
        return 0
    stale = []
    for file_id, stored in con.execute("SELECT id, path FROM Files").fetchall():
        rel = file_ids._from_normalized_path(stored)
        if rel is None or rel.startswith("../"):
            stale.append(file_id)
        elif file_id not in keep and not os.path.lexists(to_os_path(root_dir, rel)):
            stale.append(file_id)
    if stale:
        with con:
            con.executemany("DELETE FROM Files WHERE id = ?", [(i,) for i in stale])
        log.info("jupyter_mcp: pruned %d stale file-id rows", len(stale))
    return len(stale)
