"""Benchmark harness: a real jupyter lab, scenarios timed against a floor in the same run.

Machines here are shared and noisy, so no absolute time means anything across runs;
each scenario measures its floor (the cheapest way to do the same work) right next
to itself, alternating samples, and reports the ratio of the medians.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

Sample = Callable[[], Awaitable[object]]


@dataclass
class Result:
    name: str
    target: float | None
    subject_ms: list[float] = field(default_factory=list)
    floor_ms: list[float] = field(default_factory=list)
    note: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    @staticmethod
    def _p(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def ratio(self) -> float | None:
        if not self.subject_ms or not self.floor_ms:
            return None
        return statistics.median(self.subject_ms) / statistics.median(self.floor_ms)

    def line(self) -> str:
        if not self.subject_ms:
            return f"{self.name:<22} {self.note}"
        s, f = self.subject_ms, self.floor_ms
        ratio = self.ratio
        verdict = ""
        if self.target is not None and ratio is not None:
            verdict = "meets" if ratio <= self.target else "MISSES"
            verdict = f"target <= {self.target:g}x: {verdict}"
        floor = f"floor median {statistics.median(f):8.2f} ms p90 {self._p(f, .9):8.2f}" if f else ""
        r = f"ratio {ratio:5.2f}x" if ratio is not None else ""
        return (f"{self.name:<22} median {statistics.median(s):8.2f} ms p90 {self._p(s, .9):8.2f}  "
                f"{floor}  {r}  {verdict} {self.note}")


async def timed(fn: Sample) -> float:
    start = time.perf_counter()
    await fn()
    return (time.perf_counter() - start) * 1000


async def compare(name: str, subject: Sample, floor: Sample, *, n: int, warmup: int = 5,
                  target: float | None = None) -> Result:
    """Alternate subject and floor samples so both see the same machine."""
    for _ in range(warmup):
        await subject()
        await floor()
    result = Result(name, target)
    for _ in range(n):
        result.subject_ms.append(await timed(subject))
        result.floor_ms.append(await timed(floor))
    return result
