"""The benchmark scenarios. Each returns a Result whose floor was measured in the same run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import nbformat
from jupyter_client.asynchronous import AsyncKernelClient

from benchmarks.harness import Meter, Result, compare
from jupyter_mcp.client import connect
from jupyter_mcp.testing import write_notebook

Scenario = Callable[..., Awaitable[Result]]


def write(server, name: str, sources: list[str]) -> list[str]:
    return write_notebook(server.root / name, sources)


async def exec_trivial(server) -> Result:
    """cell_execute of `1+1` vs the same code sent straight to the same kernel with jupyter_client."""
    ids = write(server, "bench_exec.ipynb", ["1+1"])
    async with connect(server.mcp_url, server.token) as mcp:
        first = await mcp.call_tool("cell_execute", {"path": "bench_exec.ipynb", "cell_id": ids[0]})
        assert not first.is_error, first.content
        sessions = httpx.get(server.url + "api/sessions", headers=server.headers).json()
        kernel_id = next(s["kernel"]["id"] for s in sessions if s["path"] == "bench_exec.ipynb")
        kc = AsyncKernelClient()
        kc.load_connection_file(str(server.base / "runtime" / f"kernel-{kernel_id}.json"))
        kc.start_channels()
        await kc.wait_for_ready(timeout=30)
        try:
            async def subject():
                r = await mcp.call_tool("cell_execute", {"path": "bench_exec.ipynb", "cell_id": ids[0]})
                assert r.structured_content["outputs"][0]["text"] == "2"

            async def floor():
                reply = await kc.execute_interactive("1+1", output_hook=lambda msg: None, timeout=30)
                assert reply["content"]["status"] == "ok"

            return await compare("exec_trivial", subject, floor, server_pid=server.proc.pid, n=60, target=1.4)
        finally:
            kc.stop_channels()




async def tasks(server) -> Result:
    """tools/call as a task (CreateTaskResult) vs the plain call, for a trivial tool."""
    from jupyter_mcp.client import Tasks

    async with connect(server.mcp_url, server.token) as mcp:
        t = Tasks(mcp)
        args = {"path": "nothing-open.ipynb"}

        async def subject():
            task = await t.submit("notebook_list_users", args)
            assert task["status"] in ("working", "completed")

        async def floor():
            r = await mcp.call_tool("notebook_list_users", args)
            assert not r.is_error

        return await compare("tasks_submit", subject, floor, server_pid=server.proc.pid, n=100, target=1.2)


async def tasks_get_10k(server) -> Result:
    """tasks/get with 10,000 stored tasks vs the same with one stored task (a fresh store)."""
    import asyncio
    import contextlib
    import tempfile
    from pathlib import Path

    from jupyter_mcp.client import Tasks
    from jupyter_mcp.testing import LiveServer

    with tempfile.TemporaryDirectory() as tmp:
        fresh = LiveServer(Path(tmp) / "one", args=server.args).start()
        full = None
        try:
            # one user keeps 500 tasks at most by default
            full = LiveServer(Path(tmp) / "many", args=[*server.args, "--JupyterMCPApp.max_tasks_per_user=20000"]).start()
            async with connect(fresh.mcp_url, fresh.token) as one_client, \
                    connect(full.mcp_url, full.token) as many_client:
                one, many = Tasks(one_client), Tasks(many_client)
                lonely = (await one.submit("notebook_list", {}))["taskId"]
                async with contextlib.AsyncExitStack() as stack:
                    sessions = [Tasks(await stack.enter_async_context(connect(full.mcp_url, full.token)))
                                for _ in range(8)]

                    async def fill(session, n):
                        return [(await session.submit("notebook_list", {}))["taskId"] for _ in range(n)]

                    filled = await asyncio.gather(*(fill(s, 1250) for s in sessions))
                target_id = filled[3][600]
                assert len((await many.list())["tasks"]) == 50

                async def subject():
                    assert (await many.get(target_id))["taskId"] == target_id

                async def floor():
                    assert (await one.get(lonely))["taskId"] == lonely

                result = await compare("tasks_get_10k", subject, floor, server_pid=None, n=150, target=1.5)  # two servers
                result.note = f"({sum(len(f) for f in filled)} tasks stored vs 1)"
                return result
        finally:
            fresh.stop()
            if full is not None:
                full.stop()




def status_floor(server, http):
    async def floor():
        r = await http.get(server.url + "api/status")
        assert r.status_code == 200
    return floor


async def ping(server) -> Result:
    """MCP ping vs an authenticated GET /api/status (the same HTTP client library)."""
    import warnings

    import httpx2

    warnings.simplefilter("ignore")
    async with connect(server.mcp_url, server.token) as mcp, \
            httpx2.AsyncClient(headers=server.headers) as http:
        async def subject():
            await mcp.send_ping()

        return await compare("ping", subject, status_floor(server, http), server_pid=server.proc.pid, n=200,
                             target=1.5, cpu_target=1.5)


async def update_cell(server) -> Result:
    """cell_update of one cell in a 20-cell notebook vs an authenticated HTTP round trip."""
    import httpx2

    ids = write(server, "bench_update.ipynb", [f"x{i} = {i}" for i in range(20)])
    counter = iter(range(10**9))
    async with connect(server.mcp_url, server.token) as mcp, \
            httpx2.AsyncClient(headers=server.headers) as http:
        async def subject():
            r = await mcp.call_tool("cell_update", {"path": "bench_update.ipynb", "cell_id": ids[10],
                                                    "source": f"x10 = {next(counter)}"})
            assert not r.is_error

        return await compare("update_cell", subject, status_floor(server, http), server_pid=server.proc.pid, n=150,
                             target=2.0, cpu_target=3.0)


async def read_big(server) -> Result:
    """notebook_get of a 1,000-cell notebook vs GET /api/contents of the same file with content."""
    import httpx2

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(f"value_{i} = {i} * 2\nprint(value_{i})",
                                  outputs=[nbformat.v4.new_output("stream", name="stdout", text=f"{i * 2}\n")],
                                  execution_count=i + 1)
        for i in range(1000)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, server.root / "bench_big.ipynb")
    async with connect(server.mcp_url, server.token) as mcp, \
            httpx2.AsyncClient(headers=server.headers, timeout=60) as http:
        async def subject():
            r = await mcp.call_tool("notebook_get", {"path": "bench_big.ipynb"})
            assert r.structured_content["cell_count"] == 1000

        async def floor():
            r = await http.get(server.url + "api/contents/bench_big.ipynb?content=1&type=notebook")
            assert len(r.json()["content"]["cells"]) == 1000

        result = await compare("read_big", subject, floor, server_pid=server.proc.pid, n=30, warmup=3, target=0.5)
        answer_bytes, decoded_bytes = await answer_size(server, http, "notebook_get", {"path": "bench_big.ipynb"})
        file_bytes = (server.root / "bench_big.ipynb").stat().st_size
        verdict = "meets" if answer_bytes <= file_bytes else "MISSES"
        result.note = (f"answer {answer_bytes:,} bytes on the wire ({decoded_bytes:,} decoded) vs the file's "
                       f"{file_bytes:,} (target <= the file's: {verdict})")
        result.extra = {"answer_bytes": answer_bytes, "decoded_bytes": decoded_bytes, "file_bytes": file_bytes}
        return result


async def answer_size(server, http, tool: str, arguments: dict) -> tuple[int, int]:
    """A tool's answer as an SDK client receives it (it accepts gzip): bytes on the wire, decoded."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}}
    r = await http.post(server.mcp_url, json=init, headers=headers)
    headers.update({"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"})
    r = await http.post(server.mcp_url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                                "params": {"name": tool, "arguments": arguments}})
    assert "result" in r.json(), r.text
    await http.delete(server.mcp_url, headers=headers)
    return r.num_bytes_downloaded, len(r.content)


