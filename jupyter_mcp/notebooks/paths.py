"""The path layer: every path a client gives becomes ONE canonical workspace path.

``foo.ipynb``, ``./foo.ipynb``, ``/foo.ipynb``, ``<root>/foo.ipynb`` and a symlink in the
workspace that leads to it all name the same notebook, so they must reach the file-id
manager (and so the room) as the same string: ``foo.ipynb``. Anything that could leave the workspace is refused here,
before any other layer sees it, with an error naming the path and the reason.

A path checked here can still change before the contents manager opens it (it opens by path
and follows symlinks), so the file itself is checked too: ``real_file`` and ``read_real_file``
open it without following any symlink, and refuse a file with a second hard link.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat

from ..errors import NotebookError

MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255
NOTEBOOK_SUFFIX = ".ipynb"


class PathError(NotebookError):
    """A path was refused; the message names the path and why."""

    def __init__(self, path: object, reason: str) -> None:
        shown = repr(path)
        if len(shown) > 120:
            shown = shown[:100] + "…(" + str(len(shown)) + " chars)"
        super().__init__(f"{reason}: {shown}")
        self.path = path
        self.reason = reason


def _is_within(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def canonical_path(root_dir: str, path: object, *, notebook: bool = True) -> str:
    """Turn a client path into the canonical workspace-relative path, or raise PathError.

    ``notebook=True`` also requires a ``.ipynb`` file name; ``notebook=False`` accepts a
    folder too, where ``""`` (or ``/`` or ``.``) is the workspace root itself.
    """
    if not isinstance(path, str):
        raise PathError(path, f"path must be a string, not {type(path).__name__}")
    if "\x00" in path:
        raise PathError(path, "path contains a NUL byte")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in path):
        raise PathError(path, "path contains a control character")
    if len(path) > MAX_PATH_CHARS:
        raise PathError(path, f"path is longer than {MAX_PATH_CHARS} characters")
    if not path.strip() and notebook:
        raise PathError(path, "path is empty")

    root = os.path.abspath(root_dir)
    real_root = os.path.realpath(root)
    rel = _workspace_relative(path, root, real_root)

    normalized = posixpath.normpath(rel) if rel else "."
    if normalized == ".":
        normalized = ""
    if normalized == ".." or normalized.startswith("../"):
        raise PathError(path, "path escapes the workspace")
    for part in normalized.split("/") if normalized else []:
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise PathError(path, f"a path component is longer than {MAX_NAME_BYTES} bytes")

    resolved = os.path.realpath(os.path.join(real_root, normalized))
    if not _is_within(resolved, real_root):
        raise PathError(path, "path resolves outside the workspace (through a symlink)")
    # A symlink inside the workspace names the file it leads to: every name of one file is
    # one canonical path, so one room.
    normalized = "" if resolved == real_root else os.path.relpath(resolved, real_root).replace(os.sep, "/")

    if notebook:
        if not normalized:
            raise PathError(path, "path names the workspace folder, not a notebook")
        if not normalized.endswith(NOTEBOOK_SUFFIX) or posixpath.basename(normalized) == NOTEBOOK_SUFFIX:
            raise PathError(path, "not a notebook path (it must end in .ipynb)")
    return normalized


def _workspace_relative(path: str, root: str, real_root: str) -> str:
    """Strip the workspace root from an absolute path; refuse host paths outside it.

    Components are compared without collapsing ``..``, so ``<root>/../x`` stays an
    escape (``../x``) instead of being silently folded into something else.
    """
    if not path.startswith("/"):
        return path
    parts = [p for p in path.split("/") if p not in ("", ".")]
    for candidate_root in (root, real_root):
        root_parts = [p for p in candidate_root.split("/") if p]
        if parts[: len(root_parts)] == root_parts:
            return "/".join(parts[len(root_parts):])
    # "/foo.ipynb" is the Jupyter API's way of naming a workspace file, but
    # "/etc/x.ipynb" or "/home/me/x.ipynb" is a host path: its first folder exists
    # on the host and not in the workspace.
    if len(parts) > 1 and parts[0] != "..":
        if os.path.isdir("/" + parts[0]) and not os.path.exists(os.path.join(root, parts[0])):
            raise PathError(path, "absolute path outside the workspace")
    return "/".join(parts)


def to_os_path(root_dir: str, canonical: str) -> str:
    """The filesystem path of a canonical workspace path."""
    return os.path.join(os.path.abspath(root_dir), canonical)


def hidden_part(canonical: str) -> str | None:
    """The first hidden component of a canonical path (a name starting with '.'), if any."""
    return next((part for part in canonical.split("/") if part.startswith(".")), None)


def real_file(root_dir: str, canonical: str) -> os.stat_result | None:
    """The stat of the workspace's own file at ``canonical``, or None if nothing is there; else PathError.

    Its own file: reached without any symlink (a canonical path has none, so one now is a swap
    made after the path was checked), a regular file, with one name. A second hard link may be a
    file outside the workspace: reading it would show that file, and an edit, written in place,
    would change it."""
    try:
        fd = _open_real(root_dir, canonical)
    except FileNotFoundError:
        return None
    try:
        return _checked_stat(fd, canonical)
    finally:
        os.close(fd)


def read_real_file(root_dir: str, canonical: str) -> bytes:
    """The bytes of the workspace's own file at ``canonical`` (as ``real_file`` says), read from
    the file opened without following a symlink: what was read by path can be compared with it."""
    fd = _open_real(root_dir, canonical)
    try:
        _checked_stat(fd, canonical)
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read()
    finally:
        os.close(fd)


def _open_real(root_dir: str, canonical: str) -> int:
    """Open ``canonical`` from the real workspace root one component at a time, each relative to
    the folder before, none followed if it is a symlink (ELOOP becomes a PathError)."""
    nofollow = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(os.path.realpath(root_dir), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    *folders, name = canonical.split("/")
    try:
        for folder in folders:
            fd, parent = os.open(folder, nofollow | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(parent)
        # O_NONBLOCK: a FIFO put there must not hang the open; it is refused as not a regular file
        fd, parent = os.open(name, nofollow | os.O_NONBLOCK, dir_fd=fd), fd
        os.close(parent)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PathError(canonical, "path now leads through a symlink or a non-folder (it changed after "
                                       "it was checked)") from None
        raise
    return fd


def _checked_stat(fd: int, canonical: str) -> os.stat_result:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise PathError(canonical, "not a regular file")
    if info.st_nlink > 1:
        raise PathError(canonical, f"the file has {info.st_nlink} hard links, and another of its names may be a "
                                   "file outside the workspace (reading it would show that file, an edit would "
                                   "write it); a notebook with more than one hard link is not opened")
    return info
