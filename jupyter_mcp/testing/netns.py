"""Another network namespace: a client outside the box's deployment, for real.

A namespace joined to this machine by a veth pair is what another machine on the network
looks like to a server here: its requests arrive from its own address, over a routed
interface. Needs root and iproute2; ``problem()`` says why not where it cannot run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager
from typing import Iterator


def problem() -> str | None:
    if os.geteuid() != 0:
        return "a network namespace needs root"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    return None


class Outside:
    """A namespace ``name`` at ``address``; this machine is ``host`` on the link between them."""

    def __init__(self, tag: int) -> None:
        self.name = f"mcp-out-{tag}"
        self.host = f"10.213.{tag % 250}.1"
        self.address = f"10.213.{tag % 250}.2"
        self._link = f"mcpo{tag % 100000}"

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A command run in the namespace."""
        return subprocess.run(["ip", "netns", "exec", self.name, *argv], capture_output=True, text=True, timeout=timeout)

    def _up(self) -> None:
        host_end, ns_end = f"{self._link}h", f"{self._link}n"
        for argv in (["netns", "add", self.name],
                     ["link", "add", host_end, "type", "veth", "peer", "name", ns_end],
                     ["link", "set", ns_end, "netns", self.name],
                     ["addr", "add", f"{self.host}/24", "dev", host_end],
                     ["link", "set", host_end, "up"],
                     ["netns", "exec", self.name, "ip", "addr", "add", f"{self.address}/24", "dev", ns_end],
                     ["netns", "exec", self.name, "ip", "link", "set", ns_end, "up"],
                     ["netns", "exec", self.name, "ip", "link", "set", "lo", "up"],
                     ["netns", "exec", self.name, "ip", "route", "add", "default", "via", self.host]):
            subprocess.run(["ip", *argv], check=True, capture_output=True, text=True)

    def _down(self) -> None:
        subprocess.run(["ip", "link", "del", f"{self._link}h"], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


@contextmanager
def outside_namespace() -> Iterator[Outside]:
    outside = Outside(os.getpid())
    outside._down()  # a leftover of an earlier run with this pid
    outside._up()
    try:
        yield outside
    finally:
        outside._down()
