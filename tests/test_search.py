"""notebook_search on a real server: the workspace's notebooks as people see them now (a notebook open
in a room is searched in its live document, unsaved typing included), bounded, and refused clearly."""

from __future__ import annotations

import json
import uuid

import nbformat
import pytest

from jupyter_mcp.client import connect
from jupyter_mcp.testing import UIClient, call, read_notebook, refused, write_notebook

pytestmark = pytest.mark.live


def folder(live) -> str:
    """A folder of its own in the live workspace, so other tests' notebooks are not found."""
    name = f"search-{uuid.uuid4().hex[:8]}"
    (live.root / name).mkdir()
    return name


async def test_finds_text_in_sources_and_outputs_across_a_folder(live):
    where = folder(live)
    a = write_notebook(live.root / where / "a.ipynb", ["import pandas as pd\ndf = pd.read_csv('sales.csv')", "x = 1"])
    b_nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Sales report\nNumbers from SALES.csv"),
        nbformat.v4.new_code_cell("print(total)", outputs=[nbformat.v4.new_output("stream", text="total sales: 42\n")])])
    nbformat.write(b_nb, live.root / where / "b.ipynb")
    (live.root / where / ".hidden").mkdir()
    write_notebook(live.root / where / ".hidden" / "c.ipynb", ["sales everywhere"])
    async with connect(live.mcp_url, live.token) as mcp:
        found = await call(mcp, "notebook_search", query="sales", folder=where)
        assert found["notebooks_searched"] == 2 and not found["truncated"] and found["unreadable"] == []
        assert [(m["path"], m["index"], m["where"], m["line"]) for m in found["matches"]] == [
            (f"{where}/a.ipynb", 0, "source", 2), (f"{where}/b.ipynb", 0, "source", 1),
            (f"{where}/b.ipynb", 0, "source", 2)]
        first = found["matches"][0]
        assert first["cell_id"] == a[0] and first["cell_type"] == "code"
        assert first["excerpt"] == "df = pd.read_csv('sales.csv')"
        with_outputs = await call(mcp, "notebook_search", query="sales", folder=where, include_outputs=True)
        assert with_outputs["matches"][-1] == {"path": f"{where}/b.ipynb", "cell_id": b_nb.cells[1].id, "index": 1,
                                               "cell_type": "code", "where": "output", "line": 1,
                                               "excerpt": "total sales: 42"}
        exact = await call(mcp, "notebook_search", query="SALES", folder=where, case_sensitive=True)
        assert [m["excerpt"] for m in exact["matches"]] == ["Numbers from SALES.csv"]
        one = await call(mcp, "notebook_search", query="sales", path=f"{where}/a.ipynb")
        assert one["notebooks_searched"] == 1 and len(one["matches"]) == 1


async def test_searches_the_live_document_with_a_persons_unsaved_typing(live):
    where = folder(live)
    name = f"{where}/live.ipynb"
    ids = write_notebook(live.root / name, ["a = 1"])
    async with connect(live.mcp_url, live.token) as mcp, UIClient(live.url, live.token, name) as ui:
        ui.type_into(0, "\nquokka = 2  # typed, not saved")
        for _ in range(100):
            found = await call(mcp, "notebook_search", query="quokka", folder=where)
            if found["matches"]:
                break
        # found before the room's save (1 s after the typing) wrote it: read from the live document
        assert "quokka" not in json.dumps(read_notebook(live.root / name))
        assert found["matches"] == [{"path": name, "cell_id": ids[0], "index": 0, "cell_type": "code",
                                     "where": "source", "line": 2, "excerpt": "quokka = 2  # typed, not saved"}]


async def test_results_are_bounded_and_long_lines_cut_around_the_match(live):
    where = folder(live)
    long_line = "x" * 500 + " needle " + "y" * 500
    write_notebook(live.root / where / "many.ipynb", ["\n".join(f"needle {i}" for i in range(30)), long_line])
    async with connect(live.mcp_url, live.token) as mcp:
        found = await call(mcp, "notebook_search", query="needle", folder=where, max_results=10)
        assert len(found["matches"]) == 10 and found["truncated"]
        assert [m["line"] for m in found["matches"]] == list(range(1, 11))
        everything = await call(mcp, "notebook_search", query="needle", folder=where, max_results=500)
        assert len(everything["matches"]) == 31 and not everything["truncated"]
        cut = everything["matches"][-1]["excerpt"]
        assert " needle " in cut and cut.startswith("…") and cut.endswith("…") and len(cut) <= 162


async def test_bad_searches_are_refused_and_a_broken_file_is_named(live):
    where = folder(live)
    write_notebook(live.root / where / "good.ipynb", ["findme"])
    (live.root / where / "broken.ipynb").write_text("{not json")
    async with connect(live.mcp_url, live.token) as mcp:
        found = await call(mcp, "notebook_search", query="findme", folder=where)
        assert len(found["matches"]) == 1 and found["unreadable"] == [f"{where}/broken.ipynb"]
        assert "query is empty" in await refused(mcp, "notebook_search", query="")
        assert "line break" in await refused(mcp, "notebook_search", query="a\nb")
        assert "not both" in await refused(mcp, "notebook_search", query="a", path=f"{where}/good.ipynb", folder=where)
        assert "escapes the workspace" in await refused(mcp, "notebook_search", query="a", folder="../..")
        assert "does not exist" in await refused(mcp, "notebook_search", query="a", folder=f"{where}/nope")


async def test_an_unknown_argument_is_refused_naming_the_valid_ones_sync_and_as_a_task(live):
    from jupyter_mcp.client import Tasks
    name = f"{folder(live)}/args.ipynb"
    write_notebook(live.root / name, ["1"])
    async with connect(live.mcp_url, live.token) as mcp:
        message = await refused(mcp, "cell_get", path=name, idx=0)
        assert message.startswith("cell_get takes no argument 'idx' (did you mean 'index'?); its arguments are: path, "
                                  "cell_id, index")
        raw = await Tasks(mcp).request("tools/call", {"name": "cell_execute", "task": {},
                                                      "arguments": {"path": name, "cell": 0}})
        assert "task" not in raw and raw["isError"] is True and "takes no argument 'cell'" in raw["content"][0]["text"]
    assert read_notebook(live.root / name)["cells"][0]["outputs"] == []
