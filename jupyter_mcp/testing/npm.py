"""Command-line tools and libraries from the npm registry (the MCP Inspector,
configurable-http-proxy, the TypeScript SDKs), installed once into a folder of the checkout,
never globally. Test processes running side by side (pytest-xdist's workers) install into one
folder one at a time: a lock file beside it is held for the check and the install."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def npm_tool(package: str, prefix: Path, command: str) -> Path:
    """``package`` (``name@version``) installed into ``prefix`` unless it is there; its ``command``."""
    binary = prefix / "node_modules" / ".bin" / command
    with _one_at_a_time(prefix):
        if not binary.exists():
            _install([package], prefix)
    return binary


def npm_packages(packages: list[str], prefix: Path) -> Path:
    """``packages`` (``name@version`` each) installed into ``prefix`` unless they are there; the
    folder, where a script placed in it finds them as its node_modules."""
    names = [package.rsplit("@", 1)[0] for package in packages]
    with _one_at_a_time(prefix):
        if not all((prefix / "node_modules" / name / "package.json").exists() for name in names):
            _install(packages, prefix)
    return prefix


@contextmanager
def _one_at_a_time(prefix: Path) -> Iterator[None]:
    """Held while ``prefix`` is checked and installed into, across processes."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with open(prefix.parent / f".{prefix.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _install(packages: list[str], prefix: Path) -> None:
    if shutil.which("npm") is None:
        raise RuntimeError("npm is not installed (bash scripts/test installs Node.js with apt-get)")
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), *packages],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"npm install {' '.join(packages)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