async def propagation(server) -> Result:
    """From an MCP cell_update to the change seen by a UI client, vs the same change made by
    a second UI client (each timed until the watching client has it)."""
    import asyncio
    import time

    from jupyter_mcp.testing import UIClient

    ids = write(server, "bench_prop.ipynb", ["a = 0", "b = 0"])
    counter = iter(range(1, 10**9))  # every step changes the text
    async with connect(server.mcp_url, server.token) as mcp, \
            UIClient(server.url, server.token, "bench_prop.ipynb", name="Watcher") as watcher, \
            UIClient(server.url, server.token, "bench_prop.ipynb", name="Editor") as editor:
        seen = asyncio.Event()
        expected: dict = {"cell": 0, "text": None}

        def observe(_events):
            if str(watcher.nb.ycells[expected["cell"]]["source"]) == expected["text"]:
                seen.set()

        watcher.nb.ycells.observe_deep(observe)

        async def until_seen():
            await asyncio.wait_for(seen.wait(), 10)
            seen.clear()

        async def agent_edit() -> float:  # the agent edits cell 0
            expected.update(cell=0, text=f"a = {next(counter)}")
            started = time.perf_counter()
            call = asyncio.create_task(mcp.call_tool(
                "cell_update", {"path": "bench_prop.ipynb", "cell_id": ids[0], "source": expected["text"]}))
            await until_seen()
            elapsed = (time.perf_counter() - started) * 1000
            assert not (await call).is_error  # its answer comes after: not part of the sample
            return elapsed

        async def person_edit() -> float:  # another person edits cell 1 (no merge with the agent's)
            expected.update(cell=1, text=f"b = {next(counter)}")
            started = time.perf_counter()
            editor.nb.set_cell(1, source=expected["text"])
            await until_seen()
            return (time.perf_counter() - started) * 1000

        for _ in range(5):
            await agent_edit()
            await person_edit()
        result = Result("propagation", 2.0)
        meter = Meter(server.proc.pid)
        for _ in range(100):
            for walls, cpus, edit in ((result.subject_ms, result.subject_cpu_ms, agent_edit),
                                      (result.floor_ms, result.floor_cpu_ms, person_edit)):
                wall, cpu = await meter.cpu_of(edit)
                walls.append(wall)
                cpus.append(cpu)
        return result


