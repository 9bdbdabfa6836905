"""The box: the candy's run steps applied to a fresh parent environment (the local box),
every declarative check run against it, and a sibling's connection from its discovery entry."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
import yaml

from jupyter_mcp.client import connect
from jupyter_mcp.testing import free_port
from jupyter_mcp.testing.box import SIBLING, charly_mcp_servers, documented_tools, probe
from jupyter_mcp.testing.hermes import hermes_config, hermes_tool
from jupyter_mcp.testing.plugin import starts_process

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent


class LocalBox:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.token = "box-" + os.urandom(8).hex()

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def python(self) -> Path:
        return self.home / ".pixi" / "envs" / "default" / "bin" / "python"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def build(self) -> None:
        env = {**os.environ, "JUPYTER_TOKEN": self.token}
        subprocess.run(["bash", str(ROOT / "scripts" / "box-local.sh"), str(self.base), str(self.port)],
                       check=True, env=env, timeout=1200)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/api/status", headers={"Authorization": f"token {self.token}"},
                             timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.5)
        raise RuntimeError((self.base / "jupyter.log").read_text())

    def checks(self, *files: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.python), "-m", "checks", "check", *map(str, files), "--url", self.url,
                               "--home", str(self.home), "--json", str(self.base / "report.json")],
                              capture_output=True, text=True, timeout=600, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})

    def stop(self) -> None:
        pid_file = self.base / "pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="module")
@starts_process
def local_box(tmp_path_factory):
    box = LocalBox(tmp_path_factory.mktemp("box"))
    try:
        box.build()
        yield box
    finally:  # also when its server started but never answered
        box.stop()


def test_the_local_box_passes_every_check(local_box):
    """Every check of both charly files and checks/, run as charly runs them: no token is sent,
    and mcp steps dial the box's mcp_provide entry."""
    done = local_box.checks()
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((local_box.base / "report.json").read_text())
    assert report and all(o["status"] == "ok" for o in report)
    sources = {o["source"] for o in report}
    assert {"candy/jupyter-mcp/charly.yml", "charly.yml", "checks/roundtrip.yml"} <= sources
    assert re.search(r"^ok \d+ - \[candy/jupyter-mcp/charly.yml\] the MCP server lists all 23 tools", done.stdout, re.M)


def test_the_box_was_made_by_the_candys_own_steps(local_box):
    """The parent environment got fastmcp and jupyter-mcp, and the drop-in, from the run steps."""
    env = local_box.home / ".pixi" / "envs" / "default"
    dropin = env / "etc" / "jupyter" / "jupyter_server_config.d" / "jupyter_mcp.json"
    assert json.loads(dropin.read_text())["ServerApp"]["jpserver_extensions"]["jupyter_mcp"] is True
    out = subprocess.run([str(local_box.python), "-m", "pip", "show", "jupyter-mcp"], capture_output=True, text=True)
    assert "Location:" in out.stdout and str(env) in out.stdout  # a real install, not this checkout
    again = subprocess.run(["bash", str(ROOT / "scripts" / "enable-extension.sh"), str(local_box.python)])
    assert again.returncode == 0  # idempotent


def test_a_failing_check_fails_the_run(local_box, tmp_path):
    """A tool that answers isError fails its step, as charly's mcp verb does (exit 1, want 0)."""
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump([{"check": "a tool that does not exist answers", "context": ["runtime"],
                                    "mcp": {"method": "call", "tool": "no_such_tool", "input": "{}"}}]))
    done = local_box.checks(bad)
    assert done.returncode == 2 and "not ok 1" in done.stdout
    assert "mcp: exit=1, want 0" in done.stdout


def test_an_invalid_file_runs_nothing(local_box, tmp_path):
    """charly validates every step before it runs any: today's old mcp form is refused, and the
    valid step before it does not run."""
    marker = tmp_path / "ran"
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump([
        {"check": "would leave a mark", "context": ["runtime"], "command": {"command": f"touch {marker}",
                                                                             "from_host": True}},
        {"check": "the old form", "context": ["runtime"], "mcp": {"mcp": "http://127.0.0.1:8888/mcp", "method": "ping"}}]))
    done = local_box.checks(bad)
    assert done.returncode == 1 and "charly would not load these files" in done.stderr
    assert "field not allowed" in done.stderr and not marker.exists()


