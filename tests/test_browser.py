"""Proof in a real browser: JupyterLab in headless Chromium (Playwright) while an agent works
through the real MCP client. Screenshots go to test-artifacts/ (kept out of git)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import shutil
import string
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
from jupyter_ydoc import YNotebook
from mcp_types import Implementation
from pycrdt import Doc, YMessageType, YSyncMessageType, read_message

from jupyter_mcp.client import connect
from jupyter_mcp.testing import UIClient, call, disk_sources, new_notebook
from jupyter_mcp.testing.plugin import starts_process

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
AGENT = "browser-test-agent"

pytestmark = [pytest.mark.live, pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                                   reason="Chromium is not installed (scripts/test installs Debian's chromium)")]


@pytest.fixture(scope="module")
@starts_process
def lab(tmp_path_factory):
    """A real jupyter lab with news and update prompts switched off, its app reachable from the page."""
    from jupyter_mcp.testing import LiveServer

    base = tmp_path_factory.mktemp("lab")
    settings = base / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false",
                                                                          "checkForUpdates": False}))
    server = LiveServer(base, env={"JUPYTERLAB_SETTINGS_DIR": str(base / "lab-settings"),
                                   "JUPYTERLAB_WORKSPACES_DIR": str(base / "lab-workspaces")},
                        args=["--LabApp.expose_app_in_browser=True"])  # window.jupyterapp: the tab's Yjs document
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


# --- a person typing while the agent moves or rewrites their cell ------------------------------
#
# Yjs orders two inserts made at one spot at the same time by client id, the lower first. The
# browser draws a tab's id on 32 bits and pycrdt the server document's on 53, so a tab is below
# the server all but always: each test runs so, and with the tab set above it (as Yjs itself sets
# a new id on a tab whose id it finds taken). The room's websocket runs through the test (a slow
# link it can hold), so the person's letters cross the agent's edit every time.

TAB_SIDES = pytest.mark.parametrize("side", ["tab-id-below-server", "tab-id-above-server"])
YDOC = "window.jupyterapp.shell.currentWidget.context.model.sharedModel"
LETTERS = string.ascii_letters


class RoomLink:
    """The page's websocket to its notebook's room, routed through the test: what the server sends
    can be held back and let through message by message; ``doc`` holds all that either side sent
    through it, so it is the page's document as far as the page has been given it."""

    def __init__(self) -> None:
        self.held: list[bytes] | None = None  # None: nothing is held
        self.doc = YNotebook(Doc())
        self.page_side = None

    @classmethod
    async def of(cls, page) -> RoomLink:
        link = cls()
        await page.route_web_socket(lambda url: "/api/collaboration/room/json:notebook:" in url, link._route)
        return link

    def _route(self, page_side) -> None:
        server_side = page_side.connect_to_server()
        self.page_side = page_side
        page_side.on_message(lambda message: (self._copy(message), server_side.send(message)))
        server_side.on_message(self._from_server)

    def _copy(self, message: str | bytes) -> None:
        if isinstance(message, bytes) and len(message) > 2 and message[0] == YMessageType.SYNC \
                and message[1] in (YSyncMessageType.SYNC_STEP2, YSyncMessageType.SYNC_UPDATE):
            self.doc.ydoc.apply_update(read_message(message[2:]))

    def _from_server(self, message: str | bytes) -> None:
        if self.held is None:
            self._deliver(message)
        else:
            self.held.append(message)

    def _deliver(self, message: str | bytes) -> None:
        self._copy(message)
        self.page_side.send(message)

    @contextmanager
    def held_back(self) -> Iterator[None]:
        """What the server sends reaches the page after the block (in order): a slow link."""
        self.held = []
        try:
            yield
        finally:
            held, self.held = self.held, None
            for message in held:
                self._deliver(message)

    def deliver_until(self, given: Callable[[YNotebook], bool]) -> None:
        """Let held messages through, one by one, until the page has been ``given`` what it needs."""
        while self.held and not given(self.doc):
            self._deliver(self.held.pop(0))
        assert given(self.doc), "the server never sent it"


async def put_tab_on(page, side: str, server_id: int) -> int:
    """The page's Yjs client id, on ``side`` of the server document's (set when it must be above)."""
    tab_id = await page.evaluate(f"() => {YDOC}.ydoc.clientID")
    if side == "tab-id-below-server":
        assert tab_id < server_id
        return tab_id
    tab_id = server_id + (2 ** 53 - server_id) // 2  # below 2^53: a Yjs client id is a safe integer
    await page.evaluate(f"id => {{ {YDOC}.ydoc.clientID = id }}", tab_id)
    return tab_id


async def page_cells(page) -> list[list[str]]:
    """The page's cells as its document holds them: [id, source] each."""
    return await page.evaluate(f"() => {YDOC}.cells.map(c => [c.getId(), c.getSource()])")


