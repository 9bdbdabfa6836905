"""Run the check: (and run:) steps of charly files against a box.

The steps are charly's (their shape: checks/charly.schema.json): a prose ``check:`` with one
verb (command, file, http, addr, mcp), matchers (equals, contains, matches, not_contains,
not_matches, lt/le/gt/ge), and the options timeout, eventually, retry_interval, context.
``${HOME}``, ``${USER}``, ``${HOST_PORT:N}`` and ``${CONTAINER_NAME}`` are substituted.

Where a step runs: http, addr and mcp from here, against the box's published ports;
command and file inside the box, through a ``Box`` (this machine with the box's HOME for
the local box, ``podman exec`` for a container). Run steps (``apply``) execute the same way,
with ``/ctx`` (charly's build context) mapped to a folder.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

VERBS = ("command", "file", "http", "addr", "mcp")
VAR = re.compile(r"\$\{(HOME|USER|CONTAINER_NAME|HOST_PORT(?::(\d+))?)\}")


def duration(value: Any, default: float) -> float:
    """'5s', '90s', '500ms', '2m' or a number of seconds."""
    if value is None:
        return default
    if isinstance(value, (int, float)):
        return float(value)
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", str(value).strip())
    if not match:
        raise ValueError(f"not a duration: {value!r}")
    number, unit = float(match.group(1)), match.group(2) or "s"
    return number / 1000 if unit == "ms" else number * 60 if unit == "m" else number


@dataclass
class Box:
    """Where command and file steps run, and how the box's ports are reached."""

    home: str | None = None  # the box user's HOME; None: command/file steps are skipped
    user: str = field(default_factory=lambda: os.environ.get("USER", "root"))
    container: str | None = None  # a podman container name, or None for this machine
    ports: dict[int, int] = field(default_factory=dict)  # box port -> published port
    host: str = "127.0.0.1"
    token: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    ctx: str | None = None  # what /ctx means for run steps
    engine: str = "podman"

    def substitute(self, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name == "HOME":
                return self.home or "~"
            if name == "USER":
                return self.user
            if name == "CONTAINER_NAME":
                return self.container or "localhost"
            port = int(match.group(2) or 8888)
            return str(self.ports.get(port, port))

        text = VAR.sub(one, text)
        if self.host != "127.0.0.1":  # steps address the box as charly does: from its host
            text = text.replace("127.0.0.1:", f"{self.host}:")
        if self.ctx and self.container is None:
            text = re.sub(r"(?<![\w/])/ctx(?=/|\b)", self.ctx, text)
        return text

    def inside(self, command: str) -> str:
        """A command as it runs in the box. The local box publishes no ports (its service
        listens on the published one), so in-box addresses of a box port move with it."""
        if self.container is None:
            for port, published in self.ports.items():
                command = command.replace(f"127.0.0.1:{port}", f"127.0.0.1:{published}")
        return command

    def shell(self, command: str, timeout: float) -> subprocess.CompletedProcess[str]:
        if self.container is None:
            env = {**os.environ, "HOME": self.home, "USER": self.user, **self.env}
            if self.token:
                env["JUPYTER_TOKEN"] = self.token
            return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout, env=env)
        args = [self.engine, "exec"]
        for key, value in ({**self.env, **({"JUPYTER_TOKEN": self.token} if self.token else {})}).items():
            args += ["-e", f"{key}={value}"]
        return subprocess.run([*args, self.container, "bash", "-c", command], capture_output=True, text=True,
                              timeout=timeout)

    def read(self, path: str, timeout: float) -> str | None:
        if self.container is None:
            return Path(path).read_text() if Path(path).exists() else None
        done = self.shell(f"cat {shlex.quote(path)}", timeout)
        return done.stdout if done.returncode == 0 else None


class CheckFailed(Exception):
    pass


