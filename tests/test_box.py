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
import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from jupyter_mcp.client import connect
from jupyter_mcp.testing import free_port

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
                               "--token", self.token, "--home", str(self.home), "--json", str(self.base / "report.json")],
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
def local_box(tmp_path_factory):
    box = LocalBox(tmp_path_factory.mktemp("box"))
    box.build()
    yield box
    box.stop()


def test_the_local_box_passes_every_check(local_box):
    done = local_box.checks()
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((local_box.base / "report.json").read_text())
    assert report and all(o["status"] == "ok" for o in report)
    sources = {o["source"] for o in report}
    assert {"candy/jupyter-mcp/charly.yml", "charly.yml", "checks/roundtrip.yml"} <= sources
    assert re.search(r"^ok \d+ - \[candy/jupyter-mcp/charly.yml\] the MCP server lists all 12 tools", done.stdout, re.M)


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
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump([{"check": "a tool that does not exist answers", "context": ["runtime"],
                                    "mcp": {"mcp": "http://127.0.0.1:${HOST_PORT:8888}/mcp", "method": "call",
                                            "tool": "no_such_tool", "input": {}}}]))
    done = local_box.checks(bad)
    assert done.returncode == 1 and "not ok 1" in done.stdout


def test_checks_run_by_hand_against_a_box_url(local_box):
    """The documented command, with only a URL and a token: shell steps are skipped, said so."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "check"), local_box.url, "--token", local_box.token],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# SKIP needs the box's shell" in done.stdout
    assert re.search(r"^ok \d+ - .*notebook_list answers", done.stdout, re.M)


def charly_mcp_servers(container_name: str) -> list[dict]:
    """CHARLY_MCP_SERVERS as charly renders it for a sibling of the jupyter box: each of the
    box's mcp_provide entries with its container's name filled in, and the box it came from."""
    box = yaml.safe_load((ROOT / "charly.yml").read_text())["jupyter"]["candy"]
    return [{**{k: str(v).replace("{{.ContainerName}}", container_name) for k, v in entry.items()},
             "source": "jupyter"} for entry in box["mcp_provide"]]


TRANSPORTS = {"http": streamable_http_client}  # an entry's transport: the SDK client that speaks it


async def test_a_sibling_connects_from_its_charly_mcp_servers_entry(local_box):
    """What the box promises a sibling service: from its CHARLY_MCP_SERVERS entry alone
    (name, url, transport), a plain MCP SDK client connects and lists every tool the candy
    checks for. The sibling's network is stood in for: the container's name and port in the
    entry's url are replaced by the address the local box is reachable at; nothing else of
    the url changes. The Jupyter token is given by hand: discovery does not carry it today
    (a later issue designs how siblings get it). What hermes or openwebui then do with the
    entry is theirs and not tested here."""
    entry, = charly_mcp_servers("charly-jupyter")
    assert entry["name"] == "jupyter" and entry["source"] == "jupyter"
    assert entry["transport"] in TRANSPORTS, f"no client here for transport {entry['transport']!r}"
    url = urlsplit(entry["url"])
    box = yaml.safe_load((ROOT / "charly.yml").read_text())["jupyter"]["candy"]
    assert url.hostname == "charly-jupyter" and url.port in box["port"]  # the container, on a port it publishes
    reachable = urlunsplit(url._replace(netloc=f"127.0.0.1:{local_box.port}"))
    async with httpx2.AsyncClient(headers={"Authorization": f"token {local_box.token}"}) as http, \
            Client(TRANSPORTS[entry["transport"]](reachable, http_client=http)) as client:
        listed = sorted(t.name for t in (await client.list_tools()).tools)
    plan = yaml.safe_load((ROOT / "candy" / "jupyter-mcp" / "charly.yml").read_text())["jupyter-mcp"]["candy"]["plan"]
    checked = next(s for s in plan if s.get("mcp", {}).get("method") == "list-tools")
    assert listed == sorted(m["contains"] for m in checked["stdout"])


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