async def concurrent_insert(server) -> Result:
    """8 sessions x 25 inserts into one notebook, with and without a UI client: inserts/s vs
    one session inserting the same 200 cells one after another (the median of 3 rounds each);
    and correctness."""
    import asyncio
    import contextlib
    import statistics
    import time

    ROUNDS = 3

    from jupyter_mcp.testing import UIClient

    async def run(name, sessions, per_session):
        async def worker(client, k):
            ids = []
            for j in range(per_session):
                r = await client.call_tool("cell_insert", {"path": name, "source": f"s{k}-{j}"})
                assert not r.is_error, r.content
                ids.append(r.structured_content["id"])
            return ids

        started = time.perf_counter()
        made = await asyncio.gather(*(worker(c, k) for k, c in enumerate(sessions)))
        elapsed = time.perf_counter() - started
        return [i for batch in made for i in batch], elapsed

    rates: dict[tuple[str, str], list[float]] = {}
    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(connect(server.mcp_url, server.token)) for _ in range(8)]
        for round_ in range(ROUNDS):  # the shapes alternate; a round takes ~1 s, and one alone is noise
            for label, with_ui in (("no UI", False), ("UI connected", True)):
                for shape in ("sequential", "concurrent"):
                    name = f"bench_insert_{shape}_{with_ui}_{round_}.ipynb"
                    write(server, name, ["seed"])
                    async with contextlib.AsyncExitStack() as ui_stack:
                        if with_ui:
                            await ui_stack.enter_async_context(UIClient(server.url, server.token, name))
                        if shape == "sequential":
                            made, elapsed = await run(name, sessions[:1], 200)
                        else:
                            made, elapsed = await run(name, sessions, 25)
                    final = await sessions[0].call_tool("notebook_get", {"path": name, "include_outputs": False})
                    cells = final.structured_content["cells"]
                    all_ids = [c["id"] for c in cells]
                    assert len(cells) == 201 and len(set(all_ids)) == 201 and set(made) <= set(all_ids)
                    rates.setdefault((label, shape), []).append(200 / elapsed)
    results = {key: statistics.median(values) for key, values in rates.items()}
    ratio_no_ui = results[("no UI", "concurrent")] / results[("no UI", "sequential")]
    ratio_ui = results[("UI connected", "concurrent")] / results[("UI connected", "sequential")]
    result = Result("concurrent_insert", None)
    verdict = "meets" if min(ratio_no_ui, ratio_ui) >= 2 else "MISSES"
    result.note = (f"8 sessions: {results[('no UI', 'concurrent')]:.0f} inserts/s ({ratio_no_ui:.2f}x one session's "
                   f"{results[('no UI', 'sequential')]:.0f}/s); with a UI client {results[('UI connected', 'concurrent')]:.0f}/s "
                   f"({ratio_ui:.2f}x {results[('UI connected', 'sequential')]:.0f}/s); 200 new cells, 0 duplicate ids; "
                   f"target >= 2x: {verdict}")
    result.extra = {"rates": {f"{k[0]}/{k[1]}": [round(v, 1) for v in vs] for k, vs in rates.items()},
                    "speedup": min(ratio_no_ui, ratio_ui)}
    return result


