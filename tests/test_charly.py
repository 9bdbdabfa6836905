"""The charly files follow charly's format, as checks/charly.schema.json states it (closed
keys, CalVer, one verb per step, only charly's templates), and a broken copy fails."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "checks" / "charly.schema.json").read_text())
CANDY = ROOT / "candy" / "jupyter-mcp" / "charly.yml"
PROJECT = ROOT / "charly.yml"
CHECK_FILES = sorted((ROOT / "checks").glob("*.yml"))


def errors(document) -> list[str]:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def check_file_errors(steps) -> list[str]:
    schema = {**SCHEMA, "type": "array", "items": {"$ref": "#/$defs/step"}}
    schema.pop("properties"), schema.pop("additionalProperties"), schema.pop("propertyNames")
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(steps)]


def load(path: Path):
    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize("path", [CANDY, PROJECT], ids=["candy", "project"])
def test_charly_files_validate(path):
    assert errors(load(path)) == []


@pytest.mark.parametrize("path", CHECK_FILES, ids=[p.name for p in CHECK_FILES])
def test_check_files_validate(path):
    assert check_file_errors(load(path)) == []


def test_the_box_composes_the_candy_and_publishes_the_jupyter_server():
    box = load(PROJECT)["jupyter"]["candy"]
    assert box["candy"] == ["jupyter-mcp"] and (ROOT / "candy" / "jupyter-mcp" / "charly.yml").exists()
    assert box["env"] == {"MCP_SERVER_NAME": "jupyter"} and box["port"] == [8888]
    assert {"name": "workspace", "path": "/workspace"} in box["volume"]
    provided = box["mcp_provide"]
    assert provided == [{"name": "jupyter", "url": "http://{{.ContainerName}}:8888/mcp", "transport": "http"}]
    names = [p["name"] for p in provided]
    assert len(names) == len(set(names))
    assert any(s.get("enable") and "jupyter lab" in s["exec"] for s in box["service"])


def test_the_candy_checks_imports_drop_in_routing_ping_every_tool_and_a_call():
    """What the README says the candy checks after its install steps, and that its run steps
    are the install scripts in scripts/."""
    plan = load(CANDY)["jupyter-mcp"]["candy"]["plan"]
    checks = [s for s in plan if "check" in s]
    verbs = [next(v for v in ("command", "file", "http", "addr", "mcp") if v in s) for s in checks]
    assert verbs.count("command") >= 2 and "file" in verbs and "http" in verbs
    methods = [s["mcp"]["method"] for s in checks if "mcp" in s]
    assert {"ping", "list-tools", "call"} <= set(methods)
    listed = next(s for s in checks if s.get("mcp", {}).get("method") == "list-tools")
    tools = [m["contains"] for m in listed["stdout"]]
    documented = re.findall(r"^## `(\w+)`", (ROOT / "docs" / "tools.md").read_text(), re.M)
    assert sorted(tools) == sorted(documented) and len(tools) == 12  # every tool, each once
    assert f"all {len(tools)} tools" in listed["check"]
    runs = [s["command"] for s in plan if "run" in s]
    assert [r.split()[1] for r in runs] == ["/ctx/scripts/install-runtime.sh", "/ctx/scripts/install-extension.sh",
                                           "/ctx/scripts/enable-extension.sh"]
    for run in runs:  # every run step is one of the install scripts: one source for all boxes
        assert (ROOT / run.split()[1].removeprefix("/ctx/")).exists()


def test_runtime_requirements_match_pyproject():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted = [ln.strip() for ln in (ROOT / "scripts" / "runtime-requirements.txt").read_text().splitlines()
              if ln.strip() and not ln.startswith("#")]
    for requirement in wanted:
        assert requirement in deps


BROKEN = {
    "a typo in a key": lambda d: d["jupyter-mcp"]["candy"]["plan"][0].update({"comand": "x"}),
    "an unknown candy key": lambda d: d["jupyter-mcp"]["candy"].update({"services": []}),
    "a version that is not CalVer": lambda d: d["jupyter-mcp"]["candy"].update({"version": "1.2.3"}),
    "an empty description": lambda d: d["jupyter-mcp"]["candy"].update({"description": "  "}),
    "no description": lambda d: d["jupyter-mcp"]["candy"].pop("description"),
    "two verbs in one step": lambda d: d["jupyter-mcp"]["candy"]["plan"][3].update({"file": {"file": "/x"}}),
    "two prose keys in one step": lambda d: d["jupyter-mcp"]["candy"]["plan"][3].update({"run": "and run"}),
    "a step with no prose key": lambda d: d["jupyter-mcp"]["candy"]["plan"][3].pop("check"),
    "a bash default in a template": lambda d: d["jupyter-mcp"]["candy"]["plan"][0].update(
        {"command": "bash ${HOME:-/root}/x"}),
    "an unknown template variable": lambda d: d["jupyter-mcp"]["candy"]["plan"][0].update(
        {"command": "bash ${PWD}/x"}),
    "an install verb on a check": lambda d: d["jupyter-mcp"]["candy"]["plan"][3].update({"mkdir": "/x"}),
    "an unknown context": lambda d: d["jupyter-mcp"]["candy"]["plan"][6].update({"context": ["live"]}),
    "PATH in env": lambda d: d["jupyter-mcp"]["candy"].update({"env": {"PATH": "/x"}}),
    "a bad duration": lambda d: d["jupyter-mcp"]["candy"]["plan"][6].update({"timeout": "5 seconds"}),
    "an unknown mcp method": lambda d: d["jupyter-mcp"]["candy"]["plan"][7]["mcp"].update({"method": "tools"}),
}


@pytest.mark.parametrize("what", list(BROKEN))
def test_a_broken_copy_fails(what):
    broken = copy.deepcopy(load(CANDY))
    BROKEN[what](broken)
    assert errors(broken), f"the schema accepted {what}"


def test_a_broken_box_fails():
    broken = copy.deepcopy(load(PROJECT))
    broken["jupyter"]["candy"]["mcp_provide"][0]["url"] = "http://{{.Hostname}}:8888/mcp"
    assert errors(broken)
    broken = copy.deepcopy(load(PROJECT))
    broken["jupyter"]["candy"]["mcp_provide"][0]["transport"] = "websocket"
    assert errors(broken)


def test_calver_is_today_shaped():
    version = load(CANDY)["jupyter-mcp"]["candy"]["version"]
    year, day, hhmm = version.split(".")
    assert 2024 <= int(year) and 1 <= int(day) <= 366 and int(hhmm[:-2]) < 24 and int(hhmm[-2:]) < 60
    assert re.fullmatch(r"\d{4}\.\d{1,3}\.\d{3,4}", version)
