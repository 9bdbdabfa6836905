"""The charly files are valid as charly validates them (checks/schema.py with
checks/charly.schema.json: closed CUE schemas, the step desugaring, the one-verb rule, the
verbs' closed inputs, the variable rules), and each kind of mistake is refused with a message
that says where it is and what is wrong."""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from checks.schema import DEFS, PRIMARY, SchemaError, desugar, plan_steps, validate

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
CANDY = ROOT / "candy" / "jupyter-mcp" / "charly.yml"
PROJECT = ROOT / "charly.yml"
ROUNDTRIP = ROOT / "checks" / "roundtrip.yml"


def load(path: Path):
    return yaml.safe_load(path.read_text())


def label(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", [PROJECT, CANDY, ROUNDTRIP], ids=["project", "candy", "roundtrip"])
def test_charly_files_validate(path):
    assert validate(load(path), label(path)) == []


def test_every_known_verb_has_its_closed_input_def():
    assert all(f"{verb.title()}Input" in DEFS for verb in PRIMARY)


def test_sugar_forms_desugar_as_charly_does():
    steps = plan_steps([
        {"check": "ping", "mcp": "ping", "context": ["runtime"]},
        {"check": "call", "mcp": {"method": "call", "tool": "t", "input": "{}"}},
        {"check": "http", "http": "http://127.0.0.1:8888/api", "timeout": "5s"},
        {"run": "install", "command": "echo hi", "run_as": "${USER}"},
        {"check": "servers", "mcp": None},
        {"run": "make a dir", "mkdir": "/x"},
        {"agent-check": "look at it"},
    ], "f.yml")
    assert [(s.intent, s.prose, s.verb, s.input) for s in steps] == [
        ("check", "ping", "mcp", {"method": "ping"}),
        ("check", "call", "mcp", {"method": "call", "tool": "t", "input": "{}"}),
        ("check", "http", "http", {"http": "http://127.0.0.1:8888/api"}),
        ("run", "install", "command", {"command": "echo hi"}),
        ("check", "servers", "mcp", {}),
        ("run", "make a dir", "mkdir", {}),
        ("agent-check", "look at it", None, {}),
    ]
    assert steps[0].op == {"context": ["runtime"]} and steps[2].op == {"timeout": "5s"}
    assert steps[3].op == {"run_as": "${USER}"} and steps[5].op == {"mkdir": "/x"}
    assert steps[1].where == "f.yml: plan[1]"
    candy = plan_steps(load(CANDY), "candy.yml")
    assert candy[7].where == 'candy.yml: node "jupyter-mcp" plan[7]' and candy[7].input == {"method": "ping"}


def test_desugar_refuses_what_charly_parse_refuses():
    with pytest.raises(SchemaError, match=r'node "n": plan\[2\] has multiple intent keywords'):
        desugar({"check": "a", "run": "b", "command": "x"}, "n", 2)
    with pytest.raises(SchemaError, match=r'plan\[0\] authors "plugin" — the plugin envelope is internal-only'):
        desugar({"check": "a", "plugin": "mcp"}, "n", 0)
    with pytest.raises(SchemaError, match=r"plan\[0\] must be a mapping step"):
        desugar("check: a", "n", 0)
    with pytest.raises(SchemaError, match=r'^f.yml: plan\[1\] has no intent keyword'):
        plan_steps([{"check": "a", "command": "true"}, {"command": "true"}], "f.yml")


def candy(d):
    return d["jupyter-mcp"]["candy"]


def plan(d):
    return candy(d)["plan"]


def box(d):
    return d["jupyter"]["candy"]


C, P, R = "candy/jupyter-mcp/charly.yml", "charly.yml", "checks/roundtrip.yml"
STEP = 'candy/jupyter-mcp/charly.yml: node "jupyter-mcp" plan'  # where a step is
PARSE = 'candy/jupyter-mcp/charly.yml: node "jupyter-mcp": plan'  # charly's parse errors say it so
TOKEN_CHECK = 'curl -s -H "Authorization: token ${JUPYTER_TOKEN:-x}" http://127.0.0.1:8888/api'
BROKEN = {  # what is wrong: (file, how to break it, a fragment of the message)
    "an unknown candy key": (C, lambda d: candy(d).update(services=[]),
                             f'{C}: candy "jupyter-mcp": services: field not allowed'),
    "a typo next to a verb": (C, lambda d: plan(d)[3].update(comand="x"),
                              f"{PARSE}[3] carries multiple non-#Op keys (comand, command) — a step takes at most "
                              "ONE plugin-verb sugar key"),
    "a typo'd verb with a map": (C, lambda d: plan(d)[9].update(mpc=plan(d)[9].pop("mcp")),
                                 f'{STEP}[9]: no provider registered for plugin verb "mpc"'),
    "a typo'd verb with a scalar": (C, lambda d: plan(d)[3].update(comand=plan(d)[3].pop("command")),
                                    f'{PARSE}[3] plugin verb "comand" takes a MAP input'),
    "timeout as an int": (C, lambda d: plan(d)[6].update(timeout=5),
                          f"{STEP}[6]: timeout: conflicting values 5 and string (mismatched types int and string)"),
    "a bad duration": (C, lambda d: plan(d)[6].update(timeout="5 seconds"),
                       f'{STEP}[6]: timeout: invalid value "5 seconds" (out of bound =~'),
    "exit_status as a string": (C, lambda d: plan(d)[3].update(exit_status="0"),
                                f'{STEP}[3]: exit_status: conflicting values "0" and int'),
    "an unknown context": (C, lambda d: plan(d)[6].update(context=["live"]),
                           f'{STEP}[6]: context.0: conflicting values "live" and "build" | "deploy" | "runtime"'),
    "a port as a bare string": (P, lambda d: box(d).update(port=["8888"]),
                                'charly.yml: candy "jupyter": port.0: invalid value "8888" (out of bound '
                                '=~"^[a-z+-]+:[0-9]+$")'),
    "a URL field on mcp (the old form)": (C, lambda d: plan(d)[7].update(mcp={"mcp": "http://x/mcp", "method": "ping"}),
                                          f"{STEP}[7]: plugin verb:mcp: plugin_input fails #McpInput: mcp: "
                                          "field not allowed"),
    "mcp input as a map": (C, lambda d: plan(d)[9]["mcp"].update(input={"path": "x.ipynb"}),
                           "plugin_input fails #McpInput: input: conflicting values {...} and string"),
    "mcp input that is not JSON": (C, lambda d: plan(d)[9]["mcp"].update(input="{path: x}"),
                                   f"{STEP}[9]: mcp: call: parsing tool arguments as JSON"),
    "mcp input that is not a JSON object": (C, lambda d: plan(d)[9]["mcp"].update(input="[1]"),
                                            "mcp: call: tool arguments must be a JSON object, got list"),
    "an unknown mcp method": (C, lambda d: plan(d)[8].update(mcp="tools"),
                              'plugin_input fails #McpInput: method: conflicting values "tools" and "ping"'),
    "call with no tool": (C, lambda d: plan(d)[9]["mcp"].pop("tool"),
                          f"{STEP}[9]: mcp: call: missing required modifier(s): tool"),
    "read with no uri": (C, lambda d: plan(d)[9].update(mcp={"method": "read"}),
                         "mcp: read: missing required modifier(s): uri"),
    "request headers on http": (C, lambda d: plan(d)[6]["http"].update(headers={"Authorization": "token x"}),
                                "plugin_input fails #HttpInput: headers: field not allowed"),
    "a request-header field on http": (C, lambda d: plan(d)[6]["http"].update(request_header=["A: b"]),
                                       "plugin_input fails #HttpInput: request_header: field not allowed"),
    "an http body given as a request": (C, lambda d: plan(d)[6]["http"].update(body={"jsonrpc": "2.0", "id": 1}),
                                        "plugin_input fails #HttpInput: body: a matcher map takes exactly one "
                                        "operator"),
    "a matcher with a typo'd operator": (C, lambda d: plan(d)[4].update(stdout=[{"match": "x"}]),
                                         f"{STEP}[4]: stdout.0.match: field not allowed"),
    "two verbs in one step": (C, lambda d: plan(d)[3].update(file={"file": "/x"}),
                              f"{PARSE}[3] carries multiple non-#Op keys (command, file)"),
    "an install verb and a plugin verb": (C, lambda d: plan(d)[3].update(mkdir="/x"),
                                          "(check): check has multiple verbs set (mkdir, plugin)"),
    "two prose keys": (C, lambda d: plan(d)[3].update(run="and run"),
                       f"{PARSE}[3] has multiple intent keywords — a step has exactly one"),
    "no prose key": (C, lambda d: plan(d)[3].pop("check"),
                     f"{PARSE}[3] has no intent keyword (run/check/agent-run/agent-check/include)"),
    "empty prose": (C, lambda d: plan(d)[3].update(check=""),
                    f'{STEP}[3]: check: invalid value "" (out of bound !="")'),
    "a check with no verb": (C, lambda d: plan(d)[3].pop("command"), "(check): check has no verb set"),
    "an agent-check with a verb": (C, lambda d: plan(d)[10].update(command="true"),
                                   f"{STEP}[10]: (agent-check): agent steps must not carry an Op verb"),
    "an authored plugin envelope": (C, lambda d: plan(d)[3].update(plugin="command"),
                                    f'{PARSE}[3] authors "plugin" — the plugin envelope is internal-only'),
    "PATH in env": (C, lambda d: candy(d).update(env={"PATH": "/x"}),
                    'candy "jupyter-mcp": env.PATH: field not allowed'),
    "a version that is not CalVer": (C, lambda d: candy(d).update(version="1.2.3"),
                                     'candy "jupyter-mcp": version: invalid value "1.2.3" (out of bound =~'),
    "an empty description": (C, lambda d: candy(d).update(description=""),
                             'candy "jupyter-mcp": description: invalid value "" (out of bound !="")'),
    "a blank description": (C, lambda d: candy(d).update(description="  "),
                            'candy "jupyter-mcp": missing required `description:` string'),
    "no description": (C, lambda d: candy(d).pop("description"),
                       'candy "jupyter-mcp": description: field is required but not present'),
    "no check step": (C, lambda d: candy(d).update(plan=[s for s in plan(d) if "check" not in s]),
                      "`plan:` must contain at least one `check:` step"),
    "a project: key": (P, lambda d: d.update(project={"name": "jupyter-mcp", "candies": ["candy/jupyter-mcp"]}),
                       'charly.yml: node "project": no kind discriminator (its keys: name, candies)'),
    "a child next to the candy": (P, lambda d: d["jupyter"].update(plan=[]),
                                  'node "jupyter" (kind "candy"): child "plan" is not allowed'),
    "duplicate mcp_provide names": (P, lambda d: box(d)["mcp_provide"].append(dict(box(d)["mcp_provide"][0])),
                                    'charly.yml: candy jupyter: mcp_provides has duplicate name "jupyter"'),
    "an unknown url template": (P, lambda d: box(d)["mcp_provide"][0].update(url="http://{{.Hostname}}:8888/mcp"),
                                "mcp_provides[jupyter] url contains unknown or malformed template variable"),
    "transport websocket": (P, lambda d: box(d)["mcp_provide"][0].update(transport="websocket"),
                            'candy "jupyter": mcp_provide.0.transport: conflicting values "websocket" and "http"'),
    "a header field on mcp_provide": (P, lambda d: box(d)["mcp_provide"][0].update(headers={"A": "b"}),
                                   'candy "jupyter": mcp_provide.0.headers: field not allowed'),
    "service restart sometimes": (P, lambda d: box(d)["service"][0].update(restart="sometimes"),
                                  'candy "jupyter": service.0.restart: conflicting values "sometimes" and "no"'),
    "a service with no exec": (P, lambda d: box(d)["service"][0].pop("exec"),
                               'candy "jupyter": service.0: exactly one of exec, use_packaged is required'),
    "a runtime-only variable in build scope": (C, lambda d: plan(d)[6].pop("context"),
                                               f"{STEP}[6]: references runtime-only variable ${{HOST_PORT:8888}} "
                                               "but scope is build"),
    "a bash default in a check command": (C, lambda d: plan(d)[3].update(command=TOKEN_CHECK),
                                          f"{STEP}[3]: unresolved variable ${{JUPYTER_TOKEN:-x}} (charly would "
                                          "skip this step)"),
    "an unknown variable in a check": (C, lambda d: plan(d)[5]["file"].update(file="${PWD}/x"),
                                       "unresolved variable ${PWD}"),
    "an invalid run_as": (C, lambda d: plan(d)[0].update(run_as="Jupyter User"), 'user: "Jupyter User" is not valid'),
    "a check file step with the old mcp form": (R, lambda d: d[1]["mcp"].update(mcp="http://127.0.0.1:8888/mcp"),
                                                "checks/roundtrip.yml: plan[1]: plugin verb:mcp: plugin_input fails "
                                                "#McpInput: mcp: field not allowed"),
}


@pytest.mark.parametrize("what", list(BROKEN))
def test_a_broken_copy_is_refused_with_charlys_message(what):
    source, breaks, expected = BROKEN[what]
    document = copy.deepcopy(load(ROOT / source))
    breaks(document)
    problems = validate(document, source)
    assert any(expected in p for p in problems), f"{what}: expected {expected!r} in {problems}"
    assert all(p.startswith(f"{source}: ") for p in problems)


def test_run_step_commands_may_use_shell_variables():
    """A run step's command goes to a shell, so its ${VAR:-x} is the shell's business."""
    steps = [{"run": "install", "command": 'bash -c "echo ${TOKEN:-none}"'}, {"check": "ok", "command": "true"}]
    assert validate(steps, "f.yml") == []


def test_the_box_composes_the_candy_and_publishes_the_jupyter_server():
    project = load(PROJECT)
    box_candy = box(project)
    assert box_candy["candy"] == ["jupyter-mcp"] and "jupyter-mcp" in load(CANDY)
    assert box_candy["port"] == [8888] and {"name": "workspace", "path": "/workspace"} in box_candy["volume"]
    assert box_candy["mcp_provide"] == [{"name": "jupyter", "url": "http://{{.ContainerName}}:8888/mcp",
                                         "transport": "http"}]
    assert "plugin-mcp" in box_candy["require"] and "plugin-mcp" in candy(load(CANDY))["require"]


def test_the_list_tools_check_names_every_documented_tool_once_and_no_room_management_tool():
    steps = plan_steps(load(CANDY), label(CANDY))
    listed = next(s for s in steps if s.verb == "mcp" and s.input.get("method") == "list-tools")
    matchers = listed.op["stdout"]
    named = [re.fullmatch(r"\(\^\|\\n\)(\w+)\\t", x["matches"]) for x in matchers if "matches" in x]
    tools = [m[1] for m in named if m]
    documented = re.findall(r"^## `(\w+)`", (ROOT / "docs" / "tools.md").read_text(), re.M)
    assert sorted(tools) == sorted(documented) and len(tools) == len(set(tools))
    assert f"all {len(documented)} tools" in listed.prose
    assert any(x.get("matches", "").endswith("{%d}$" % (len(documented) - 1)) for x in matchers)  # no other tool
    refused = [x["not_matches"] for x in matchers if "not_matches" in x]
    assert any(re.search(r"room_\((open\|close\|pick)", r) for r in refused)


def test_the_run_steps_are_the_install_scripts():
    runs = [s.input["command"].split() for s in plan_steps(load(CANDY), label(CANDY)) if s.intent == "run"]
    scripts = [r[1] for r in runs]
    assert scripts == ["/ctx/scripts/install-runtime.sh", "/ctx/scripts/install-extension.sh",
                       "/ctx/scripts/enable-extension.sh"]
    assert all(r[0] == "bash" and (ROOT / s.removeprefix("/ctx/")).is_file() for r, s in zip(runs, scripts))


def test_runtime_requirements_match_pyproject():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted = [ln.strip() for ln in (ROOT / "scripts" / "runtime-requirements.txt").read_text().splitlines()
              if ln.strip() and not ln.startswith("#")]
    for requirement in wanted:
        assert requirement in deps


def test_calver_is_today_shaped():
    version = load(CANDY)["jupyter-mcp"]["candy"]["version"]
    year, day, hhmm = version.split(".")
    assert 2024 <= int(year) and 1 <= int(day) <= 366 and int(hhmm[:-2]) < 24 and int(hhmm[-2:]) < 60
    assert re.fullmatch(r"\d{4}\.\d{1,3}\.\d{3,4}", version)
