"""Proof in a real browser: JupyterLab in headless Chromium (Playwright) while an agent works
through the real MCP client. Screenshots go to test-artifacts/ (kept out of git)."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp_types import Implementation

from jupyter_mcp.client import connect
from jupyter_mcp.testing import call, new_notebook

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
AGENT = "browser-test-agent"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="Chromium is not installed (scripts/test installs Debian's chromium)")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A real jupyter lab with news and update prompts switched off."""
    from jupyter_mcp.testing import LiveServer

    base = tmp_path_factory.mktemp("lab")
    settings = base / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false",
                                                                          "checkForUpdates": False}))
    server = LiveServer(base, env={"JUPYTERLAB_SETTINGS_DIR": str(base / "lab-settings"),
                                   "JUPYTERLAB_WORKSPACES_DIR": str(base / "lab-workspaces")})
    server.start()
    yield server
    server.stop()


@asynccontextmanager
async def browser(tmp_path):
    """A fresh headless Chromium (Debian's, never a downloaded one) with an empty profile."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        context = await p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": 1400, "height": 900})
        page = context.pages[0] if context.pages else await context.new_page()
        yield page
        await context.close()


PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"


async def open_notebook(page, lab, name):
    """Open one notebook in a workspace of its own (nothing restored from earlier tests)."""
    await page.goto(f"{lab.url}lab/workspaces/{uuid.uuid4().hex[:8]}/tree/{name}?reset&token={lab.token}")
    await page.wait_for_selector(f"{PANEL} .jp-Cell .cm-content", state="attached", timeout=60_000)
    await page.wait_for_function("() => !document.querySelector('.jp-Dialog')", timeout=30_000)
    await asyncio.sleep(0.5)  # let the collaborative document settle


def cell_texts_js():
    return f"() => [...document.querySelectorAll('{PANEL} .jp-Cell .cm-content')].map(e => e.innerText)"


async def shot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def notebook(lab, *sources):
    return new_notebook(lab.root, *sources, prefix="ui")


async def test_agent_update_and_insert_appear_in_the_open_notebook(lab, tmp_path):
    async with browser(tmp_path) as page:
        name, ids = notebook(lab, "a = 1", "b = 2")
        await open_notebook(page, lab, name)
        async with connect(lab.mcp_url, lab.token, client_info=Implementation(name=AGENT, version="1")) as mcp:
            await call(mcp, "cell_update", path=name, cell_id=ids[1], source="b = 'written by the agent'")
            await page.wait_for_function(f"() => ({cell_texts_js()})().some(t => t.includes('written by the agent'))",
                                         timeout=30_000)
            await call(mcp, "cell_insert", path=name, source="# a markdown note from the agent", cell_type="markdown")
            await page.wait_for_function(f"() => document.querySelectorAll('{PANEL} .jp-Cell').length === 3",
                                         timeout=30_000)
            await page.wait_for_function("() => document.body.innerText.includes('a markdown note from the agent')",
                                         timeout=30_000)
        await shot(page, "1-update-and-insert")


async def test_agent_execution_streams_lines_into_the_browser(lab, tmp_path):
    async with browser(tmp_path) as page:
        code = "import time\nfor i in range(5):\n    print(f'line {i}', flush=True)\n    time.sleep(0.5)"
        name, ids = notebook(lab, code)
        await open_notebook(page, lab, name)
        await page.locator(".jp-SideBar [data-id='jp-collaboration-panel']").click()  # for the screenshot
        async with connect(lab.mcp_url, lab.token, client_info=Implementation(name=AGENT, version="1")) as mcp:
            run = asyncio.create_task(call(mcp, "cell_execute", path=name, cell_id=ids[0]))
            seen: list[int] = []
            while not run.done():
                text = await page.evaluate(f"() => [...document.querySelectorAll('{PANEL} .jp-OutputArea-output')]"
                                           ".map(e => e.innerText).join('')")
                count = text.count("line ")
                if count and (not seen or seen[-1] != count):
                    seen.append(count)
                if count == 3:
                    await shot(page, "2-lines-arriving")
                await asyncio.sleep(0.05)
            result = await run
        assert result["status"] == "ok"
        assert [n for n in seen if n < 5] == [1, 2, 3, 4], f"lines seen while running: {seen}"
        prompt = f"[{result['execution_count']}]:"
        await page.wait_for_function(
            f"() => [...document.querySelectorAll('{PANEL} .jp-InputPrompt')].some(e => e.innerText.includes('{prompt}'))",
            timeout=30_000)
        await shot(page, "2-execution-done")


async def test_person_typing_is_seen_and_not_disturbed_by_the_agent(lab, tmp_path):
    async with browser(tmp_path) as page:
        name, ids = notebook(lab, "", "other = 1")
        await open_notebook(page, lab, name)
        editor = page.locator(f"{PANEL} .jp-Cell .cm-content").first
        await editor.click()
        await page.keyboard.type("typed_by_a_person = 42", delay=20)
        async with connect(lab.mcp_url, lab.token, client_info=Implementation(name=AGENT, version="1")) as mcp:
            deadline = time.monotonic() + 30
            while (await call(mcp, "cell_get", path=name, cell_id=ids[0]))["source"] != "typed_by_a_person = 42":
                assert time.monotonic() < deadline, "the agent never saw what the person typed"
                await asyncio.sleep(0.1)
            await call(mcp, "cell_update", path=name, cell_id=ids[1], source="other = 'agent edited another cell'")
            await page.wait_for_function(f"() => ({cell_texts_js()})()[1].includes('agent edited another cell')",
                                         timeout=30_000)
            await page.keyboard.type(" + 1", delay=20)  # the person's cursor is where they left it
            await page.wait_for_function(f"() => ({cell_texts_js()})()[0] === 'typed_by_a_person = 42 + 1'",
                                         timeout=30_000)
            deadline = time.monotonic() + 30
            while (await call(mcp, "cell_get", path=name, cell_id=ids[0]))["source"] != "typed_by_a_person = 42 + 1":
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
        await shot(page, "3-person-and-agent")


async def test_agent_move_edit_and_clear_are_decoded_by_the_browser(lab, tmp_path):
    """The browser's own Yjs applies cell_move (a delete and an insert in one transaction, as
    JupyterLab moves a cell), cell_edit and cell_clear_outputs; the person then types into the
    moved cell, and the agent reads what they typed."""
    async with browser(tmp_path) as page:
        name, ids = notebook(lab, "print('moved output')", "b = 2", "c = 3")
        await open_notebook(page, lab, name)
        async with connect(lab.mcp_url, lab.token, client_info=Implementation(name=AGENT, version="1")) as mcp:
            await call(mcp, "cell_execute", path=name, cell_id=ids[0])
            await page.wait_for_function("() => document.body.innerText.includes('moved output')", timeout=30_000)
            await call(mcp, "cell_move", path=name, cell_id=ids[0], to_index=2)
            await page.wait_for_function(f"want => JSON.stringify(({cell_texts_js()})()) === JSON.stringify(want)",
                                         arg=["b = 2", "c = 3", "print('moved output')"], timeout=30_000)
            outputs = f"[...document.querySelectorAll('{PANEL} .jp-Cell')].map(c => c.querySelector('.jp-OutputArea')?.innerText || '')"
            assert "moved output" in (await page.evaluate(f"() => {outputs}"))[2]  # its output moved with it
            await shot(page, "6-moved")
            await call(mcp, "cell_edit", path=name, cell_id=ids[1], old="2", new="'edited in place'")
            await page.wait_for_function(f"() => ({cell_texts_js()})()[0] === \"b = 'edited in place'\"",
                                         timeout=30_000)
            editor = page.locator(f"{PANEL} .jp-Cell .cm-content").nth(2)
            await editor.click()
            await page.keyboard.press("End")
            await page.keyboard.type("  # typed after the move", delay=20)
            deadline = time.monotonic() + 30
            while (await call(mcp, "cell_get", path=name, cell_id=ids[0]))["source"] != \
                    "print('moved output')  # typed after the move":
                assert time.monotonic() < deadline, "the agent never saw the person's typing in the moved cell"
                await asyncio.sleep(0.1)
            await call(mcp, "cell_clear_outputs", path=name, all_cells=True)
            await page.wait_for_function(f"() => {outputs}.every(t => !t.includes('moved output'))", timeout=30_000)
            assert [c["id"] for c in (await call(mcp, "notebook_get", path=name))["cells"]] == [ids[1], ids[2], ids[0]]
        await shot(page, "6-edited-and-cleared")


async def test_agent_appears_among_the_collaborators(lab, tmp_path):
    """JupyterLab's Collaborators panel lists the agent, with the notebook it works on."""
    async with browser(tmp_path) as page:
        name, ids = notebook(lab, "x = 1")
        await open_notebook(page, lab, name)
        await page.locator(".jp-SideBar [data-id='jp-collaboration-panel']").click()
        async with connect(lab.mcp_url, lab.token, client_info=Implementation(name=AGENT, version="1")) as mcp:
            await call(mcp, "cell_update", path=name, cell_id=ids[0], source="x = 'the agent is here'")
            agent = page.locator(".jp-CollaboratorsList .jp-Collaborator", has_text=f"jupyter agent ({AGENT})")
            await agent.wait_for(timeout=30_000)
            assert (await agent.locator(".jp-CollaboratorIcon").inner_text()).strip() == "AI"
            await agent.locator(".jp-CollaboratorHeader").click()
            await page.locator(".jp-CollaboratorFiles", has_text=name).wait_for(timeout=10_000)
            await shot(page, "4-agent-collaborator")


