"""Run the check: (and run:) steps of charly files against a box, as ``charly check live`` does.

Every step of every file is validated first (checks/schema.py: charly's closed schema and its
parse rules); one problem and nothing runs. Then each check runs with charly's semantics:
its variables (``${HOME}``, ``${USER}``, ``${HOST_PORT:N}``, ``${CONTAINER_NAME}``, ...; a
step whose variable has no value is skipped, as charly skips it), its verb, what the verb
prints, ``exit_status`` and the stdout/stderr matchers (a scalar means equals; regexes are
searched without multi-line mode, as Go's are).

Where a step runs: ``http``, ``addr`` and ``mcp`` from this machine, against the box's published
ports, with no header (charly's verbs have none to send); ``command`` and ``file`` inside the
box through a ``Box`` (this machine with the box's HOME for the local box, ``podman exec``
for a container). ``mcp`` dials the box's own ``mcp_provide`` entry, rewritten to the
published port as charly's plugin does: a check that passes here passes under charly.
"""

from __future__ import annotations

import asyncio
import base64
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
from urllib.parse import urlsplit, urlunsplit

import yaml

from checks.schema import VAR_REF, Step, plan_steps, validate

MCP_TIMEOUT = 30.0  # charly's default for an mcp step without `timeout`


def duration(value: Any, default: float) -> float:
    """A Go duration ('5s', '90s', '500ms', '1m30s') in seconds."""
    if value is None:
        return default
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", str(value))
    return sum(float(n) * units[u] for n, u in parts) if parts else default


class Unresolved(Exception):
    """A variable with no value here: charly skips such a step."""


@dataclass
class Box:
    """Where command and file steps run, how the box's ports are reached, and what it provides."""

    home: str | None = None  # the box user's HOME; None: command/file steps are skipped
    user: str = field(default_factory=lambda: os.environ.get("USER", "root"))
    container: str | None = None  # a podman container name, or None for this machine
    ports: dict[int, int] = field(default_factory=dict)  # box port -> published port
    host: str = "127.0.0.1"
    env: dict[str, str] = field(default_factory=dict)  # the box's environment (ENV_* variables)
    ctx: str | None = None  # what /ctx means for run steps
    engine: str = "podman"
    mcp_provide: list[dict[str, Any]] = field(default_factory=list)  # the image's entries

    def variable(self, name: str, arg: str | None) -> str:
        if name == "HOME" and self.home:
            return self.home
        if name == "USER":
            return self.user
        if name == "CONTAINER_NAME" and self.container:
            return self.container
        if name == "HOST_PORT" and arg and arg.isdigit() and int(arg) in self.ports:
            return str(self.ports[int(arg)])
        if name.startswith("ENV_") and name[4:] in self.env:
            return self.env[name[4:]]
        raise Unresolved(f"${{{name}{':' + arg if arg else ''}}}")

    def substitute(self, value: Any) -> Any:
        """charly's variables in every string of a step's input; Unresolved names them all."""
        if isinstance(value, dict):
            return {k: self.substitute(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.substitute(v) for v in value]
        if not isinstance(value, str):
            return value
        missing: list[str] = []

        def one(match: re.Match[str]) -> str:
            try:
                return self.variable(match.group(1), match.group(2))
            except Unresolved as exc:
                missing.append(str(exc))
                return match.group(0)

        text = VAR_REF.sub(one, value)
        if missing:
            raise Unresolved(", ".join(missing))
        if self.host != "127.0.0.1":  # the box's ports are published on another address
            text = text.replace("127.0.0.1:", f"{self.host}:")
        return text

    def inside(self, command: str) -> str:
        """A command as it runs in the box. The local box publishes no ports (its service
        listens on the published one), so in-box addresses of a box port move with it."""
        if self.container is None:
            for port, published in self.ports.items():
                command = command.replace(f"127.0.0.1:{port}", f"127.0.0.1:{published}")
            if self.ctx:
                command = re.sub(r"(?<![\w/])/ctx(?=/|\b)", self.ctx, command)
        return command

    def shell(self, command: str, timeout: float, in_box: bool = True) -> subprocess.CompletedProcess[str]:
        if not in_box:
            return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout)
        if self.container is None:
            env = {**os.environ, **self.env, "HOME": self.home or os.environ["HOME"], "USER": self.user}
            return subprocess.run(["bash", "-c", self.inside(command)], capture_output=True, text=True,
                                  timeout=timeout, env=env)
        return subprocess.run([self.engine, "exec", self.container, "bash", "-c", command], capture_output=True,
                              text=True, timeout=timeout)

    def local_entries(self) -> list[dict[str, Any]]:
        """The box's mcp_provide entries as charly's mcp plugin sees them: the container name
        filled in, then made local (the box's own entries are reached at localhost)."""
        container = self.container or "localhost"
        return [{**e, "url": str(e["url"]).replace("{{.ContainerName}}", container).replace(container, "localhost"),
                 "transport": e.get("transport") or "http"} for e in self.mcp_provide]

    def mcp_endpoint(self, name: str | None) -> tuple[str, str]:
        """The URL and transport of the entry a step names (or the only one), its local address
        moved to the port published for it, as charly's mcp plugin dials it."""
        entries = self.local_entries()
        if not entries:
            raise CheckFailed("the box declares no mcp_provide")
        available = ", ".join(e["name"] for e in entries)
        if name:
            picked = [e for e in entries if e["name"] == name]
            if not picked:
                raise CheckFailed(f"no mcp_provides entry named {name!r} (available: {available})")
        elif len(entries) > 1:
            raise CheckFailed(f"image provides multiple mcp servers; use mcp_name (available: {available})")
        else:
            picked = entries
        url = urlsplit(picked[0]["url"])
        if url.hostname in (self.container, "localhost", "127.0.0.1"):
            if url.port not in self.ports:
                raise CheckFailed(f"container port {url.port} is not published to a host port")
            url = url._replace(netloc=f"{self.host}:{self.ports[url.port]}")
        return urlunsplit(url), picked[0]["transport"]

    def servers(self) -> str:
        """What charly's ``mcp: servers`` prints: the entries, made local, one per line."""
        return "\n".join(f"{e['name']}\t{e['url']}\t{e['transport']}" for e in self.local_entries())


