"""The file, not only its path (issue 12, finding 11), on a real server.

A path is checked, then the contents manager opens the file by path, following symlinks; its
atomic writing writes a symlink's target, and a hard link's other names, in place. So a
notebook swapped for a symlink to outside between the check and the read must not bring the
outside file's content to the agent, one swapped before a save must not get written through,
and a hard link (maybe to a file outside the workspace) is neither read nor written.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from pathlib import Path

import pytest

from jupyter_mcp.client import connect
from jupyter_mcp.testing import call, new_notebook, refused, write_notebook

pytestmark = pytest.mark.live

SECRET = "s3cr3t-" + uuid.uuid4().hex  # in the outside notebook only
NO_AUTOSAVE = ["--YDocExtension.document_save_delay=3600"]  # only our save can write
SWEEPY = {"MCP_ROOM_IDLE_TIMEOUT_SEC": "1", "MCP_ROOM_SWEEP_INTERVAL_SEC": "0.3"}


def outside_notebook(server) -> Path:
    """A notebook beside the workspace (same file system, so it can be hard-linked), with the secret."""
    path = server.base / "outside" / f"secret-{uuid.uuid4().hex[:8]}.ipynb"
    write_notebook(path, [f"password = {SECRET!r}"])
    return path


def answer_text(result) -> str:
    return repr(result.structured_content) + "".join(getattr(c, "text", "") for c in result.content)


async def test_a_hard_link_is_not_read_not_written_and_not_listed(live):
    outside = outside_notebook(live)
    before = outside.read_bytes()
    name = f"hard-{uuid.uuid4().hex[:8]}.ipynb"
    os.link(outside, live.root / name)
    async with connect(live.mcp_url, live.token) as mcp:
        message = await refused(mcp, "notebook_get", path=name)
        assert "2 hard links" in message and "outside the workspace" in message and name in message
        assert SECRET not in message
        message = await refused(mcp, "cell_update", path=name, index=0, source="password = 'overwritten'")
        assert "hard links" in message
        listed = [nb["path"] for nb in (await call(mcp, "notebook_list"))["notebooks"]]
        assert name not in listed
        assert not [r for r in (await call(mcp, "room_list"))["rooms"] if r["path"] == name]
    await asyncio.sleep(1.5)  # past jupyter-server-ydoc's autosave delay: nothing may write it late
    assert outside.read_bytes() == before


class Swapper(threading.Thread):
    """Swaps the current target notebook for a symlink to the outside one and back, over and over."""

    def __init__(self, outside: Path) -> None:
        super().__init__(daemon=True)
        self.outside = outside
        self.target: Path | None = None
        self.stopping = threading.Event()
        self.swaps = 0

    def run(self) -> None:
        while not self.stopping.is_set():
            target = self.target
            if target is None:
                time.sleep(0.001)
                continue
            link, aside = target.with_name(".link-" + target.name), target.with_name(".aside-" + target.name)
            os.symlink(self.outside, link)
            os.rename(target, aside)
            os.rename(link, target)  # the notebook's name now leads outside
            time.sleep(0.002)
            os.rename(aside, target)  # and back: the same file, as it was
            self.swaps += 1
            time.sleep(0.002)


async def test_a_notebook_swapped_for_a_symlink_never_shows_the_outside_file(live):
    """120 opens of notebooks that a racing thread keeps swapping for a symlink to a notebook
    outside the workspace and back: not one answer holds the outside notebook's secret."""
    outside = outside_notebook(live)
    names = [new_notebook(live.root, "public = 1", prefix="race")[0] for _ in range(120)]
    swapper = Swapper(outside)
    swapper.start()
    leaked, refusals = [], 0
    try:
        async with connect(live.mcp_url, live.token) as mcp:
            for name in names:
                swapper.target = live.root / name
                await asyncio.sleep(0.003)
                result = await mcp.call_tool("notebook_get", {"path": name})
                refusals += result.is_error
                if SECRET in answer_text(result):
                    leaked.append(name)
                swapper.target = None
            swapper.stopping.set()
            swapper.join()
            assert swapper.swaps > 100 and refusals > 0  # the race was run, and won some of the time
            assert not leaked, f"{len(leaked)} of {len(names)} answers held the outside file's content"
            last = await call(mcp, "notebook_get", path=names[-1])  # with the file left alone, it opens
            assert [c["source"] for c in last["cells"]] == ["public = 1"]
    finally:
        swapper.stopping.set()


async def test_a_notebook_swapped_for_a_symlink_before_a_save_is_not_written_through(live_factory):
    """An edit waits in the room; the file is swapped for a symlink to an outside notebook (with
    the same mtime, so the save sees no change on disk) before the sweeper saves: the save fails
    naming why, the outside file is unchanged, and the room keeps its edit."""
    server = live_factory(env=SWEEPY, args=NO_AUTOSAVE)
    outside = outside_notebook(server)
    name, ids = new_notebook(server.root, "x = 1")
    target = server.root / name
    async with connect(server.mcp_url, server.token) as mcp:
        await call(mcp, "cell_update", path=name, cell_id=ids[0], source="x = 'the edit'")
        before = outside.read_bytes()
        mtime = target.lstat().st_mtime_ns
        link = target.with_name(".link-" + name)
        os.symlink(outside, link)
        os.utime(link, ns=(mtime, mtime), follow_symlinks=False)
        os.rename(target, target.with_name(".aside-" + name))
        os.rename(link, target)
        for _ in range(100):
            rooms = [r for r in (await call(mcp, "room_list"))["rooms"] if r["path"] == name]
            if not rooms or rooms[0]["saved"] is False:
                break  # saved (somewhere) and closed, or failed
            await asyncio.sleep(0.1)
        assert outside.read_bytes() == before
        assert rooms, "the room was closed as saved"
        assert rooms[0]["saved"] is False and "symlink" in rooms[0]["save_error"], rooms[0]
        assert SECRET not in answer_text(await mcp.call_tool("notebook_get", {"path": name}))