async def test_a_notebook_the_agent_created_appears_and_opens(lab, tmp_path):
    async with browser(tmp_path) as page:
        await page.goto(f"{lab.url}lab/workspaces/{uuid.uuid4().hex[:8]}?reset&token={lab.token}")
        await page.wait_for_selector(".jp-SideBar [data-id='filebrowser']", timeout=60_000)
        if not await page.locator("#filebrowser").is_visible():
            await page.locator(".jp-SideBar [data-id='filebrowser']").click()
        await page.wait_for_selector("#filebrowser .jp-DirListing-content", timeout=60_000)
        name = f"made-by-agent-{uuid.uuid4().hex[:6]}.ipynb"
        async with connect(lab.mcp_url, lab.token, client_info=Implementation(name=AGENT, version="1")) as mcp:
            await call(mcp, "notebook_create", path=name,
                       cells=[{"cell_type": "markdown", "source": "# Made by the agent"}])
        item = page.locator(f"#filebrowser .jp-DirListing-item:has-text('{name}')").first
        deadline = time.monotonic() + 60
        while not await item.count():
            assert time.monotonic() < deadline, "the new notebook never appeared in the file browser"
            await page.locator("#filebrowser [data-command='filebrowser:refresh']").first.click()
            await asyncio.sleep(1)
        await item.dblclick()
        await page.wait_for_function("() => document.body.innerText.includes('Made by the agent')", timeout=60_000)
        await shot(page, "5-created-notebook-opened")