class CheckFailed(Exception):
    pass


def match(stream: str, text: str, matchers: Any) -> None:
    """charly's matchers on a step's output: a scalar means equals, a map names one operation."""
    if matchers is None:
        return
    for matcher in matchers if isinstance(matchers, list) else [matchers]:
        kind, expected = next(iter(matcher.items())) if isinstance(matcher, dict) else ("equals", matcher)
        expected_all = expected if isinstance(expected, list) else [expected]
        for one in expected_all:
            ok, wanted = _match_one(kind, text, one)
            if not ok:
                shown = text if len(text) < 300 else text[:300] + "…"
                raise CheckFailed(f"{stream}: {wanted} (got: {shown!r})")


def _match_one(kind: str, text: str, expected: Any) -> tuple[bool, str]:
    value = str(expected).lower() if isinstance(expected, bool) else str(expected)
    trimmed = text.rstrip("\r\n")
    tests = {
        "equals": (lambda: trimmed == value, f"expected exactly {value!r}"),
        "not_equals": (lambda: trimmed != value, f"expected anything but {value!r}"),
        "contains": (lambda: value in text, f"expected to contain {value!r}"),
        "not_contains": (lambda: value not in text, f"expected not to contain {value!r}"),
        "matches": (lambda: re.search(value, text) is not None, f"expected to match /{value}/"),
        "not_matches": (lambda: re.search(value, text) is None, f"expected not to match /{value}/"),
        "lt": (lambda: float(trimmed) < float(value), f"expected < {value}"),
        "le": (lambda: float(trimmed) <= float(value), f"expected <= {value}"),
        "gt": (lambda: float(trimmed) > float(value), f"expected > {value}"),
        "ge": (lambda: float(trimmed) >= float(value), f"expected >= {value}"),
    }
    test, wanted = tests[kind]
    try:
        return test(), wanted
    except ValueError:
        return False, wanted + " (not a number)"