async def memory(server) -> Result:
    """Server RSS after touching 200 notebooks, and after the sweeper closed their rooms."""
    import asyncio
    import tempfile
    from pathlib import Path

    from jupyter_mcp.testing import LiveServer

    def rss_mb(pid):
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    with tempfile.TemporaryDirectory() as tmp:
        fresh = LiveServer(Path(tmp), args=server.args, env={"MCP_ROOM_IDLE_TIMEOUT_SEC": "45", "MCP_ROOM_SWEEP_INTERVAL_SEC": "1"})
        fresh.start()
        try:
            for i in range(200):
                write(fresh, f"mem_{i}.ipynb", [f"x = {i}", "y = 'some text ' * 20", "z = list(range(10))"])
            async with connect(fresh.mcp_url, fresh.token) as mcp:
                await mcp.call_tool("notebook_get", {"path": "mem_0.ipynb"})  # warm: imports, first room
                await asyncio.sleep(5)
                start = rss_mb(fresh.proc.pid)
                for i in range(200):  # an edit and a read: every kind of state a room gathers
                    await mcp.call_tool("cell_update", {"path": f"mem_{i}.ipynb", "index": 0, "source": f"x = {i} + 1"})
                    await mcp.call_tool("notebook_get", {"path": f"mem_{i}.ipynb"})
                peak = rss_mb(fresh.proc.pid)
                rooms = len((await mcp.call_tool("room_list", {})).structured_content["rooms"])
                for _ in range(120):
                    await asyncio.sleep(1)
                    left = len((await mcp.call_tool("room_list", {})).structured_content["rooms"])
                    if left == 0:
                        break
                await asyncio.sleep(2)
                after = rss_mb(fresh.proc.pid)
        finally:
            fresh.stop()
    growth = (after - start) / start
    result = Result("memory", None)
    verdict = "meets" if growth <= 0.20 else "MISSES"
    result.note = (f"RSS {start:.0f} MB at start, {peak:.0f} MB with {rooms} rooms open, {after:.0f} MB after the "
                   f"sweep ({left} rooms left): {growth:+.0%} vs start; target within 20%: {verdict}")
    result.extra = {"start_mb": start, "peak_mb": peak, "after_mb": after, "growth": growth}
    return result