async def page_shows(page, cell_id: str, source: str) -> str:
    """The cell's source in the page once it is ``source`` (or what it is after 30 s)."""
    want = f"c => c[0] === {json.dumps(cell_id)} && c[1] === {json.dumps(source)}"
    try:
        await page.wait_for_function(f"() => {YDOC}.cells.map(c => [c.getId(), c.getSource()]).some({want})",
                                     timeout=30_000)
    except Exception:
        pass
    return next(text for cid, text in await page_cells(page) if cid == cell_id)


async def type_at_end(page, index: int, text: str) -> None:
    """The person clicks into the cell at ``index``, goes to its end, and types ``text``."""
    await page.locator(f"{PANEL} .jp-Cell .cm-content").nth(index).click()
    await page.keyboard.press("Control+End")
    await page.keyboard.type(text, delay=30)


async def live_source(mcp, name: str, cell_id: str, want: str) -> str:
    """The cell's source in the live document once it is ``want`` (or what it is after 30 s)."""
    deadline = time.monotonic() + 30
    while (source := (await call(mcp, "cell_get", path=name, cell_id=cell_id))["source"]) != want:
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    return source


async def file_source(path: Path, index: int, want: str) -> str:
    """The cell's source in the file once autosave wrote ``want`` (or what it holds after 30 s)."""
    deadline = time.monotonic() + 30
    while (source := disk_sources(path)[index]) != want and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return source


@TAB_SIDES
async def test_keystrokes_that_cross_the_agents_moves_are_all_kept_in_order(lab, tmp_path, side):
    """Issue 40, finding 7. Each move: the person types on while it travels (their letters land in
    the copy the move deletes, and are carried into the moved cell); once the move reaches the page
    (JupyterLab then focuses another cell) they click back into theirs and type on before the
    carried letters reach the page: the two meet at one spot, and must keep the order typed."""
    name, ids = notebook(lab, "total = 0", "other = 1", "last = 2")
    letters = iter(LETTERS)
    async with browser(tmp_path) as page, UIClient(lab.url, lab.token, name, name="Idle Tab") as idle:
        server_id = idle.server_client_id()
        link = await RoomLink.of(page)
        await open_notebook(page, lab, name)
        tab_id = await put_tab_on(page, side, server_id)
        async with connect(lab.mcp_url, lab.token, client_info=Implementation(name=AGENT, version="1")) as mcp:
            typed = "".join(next(letters) for _ in range(3))
            await type_at_end(page, 0, typed)
            at = 0
            for _ in range(4):
                to = 2 - at
                with link.held_back():
                    await call(mcp, "cell_move", path=name, cell_id=ids[0], to_index=to)
                    crossing = "".join(next(letters) for _ in range(3))
                    await page.keyboard.type(crossing, delay=30)  # the page has not seen the move
                    carried = f"total = 0{typed}{crossing}"
                    with contextlib.suppress(AssertionError):
                        await idle.wait_for(lambda: idle.source(to) == carried)
                    assert idle.source(to) == carried  # the letters typed as the move travelled, carried over
                    link.deliver_until(lambda nb: nb.ycells[to]["id"] == ids[0])  # the move, not the carried letters
                    await page.wait_for_function(f"i => {YDOC}.cells[i].getId() === {json.dumps(ids[0])}", arg=to)
                    after = "".join(next(letters) for _ in range(3))
                    await type_at_end(page, to, after)
                typed, at = typed + crossing + after, to
            want = f"total = 0{typed}"
            assert await page_shows(page, ids[0], want) == want  # each letter once, in the order typed
            assert at == 0 and [cid for cid, _ in await page_cells(page)] == ids == idle.cell_ids()  # one copy
            assert idle.source(0) == want
            assert await live_source(mcp, name, ids[0], want) == want
            assert await file_source(lab.root / name, 0, want) == want
            assert tab_id in idle.clients()  # the person's letters are the tab's, with the id chosen
        await shot(page, f"8-typing-across-moves-{side}")