async def run_verb(verb: str | None, spec: dict[str, Any], box: Box, timeout: float) -> tuple[int, str, str]:
    """One attempt of a verb on its input (variables substituted): its exit status, stdout and
    stderr, as charly's verb gives them."""
    if verb == "command":
        in_box = spec.get("in_container", True) and not spec.get("from_host", False)
        done = await asyncio.to_thread(box.shell, spec["command"], timeout, in_box)
        return done.returncode, done.stdout, done.stderr
    if verb == "file":
        return await asyncio.to_thread(_file, spec, box, timeout)
    if verb == "addr":
        host, _, port = spec["addr"].rpartition(":")
        try:
            await asyncio.to_thread(lambda: socket.create_connection((host, int(port)), timeout=timeout).close())
            reachable = True
        except OSError:
            reachable = False
        if reachable != spec.get("reachable", True):
            return 1, "", f"{host}:{port} is {'' if reachable else 'not '}reachable"
        return 0, f"{host}:{port} reachable={reachable}", ""
    if verb == "http":
        return await _http(spec, timeout)
    if verb == "mcp":
        return await _mcp(spec, box, timeout)
    raise CheckFailed(f"this runner does not run the {verb!r} verb")


def _file(spec: dict[str, Any], box: Box, timeout: float) -> tuple[int, str, str]:
    path = spec["file"]
    done = box.shell(f"cat {shlex.quote(path)}", timeout)
    exists = done.returncode == 0
    if exists != spec.get("exists", True):
        return 1, "", f"{path} {'exists' if exists else 'does not exist'}"
    if exists and "contains" in spec:
        contains = spec["contains"]  # a bare scalar here means contains
        items = contains if isinstance(contains, list) else [contains]
        match(path, done.stdout, [i if isinstance(i, dict) else {"contains": i} for i in items])
    return 0, path, ""


async def _http(spec: dict[str, Any], timeout: float) -> tuple[int, str, str]:
    import httpx

    async with httpx.AsyncClient(timeout=timeout, verify=not spec.get("allow_insecure", False),
                                 follow_redirects=not spec.get("no_follow_redirects", False)) as http:
        response = await http.request(spec.get("method") or "GET", spec["http"], content=spec.get("request_body"))
    if "status" in spec and response.status_code != spec["status"]:
        return 1, "", f"status={response.status_code}, want {spec['status']}"
    match("body", response.text, spec.get("body"))
    match("headers", "".join(f"{k}: {v}\n" for k, v in response.headers.items()), spec.get("header"))
    return 0, f"status={response.status_code}", ""


async def _mcp(spec: dict[str, Any], box: Box, timeout: float) -> tuple[int, str, str]:
    """charly's mcp verb: a bare MCP client (no header) on the box's mcp_provide entry."""
    method = spec["method"]
    if method == "servers":
        return 0, box.servers(), ""
    url, transport = box.mcp_endpoint(spec.get("mcp_name"))
    try:
        return 0, await asyncio.wait_for(_mcp_method(url, transport, method, spec), timeout), ""
    except ToolError as exc:
        return 1, exc.args[0], f"tool {spec.get('tool')} reported an error"
    except Exception as exc:  # noqa: BLE001 - any failure to connect or answer is the step's stderr
        return 1, "", f"mcp {method}: {type(exc).__name__}: {exc}"


class ToolError(Exception):
    """A call answered with isError: its text is still printed."""


def _first_line(text: str | None) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")


async def _mcp_method(url: str, transport: str, method: str, spec: dict[str, Any]) -> str:
    from mcp import ClientSession
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    opener = sse_client(url) if transport == "sse" else streamable_http_client(url)
    async with opener as streams, ClientSession(streams[0], streams[1]) as client:
        await client.initialize()
        if method == "ping":
            await client.send_ping()
            return "ok"
        if method == "list-tools":
            return "\n".join(f"{t.name}\t{_first_line(t.description)}" for t in (await client.list_tools()).tools)
        if method == "list-resources":
            return "\n".join(f"{r.uri}\t{r.name}\t{r.mime_type or ''}" for r in (await client.list_resources()).resources)
        if method == "list-prompts":
            return "\n".join(f"{p.name}\t{_first_line(p.description)}" for p in (await client.list_prompts()).prompts)
        if method == "read":
            contents = (await client.read_resource(spec["uri"])).contents
            return "\n".join(getattr(c, "text", None) or f"[binary resource {c.uri}: {len(getattr(c, 'blob', ''))} bytes, "
                             f"mime {c.mime_type}]" for c in contents)
        arguments = json.loads(spec.get("input") or "{}")
        result = await client.call_tool(spec["tool"], arguments)
        out = "\n".join(_block(b) for b in result.content)
        if result.is_error:
            raise ToolError(out)
        return out


