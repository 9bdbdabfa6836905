"""A bounded soak: one fresh server, five notebooks, every kind of MCP call while two people type.

    bash scripts/bench soak              # about 8 minutes (at most 10; SOAK_SECONDS=... to change)
    bash scripts/bench soak_short        # the same in about 2 minutes (what tests/test_soak.py runs)

What it does, on a fresh `jupyter lab` (its rooms closed by the sweeper once idle for a few
seconds more than a phase lasts, so that every room stays open during the load and all of them
close soon after it):

1. Warm-up: every kind of call on every notebook (each notebook's kernel started), then every
   room closed. The server's census (``jupyter_mcp.testing.census``: its live objects counted in
   its own process, after a full collection and with freed heap given back) is the baseline.
2. The load, in rounds of phases, each phase one kind of call only, made by four MCP sessions at
   once, round the five notebooks: ``read`` (notebook_get, cell_get), ``update`` (cell_update of a
   new ~300-character source), ``insert`` (cell_insert), ``delete`` (cell_delete of the cells the
   insert phase added), ``execute`` (cell_execute of a small print), ``users``
   (notebook_list_users), and ``typing`` (no call: the people alone). Two tabs (``UIClient``, in
   two of the notebooks, each sharing its cursor) type a letter every 30 ms each all along. The
   server's RSS is read at each phase's start and end: its growth over every phase of a kind,
   per 1,000 calls of that kind (per 1,000 keystrokes for ``typing``, whose growth every phase
   also contains).
3. The tabs leave and every room closes; the census again: what stays (RSS, and the live
   documents, rooms, handlers, kernel clients and jupyter-mcp objects against the baseline).

All along, another process asks ``GET /api/status`` every 5 ms: its p99 in the worst 30 s window
of the load. The report says too whether any call erred and whether every keystroke arrived (the
server's copy of each person's cell holds exactly what they typed).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("read", "update", "insert", "delete", "execute", "users")
# no two phases in a row leave the rooms without a person untouched (users, typing): they would close
PHASES = ("read", "update", "users", "insert", "delete", "typing", "execute")
NOTEBOOKS = 5
SESSIONS = 4  # MCP sessions calling at once
KEYSTROKE_SEC = 0.03  # each tab types a letter this often
WINDOW_SEC = 30.0  # GET /api/status's p99 is taken per window of this length
NOTES = "# notes: "  # the cell the people type in (never touched by the agent)
OVERHEAD_SEC = 40.0  # start, warm-up, waiting for rooms to close, censuses: what the phases leave
LONG_SEC = 540.0
SHORT_SEC = 120.0
MAX_SEC = 600.0
DELETES_WITHIN = 3  # a delete phase may last this many phases: deletes are about as fast as inserts


@dataclass
class Plan:
    """How long the phases last, and how many rounds of them, within ``seconds`` in all."""

    seconds: float
    phase_sec: float
    rounds: int

    @classmethod
    def within(cls, seconds: float) -> Plan:
        seconds = min(float(seconds), MAX_SEC)
        load = max(len(PHASES) * 5.0, seconds - OVERHEAD_SEC)
        phase_sec = 20.0 if load >= 2 * len(PHASES) * 20 else max(5.0, load / len(PHASES))
        return cls(seconds, phase_sec, max(1, int(load // (len(PHASES) * phase_sec))))

    @property
    def room_idle_sec(self) -> float:
        """The sweeper's idle timeout: longer than any phase in which a room may see no call."""
        return self.phase_sec + 5