def test_checks_run_by_hand_against_a_box_url(local_box):
    """The documented command, with only a URL: shell steps are skipped, said so."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "check"), local_box.url],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# SKIP needs the box's shell" in done.stdout
    assert re.search(r"^ok \d+ - .*notebook_list answers", done.stdout, re.M)


def test_a_sibling_connects_from_its_charly_mcp_servers_entry(local_box):
    """A sibling knows only its CHARLY_MCP_SERVERS entry (name, url, transport) and sends no
    header: it lists every tool, runs notebook_list and runs code at the URL without /mcp as Open WebUI does.
    On this machine the entry's container name is the local box's address (the local box's
    deployment is this machine's loopback); the container test does it across a network."""
    entry, = charly_mcp_servers("charly-jupyter")
    assert entry == {"name": "jupyter", "url": "http://charly-jupyter:8888/mcp", "transport": "http",
                     "source": "jupyter"}
    entry["url"] = urlunsplit(urlsplit(entry["url"])._replace(netloc=f"127.0.0.1:{local_box.port}"))
    done = subprocess.run([str(local_box.python), str(SIBLING), "jupyter"], capture_output=True, text=True,
                          timeout=120, env={"PATH": os.environ["PATH"], "CHARLY_MCP_SERVERS": json.dumps([entry])})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["server"] == "jupyter" and sorted(seen["tools"]) == documented_tools()
    assert not seen["notebook_list_error"] and "notebooks" in seen["notebook_list"] and seen["code_ran"] == "42\n"


def test_hermes_finds_every_tool_from_its_charly_mcp_servers_entry(local_box, tmp_path):
    """The real hermes (hermes-agent from PyPI), configured from CHARLY_MCP_SERVERS as charly's
    hermes box does it (a name and a URL, no header): `hermes mcp test jupyter` connects and
    discovers every tool. (Calling one needs hermes's model loop, so the call is proven by the
    generic sibling above.)"""
    entry, = charly_mcp_servers("charly-jupyter")
    entry["url"] = urlunsplit(urlsplit(entry["url"])._replace(netloc=f"127.0.0.1:{local_box.port}"))
    (tmp_path / "config.yaml").write_text(hermes_config([entry]))
    done = subprocess.run([str(hermes_tool(ROOT / "build" / "hermes")), "mcp", "test", "jupyter"], capture_output=True,
                          text=True, timeout=180, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path),
                                                       "HERMES_HOME": str(tmp_path), "NO_COLOR": "1"})
    out = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    assert "Auth: none" in out and f"Tools discovered: {len(documented_tools())}" in out, out
    assert all(re.search(rf"^\s+{tool}\s", out, re.M) for tool in documented_tools()), out


def on_this_machine(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60)


def test_outside_the_deployment_the_token_is_needed(local_box, outside):
    """From another network namespace (another machine, as the box sees it) a request without
    the token is refused and changes nothing; with the token it gets in. A browser's request
    from the box's own machine needs the token too, and so does a wrong token."""
    url = f"http://{outside.host}:{local_box.port}/mcp"
    refused = probe(outside.run, url)
    assert refused["status"] == 403 and "token" in refused["body"]
    assert probe(outside.run, url, {"Authorization": f"token {local_box.token}"})["status"] == 200
    assert f"{outside.address} let in without a token" not in (local_box.base / "jupyter.log").read_text()
    here = f"{local_box.url}/mcp"
    assert probe(on_this_machine, here)["status"] == 200  # the deployment: this machine's loopback
    assert probe(on_this_machine, here, {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"})["status"] == 403
    assert probe(on_this_machine, here, {"Authorization": "token wrong"})["status"] == 403


async def test_claude_code_mcp_json_connects(local_box):
    """.mcp.json registers `jupyter` (type http, the URL, the token header from the environment)."""
    spec = json.loads((ROOT / ".mcp.json").read_text())["mcpServers"]["jupyter"]
    assert spec["type"] == "http"
    env = {"JUPYTER_TOKEN": local_box.token, "JUPYTER_MCP_URL": f"{local_box.url}/mcp"}

    def expand(text: str) -> str:  # Claude Code's ${VAR} and ${VAR:-default}
        return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(m.group(1), m.group(2) or ""), text)

    url, headers = expand(spec["url"]), {k: expand(v) for k, v in spec["headers"].items()}
    assert headers == {"Authorization": f"token {local_box.token}"}
    scheme, token = headers["Authorization"].split(" ", 1)
    assert scheme == "token"
    async with connect(url, token) as client:
        assert "cell_execute" in [t.name for t in (await client.list_tools()).tools]