def match(name: str, text: str, matchers: Any) -> None:
    """Apply charly matchers (a list of {kind: value}) to ``text``; raise on the first miss."""
    if matchers is None:
        return
    if isinstance(matchers, dict):
        matchers = [matchers]
    for matcher in matchers:
        for kind, expected in matcher.items():
            ok = {
                "equals": lambda: text.strip() == str(expected).strip(),
                "contains": lambda: str(expected) in text,
                "not_contains": lambda: str(expected) not in text,
                "matches": lambda: re.search(str(expected), text, re.M) is not None,
                "not_matches": lambda: re.search(str(expected), text, re.M) is None,
                "lt": lambda: float(text.strip()) < float(expected),
                "le": lambda: float(text.strip()) <= float(expected),
                "gt": lambda: float(text.strip()) > float(expected),
                "ge": lambda: float(text.strip()) >= float(expected),
            }.get(kind)
            if ok is None:
                raise CheckFailed(f"unknown matcher {kind!r}")
            if not ok():
                shown = text if len(text) < 300 else text[:300] + "…"
                raise CheckFailed(f"{name} does not satisfy {kind}: {expected!r} (got {shown!r})")


def verb_of(step: dict[str, Any]) -> str:
    verbs = [v for v in VERBS if v in step]
    if len(verbs) != 1:
        raise CheckFailed(f"a step needs exactly one verb of {', '.join(VERBS)}; found {verbs or 'none'}")
    return verbs[0]


async def run_verb(step: dict[str, Any], box: Box, timeout: float) -> str:
    """Run one attempt of a step; returns a short detail, raises CheckFailed."""
    verb = verb_of(step)
    spec = step[verb]
    if verb == "command":
        command = box.inside(box.substitute(str(spec)))
        done = await asyncio.to_thread(box.shell, command, timeout)
        expected = int(step.get("exit_status", 0))
        if done.returncode != expected:
            raise CheckFailed(f"exit status {done.returncode}, expected {expected}: {done.stderr.strip()[-300:]}")
        match("stdout", done.stdout, step.get("stdout"))
        match("stderr", done.stderr, step.get("stderr"))
        return f"exit {done.returncode}"
    if verb == "file":
        path = box.substitute(str(spec["file"]))
        content = await asyncio.to_thread(box.read, path, timeout)
        if spec.get("exists", True) is False:
            if content is not None:
                raise CheckFailed(f"{path} exists")
            return "absent"
        if content is None:
            raise CheckFailed(f"{path} does not exist")
        match(path, content, spec.get("contains"))
        return path
    if verb == "addr":
        host, _, port = box.substitute(str(spec["addr"])).rpartition(":")
        try:
            await asyncio.to_thread(lambda: socket.create_connection((host, int(port)), timeout=timeout).close())
            reachable = True
        except OSError:
            reachable = False
        if reachable != bool(spec.get("reachable", True)):
            raise CheckFailed(f"{host}:{port} is {'' if reachable else 'not '}reachable")
        return f"{host}:{port}"
    if verb == "http":
        return await _http(step, spec, box, timeout)
    return await _mcp(step, spec, box, timeout)


async def _http(step: dict[str, Any], spec: dict[str, Any], box: Box, timeout: float) -> str:
    import httpx

    url = box.substitute(str(spec["http"]))
    headers = {k: box.substitute(str(v)) for k, v in (spec.get("headers") or {}).items()}
    if box.token and "Authorization" not in headers:
        headers["Authorization"] = f"token {box.token}"  # an operator of the box, logged in
    async with httpx.AsyncClient(timeout=timeout) as http:
        response = await http.request(spec.get("method", "GET"), url, headers=headers,
                                      content=spec.get("request_body"))
    if "status" in spec and response.status_code != int(spec["status"]):
        raise CheckFailed(f"{url} answered {response.status_code}, expected {spec['status']}")
    match("body", response.text, spec.get("body"))
    return f"{response.status_code}"


async def _mcp(step: dict[str, Any], spec: dict[str, Any], box: Box, timeout: float) -> str:
    url = box.substitute(str(spec["mcp"]))
    method = spec.get("method", "ping")
    out = await asyncio.wait_for(_mcp_call(url, box.token, method, spec, step), timeout)
    match("stdout", out, step.get("stdout"))
    return method