@dataclass
class Report:
    """What a soak measured."""

    plan: Plan
    calls: Counter = field(default_factory=Counter)  # by kind
    errors: Counter = field(default_factory=Counter)
    first_errors: list[str] = field(default_factory=list)
    seconds: Counter = field(default_factory=Counter)  # of calls, by kind
    rss_growth_mb: Counter = field(default_factory=Counter)  # by phase kind
    typed: list[int] = field(default_factory=list)  # keystrokes per tab
    arrived: list[bool] = field(default_factory=list)  # the server's copy holds each tab's text
    keystrokes_in_typing_phases: int = 0
    status_ms: list[tuple[float, float]] = field(default_factory=list)  # (when, ms)
    load_started: float = 0.0
    before: dict[str, Any] = field(default_factory=dict)  # census after the warm-up, rooms closed
    during: dict[str, Any] = field(default_factory=dict)  # census at the load's end, rooms open
    after: dict[str, Any] = field(default_factory=dict)  # census once every room closed again
    rooms_left: int = -1
    took_sec: float = 0.0

    # -- what it says --------------------------------------------------------------------

    def per_thousand(self) -> dict[str, float | None]:
        """RSS growth (MB) per 1,000 calls of each kind; per 1,000 keystrokes for ``typing``."""
        found: dict[str, float | None] = {}
        for kind in KINDS:
            found[kind] = self.rss_growth_mb[kind] / self.calls[kind] * 1000 if self.calls[kind] else None
        keys = self.keystrokes_in_typing_phases
        found["typing"] = self.rss_growth_mb["typing"] / keys * 1000 if keys else None
        return found

    def status_windows(self) -> list[float]:
        """p99 of GET /api/status (ms) in each whole-or-partial 30 s window of the load."""
        windows: dict[int, list[float]] = {}
        for when, ms in self.status_ms:
            if when >= self.load_started:
                windows.setdefault(int((when - self.load_started) // WINDOW_SEC), []).append(ms)
        return [_p(values, 0.99) for _, values in sorted(windows.items()) if len(values) >= 20]

    def stays(self) -> dict[str, tuple[int, int]]:
        """Live objects more numerous once every room closed than before the load."""
        before, after = self.before.get("counts", {}), self.after.get("counts", {})
        return {name: (before.get(name, 0), count) for name, count in after.items() if count > before.get(name, 0)}

    def documents_back(self) -> bool:
        """Every Y document made during the load is gone (as many as before it)."""
        before, after = self.before.get("counts", {}), self.after.get("counts", {})
        names = ("room documents", "Y documents", "Y documents (native)", "undo managers (native)", "awareness")
        return all(after.get(name, 0) <= before.get(name, 0) for name in names)

    def summary(self) -> dict[str, Any]:
        windows = self.status_windows()
        every = [ms for _, ms in self.status_ms]
        return {
            "seconds": round(self.took_sec), "phase_sec": self.plan.phase_sec, "rounds": self.plan.rounds,
            "calls": dict(self.calls), "errors": dict(self.errors), "first_errors": self.first_errors,
            "calls_per_sec": {k: round(self.calls[k] / self.seconds[k], 1) for k in KINDS if self.seconds[k]},
            "rss_mb_per_1000": {k: (round(v, 2) if v is not None else None) for k, v in self.per_thousand().items()},
            "keystrokes": self.typed, "keystrokes_arrived": self.arrived,
            "status_p99_worst_window_ms": round(max(windows), 2) if windows else None,
            "status_p99_ms": round(_p(every, 0.99), 2) if every else None,
            "status_max_ms": round(max(every), 2) if every else None, "status_requests": len(every),
            "rss_before_mb": self.before.get("rss_mb"), "rss_open_mb": self.during.get("rss_mb"),
            "rss_after_mb": self.after.get("rss_mb"), "heap_before_mb": _round(self.before.get("heap_mb")),
            "heap_after_mb": _round(self.after.get("heap_mb")), "rooms_left": self.rooms_left,
            "stays": {k: list(v) for k, v in self.stays().items()},
        }

    def note(self) -> str:
        s = self.summary()
        per = s["rss_mb_per_1000"]
        calls = ", ".join(f"{k} {self.calls[k]:,} ({s['calls_per_sec'].get(k, 0)}/s)" for k in KINDS)
        growth = ", ".join(f"{k} {per[k]:+.2f}" if per[k] is not None else f"{k} -" for k in KINDS)
        typing = f"{per['typing']:+.3f} MB per 1,000 keystrokes alone" if per["typing"] is not None else ""
        errors = sum(self.errors.values())
        error_text = (f"{errors} calls erred ({dict(self.errors)}: {self.first_errors[:2]})" if errors
                      else "no call erred")
        keys = " + ".join(f"{n:,}" for n in self.typed)
        arrived = "all arrived" if self.arrived and all(self.arrived) else f"NOT all arrived ({self.arrived})"
        stays = ", ".join(f"{k} {b}->{a}" for k, (b, a) in s["stays"].items()) or "nothing"
        return "\n".join([
            f"{s['seconds']} s: {self.plan.rounds} round(s) of {len(PHASES)} phases of {self.plan.phase_sec:.0f} s; "
            f"{NOTEBOOKS} notebooks, {SESSIONS} MCP sessions, 2 tabs typing",
            f"  calls: {calls}; {error_text}",
            f"  RSS per 1,000 calls (MB): {growth}; {typing}",
            f"  keystrokes: {keys} typed, {arrived}",
            f"  GET /api/status: p99 {s['status_p99_worst_window_ms']} ms in the worst {WINDOW_SEC:.0f} s window "
            f"(p99 {s['status_p99_ms']} ms, max {s['status_max_ms']} ms over {s['status_requests']:,} requests)",
            f"  RSS {s['rss_before_mb']} MB before the load (rooms closed), {s['rss_open_mb']} MB at its end (rooms "
            f"open), {s['rss_after_mb']} MB once every room closed ({s['rooms_left']} left): "
            f"{_delta(s['rss_before_mb'], s['rss_after_mb'])} stays; heap in use {s['heap_before_mb']} -> "
            f"{s['heap_after_mb']} MB",
            f"  live objects more numerous than before the load: {stays}",
        ])


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _round(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def _delta(before: float | None, after: float | None) -> str:
    return f"{after - before:+.1f} MB" if before is not None and after is not None else "?"


# -- GET /api/status, from a process of its own ----------------------------------------------


def _poll_status(url: str, headers: dict[str, str], stop: Any, out: Any) -> None:
    """In a process of its own (none of the load's work shares its interpreter): GET ``url``
    every 5 ms until ``stop`` is set; sends back [(when, ms)] (``time.monotonic``, system-wide)."""
    import httpx

    seen: list[tuple[float, float]] = []
    with httpx.Client(headers=headers, timeout=120) as http:
        while not stop.is_set():
            start = time.monotonic()
            response = http.get(url)
            seen.append((start, (time.monotonic() - start) * 1000))
            if response.status_code != 200:
                seen.append((start, float("nan")))
            stop.wait(0.005)
    out.send(seen)
    out.close()


@contextlib.contextmanager
def status_poller(server: Any, report: Report):
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_poll_status, args=(server.url + "api/status", server.headers, stop, send),
                              daemon=True)
    process.start()
    try:
        yield
    finally:
        stop.set()
        if receive.poll(60):
            report.status_ms = [(when, ms) for when, ms in receive.recv() if ms == ms]
        process.join(10)
        if process.is_alive():
            process.kill()


# -- the load ---------------------------------------------------------------------------------


def _sources(i: int) -> list[str]:
    filler = [f"## Part {i}.{j}\nSome text about part {j} of notebook {i}." if j % 2 else
              f"values_{j} = [n * {j} for n in range(10)]\nsum(values_{j})" for j in range(7)]
    return [NOTES, "x = 0", "import random\nprint('run', random.random())", *filler]


class Load:
    """The agent's side: SESSIONS MCP sessions, calls of one kind at a time."""

    def __init__(self, sessions: list[Any], paths: list[str], report: Report) -> None:
        self.sessions = sessions
        self.paths = paths
        self.report = report
        self.inserted: dict[str, list[str]] = {path: [] for path in paths}  # what the delete phase deletes
        self.counter = 0

    async def call(self, client: Any, tool: str, arguments: dict[str, Any], kind: str) -> Any:
        try:
            result = await client.call_tool(tool, arguments)
        except Exception as exc:  # a transport error is an erred call too
            self._erred(kind, f"{tool}: {type(exc).__name__}: {exc}")
            return None
        if result.is_error:
            text = result.content[0].text if result.content else "?"
            self._erred(kind, f"{tool}: {text[:200]}")
            return None
        return result.structured_content

    def _erred(self, kind: str, text: str) -> None:
        self.report.errors[kind] += 1
        if len(self.report.first_errors) < 5:
            self.report.first_errors.append(text)

    async def one(self, client: Any, kind: str, path: str) -> bool:
        """One call of ``kind`` on ``path``; False when there is nothing left to do (deletes)."""
        self.counter += 1
        n = self.counter
        if kind == "read":
            if n % 2:
                await self.call(client, "notebook_get", {"path": path}, kind)
            else:
                await self.call(client, "cell_get", {"path": path, "index": 3 + n % 7}, kind)
        elif kind == "update":
            source = f"x = {n}\n# step {n}: " + " ".join(f"w{(n * 7 + k) % 101}" for k in range(50))
            await self.call(client, "cell_update", {"path": path, "index": 1, "source": source}, kind)
        elif kind == "insert":
            made = await self.call(client, "cell_insert", {"path": path, "source": f"y = {n}"}, kind)
            if made:
                self.inserted[path].append(made["id"])
        elif kind == "delete":
            if not self.inserted[path]:
                return False
            await self.call(client, "cell_delete", {"path": path, "cell_id": self.inserted[path].pop()}, kind)
        elif kind == "execute":
            await self.call(client, "cell_execute", {"path": path, "index": 2}, kind)
        elif kind == "users":
            await self.call(client, "notebook_list_users", {"path": path}, kind)
        self.report.calls[kind] += 1
        return True

    async def phase(self, kind: str, seconds: float | None = None, per_notebook: int | None = None) -> None:
        """Calls of ``kind`` from every session for ``seconds`` (or ``per_notebook`` calls on each
        notebook), round the notebooks. A delete phase deletes every cell the insert phase added
        (within ``DELETES_WITHIN`` times ``seconds``), so that the notebooks are back to their size."""
        if kind == "delete" and seconds is not None:
            seconds *= DELETES_WITHIN
        deadline = time.monotonic() + seconds if seconds is not None else None
        started = time.monotonic()

        async def worker(k: int, client: Any) -> None:
            turn = k
            while True:
                if deadline is not None and time.monotonic() >= deadline:
                    return
                if per_notebook is not None and turn >= per_notebook * len(self.paths):
                    return
                path = self.paths[turn % len(self.paths)]
                turn += len(self.sessions)
                if not await self.one(client, kind, path) and all(not ids for ids in self.inserted.values()):
                    return

        if kind == "typing":
            await asyncio.sleep(seconds or 0)
        else:
            await asyncio.gather(*(worker(k, c) for k, c in enumerate(self.sessions)))
        self.report.seconds[kind] += time.monotonic() - started


class Typist:
    """A person in a notebook: shares a cursor, types a letter every KEYSTROKE_SEC."""

    def __init__(self, tab: Any) -> None:
        self.tab = tab
        self.text = ""
        self.stopping = asyncio.Event()
        self.task: asyncio.Task | None = None

    async def start(self) -> None:
        await self.tab.put_cursor(0, 2)  # in the cell, as a person who clicked there
        self.task = asyncio.create_task(self._type())

    async def _type(self) -> None:
        while not self.stopping.is_set():
            letter = "abcdefghijklmnopqrstuvwxyz"[len(self.text) % 26]
            self.tab.type_into(0, letter)
            self.text += letter
            await asyncio.sleep(KEYSTROKE_SEC)

    async def stop(self) -> None:
        self.stopping.set()
        if self.task is not None:
            await self.task


async def _rooms(client: Any) -> int:
    result = await client.call_tool("room_list", {})
    return len(result.structured_content["rooms"])


async def _until_rooms_closed(client: Any, within: float) -> int:
    """Wait (at most ``within`` seconds) for the sweeper to close every room; how many are left."""
    deadline = time.monotonic() + within
    left = await _rooms(client)
    while left and time.monotonic() < deadline:
        await asyncio.sleep(1)
        left = await _rooms(client)
    return left


def _census(server: Any, release: bool) -> dict[str, Any]:
    from jupyter_mcp.testing import census

    return census.read(server, release=release)


async def run(seconds: float = LONG_SEC, server_args: list[str] | None = None, base: Path | None = None) -> Report:
    """The soak on a fresh server, within ``seconds`` (at most 10 minutes)."""
    from jupyter_mcp.client import connect
    from jupyter_mcp.testing import LiveServer, UIClient, census, write_notebook

    plan = Plan.within(seconds)
    report = Report(plan)
    started = time.monotonic()
    with contextlib.ExitStack() as cleanup:
        if base is None:
            base = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="jupyter-mcp-soak-")))
        server = LiveServer(base, args=list(server_args or []), env={
            "MCP_ROOM_IDLE_TIMEOUT_SEC": f"{plan.room_idle_sec:g}", "MCP_ROOM_SWEEP_INTERVAL_SEC": "1"})
        census.enable(server)
        server.start()
        cleanup.callback(server.stop)
        paths = [f"soak-{i}.ipynb" for i in range(NOTEBOOKS)]
        for i, path in enumerate(paths):
            write_notebook(server.root / path, _sources(i))
        async with contextlib.AsyncExitStack() as stack:
            sessions = [await stack.enter_async_context(connect(server.mcp_url, server.token)) for _ in range(SESSIONS)]
            load = Load(sessions, paths, report)
            for kind in KINDS:  # warm-up: every kind on every notebook, every kernel started
                await load.phase(kind, per_notebook=2)
            await _until_rooms_closed(sessions[0], plan.room_idle_sec + 30)
            report.before = await asyncio.to_thread(_census, server, True)
            report.calls.clear()
            report.seconds.clear()
            with status_poller(server, report):
                async with contextlib.AsyncExitStack() as tabs:
                    typists = [Typist(await tabs.enter_async_context(UIClient(server.url, server.token, path,
                                                                               name=name)))
                               for path, name in zip(paths[:2], ("Ada Person", "Grace Person"))]
                    report.load_started = time.monotonic()
                    for typist in typists:
                        await typist.start()
                    rss = census.rss_mb(server.proc.pid)
                    stop_at = started + min(plan.seconds * 1.25, MAX_SEC) - plan.room_idle_sec - 20  # the bound
                    for round_number in range(plan.rounds):
                        for kind in PHASES:
                            longest = plan.phase_sec * (DELETES_WITHIN if kind == "delete" else 1)
                            if round_number and time.monotonic() + longest > stop_at:
                                break  # the bound cuts later rounds; the first runs every kind, however loaded
                                       # the machine (a run beside other tests used its time on the warm-up)
                            typed_before = sum(len(t.text) for t in typists)
                            await load.phase(kind, plan.phase_sec)
                            now = census.rss_mb(server.proc.pid)
                            report.rss_growth_mb[kind] += now - rss
                            rss = now
                            if kind == "typing":
                                report.keystrokes_in_typing_phases += sum(len(t.text) for t in typists) - typed_before
                    for typist in typists:
                        await typist.stop()
                    report.typed = [len(t.text) for t in typists]
                    for path, typist in zip(paths, typists):
                        report.arrived.append(await _arrived(sessions[0], path, NOTES + typist.text))
                    report.during = await asyncio.to_thread(_census, server, False)
                    del typists
            report.rooms_left = await _until_rooms_closed(sessions[0], plan.room_idle_sec + 30)
            await asyncio.sleep(1)  # the closed rooms' tasks end
            report.after = await asyncio.to_thread(_census, server, True)
    report.took_sec = time.monotonic() - started
    return report


