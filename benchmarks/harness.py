"""Benchmark harness: a real jupyter lab, scenarios timed against a floor in the same run.

Machines here are shared and noisy, so no absolute time means anything across runs;
each scenario measures its floor (the cheapest way to do the same work) right next
to itself, alternating samples, and reports the ratio of the medians: of wall time, and
of the server's CPU time per sample (read from the kernel's accounting of the server
process, which a loaded machine does not inflate the way it stretches wall time).

A sample's trailing work (a document update written to the store, broadcast to people)
happens after its answer. Before the next sample the harness waits until the server is
quiet, so no sample pays for the one before it, and each sample's CPU includes its own
trailing work.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

Sample = Callable[[], Awaitable[object]]
T = TypeVar("T")

QUIET_WINDOW_SEC = 0.005  # the server is quiet when it ran less than
QUIET_CPU_SHARE = 0.10  # this share of a window
QUIET_MAX_SEC = 0.25  # waited for at most (a busy machine's background work must not stall a run)


def cpu_clock(pid: int) -> int:
    """The clock id of process ``pid``'s CPU time (all its threads, the ended ones too):
    Linux's CPUCLOCK_SCHED of another process, in ns through ``clock_gettime``."""
    return ((~pid) << 3) | 2


@dataclass
class Result:
    name: str
    target: float | None
    subject_ms: list[float] = field(default_factory=list)
    floor_ms: list[float] = field(default_factory=list)
    subject_cpu_ms: list[float] = field(default_factory=list)  # the server's CPU per sample
    floor_cpu_ms: list[float] = field(default_factory=list)
    cpu_target: float | None = None
    note: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    @staticmethod
    def _p(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @staticmethod
    def _ratio(subject: list[float], floor: list[float]) -> float | None:
        if not subject or not floor or statistics.median(floor) <= 0:
            return None
        return statistics.median(subject) / statistics.median(floor)

    @property
    def ratio(self) -> float | None:
        return self._ratio(self.subject_ms, self.floor_ms)

    @property
    def cpu_ratio(self) -> float | None:
        return self._ratio(self.subject_cpu_ms, self.floor_cpu_ms)

    @staticmethod
    def _verdict(ratio: float | None, target: float | None) -> str:
        if target is None or ratio is None:
            return ""
        return f"(target <= {target:g}x: {'meets' if ratio <= target else 'MISSES'})"

    def line(self) -> str:
        if not self.subject_ms:
            return f"{self.name:<18} {self.note}"
        s, f = self.subject_ms, self.floor_ms
        text = (f"{self.name:<18} wall {statistics.median(s):7.2f} ms (p90 {self._p(s, .9):7.2f}) vs floor "
                f"{statistics.median(f):7.2f} ms (p90 {self._p(f, .9):7.2f}): {self.ratio:5.2f}x "
                f"{self._verdict(self.ratio, self.target)}")
        if self.subject_cpu_ms:
            cpu = self.cpu_ratio
            text += (f" | server CPU {statistics.median(self.subject_cpu_ms):6.2f} ms vs "
                     f"{statistics.median(self.floor_cpu_ms):6.2f} ms"
                     + (f": {cpu:5.2f}x {self._verdict(cpu, self.cpu_target)}" if cpu is not None else ""))
        return f"{text} {self.note}".rstrip()

    def summary(self) -> dict[str, object]:
        """What last-run.json keeps of the result."""
        med = (lambda values: round(statistics.median(values), 3) if values else None)
        return {"name": self.name, "ratio": self.ratio, "target": self.target, "cpu_ratio": self.cpu_ratio,
                "cpu_target": self.cpu_target, "subject_ms": med(self.subject_ms), "floor_ms": med(self.floor_ms),
                "subject_cpu_ms": med(self.subject_cpu_ms), "floor_cpu_ms": med(self.floor_cpu_ms),
                "note": self.note, **self.extra}


async def timed(fn: Sample) -> float:
    """Wall ms of one call."""
    start = time.perf_counter()
    await fn()
    return (time.perf_counter() - start) * 1000


class Meter:
    """Samples timed on the wall and on the server's CPU, each after the server went quiet."""

    def __init__(self, server_pid: int) -> None:
        self.clock = cpu_clock(server_pid)

    def cpu_ns(self) -> int:
        return time.clock_gettime_ns(self.clock)

    async def quiet(self) -> None:
        """Wait until the server runs less than QUIET_CPU_SHARE of a window (bounded)."""
        deadline = time.monotonic() + QUIET_MAX_SEC
        before = self.cpu_ns()
        while time.monotonic() < deadline:
            await asyncio.sleep(QUIET_WINDOW_SEC)
            now = self.cpu_ns()
            if now - before < QUIET_WINDOW_SEC * QUIET_CPU_SHARE * 1e9:
                return
            before = now

    async def cpu_of(self, fn: Callable[[], Awaitable[T]]) -> tuple[T, float]:
        """(what ``fn`` returns, the server's CPU ms for it and its trailing work)."""
        await self.quiet()
        cpu = self.cpu_ns()
        value = await fn()
        await self.quiet()
        return value, (self.cpu_ns() - cpu) / 1e6


async def compare(name: str, subject: Sample, floor: Sample, *, server_pid: int | None, n: int, warmup: int = 5,
                  target: float | None = None, cpu_target: float | None = None) -> Result:
    """Alternate subject and floor samples so both see the same machine. The server's CPU is
    read when both run on the server ``server_pid`` (None: they do not, wall time only)."""
    meter = Meter(server_pid) if server_pid is not None else None
    for _ in range(warmup):
        await subject()
        await floor()
    result = Result(name, target, cpu_target=cpu_target)
    for _ in range(n):
        for walls, cpus, fn in ((result.subject_ms, result.subject_cpu_ms, subject),
                                (result.floor_ms, result.floor_cpu_ms, floor)):
            if meter is None:
                walls.append(await timed(fn))
            else:
                wall, cpu = await meter.cpu_of(lambda: timed(fn))
                walls.append(wall)
                cpus.append(cpu)
    return result
