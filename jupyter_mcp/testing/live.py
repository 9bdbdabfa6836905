"""A real `jupyter lab` process from the installed package, for integration tests."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx


#: How many ports below the system's ephemeral range ``free_port`` takes them from, and in how
#: many slices (one per pytest-xdist worker, by its number).
PORT_BAND, PORT_SLICES = 12000, 8
_handed_out: set[int] = set()


def free_port() -> int:
    """A port nobody listens on, that stays free until a server binds it minutes later.

    A port the system picked (bind to port 0) comes from its ephemeral range, which it hands
    to every outgoing connection and kernel socket in the meantime: with test processes side
    by side, a box whose build takes a minute found its port taken. So the port is taken from
    a band just below that range, which the system never hands out on its own, in this
    worker's slice of the band, and never twice in one process."""
    low = _ephemeral_low()
    size = PORT_BAND // PORT_SLICES
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    start = low - PORT_BAND + (int(worker) % PORT_SLICES if worker.isdigit() else 0) * size
    offset = secrets.randbelow(size)
    for i in range(size):
        port = start + (offset + i) % size
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {start}..{start + size - 1}")


def _ephemeral_low() -> int:
    """The lowest port of the system's ephemeral range (Linux's default: 32768)."""
    try:
        return max(PORT_BAND + 1024, int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0]))
    except (OSError, ValueError, IndexError):
        return 32768


def end_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
    """Send ``proc`` the signal and wait for it; killed if it outlives ``timeout``. Its exit code."""
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return proc.returncode


def wait_until(proc: subprocess.Popen, ready: Callable[[], Any], *, timeout: float, what: str,
               log: Callable[[], str]) -> None:
    """Poll ``ready`` until it answers true; fail with the process's log if it exits first or
    ``timeout`` passes (``what`` says what did not happen)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode}:\n{log()}")
        if ready():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} in {timeout}s:\n{log()}")


async def eventually(check: Callable[[], Any], timeout: float = 20, what: str = "the condition") -> Any:
    """Poll ``check`` (async, returns a truthy value when done) until it holds; return its value."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout}s")
        await asyncio.sleep(0.1)


def answers(url: str, headers: dict[str, str] | None = None) -> bool:
    """Whether ``url`` answers 200 now."""
    try:
        return httpx.get(url, headers=headers, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


# Capabilities that let root read and write any file whatever its owner and mode.
FILE_PERMISSION_OVERRIDES = ("dac_override", "dac_read_search", "fowner")


class LiveServer:
    """Starts `jupyter lab` on a free port with its own workspace and Jupyter dirs.

    ``unprivileged_files=True`` starts it without root's file-permission override (the
    capabilities above dropped from its bounding set by ``setpriv``), so that file modes and
    owners apply to the server as they do on a box that runs it unprivileged: a file owned by
    someone else with mode 0644 is readable but not writable. Only root can drop them; a
    server started so by anyone else would be no different, so that is refused."""

    def __init__(self, base: Path, *, env: dict[str, str] | None = None, args: list[str] | None = None,
                 base_url: str = "/", token: str | None = None, unprivileged_files: bool = False) -> None:
        self.base = base
        self.root = base / "workspace"
        self.root.mkdir(parents=True, exist_ok=True)
        self.token = secrets.token_hex(16) if token is None else token  # "": auth off
        self.port = free_port()
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self.extra_env = env or {}
        self.args = args or []
        self.unprivileged_files = unprivileged_files
        self.log_path = base / "jupyter.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_url}"

    @property
    def mcp_url(self) -> str:
        return self.url + "mcp"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"} if self.token else {}

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(self.base / "config"),
            JUPYTER_DATA_DIR=str(self.base / "data"),
            JUPYTER_RUNTIME_DIR=str(self.base / "runtime"),
            JUPYTER_PLATFORM_DIRS="1",
            PYTHONUNBUFFERED="1",
        )
        env.update(self.extra_env)
        return env

    def command_prefix(self) -> list[str]:
        if not self.unprivileged_files:
            return []
        if os.geteuid() != 0:
            raise RuntimeError("unprivileged_files drops root's file-permission override; this process is not root")
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise RuntimeError("unprivileged_files needs setpriv (util-linux)")
        return [setpriv, "--bounding-set=" + ",".join("-" + cap for cap in FILE_PERMISSION_OVERRIDES), "--"]

    def start(self, timeout: float = 60) -> LiveServer:
        cmd = [
            *self.command_prefix(), sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
            f"--port={self.port}", "--ip=127.0.0.1", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
            f"--ServerApp.base_url={self.base_url}", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            *self.args,
        ]
        self.log_file = open(self.log_path, "ab")
        # stdin is not a terminal, as under JupyterHub's spawner or a supervisor
        self.proc = subprocess.Popen(cmd, env=self.environment(), stdin=subprocess.DEVNULL, stdout=self.log_file,
                                     stderr=subprocess.STDOUT, cwd=self.base)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{self.log()}")
            try:
                r = httpx.post(self.mcp_url, headers=self.headers, timeout=2)
                if r.status_code == 400:  # routed and the MCP app is up
                    return self
                if r.status_code == 503:
                    self.stop()
                    raise RuntimeError(f"jupyter_mcp did not start: {r.text}\n{self.log()}")
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"jupyter lab did not come up in {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        code = end_process(self.proc, sig, timeout)
        self.log_file.close()
        return code

    def restart(self) -> LiveServer:
        self.stop()
        self.port = free_port()
        return self.start()


class StatusPoller:
    """``GET /api/status`` in a loop on a thread of its own: how long the server held each one."""

    def __init__(self, server: LiveServer) -> None:
        self.url, self.headers = server.url + "api/status", server.headers
        self.latencies: list[float] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        with httpx.Client(headers=self.headers, timeout=120) as http:
            while not self.stopping.is_set():
                start = time.perf_counter()
                response = http.get(self.url)
                self.latencies.append(time.perf_counter() - start)
                assert response.status_code == 200
                self.stopping.wait(0.005)

    def take(self) -> float:
        """The longest latency seen since the last take (seconds)."""
        seen, self.latencies = self.latencies, []
        return max(seen, default=0.0)

    def __enter__(self) -> StatusPoller:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(130)