def _block(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return f"[{kind} content: {block.mime_type}, {len(base64.b64decode(block.data))} bytes]"  # Go decodes it
    return f"[non-text content: {type(block).__name__}]"


@dataclass
class Outcome:
    name: str
    source: str
    status: str  # ok | not ok | skip
    detail: str
    seconds: float


def verdict(step: Step, exit_code: int, stdout: str, stderr: str) -> str:
    """charly's verdict on one attempt: the exit status it wants, then the matchers."""
    want = step.op.get("exit_status", 0)
    if exit_code != want:
        raise CheckFailed(f"{step.verb}: exit={exit_code}, want {want} (stderr: {stderr.strip()[-400:]})")
    match("stdout", stdout, step.op.get("stdout"))
    match("stderr", stderr, step.op.get("stderr"))
    return (stdout.strip() or stderr.strip() or f"{step.verb}: exit={exit_code}").splitlines()[0][:120]


async def run_step(step: Step, box: Box, source: str) -> Outcome:
    if step.verb in ("command", "file") and box.container is None and box.home is None:
        return Outcome(step.prose, source, "skip", "needs the box's shell (--home or --container)", 0.0)
    try:
        spec = box.substitute(step.input)
    except Unresolved as exc:
        return Outcome(step.prose, source, "skip", f"unresolved variables: {exc}", 0.0)
    timeout = duration(step.op.get("timeout"), MCP_TIMEOUT)
    patience = duration(step.op.get("eventually"), 0.0)
    interval = duration(step.op.get("retry_interval"), 1.0)
    started = time.monotonic()
    while True:
        try:
            detail = verdict(step, *await run_verb(step.verb, spec, box, timeout))
            return Outcome(step.prose, source, "ok", detail, time.monotonic() - started)
        except Exception as exc:  # any failure of an attempt: retried while `eventually` allows
            if time.monotonic() - started + interval > patience:
                reason = str(exc) or type(exc).__name__
                return Outcome(step.prose, source, "not ok", reason, time.monotonic() - started)
            await asyncio.sleep(interval)


def load(files: list[Path]) -> list[tuple[Path, Any]]:
    """Every file, validated as charly validates before it runs anything: all problems at once."""
    documents = [(path, yaml.safe_load(path.read_text())) for path in files]
    problems = [p for path, doc in documents for p in validate(doc, _label(path))]
    if problems:
        raise SystemExit("charly would not load these files:\n" + "\n".join(f"  {p}" for p in problems))
    return documents


def runtime_checks(documents: list[tuple[Path, Any]]) -> list[tuple[str, Step]]:
    """The check steps ``charly check live`` runs: those whose context includes runtime."""
    return [(_label(path), step) for path, doc in documents for step in plan_steps(doc, _label(path))
            if step.intent == "check" and "runtime" in step.op.get("context", ["runtime"])]


async def check(files: list[Path], box: Box) -> list[Outcome]:
    documents = load(files)
    return [await run_step(step, box, source) for source, step in runtime_checks(documents)]


def apply(files: list[Path], box: Box) -> None:
    """Execute the run: steps (command verb) of charly files, in order; stop at the first failure."""
    for path, doc in load(files):
        for step in plan_steps(doc, _label(path)):
            if step.intent != "run":
                continue
            done = box.shell(step.input["command"], duration(step.op.get("timeout"), 900.0))
            if done.returncode != 0:
                raise SystemExit(f"run step failed: {step.prose}\n{done.stdout}\n{done.stderr}")
            print(f"ran: {step.prose}")


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