@TAB_SIDES
async def test_letters_typed_while_the_agents_update_travels_stay_after_its_text(lab, tmp_path, side):
    """Issue 40, finding 8. The person types all along at the end of the cell; five times the agent
    reads it and writes it back with x one more. By then the person typed on (the agent's read is
    stale: the update replaces those letters, and its diff names them), and they type on while the
    update travels: those letters must stay after the agent's text, not go between "x = " and x."""
    name, ids = notebook(lab, "x = 0  # note: ", "other = 1")
    async with browser(tmp_path) as page, UIClient(lab.url, lab.token, name, name="Idle Tab") as idle:
        server_id = idle.server_client_id()
        link = await RoomLink.of(page)
        await open_notebook(page, lab, name)
        tab_id = await put_tab_on(page, side, server_id)
        await page.locator(f"{PANEL} .jp-Cell .cm-content").first.click()
        await page.keyboard.press("Control+End")
        typed: list[str] = []
        stop = asyncio.Event()

        async def person() -> None:
            while not stop.is_set():
                chunk = "".join(LETTERS[(len(typed) + i) % len(LETTERS)] for i in range(4))
                await page.keyboard.type(chunk, delay=30)
                typed.extend(chunk)

        async def person_typed_on(count: int) -> None:  # as the page shows the cell
            length = len((await page_cells(page))[0][1])
            await page.wait_for_function(f"n => {YDOC}.cells[0].getSource().length >= n", arg=length + count)

        replaced_letters: set[int] = set()  # those an update replaced (its diff shows them), by when typed

        def kept(count: int) -> list[int]:  # the first ``count`` letters the cell should hold, by when typed
            return list(itertools.islice((i for i in itertools.count() if i not in replaced_letters), count))

        def letters(indexes: list[int]) -> str:
            return "".join(LETTERS[i % len(LETTERS)] for i in indexes)
        typing = asyncio.ensure_future(person())
        try:
            async with connect(lab.mcp_url, lab.token, client_info=Implementation(name=AGENT, version="1")) as mcp:
                for n in range(5):
                    prefix = f"x = {n}  # note: "
                    await person_typed_on(2)
                    read = (await call(mcp, "cell_get", path=name, cell_id=ids[0]))["source"]
                    assert read.startswith(prefix), read  # the agent's text intact, nothing typed inside it
                    seen = len(read) - len(prefix)
                    assert read[len(prefix):] == letters(kept(seen))
                    while len((await call(mcp, "cell_get", path=name, cell_id=ids[0]))["source"]) == len(read):
                        await asyncio.sleep(0.01)  # until a letter reached the server after the read
                    with link.held_back():
                        answer = await call(mcp, "cell_update", path=name, cell_id=ids[0],
                                            source=read.replace(prefix, f"x = {n + 1}  # note: ", 1))
                        await person_typed_on(2)  # typed before the update reached the page
                    lines = [line[1:] for line in answer["diff"].splitlines()
                             if line.startswith("-") and not line.startswith("---")]
                    assert len(lines) == 1, answer["diff"]
                    replaced = lines[0][len(read):]  # what reached the server after the agent's read
                    gone = kept(seen + len(replaced))[seen:]
                    assert replaced and replaced == letters(gone)
                    replaced_letters.update(gone)
                stop.set()
                await typing
                want = "x = 5  # note: " + letters(kept(len(typed) - len(replaced_letters)))
                assert await page_shows(page, ids[0], want) == want  # each letter once, in the order typed
                await idle.wait_for(lambda: idle.source(0) == want)
                assert await live_source(mcp, name, ids[0], want) == want
                assert await file_source(lab.root / name, 0, want) == want
                assert tab_id in idle.clients()
        finally:
            stop.set()
            await typing
        await shot(page, f"9-typing-across-updates-{side}")


async def test_the_persons_undo_does_not_bring_back_what_the_agent_deleted(lab, tmp_path):
    """What cell_delete's description says: JupyterLab's undo (Ctrl+Z in a cell, Z on the
    notebook) undoes the person's own edits, and never brings back cells the agent deleted or
    undoes the agent's update (it tracks only the tab's own changes)."""
    async with browser(tmp_path) as page:
        name, ids = notebook(lab, "a = 1", "b = 2", "c = 3")
        await open_notebook(page, lab, name)
        await type_at_end(page, 0, "  # mine")
        await page_shows(page, ids[0], "a = 1  # mine")
        async with connect(lab.mcp_url, lab.token, client_info=Implementation(name=AGENT, version="1")) as mcp:
            assert await live_source(mcp, name, ids[0], "a = 1  # mine") == "a = 1  # mine"
            await call(mcp, "cell_delete", path=name, cell_id=ids[1])
            await call(mcp, "cell_update", path=name, cell_id=ids[2], source="c = 'the agent'")
            await page.wait_for_function(f"() => {YDOC}.cells.length === 2", timeout=30_000)
            await page_shows(page, ids[2], "c = 'the agent'")
            await page.locator(f"{PANEL} .jp-Cell .cm-content").first.click()
            for _ in range(12):
                await page.keyboard.press("Control+z")
            await page.keyboard.press("Escape")  # command mode: Z undoes cell actions
            for _ in range(6):
                await page.keyboard.press("z")
            assert await page_shows(page, ids[0], "a = 1") == "a = 1"  # the person's own typing is undone
            assert await live_source(mcp, name, ids[0], "a = 1") == "a = 1"
            listed = await call(mcp, "notebook_get", path=name)
            assert [(c["id"], c["source"]) for c in listed["cells"]] == [(ids[0], "a = 1"), (ids[2], "c = 'the agent'")]
            assert [cid for cid, _ in await page_cells(page)] == [ids[0], ids[2]]
        await shot(page, "6-undo-leaves-the-agents-changes")
