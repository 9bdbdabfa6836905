"""The container box: built from the Containerfile with no network, run with its port on
127.0.0.1, every declarative check run against it, then removed. Where no engine can
run, the test is skipped with the reason (never passed silently)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from jupyter_mcp.testing import free_port, netns
from jupyter_mcp.testing.box import SIBLING, charly_mcp_servers, documented_tools, probe
from jupyter_mcp.testing.plugin import starts_process

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "localhost/jupyter-box:test"


def engine_problem(env) -> str | None:
    for tool in ("podman", "runc", "debootstrap"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/test installs podman, runc and debootstrap as root)"
    info = subprocess.run(["podman", "info"], capture_output=True, text=True, env=env)
    if info.returncode != 0:
        return f"podman cannot run here: {info.stderr.strip()[-300:]}"
    return None


@pytest.fixture(scope="module")
@starts_process
def container_box(tmp_path_factory):
    work = tmp_path_factory.mktemp("container")
    conf = work / "containers.conf"
    conf.write_text('[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
                    '[engine]\nruntime = "runc"\n')
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    problem = engine_problem(env)
    if problem:
        print(f"\nSKIPPED container box: {problem}")
        pytest.skip(problem)
    build = subprocess.run(["bash", str(ROOT / "scripts" / "box-image.sh"), IMAGE, str(work)], env=env,
                           capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, build.stderr + (work / "build.log").read_text(errors="replace")[-3000:]
    # The deployment's network, as charly makes its shared `charly` bridge (no DNS plugin here:
    # a sibling is told the box's address with --add-host, as charly's network DNS would).
    name, port, token = f"jupyter-box-{os.getpid()}", free_port(), "ctr-" + os.urandom(8).hex()
    network, subnet = f"jupyter-mcp-{os.getpid()}", f"10.214.{os.getpid() % 250}.0/24"
    (work / "token").write_text(token)  # a secret file, read by Jupyter itself (JUPYTER_TOKEN_FILE)
    subprocess.run(["podman", "rm", "-f", name], env=env, capture_output=True)
    subprocess.run(["podman", "network", "rm", "-f", network], env=env, capture_output=True)
    made = subprocess.run(["podman", "network", "create", "--subnet", subnet, network], env=env,
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    run = subprocess.run(["podman", "run", "-d", "--name", name, "--network", network, "-p", f"{port}:8888",
                          "-v", f"{work / 'token'}:/run/secrets/jupyter-token:ro",
                          "-e", "JUPYTER_TOKEN_FILE=/run/secrets/jupyter-token", IMAGE],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/status", headers={"Authorization": f"token {token}"},
                             timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                logs = subprocess.run(["podman", "logs", name], env=env, capture_output=True, text=True)
                raise AssertionError(f"the container box did not come up:\n{logs.stdout}{logs.stderr}")
            time.sleep(0.5)
        address = subprocess.run(["podman", "inspect", "--format",
                                  "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name],
                                 env=env, capture_output=True, text=True).stdout.strip()
        yield {"name": name, "port": port, "token": token, "env": env, "work": work, "network": network,
               "address": address}
    finally:
        subprocess.run(["podman", "rm", "-f", name], env=env, capture_output=True)
        subprocess.run(["podman", "network", "rm", "-f", network], env=env, capture_output=True)


def test_the_container_box_passes_every_check(container_box):
    """Every check of both charly files and checks/, as charly runs them from the host: no
    token, mcp steps on the box's mcp_provide entry at its published port."""
    box = container_box
    report = box["work"] / "report.json"
    done = subprocess.run([sys.executable, "-m", "checks", "check", "--url", f"http://127.0.0.1:{box['port']}",
                           "--container", box["name"], "--json", str(report)],
                          cwd=ROOT, env=box["env"], capture_output=True, text=True, timeout=600)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = json.loads(report.read_text())
    assert outcomes and all(o["status"] == "ok" for o in outcomes)  # none skipped: the shell steps ran inside


def test_the_build_used_no_network_and_the_candy_steps(container_box):
    """The build had no network (the Containerfile's first step writes the interfaces it
    sees to the build log: only loopback), and the candy's run steps ran in it."""
    log = (container_box["work"] / "build.log").read_text()
    seen = re.findall(r"^build network interfaces: (.*)$", log, re.M)
    assert seen, "the build log does not say which network the build had"
    assert [line.split() for line in seen] == [["lo"]], f"the build had a network: {seen}"
    assert "ran: install the runtime dependency" in log and "ran: enable the extension" in log
    containerfile = (ROOT / "Containerfile").read_text()
    service = yaml.safe_load((ROOT / "charly.yml").read_text())["jupyter"]["candy"]["service"][0]["exec"]
    assert service in containerfile  # the image runs the parent candy's own service command


def test_the_container_runs_as_a_user_with_the_workspace_volume(container_box):
    box = container_box
    who = subprocess.run(["podman", "exec", box["name"], "id", "-un"], env=box["env"], capture_output=True, text=True)
    assert who.stdout.strip() == "jovyan"
    inspect = subprocess.run(["podman", "inspect", box["name"]], env=box["env"], capture_output=True, text=True)
    mounts = json.loads(inspect.stdout)[0]["Mounts"]
    assert any(m["Destination"] == "/workspace" for m in mounts)


def test_a_sibling_container_connects_from_its_charly_mcp_servers_entry(container_box):
    """A sibling container on the deployment's network, given only CHARLY_MCP_SERVERS (the box's
    mcp_provide entry with its container name, as charly renders it) and no header: it lists
    every tool, runs notebook_list and runs code at the URL without /mcp as Open WebUI does."""
    box = container_box
    entry, = charly_mcp_servers(box["name"])
    assert entry["url"] == f"http://{box['name']}:8888/mcp"
    done = subprocess.run(["podman", "run", "--rm", "--network", box["network"], "--add-host",
                           f"{box['name']}:{box['address']}", "-e", f"CHARLY_MCP_SERVERS={json.dumps([entry])}",
                           "-v", f"{SIBLING}:/sibling.py:ro", IMAGE, "bash", "-c",
                           'exec "$HOME/.pixi/envs/default/bin/python" /sibling.py jupyter'],
                          env=box["env"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["server"] == "jupyter" and sorted(seen["tools"]) == documented_tools()
    assert not seen["notebook_list_error"] and "notebooks" in seen["notebook_list"] and seen["code_ran"] == "42\n"


def test_outside_the_deployment_the_token_is_needed(container_box):
    """From another network namespace, through the box's published port, a request without the
    token is refused; with the token from the box's JUPYTER_TOKEN_FILE it gets in."""
    problem = netns.problem()
    if problem:
        pytest.skip(problem)
    box = container_box
    with netns.outside_namespace() as outside:
        url = f"http://{outside.host}:{box['port']}/mcp"
        refused = probe(outside.run, url)
        assert refused["status"] == 403 and "token" in refused["body"]
        assert probe(outside.run, url, {"Authorization": f"token {box['token']}"})["status"] == 200
    logs = subprocess.run(["podman", "logs", box["name"]], env=box["env"], capture_output=True, text=True)
    assert f"{outside.address} let in without a token" not in logs.stdout + logs.stderr