async def _arrived(client: Any, path: str, text: str, within: float = 20) -> bool:
    """Whether the server's copy of the person's cell holds exactly what they typed (given time)."""
    deadline = time.monotonic() + within
    while True:
        result = await client.call_tool("cell_get", {"path": path, "index": 0})
        if not result.is_error and result.structured_content["source"] == text:
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.2)


# -- as benchmark scenarios ----------------------------------------------------------------------


def _seconds() -> float:
    raw = os.environ.get("SOAK_SECONDS")
    return min(float(raw), MAX_SEC) if raw else LONG_SEC


async def _scenario(name: str, seconds: float, server: Any) -> Any:
    from benchmarks.harness import Result

    report = await run(seconds, server_args=server.args)
    result = Result(name, None)
    result.note = report.note()
    result.extra = report.summary()
    return result


async def soak(server: Any) -> Any:
    """The soak, about 8 minutes (SOAK_SECONDS, at most 600)."""
    return await _scenario("soak", _seconds(), server)


async def soak_short(server: Any) -> Any:
    """The soak in about 2 minutes."""
    return await _scenario("soak_short", SHORT_SEC, server)


SCENARIOS = {"soak": soak, "soak_short": soak_short}
ON_REQUEST = {"soak_short"}  # run only when named: the same measure as soak, shorter