async def _mcp_call(url: str, token: str | None, method: str, spec: dict[str, Any], step: dict[str, Any]) -> str:
    from jupyter_mcp.client import connect

    async with connect(url, token) as client:
        if method == "ping":
            await client.send_ping()
            info = client.server_info
            out = json.dumps({"ok": True, "server": info.name if info else None})
        elif method == "list-tools":
            tools = (await client.list_tools()).tools
            out = json.dumps([{"name": t.name, "description": t.description} for t in tools])
        elif method == "call":
            result = await client.call_tool(str(spec["tool"]), spec.get("input") or {})
            out = json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True))
            if result.is_error and not step.get("stdout"):
                raise CheckFailed(f"{spec['tool']} answered an error: {out[:300]}")
        else:
            raise CheckFailed(f"unknown mcp method {method!r} (ping, list-tools, call)")
    return out


@dataclass
class Outcome:
    name: str
    source: str
    status: str  # ok | not ok | skip
    detail: str
    seconds: float


async def run_step(step: dict[str, Any], box: Box, source: str) -> Outcome:
    name = str(step.get("check") or step.get("run"))
    verb = verb_of(step)
    if verb in ("command", "file") and box.container is None and box.home is None:
        return Outcome(name, source, "skip", "needs the box's shell (--home or --container)", 0.0)
    timeout = duration(step.get("timeout"), 30.0)
    patience = duration(step.get("eventually"), 0.0)
    interval = duration(step.get("retry_interval"), 1.0)
    started = time.monotonic()
    while True:
        try:
            detail = await run_verb(step, box, timeout)
            return Outcome(name, source, "ok", detail, time.monotonic() - started)
        except Exception as exc:  # any failure of an attempt: retried while `eventually` allows
            if time.monotonic() - started + interval > patience:
                reason = str(exc) or type(exc).__name__
                return Outcome(name, source, "not ok", reason, time.monotonic() - started)
            await asyncio.sleep(interval)


def steps_of(path: Path, kinds: tuple[str, ...] = ("check",)) -> list[dict[str, Any]]:
    """The plan steps of every candy in a charly file (or the top-level list of a check file)."""
    data = yaml.safe_load(path.read_text())
    plans: list[list[dict[str, Any]]] = []
    if isinstance(data, list):
        plans.append(data)
    else:
        for entry in (data or {}).values():
            if isinstance(entry, dict) and isinstance(entry.get("candy"), dict):
                plans.append(entry["candy"].get("plan") or [])
            elif isinstance(entry, dict) and isinstance(entry.get("plan"), list):
                plans.append(entry["plan"])
    return [s for plan in plans for s in plan if any(k in s for k in kinds)]


async def check(files: list[Path], box: Box) -> list[Outcome]:
    outcomes = []
    for path in files:
        for step in steps_of(path):
            outcomes.append(await run_step(step, box, _label(path)))
    return outcomes


def apply(files: list[Path], box: Box) -> None:
    """Execute the run: steps (command verb) of charly files, in order; stop at the first failure."""
    for path in files:
        for step in steps_of(path, ("run",)):
            command = box.substitute(str(step["command"]))
            done = box.shell(command, duration(step.get("timeout"), 900.0))
            if done.returncode != 0:
                raise SystemExit(f"run step failed: {step['run']}\n{done.stdout}\n{done.stderr}")
            print(f"ran: {step['run']}")


def tap(outcomes: list[Outcome]) -> str:
    lines = [f"1..{len(outcomes)}"]
    for i, o in enumerate(outcomes, 1):
        mark = "ok" if o.status == "ok" else "ok" if o.status == "skip" else "not ok"
        suffix = f" # SKIP {o.detail}" if o.status == "skip" else f" ({o.seconds:.1f}s)"
        lines.append(f"{mark} {i} - [{o.source}] {o.name}{suffix}")
        if o.status == "not ok":
            lines.append(f"  # {o.detail}")
    return "\n".join(lines)


def _label(path: Path) -> str:
    """A file's name as the report shows it: relative to the repository when it is in it."""
    root = Path(__file__).resolve().parent.parent
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return path.name
