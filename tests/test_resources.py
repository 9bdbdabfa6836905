"""The notebooks as MCP resources, on a real server with the real SDK client over HTTP and a
person's collaborative client beside it: listed and read from the live document (what the person
sees, unsaved edits included), and subscriptions on both protocol eras told when that document
changes, whoever changed it."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
import warnings
from contextlib import AsyncExitStack

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

from jupyter_mcp.client import LEGACY, MODERN, Tasks, connect
from jupyter_mcp.testing import LiveServer, UIClient, call, new_notebook, saved_notebook
from jupyter_mcp.testing.plugin import starts_process

pytestmark = pytest.mark.live

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
SHOW_PNG = ("from IPython.display import Image, display\nimport base64\n"
            f"display(Image(data=base64.b64decode({base64.b64encode(PNG).decode()!r})))\nprint('printed')")


def uri(path: str, cell_id: str | None = None, output: int | None = None) -> str:
    text = f"notebook://{path}"
    if cell_id is not None:
        text += f"/cells/{cell_id}"
    if output is not None:
        text += f"/outputs/{output}"
    return text


async def read(client, resource: str) -> list:
    return (await client.read_resource(resource)).contents


LIST_CHANGED = "(the list changed)"


class Updates:
    """The resources/updated (and list_changed) notifications a 2025-11-25 client receives."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.arrived = asyncio.Event()

    async def __call__(self, message) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            self.uris.append(str(root.params.uri))
            self.arrived.set()
        elif getattr(root, "method", None) == "notifications/resources/list_changed":
            self.uris.append(LIST_CHANGED)
            self.arrived.set()

    async def wait_for(self, wanted: str, timeout: float = 20) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while wanted not in self.uris:
            self.arrived.clear()
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise AssertionError(f"no update of {wanted} in {timeout}s; got {self.uris}")
            try:
                await asyncio.wait_for(self.arrived.wait(), left)
            except asyncio.TimeoutError:
                pass


