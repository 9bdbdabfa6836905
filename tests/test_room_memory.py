"""A room the sweeper closed is freed: its Y document does not outlive it (in-process
server, the real MCP client over HTTP)."""

from __future__ import annotations

import gc
import weakref

import pytest

from jupyter_mcp.client import connect
from jupyter_mcp.testing import call, disk_sources, write_notebook

pytestmark = pytest.mark.live


async def test_a_swept_room_frees_its_document(mcp_url, jp_token, mcp_ext, jp_root_dir):
    ids = write_notebook(jp_root_dir / "free.ipynb", ["a = 1", "b = 2"])
    async with connect(mcp_url, jp_token) as client:
        await call(client, "notebook_get", path="free.ipynb")
        await call(client, "cell_update", path="free.ipynb", cell_id=ids[0], source="a = 10")
        await call(client, "notebook_watch", path="free.ipynb", timeout=0.1)
        await call(client, "notebook_get", path="free.ipynb")
        doc = weakref.ref(mcp_ext.rooms.find("free.ipynb").room.ydoc)
        mcp_ext.sweeper.idle_timeout = 0
        assert len(await mcp_ext.sweeper.sweep()) == 1
    gc.collect()
    assert doc() is None, f"the closed room's document is still referenced by {gc.get_referrers(doc())!r:.500}"
    assert "a = 10" in disk_sources(jp_root_dir / "free.ipynb")
