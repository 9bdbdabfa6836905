"""Every tool publishes an output schema, and every real answer validates against it: each
tool is called (on an in-process server with a real kernel) in the shapes its answers take,
and each answer is checked with jsonschema against the schema tools/list gave."""

from __future__ import annotations

import asyncio

import jsonschema
import nbformat
import pytest

from jupyter_mcp.client import connect

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def notebook_with_every_kind_of_output(path):
    code = nbformat.v4.new_code_cell("print('hi')")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi\n"),
                    nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"}),
                    nbformat.v4.new_output("execute_result", data={"text/html": "<b>x</b>"}, execution_count=1),
                    nbformat.v4.new_output("error", ename="ValueError", evalue="bad", traceback=["ValueError: bad"])]
    code.execution_count = 1
    cells = [code, nbformat.v4.new_markdown_cell("# title"), nbformat.v4.new_raw_cell("raw"),
             nbformat.v4.new_code_cell("1 / 0"), nbformat.v4.new_code_cell("x = 1")]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return [c.id for c in cells]


@pytest.mark.live
async def test_every_tool_answers_what_its_output_schema_says(mcp_url, jp_token, jp_root_dir, mcp_ext):
    ids = notebook_with_every_kind_of_output(jp_root_dir / "shapes.ipynb")
    answers: dict[str, list] = {}
    try:
        async with connect(mcp_url, jp_token) as client:
            schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
            assert all(schemas.values()), [name for name, schema in schemas.items() if not schema]

            async def call(tool, failing=False, **arguments):
                """A call, and whether it is a failed one (a run that raised or timed out answers
                isError, with its structured answer all the same)."""
                result = await client.call_tool(tool, arguments)
                assert result.is_error is failing, (tool, result.content)
                answers.setdefault(tool, []).append(result.structured_content)
                return result.structured_content

            nb = "shapes.ipynb"
            await call("notebook_list")
            await call("file_list", max_depth=2)
            await call("notebook_list_users", path=nb)  # no room yet
            await call("notebook_create", path="made.ipynb", cells=[{"cell_type": "markdown", "source": "# m"}])
            await call("notebook_get", path=nb)
            await call("notebook_get", path=nb, include_outputs=False)
            await call("notebook_get", path=nb, mode="outline")
            await call("notebook_list_users", path=nb)  # the room is open, the agent in it
            for cell_id in ids[:3]:
                await call("cell_get", path=nb, cell_id=cell_id)
            await call("cell_update", path=nb, cell_id=ids[4], source="x = 2", cell_type="code")
            await call("cell_edit", path=nb, cell_id=ids[4], old="2", new="3")
            await call("cell_move", path=nb, cell_id=ids[2], to_index=0)
            await call("cell_clear_outputs", path=nb, cell_id=ids[0])
            await call("cell_clear_outputs", path=nb, all_cells=True)
            inserted = await call("cell_insert", path=nb, source="print('new')", after_cell_id=ids[4])
            watcher = asyncio.ensure_future(call("notebook_watch", path=nb, timeout=30))
            await asyncio.sleep(0.5)
            await call("cell_delete", path=nb, cell_ids=[inserted["id"]])
            await watcher
            await call("notebook_watch", path=nb, timeout=0.2)  # nothing changes: a timeout
            await call("cell_execute", path=nb, cell_id=ids[4])  # ok, no output
            await call("cell_execute", path=nb, cell_id=ids[3], failing=True)  # an error
            ran = await call("cell_insert_execute", path=nb, source="print('inserted')")
            await call("cell_delete", path=nb, cell_id=ran["cell_id"])
            await call("code_execute", path=nb, code="from IPython.display import display, HTML\n"
                                                       "display(HTML('<i>h</i>'))\nprint('out')")
            await call("code_execute", path=nb, code="import time; time.sleep(5)", timeout=0.5, failing=True)
            await call("notebook_execute", path=nb, start_index=4, stop_index=5)  # ok
            await call("notebook_execute", path=nb, failing=True)  # stops at the error cell
            await call("kernel_list")
            await call("notebook_search", query="x", include_outputs=True)
            await call("kernel_interrupt", path=nb)
            await call("kernel_restart", path=nb)
            await call("kernel_select", path=nb, kernel_name="python3")
            await call("room_list")
    finally:
        for kernel_id in list(mcp_ext.serverapp.kernel_manager.list_kernel_ids()):
            await mcp_ext.serverapp.kernel_manager.shutdown_kernel(kernel_id, now=True)

    assert set(answers) == set(schemas), set(schemas) - set(answers)  # every tool was called
    for tool, results in answers.items():
        for result in results:
            jsonschema.validate(result, schemas[tool])
    statuses = {r["status"] for r in answers["cell_execute"] + answers["code_execute"]}
    assert statuses == {"ok", "error", "timeout"}
    assert [w["changed"] for w in answers["notebook_watch"]] == [True, False]


@pytest.mark.unit
def test_a_wrong_answer_fails_its_schema():
    """The check above can fail: an answer of the wrong shape does not validate."""
    from jupyter_mcp.tools.views import Cell
    from pydantic import TypeAdapter

    schema = TypeAdapter(Cell).json_schema(mode="serialization")
    good = {"id": "a", "index": 0, "cell_type": "code", "source": "", "metadata": {}}
    jsonschema.validate(good, schema)
    for bad in ({**good, "cell_type": "python"}, {**good, "index": "0"}, {k: v for k, v in good.items() if k != "id"}):
        try:
            jsonschema.validate(bad, schema)
        except jsonschema.ValidationError:
            continue
        raise AssertionError(f"{bad} validated")
