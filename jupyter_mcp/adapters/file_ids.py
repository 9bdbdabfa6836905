"""jupyter-server-fileid's internals: how its database stores a path.

Pruning and putting back rows of the file-id database works on the rows themselves (the manager
has no "remove the row of a file gone" nor "insert this id"), so a row's path is converted the way
the manager converts it."""

from __future__ import annotations

from typing import Any


def workspace_path_of_row(file_ids: Any, stored: str | None) -> str | None:
    """The workspace-relative path a row's stored path names (``_from_normalized_path``; None or
    ``../…`` for one outside the root)."""
    return file_ids._from_normalized_path(stored)


def row_path_of(file_ids: Any, path: str) -> str:
    """A workspace path as the database stores it (``_normalize_path``)."""
    return file_ids._normalize_path(path)