async def test_the_agent_is_told_the_cell_the_person_is_on(lab, tmp_path):
    """JupyterLab shares the person's caret; notebook_list_users names its cell: at the end of what
    they typed in an empty cell (Yjs names the text itself), then before a character of another."""
    async with browser(tmp_path) as page:
        name, ids = notebook(lab, "first = 1", "second = 2", "")
        await open_notebook(page, lab, name)
        async with connect(lab.mcp_url, lab.token, client_info=Implementation(name=AGENT, version="1")) as mcp:
            async def person_is_on(cell_id):
                deadline = time.monotonic() + 30
                while True:
                    users = (await call(mcp, "notebook_list_users", path=name))["users"]
                    on = [u.get("cell_id") for u in users if not u["is_agent"]]
                    if on == [cell_id]:
                        return
                    assert time.monotonic() < deadline, f"the person is on {on}, not {cell_id}"
                    await asyncio.sleep(0.2)

            editors = page.locator(f"{PANEL} .jp-Cell .cm-content")
            await editors.nth(2).click()
            await page.keyboard.type("# the person is here")
            await person_is_on(ids[2])
            await editors.nth(0).click(position={"x": 2, "y": 5})  # before the first character
            await person_is_on(ids[0])
            await shot(page, "7-person-on-a-cell")