async def open_big(server) -> Result:
    """Open and first read (notebook_get) of a 20,000-cell notebook on a fresh server, while
    another thread polls GET /api/status: how long it took, and the longest any other request
    waited meanwhile."""
    import asyncio
    import tempfile
    import time
    from pathlib import Path

    from jupyter_mcp.testing import LiveServer, StatusPoller, big_notebook

    with tempfile.TemporaryDirectory() as tmp:
        fresh = LiveServer(Path(tmp), args=server.args).start()
        try:
            big_notebook(fresh.root / "big.ipynb", 20_000)
            async with connect(fresh.mcp_url, fresh.token) as mcp:
                await mcp.call_tool("notebook_list", {})
                with StatusPoller(fresh) as poller:
                    await asyncio.sleep(0.3)
                    poller.take()
                    started = time.perf_counter()
                    r = await mcp.call_tool("notebook_get", {"path": "big.ipynb"})
                    took = time.perf_counter() - started
                    await asyncio.sleep(0.2)
                    held = poller.take()
                assert r.structured_content["cell_count"] == 20_000
        finally:
            fresh.stop()
    result = Result("open_big", None)
    verdict = "meets" if took <= 3 and held <= 0.1 else "MISSES"
    result.note = (f"open + first notebook_get of 20,000 cells: {took:.1f} s, other requests held up to "
                   f"{held * 1000:.0f} ms (target <= 3 s, nobody held over 100 ms: {verdict})")
    result.extra = {"seconds": took, "held_ms": held * 1000}
    return result


