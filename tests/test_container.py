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

from jupyter_mcp.testing import free_port

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
    name, port, token = f"jupyter-box-{os.getpid()}", free_port(), "ctr-" + os.urandom(8).hex()
    subprocess.run(["podman", "rm", "-f", name], env=env, capture_output=True)
    run = subprocess.run(["podman", "run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8888",
                          "-e", f"JUPYTER_TOKEN={token}", IMAGE], env=env, capture_output=True, text=True)
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
        yield {"name": name, "port": port, "token": token, "env": env, "work": work}
    finally:
        subprocess.run(["podman", "rm", "-f", name], env=env, capture_output=True)


def test_the_container_box_passes_every_check(container_box):
    box = container_box
    report = box["work"] / "report.json"
    done = subprocess.run([sys.executable, "-m", "checks", "check", "--url", f"http://127.0.0.1:{box['port']}",
                           "--token", box["token"], "--container", box["name"], "--json", str(report)],
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