async def subscribe(client, resource: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the SDK marks resources/subscribe deprecated (gone at 2026-07-28)
        await client.subscribe_resource(resource)


async def unsubscribe(client, resource: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await client.unsubscribe_resource(resource)


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_notebooks_are_listed_and_read_from_the_live_document(live, mode):
    name, ids = new_notebook(live.root, "x = 1", "print('hello')")
    async with connect(live.mcp_url, live.token, mode=mode) as mcp, UIClient(live.url, live.token, name) as ui:
        listed = {str(r.uri): r for r in (await mcp.list_resources()).resources}
        assert listed[uri(name)].mime_type == "application/x-ipynb+json"
        templates = {t.uri_template for t in (await mcp.list_resource_templates()).resource_templates}
        assert templates == {"notebook://{path}/cells/{cell_id}", "notebook://{path}/cells/{cell_id}/outputs/{n}"}
        ui.type_into(0, "  # typed by a person, not saved")
        await call(mcp, "cell_execute", path=name, cell_id=ids[1], timeout=120)
        [notebook] = await read(mcp, uri(name))
        assert notebook.mime_type == "application/x-ipynb+json"
        content = json.loads(notebook.text)
        assert content["nbformat"] == 4 and [c["id"] for c in content["cells"]] == ids
        assert content["cells"][0]["source"] == "x = 1  # typed by a person, not saved"
        assert content["cells"][1]["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "hello\n"}]
        [cell] = await read(mcp, uri(name, ids[1]))
        assert cell.mime_type == "application/json" and json.loads(cell.text)["source"] == "print('hello')"
        [output] = await read(mcp, uri(name, ids[1], 0))
        assert (output.mime_type, output.text) == ("text/plain", "hello\n")


async def test_an_image_output_is_served_as_a_blob_with_its_text_beside(live):
    name, ids = new_notebook(live.root, SHOW_PNG)
    async with connect(live.mcp_url, live.token) as mcp:
        ran = await call(mcp, "cell_execute", path=name, cell_id=ids[0], timeout=120)
        assert [o["output_type"] for o in ran["outputs"]] == ["display_data", "stream"]
        contents = {c.mime_type: c for c in await read(mcp, uri(name, ids[0], 0))}
        assert set(contents) == {"image/png", "text/plain"}
        assert base64.b64decode(contents["image/png"].blob) == PNG
        assert contents["text/plain"].text == "<IPython.core.display.Image object>"
        [printed] = await read(mcp, uri(name, ids[0], 1))
        assert printed.text == "printed\n"


async def test_bad_resource_uris_are_refused_saying_what_is_wrong(live):
    name, ids = new_notebook(live.root, "1 + 1")
    async with connect(live.mcp_url, live.token) as mcp:
        cases = {
            uri(name, "no-such-cell"): "no cell with id 'no-such-cell'",
            uri(name, ids[0], 0): "has no outputs",
            "notebook://missing-notebook.ipynb": "missing-notebook.ipynb",
            "notebook://../outside.ipynb": "outside",
            "notebook://notes.txt": "URIs look like notebook://<path>.ipynb",
        }
        for bad, says in cases.items():
            with pytest.raises(MCPError) as refused:
                await mcp.read_resource(bad)
            assert says in refused.value.error.message, (bad, refused.value.error.message)


async def test_subscribers_on_2025_11_25_are_told_of_a_persons_and_an_agents_changes(live):
    name, ids = new_notebook(live.root, "a = 1", "print('b')")
    updates = Updates()
    async with connect(live.mcp_url, live.token, message_handler=updates) as mcp, \
            UIClient(live.url, live.token, name) as ui:
        assert mcp.server_capabilities.resources.subscribe is True
        await subscribe(mcp, uri(name, ids[0]))
        await subscribe(mcp, uri(name, ids[1], 0))
        ui.type_into(0, " + 1")  # the person types in the first cell
        await updates.wait_for(uri(name, ids[0]))
        assert uri(name, ids[1], 0) not in updates.uris  # the other cell did not change
        await call(mcp, "cell_execute", path=name, cell_id=ids[1], timeout=120)  # the agent runs the second
        await updates.wait_for(uri(name, ids[1], 0))
        await unsubscribe(mcp, uri(name, ids[0]))
        updates.uris.clear()
        ui.type_into(0, " + 2")
        await call(mcp, "cell_edit", path=name, cell_id=ids[1], old="'b'", new="'c'")
        await asyncio.sleep(1)
        assert updates.uris == []  # no longer subscribed to the first; the second's outputs did not change


async def test_subscribers_on_2026_07_28_listen_and_are_told_of_changes_debounced(live):
    name, ids = new_notebook(live.root, "a = 1", "b = 2")
    async with connect(live.mcp_url, live.token, mode=MODERN) as mcp, UIClient(live.url, live.token, name) as ui:
        discovered = await Tasks(mcp).request("server/discover", {})  # this client mode does not ask itself
        assert discovered["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}
        async with mcp.listen(resource_subscriptions=[uri(name), uri(name, ids[1])]) as stream:
            assert set(stream.honored.resource_subscriptions) == {uri(name), uri(name, ids[1])}
            for _ in range(50):  # a person types 50 characters in one burst
                ui.type_into(1, "0")
            events = []

            async def collect() -> None:
                async for event in stream:
                    events.append(event)

            collecting = asyncio.create_task(collect())
            await asyncio.sleep(2)
            collecting.cancel()
            assert ResourceUpdated(uri(name)) in events and ResourceUpdated(uri(name, ids[1])) in events
            assert len(events) < 50  # gathered, not one per keystroke


async def test_subscribing_to_what_does_not_exist_is_refused(live):
    name, ids = new_notebook(live.root, "1")
    async with connect(live.mcp_url, live.token) as legacy, connect(live.mcp_url, live.token, mode=MODERN) as modern:
        with pytest.raises(MCPError) as refused:
            await subscribe(legacy, uri(name, "nope"))
        assert "no cell with id 'nope'" in refused.value.error.message
        with pytest.raises(MCPError) as refused:
            async with modern.listen(resource_subscriptions=["notebook://missing.ipynb"]):
                pass
        assert "missing.ipynb" in refused.value.error.message


def create_by_rest(live, name: str) -> None:
    """A person makes a notebook (JupyterLab's New Notebook: the contents REST API)."""
    response = httpx.put(live.url + f"api/contents/{name}", headers=live.headers, json={"type": "notebook"}, timeout=60)
    assert response.status_code == 201, response.text


async def test_listeners_are_told_when_a_notebook_is_made_or_deleted_not_when_one_is_saved(live):
    kept, _ = new_notebook(live.root, "1")
    made = f"made-{uuid.uuid4().hex[:6]}.ipynb"
    async with connect(live.mcp_url, live.token, mode=MODERN) as mcp:
        async with mcp.listen(resources_list_changed=True) as stream:
            events = []

            async def collect() -> None:
                async for event in stream:
                    events.append(event)

            collecting = asyncio.create_task(collect())
            create_by_rest(live, made)
            await wait_until(lambda: events == [ResourcesListChanged()])
            assert uri(made) in [str(r.uri) for r in (await mcp.list_resources()).resources]
            saved = httpx.get(live.url + f"api/contents/{kept}", headers=live.headers, timeout=60).json()
            httpx.put(live.url + f"api/contents/{kept}", headers=live.headers, json=saved, timeout=60)
            await asyncio.sleep(1.5)
            assert events == [ResourcesListChanged()]  # saving a listed notebook changes no list
            httpx.delete(live.url + f"api/contents/{made}", headers=live.headers, timeout=60)
            await wait_until(lambda: len(events) == 2)
            collecting.cancel()
    updates = Updates()
    again = f"made-{uuid.uuid4().hex[:6]}.ipynb"
    async with connect(live.mcp_url, live.token, message_handler=updates) as mcp:  # 2025-11-25
        await subscribe(mcp, uri(kept))
        await call(mcp, "notebook_create", path=again)  # an agent's new notebook: the same event
        await updates.wait_for(LIST_CHANGED)


async def test_one_client_holds_at_most_100_subscriptions(live):
    name, ids = new_notebook(live.root, *[f"cell_{i} = {i}" for i in range(101)])
    async with connect(live.mcp_url, live.token) as legacy, connect(live.mcp_url, live.token, mode=MODERN) as modern:
        for cell_id in ids[:100]:
            await subscribe(legacy, uri(name, cell_id))
        await subscribe(legacy, uri(name, ids[0]))  # the same one again: still one
        with pytest.raises(MCPError) as refused:
            await subscribe(legacy, uri(name, ids[100]))
        assert "already holds 100 subscriptions" in refused.value.error.message
        with pytest.raises(MCPError) as refused:
            async with modern.listen(resource_subscriptions=[uri(name, i) for i in ids]):
                pass
        assert "101 resource subscriptions requested" in refused.value.error.message


async def wait_until(predicate, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not so after {timeout}s")
        await asyncio.sleep(0.05)


@pytest.fixture(scope="module")
@starts_process
def sweeping(tmp_path_factory):
    """A server that closes a room one second after its last use, and whose jupyter-server-ydoc
    deletes a room one second after the last person left it."""
    server = LiveServer(tmp_path_factory.mktemp("sweeping"), args=[
        "--JupyterMCPApp.room_idle_timeout=1", "--JupyterMCPApp.room_sweep_interval=0.5",
        "--YDocExtension.document_cleanup_delay=1"]).start()
    yield server
    server.stop()


async def room_open(mcp, name: str) -> bool:
    return name in [r["path"] for r in (await call(mcp, "room_list"))["rooms"]]


async def test_a_subscribed_notebook_stays_open_until_its_last_subscriber_goes(sweeping):
    name, ids = new_notebook(sweeping.root, "1")
    async with connect(sweeping.mcp_url, sweeping.token) as mcp:
        await subscribe(mcp, uri(name))
        await subscribe(mcp, uri(name, ids[0]))
        await asyncio.sleep(3)
        assert await room_open(mcp, name)  # idle three times its timeout, and kept: someone is subscribed
        await unsubscribe(mcp, uri(name))
        await asyncio.sleep(3)
        assert await room_open(mcp, name)  # one subscription is left
        await unsubscribe(mcp, uri(name, ids[0]))
        await wait_until_async(lambda: room_open(mcp, name), False)
        async with connect(sweeping.mcp_url, sweeping.token, mode=MODERN) as modern:
            async with modern.listen(resource_subscriptions=[uri(name)]):
                await asyncio.sleep(3)
                assert await room_open(mcp, name)
            await wait_until_async(lambda: room_open(mcp, name), False)  # the stream ended: released


async def test_a_person_leaving_a_subscribed_notebook_does_not_close_it_under_the_subscriber(sweeping):
    """jupyter-server-ydoc deletes a room a while after the last person leaves it; a room someone
    is subscribed to is kept, so the subscriber is still told of the changes made after."""
    name, ids = new_notebook(sweeping.root, "a = 1")
    updates = Updates()
    async with connect(sweeping.mcp_url, sweeping.token, message_handler=updates) as mcp:
        await subscribe(mcp, uri(name, ids[0]))
        room_id = (await call(mcp, "notebook_get", path=name))["room_id"]
        async with UIClient(sweeping.url, sweeping.token, name) as ui:
            ui.type_into(0, " + 1")
            await updates.wait_for(uri(name, ids[0]))
        await asyncio.sleep(3)  # three times the cleanup delay since the person left
        updates.uris.clear()
        await call(mcp, "cell_update", path=name, cell_id=ids[0], source="a = 2")
        await updates.wait_for(uri(name, ids[0]))
        assert (await call(mcp, "notebook_get", path=name))["room_id"] == room_id
        assert [r["room_id"] for r in (await call(mcp, "room_list"))["rooms"] if r["path"] == name] == [room_id]


async def test_a_person_leaving_during_an_agents_run_loses_no_output(sweeping):
    """The person leaves mid-run and jupyter-server-ydoc's cleanup delay passes: every output of
    the run is in the answer, in the notebook's room and on disk."""
    name, ids = new_notebook(sweeping.root, "import time\nfor i in range(4):\n    print(i, flush=True)\n"
                                            "    time.sleep(1)")
    async with connect(sweeping.mcp_url, sweeping.token) as mcp:
        room_id = (await call(mcp, "notebook_get", path=name))["room_id"]
        async with UIClient(sweeping.url, sweeping.token, name) as ui:
            run = asyncio.create_task(call(mcp, "cell_execute", path=name, cell_id=ids[0], timeout=60))
            await ui.wait_for(lambda: "0" in str(ui.nb.ycells[0]["outputs"].to_py()))
        ran = await run  # the person left 3 s before the end, three times the cleanup delay
        assert ran["outputs"][0]["text"] == "0\n1\n2\n3\n"
        assert [r["room_id"] for r in (await call(mcp, "room_list"))["rooms"] if r["path"] == name] == [room_id]
        assert (await call(mcp, "cell_get", path=name, cell_id=ids[0]))["outputs"][0]["text"] == "0\n1\n2\n3\n"
        saved = (await saved_notebook(sweeping.root / name, lambda nb: nb["cells"][0]["outputs"] and "".join(
            nb["cells"][0]["outputs"][0]["text"]) == "0\n1\n2\n3\n", timeout=10, what="the four lines saved")
                 )["cells"][0]["outputs"]
        assert "".join(saved[0]["text"]) == "0\n1\n2\n3\n"


async def test_a_session_that_goes_away_releases_its_subscriptions(sweeping):
    name, _ = new_notebook(sweeping.root, "1")
    async with connect(sweeping.mcp_url, sweeping.token) as watcher:
        async with connect(sweeping.mcp_url, sweeping.token) as mcp:
            await subscribe(mcp, uri(name))
        # the client ended its session without unsubscribing
        await wait_until_async(lambda: room_open(watcher, name), False)


async def wait_until_async(check, wanted, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while await check() != wanted:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"still not {wanted} after {timeout}s")
        await asyncio.sleep(0.2)


async def test_what_a_read_leaves_out_names_the_resource_that_serves_it(live):
    """An image left out of an answer and an output cut short each name their output's resource;
    reading it gives the image, and the whole text."""
    name, ids = new_notebook(live.root, SHOW_PNG, "print('x' * 5000)")
    async with connect(live.mcp_url, live.token) as mcp:
        for cell_id in ids:
            await call(mcp, "cell_execute", path=name, cell_id=cell_id, timeout=120)
        lean = await call(mcp, "cell_get", path=name, cell_id=ids[0], max_image_bytes=0)
        image = uri(name, ids[0], 0)
        assert lean["outputs"][0]["text"] == f"[image/png, {len(PNG)} bytes: not attached; read it as resource {image}]"
        served = {c.mime_type: c for c in await read(mcp, image)}
        assert base64.b64decode(served["image/png"].blob) == PNG
        cut = await call(mcp, "notebook_get", path=name, max_output_chars=100)
        whole = uri(name, ids[1], 0)
        assert cut["cells"][1]["outputs"][0]["text"].endswith(f"not shown; all of it: resource {whole}]")
        [text] = await read(mcp, whole)
        assert text.text == "x" * 5000 + "\n"


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_notebook_cite_embeds_the_cells_as_they_are_now(live, mode):
    name, ids = new_notebook(live.root, "a = 1", "print('b')", "c = 3")
    async with connect(live.mcp_url, live.token, mode=mode) as mcp, UIClient(live.url, live.token, name) as ui:
        assert "notebook_cite" in [p.name for p in (await mcp.list_prompts()).prompts]
        await call(mcp, "cell_execute", path=name, cell_id=ids[1], timeout=120)
        ui.type_into(2, "  # a person's unsaved edit")
        await wait_until_async(lambda: cell_source(mcp, name, ids[2]), "c = 3  # a person's unsaved edit")
        got = await mcp.get_prompt("notebook_cite", {"path": name, "cells": "1-2", "request": "Explain these."})
        intro, first, second, request = got.messages
        assert intro.content.text == f"Cells 1, 2 of the notebook {name}, as it is now:"
        assert str(first.content.resource.uri) == uri(name, ids[1])
        assert json.loads(first.content.resource.text)["outputs"][0]["text"] == "b\n"
        assert json.loads(second.content.resource.text)["source"] == "c = 3  # a person's unsaved edit"
        assert (request.role, request.content.text) == ("user", "Explain these.")
        by_id = await mcp.get_prompt("notebook_cite", {"path": name, "cells": ids[0]})
        assert [str(m.content.resource.uri) for m in by_id.messages[1:]] == [uri(name, ids[0])]
        with pytest.raises(MCPError) as refused:
            await mcp.get_prompt("notebook_cite", {"path": name, "cells": "5"})
        assert "the notebook has 3 cells" in refused.value.error.message


async def cell_source(mcp, name: str, cell_id: str) -> str:
    return (await call(mcp, "cell_get", path=name, cell_id=cell_id))["source"]


async def test_one_user_cannot_take_every_listen_stream(live_factory):
    """Listen streams are capped per user, below the server's own cap: carol's third stream is
    refused, naming her, the cap and its setting, while bob still listens; once carol ends hers
    she may listen again."""
    server = live_factory(token="alice-token", args=[
        "--ServerApp.identity_provider_class=jupyter_mcp.testing.identity.TwoUsers",
        "--JupyterMCPApp.max_listen_streams_per_user=2"])
    async with connect(server.mcp_url, "carol-token", mode=MODERN) as carol, \
            connect(server.mcp_url, "bob-token", mode=MODERN) as bob:
        async with AsyncExitStack() as held:
            for _ in range(2):
                await held.enter_async_context(carol.listen(resources_list_changed=True))
            with pytest.raises(MCPError) as refused:
                async with carol.listen(resources_list_changed=True):
                    pass
            message = refused.value.error.message
            assert "subscriptions/listen refused" in message and "'carol'" in message
            assert "2 open listen streams" in message and "JupyterMCPApp.max_listen_streams_per_user" in message
            async with bob.listen(resources_list_changed=True) as bobs:
                assert bobs.honored.resources_list_changed
        for _ in range(100):  # the server learns that the streams ended when their connections close
            try:
                async with carol.listen(resources_list_changed=True) as again:
                    assert again.honored.resources_list_changed
                break
            except MCPError as exc:
                assert "subscriptions/listen refused" in exc.error.message
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("carol could not listen again after ending her streams")