async def hostile_carets(server) -> Result:
    """notebook_list_users in a 5,000-cell notebook's room where 100 awareness states share
    carets the document does not know or that name no cell's source (made-up ids, ids past its
    state vector, cells and outputs, text deleted for good, shapes no caret has), after three
    real ones; vs the same call where the three real carets are alone. A thread polls
    GET /api/status meanwhile: the longest any of those waited is how long a call held the
    server (the bound: 250 ms)."""
    import asyncio
    import random
    import statistics
    import time

    from pycrdt import Assoc, Awareness, Doc, StickyIndex, create_awareness_message

    from jupyter_mcp.notebooks.moves import state_vector
    from jupyter_mcp.testing import StatusPoller, UIClient, big_notebook

    rng = random.Random(41)
    for name in ("bench_carets.ipynb", "bench_carets_clean.ipynb"):
        big_notebook(server.root / name, 5000)

    def caret(text, offset: int) -> dict:
        return {"type": None, "tname": None, "assoc": 0, **StickyIndex.new(text, offset, Assoc.AFTER).to_json()}

    def fake(name: str, head) -> Awareness:
        awareness = Awareness(Doc())
        awareness.set_local_state({"user": {"name": name, "display_name": name, "username": name.lower()},
                                   "cursors": [{"anchor": head, "head": head, "primary": True, "empty": True}]})
        return awareness

    async def announce(ui: UIClient, people: list[Awareness]) -> None:
        for awareness in (ui.awareness, *people):  # a fresh clock: a state lasts 30 s unless renewed
            awareness.set_local_state(awareness.get_local_state())
            await ui.channel.send(create_awareness_message(awareness.encode_awareness_update([awareness.client_id])))

    async def real_people(ui: UIClient) -> tuple[list[Awareness], dict[str, str]]:
        """The tab's own caret and two more people's, in cells at the start, middle and end."""
        await ui.put_cursor(2500, 3)
        ids, cells = ui.cell_ids(), ui.nb.ycells
        people = [fake(f"Real {i}", caret(cells[i]["source"], 3)) for i in (10, 4990)]
        return people, {ui.name: ids[2500], "Real 10": ids[10], "Real 4990": ids[4990]}

    def hostile(ui: UIClient) -> list[Awareness]:
        cells, ydoc = ui.nb.ycells, ui.doc
        heads: list = [{"item": {"client": rng.getrandbits(53), "clock": rng.randrange(10**6)}} for _ in range(30)]
        writer = StickyIndex.new(cells, 0, Assoc.AFTER).to_json()["item"]["client"]  # who wrote the cells
        top = state_vector(ydoc.get_state())[writer]
        heads += [{"item": {"client": writer, "clock": top + k}} for k in range(10)]  # past the state vector
        ends = [StickyIndex.new(cells, len(cells) - 1 - k, Assoc.AFTER).to_json()["item"] for k in range(30)]
        heads += [{"item": cell} for cell in ends[:20]]  # the last cells' maps: the longest way to them
        heads += [{"type": cell} for cell in ends[20:]]  # a map is no text
        heads += [caret(cells[i]["outputs"][0]["text"], 0) for i in range(0, 30, 3)]  # outputs
        doomed = [caret(cells[i]["source"], 1) for i in range(100, 110)]
        del cells[100:110]  # their text is deleted for good
        heads += doomed
        heads += [None, "c0", 7, [], {}, {"item": "x"}, {"item": {"client": -1, "clock": 0}},
                  {"type": {"client": writer}}, {"item": {"client": writer, "clock": 2**60}}, {"tname": "cells"}]
        return [fake(f"Hostile {i}", head) for i, head in enumerate(heads)]

    async with connect(server.mcp_url, server.token) as mcp, \
            UIClient(server.url, server.token, "bench_carets.ipynb", name="Grace Hopper") as grace, \
            UIClient(server.url, server.token, "bench_carets_clean.ipynb", name="Ada Lovelace") as ada:
        real_hostile, expected_hostile = await real_people(grace)
        clean_room, expected_clean = await real_people(ada)
        strangers = hostile(grace)
        assert len(strangers) == 100
        hostile_room = real_hostile + strangers
        announced = 0.0

        async def cells_of(path: str) -> dict:
            r = await mcp.call_tool("notebook_list_users", {"path": path})
            assert not r.is_error, r.content
            return {u["display_name"]: u["cell_id"] for u in r.structured_content["users"] if not u["is_agent"]}

        async def renew() -> None:
            nonlocal announced
            if time.monotonic() - announced > 10:
                await announce(grace, hostile_room)
                await announce(ada, clean_room)
                announced = time.monotonic()
                await asyncio.sleep(0.5)

        async def subject() -> None:
            found = await cells_of("bench_carets.ipynb")
            assert {k: found.get(k) for k in expected_hostile} == expected_hostile, found
            assert len(found) == 103 and sum(v is not None for v in found.values()) == 3, found

        async def floor() -> None:
            assert await cells_of("bench_carets_clean.ipynb") == expected_clean

        for _ in range(60):  # until every state has reached the room
            await renew()
            try:
                await subject()
                await floor()
                break
            except AssertionError:
                announced = 0.0
                await asyncio.sleep(0.5)
        result = Result("hostile_carets", None)
        held: dict[str, list[float]] = {"subject": [], "floor": []}
        with StatusPoller(server) as poller:
            for _ in range(30):
                for kind, walls, fn in (("subject", result.subject_ms, subject), ("floor", result.floor_ms, floor)):
                    await renew()
                    await asyncio.sleep(0.1)
                    poller.take()
                    started = time.perf_counter()
                    await fn()
                    walls.append((time.perf_counter() - started) * 1000)
                    await asyncio.sleep(0.05)
                    held[kind].append(poller.take() * 1000)
    worst = max(held["subject"])
    verdict = "meets" if worst <= 250 else "MISSES"
    result.note = (f"(100 hostile carets + 3 real in 5,000 cells vs the 3 real alone) other requests held up to "
                   f"{worst:.0f} ms (median {statistics.median(held['subject']):.0f} ms; real carets alone: up to "
                   f"{max(held['floor']):.0f} ms); target nobody held over 250 ms: {verdict}")
    result.extra = {"held_ms": worst, "held_median_ms": statistics.median(held["subject"]),
                    "floor_held_ms": max(held["floor"])}
    return result


ALL: dict[str, Scenario] = {name: globals()[name] for name in ("ping", "update_cell", "read_big", "exec_trivial", "propagation",
                                          "concurrent_insert", "tasks", "tasks_get_10k", "memory", "open_big",
                                          "hostile_carets")}
