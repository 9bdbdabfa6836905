"""charly's rules for charly.yml documents and plan steps, so the checks runner can refuse a
file before anything runs, as charly does.

Fields and types are in checks/charly.schema.json (charly's closed CUE defs as JSON Schema).
This module holds what a schema cannot say: charly's parse-time desugaring of a step
(opencharly/sdk loaderkit/parse.go desugarStep), its one-verb rule (spec Op.Kind), the
dispatch-time checks of a verb's input (charly plugin_loader.go, plugin-mcp methods.go), the
`charly box validate` rules (charly candy/plugin-box/validate_rules.go, validate_check.go) and
the check-variable grammar (sdk kit/checkvars_expand.go). Messages follow charly's Go format
strings and CUE's wording, each prefixed with where the problem is (file, node, plan index).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA = json.loads((Path(__file__).with_name("charly.schema.json")).read_text())
DEFS = SCHEMA["$defs"]
DOCUMENT = jsonschema.Draft202012Validator(SCHEMA)
DEF = {name: jsonschema.Draft202012Validator({**definition, "$defs": DEFS}) for name, definition in DEFS.items()}

INTENTS = ("run", "check", "agent-run", "agent-check", "include")
RESERVED = frozenset(SCHEMA["properties"])  # #NodeDoc's document directives
AUTHORING = frozenset(DEFS["Op"]["properties"])  # every other step key is plugin-verb sugar
INSTALL_VERBS = ("mkdir", "copy", "write", "link", "download", "setcap", "build")  # #OpVerb minus plugin
# Each known verb's primary input field: what a scalar `<verb>: value` fills (charly
# node_desugar.go's frozen table and the plugins' manifests). Its input def is #<Verb>Input.
PRIMARY = {"command": "command", "file": "file", "http": "http", "addr": "addr", "port": "port",
           "process": "process", "service": "service", "mcp": "method"}
# Op string fields charly expands ${...} in (spec Op.StringFields; content/comment are verbatim).
EXPANDED = ("id", "description", "timeout", "mode", "target", "caps", "eventually", "retry_interval",
            "mkdir", "copy", "write", "link", "download", "setcap", "build", "run_as", "to", "extract")
VAR_REF = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)(?::([^}]+))?\}")
RUNTIME_ONLY = ("HOST_PORT", "VOLUME_PATH", "VOLUME_CONTAINER_PATH", "CONTAINER_IP", "CONTAINER_NAME",
                "INSTANCE", "ENV_", "STEP_ID", "VM_HOSTDEV_COUNT", "DEPLOY_NAME", "HOST")
KNOWN_VAR = re.compile(
    r"HOME|USER|UID|GID|IMAGE|DNS|ACME_EMAIL|INSTANCE|DEPLOY_NAME|CONTAINER_NAME|CONTAINER_IP|STEP_ID"
    r"|VM_HOSTDEV_COUNT|ENV_[A-Z0-9_]+|HOST_PORT:[0-9]+|VOLUME(_CONTAINER)?_PATH:[a-z0-9]+(-[a-z0-9]+)*"
    r"|HOST:[a-z0-9]+(-[a-z0-9]+)*(:[0-9]+)?")
RUN_AS = re.compile(r"root|\$\{USER\}|\$\{UID\}:\$\{GID\}|[a-z_][a-z0-9_-]*|\d+(:\d+)?")
TEMPLATE = re.compile(r"\{\{\.ContainerName\}\}|\{\{\.(?:HostPort|ContainerPort) \s*[+-]?\d+\s*\}\}")


class SchemaError(Exception):
    """A step that charly's parser refuses (the message says where and why)."""


@dataclass(frozen=True)
class Step:
    """One desugared plan step: its intent keyword and prose, its verb word (a plugin verb such
    as "mcp", or an install verb such as "mkdir") with the verb's input, and its #Op fields."""

    intent: str
    prose: str
    verb: str | None
    input: dict
    op: dict
    where: str


def desugar(step: Any, node: str | None, index: int) -> Step:
    """Apply charly's parse-time rules to one authored step: exactly one intent keyword, #Op
    fields kept, and at most one other key, the plugin-verb sugar `<verb>: <input>` (a map is
    the input, a scalar or list fills the verb's primary field, null is an empty input)."""
    at = f'node "{node}": plan[{index}]' if node else f"plan[{index}]"
    if not isinstance(step, dict):
        raise SchemaError(f"{at} must be a mapping step")
    intents, sugar = [], []
    for key in step:
        if key in ("plugin", "plugin_input"):
            raise SchemaError(f'{at} authors "{key}" — the plugin envelope is internal-only; author the '
                              "verb as `<word>: <input>` sugar (run: charly migrate)")
        if key in INTENTS:
            intents.append(key)
        elif key not in AUTHORING:
            sugar.append(str(key))
    if not intents:
        raise SchemaError(f"{at} has no intent keyword (run/check/agent-run/agent-check/include)")
    if len(intents) > 1:
        raise SchemaError(f"{at} has multiple intent keywords — a step has exactly one")
    if len(sugar) > 1:
        raise SchemaError(f"{at} carries multiple non-#Op keys ({', '.join(sorted(sugar))}) — a step takes "
                          "at most ONE plugin-verb sugar key")
    verb, given = (sugar[0], step[sugar[0]]) if sugar else (None, None)
    if verb is None or isinstance(given, dict):
        spec = dict(given or {})
    elif given is None:
        spec = {}
    elif verb in PRIMARY:
        spec = {PRIMARY[verb]: given}
    else:
        raise SchemaError(f'{at} plugin verb "{verb}" takes a MAP input (it declares no primary field for '
                          "the scalar shorthand)")
    op = {k: v for k, v in step.items() if k not in intents and str(k) != verb}
    if verb is None:
        verb = next((v for v in INSTALL_VERBS if op.get(v) not in (None, "")), None)
    where = f'node "{node}" plan[{index}]' if node else f"plan[{index}]"
    return Step(intents[0], step[intents[0]], verb, spec, op, where)


def plan_steps(document: Any, source: str) -> list[Step]:
    """Every step of a document, desugared, in order: each candy node's plan for a charly
    document, or the items of a bare list (a check file). Raises SchemaError on a bad step."""
    steps = []
    for node, plan in _plans(document):
        for index, raw in enumerate(plan):
            try:
                step = desugar(raw, node, index)
            except SchemaError as error:
                raise SchemaError(f"{source}: {error}") from None
            steps.append(replace(step, where=f"{source}: {step.where}"))
    return steps


def validate(document: Any, source: str) -> list[str]:
    """Every problem charly would report for this document (an empty list: valid)."""
    if isinstance(document, list):
        return _plan_problems(None, document, source)
    if not isinstance(document, dict):
        return [f"{source}: node-form document: expected a top-level mapping"]
    problems = [f"{source}: {where}{detail}" for e in DOCUMENT.iter_errors(document)
                for where, path in [_in_document(list(e.absolute_path))] for detail in _details(e, path)]
    for name, node in document.items():
        if name in RESERVED or not isinstance(node, dict):
            continue
        if "candy" not in node:
            problems.append(f'{source}: node "{name}": no kind discriminator (its keys: {", ".join(map(str, node))}) '
                            "— a top-level key that is not a document directive "
                            f"({', '.join(sorted(RESERVED))}) names a node `<name>: {{candy: {{...}}}}`, "
                            f'and "{name}" is neither')
            continue
        for child in (k for k in node if k != "candy"):
            problems.append(f'{source}: node "{name}" (kind "candy"): child "{child}" is not allowed — only '
                            "deployable kinds nest sub-entity members")
        if isinstance(node["candy"], dict):
            problems += _candy_problems(name, node["candy"], source)
    return problems


def _plans(document: Any) -> list[tuple[str | None, list]]:
    if isinstance(document, list):
        return [(None, document)]
    if not isinstance(document, dict):
        return []
    return [(name, node["candy"]["plan"]) for name, node in document.items()
            if name not in RESERVED and isinstance(node, dict) and isinstance(node.get("candy"), dict)
            and isinstance(node["candy"].get("plan"), list)]


def _candy_problems(name: str, candy: dict, source: str) -> list[str]:
    """charly box validate's rules for one candy: the mandatory plan with a check: step, and
    mcp_provide names and url templates; then every step."""
    at = f'{source}: candy "{name}"'
    problems = []
    description, plan = candy.get("description"), candy.get("plan")
    if isinstance(description, str) and description and not description.strip():
        problems.append(f"{at}: missing required `description:` string (ADE is mandatory)")
    if not plan:
        problems.append(f"{at}: missing required `plan:` list (ADE is mandatory; the spec IS the test)")
    elif isinstance(plan, list) and not any(isinstance(s, dict) and "check" in s for s in plan):
        problems.append(f"{at}: `plan:` must contain at least one `check:` step so the agentless check has "
                        "something to verify")
    seen = set()
    for entry in candy.get("mcp_provide") or []:
        if not isinstance(entry, dict):
            continue
        mcp_name, url = entry.get("name"), entry.get("url")
        if mcp_name in seen:
            problems.append(f'{source}: candy {name}: mcp_provides has duplicate name "{mcp_name}"')
        seen.add(mcp_name)
        if isinstance(url, str) and re.search(r"\{\{|\}\}", TEMPLATE.sub("", url)):
            problems.append(f"{source}: candy {name}: mcp_provides[{mcp_name}] url contains unknown or malformed "
                            "template variable (allowed: {{.ContainerName}}, {{.HostPort N}}, "
                            f"{{{{.ContainerPort N}}}}): {url}")
    if isinstance(plan, list):
        problems += _plan_problems(name, plan, source)
    return problems


def _plan_problems(node: str | None, plan: list, source: str) -> list[str]:
    problems = []
    for index, raw in enumerate(plan):
        try:
            step = desugar(raw, node, index)
        except SchemaError as error:
            problems.append(f"{source}: {error}")
            continue
        problems += [f"{source}: {step.where}: {p}" for p in _step_problems(step)]
    return problems


def _step_problems(step: Step) -> list[str]:
    """#Step typing, the one-verb rule (spec Op.Kind, plugin-box validatePlanStepsPure), the
    verb's input as its plugin checks it at dispatch, and the variable rules."""
    problems = [detail for e in DEF["Prose"].iter_errors(step.prose) for detail in _details(e, [step.intent])]
    problems += [detail for e in DEF["Op"].iter_errors(step.op) for detail in _details(e)]
    plugin = step.verb if step.verb not in (None, *INSTALL_VERBS) else None
    verbs = [v for v in INSTALL_VERBS if step.op.get(v) not in (None, "")] + (["plugin"] if plugin else [])
    if step.intent in ("run", "check") and not verbs:
        problems.append(f"({step.intent}): check has no verb set (expected exactly one of: "
                        f"{', '.join(INSTALL_VERBS)}, plugin)")
    if len(verbs) > 1:
        problems.append(f"({step.intent}): check has multiple verbs set ({', '.join(verbs)}); exactly one is required")
    if step.intent.startswith("agent-") and verbs:
        problems.append(f"({step.intent}): agent steps must not carry an Op verb")
    if len(verbs) != 1 or step.intent.startswith("agent-") or step.intent == "include":
        return problems
    if plugin and plugin not in PRIMARY:
        problems.append(f'no provider registered for plugin verb "{plugin}"')
    elif plugin:
        problems += _input_problems(plugin, step.input)
    contexts = step.op.get("context") or (("build", "deploy", "runtime") if plugin else ("build", "deploy"))
    refs = _refs(step)
    if "build" in contexts:
        problems += [f"references runtime-only variable ${{{r}}} but scope is build — give the step "
                     "context: [runtime]" for r in refs if r.split(":")[0].startswith(RUNTIME_ONLY)]
    if step.intent == "check":
        problems += [f"unresolved variable ${{{r}}} (charly would skip this step)"
                     for r in refs if not KNOWN_VAR.fullmatch(r)]
    run_as = step.op.get("run_as")
    if step.intent == "run" and isinstance(run_as, str) and run_as and not RUN_AS.fullmatch(run_as):
        problems.append(f'user: "{run_as}" is not valid (expected root, ${{USER}}, a name matching '
                        "^[a-z_][a-z0-9_-]*$, or <uid>:<gid>)")
    return problems


def _input_problems(verb: str, spec: dict) -> list[str]:
    """The verb's closed input def (charly plugin_loader.go), then what its plugin checks at
    dispatch: mcp's required modifiers and its JSON tool arguments (plugin-mcp methods.go)."""
    definition = f"{verb.title()}Input"
    prefix = f"plugin verb:{verb}: plugin_input fails #{definition}: "
    problems = [prefix + d for e in DEF[definition].iter_errors(spec) for d in _details(e)]
    if verb != "mcp" or problems:
        return problems
    method = spec["method"]
    missing = [f for f in {"call": ["tool"], "read": ["uri"]}.get(method, []) if not spec.get(f)]
    if missing:
        problems.append(f"mcp: {method}: missing required modifier(s): {', '.join(missing)}")
    if method == "call" and str(spec.get("input", "")).strip():
        try:
            arguments = json.loads(spec["input"])
        except ValueError as error:
            return problems + [f"mcp: call: parsing tool arguments as JSON: {error}"]
        if not isinstance(arguments, dict):
            problems.append(f"mcp: call: tool arguments must be a JSON object, got {_cue_type(arguments)}")
    return problems


def _refs(step: Step) -> list[str]:
    """The ${NAME[:arg]} keys charly expands in a step: its Op string fields and every string in
    the verb's input (run-step command bodies included: charly checks them for build scope)."""
    strings = [step.op[f] for f in EXPANDED if isinstance(step.op.get(f), str)] + list(_strings(step.input))
    keys = [m[1] + (f":{m[2]}" if m[2] else "") for s in strings for m in VAR_REF.finditer(s)]
    return list(dict.fromkeys(keys))


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


_JSON_TYPES = {"string": "string", "integer": "int", "number": "number", "boolean": "bool", "object": "struct",
               "array": "list", "null": "null"}
_BOUNDS = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}


def _in_document(path: list) -> tuple[str, list]:
    """Where a document error is: `candy "name": ` and the path in that candy body, `node
    "name": ` for the node itself, or nothing for a document directive."""
    if not path or path[0] in RESERVED:
        return "", path
    if len(path) > 1 and path[1] == "candy":
        return f'candy "{path[0]}": ', path[2:]
    return f'node "{path[0]}": ', path[1:]


def _details(error: jsonschema.ValidationError, path: list | None = None) -> list[str]:
    """A JSON Schema error in CUE's words (`field not allowed`, `conflicting values`, `invalid
    value ... (out of bound ...)`), at a dotted path (by default the error's own)."""
    path = list(error.absolute_path) if path is None else path
    at = ".".join(map(str, path))
    field = (at + ": ") if at else ""
    kind, schema, value = error.validator, error.schema, error.instance
    if kind == "not" and error.validator_value == {}:  # a forbidden key (CUE `_|_`)
        return [f"{field}field not allowed"]
    if kind == "additionalProperties":
        known, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
        return [f"{'.'.join(map(str, [*path, k]))}: field not allowed" for k in value
                if k not in known and not any(re.search(p, str(k)) for p in patterns)]
    if kind == "required":
        return [f"{'.'.join(map(str, [*path, k]))}: field is required but not present"
                for k in error.validator_value if k not in value]
    if kind == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        names = " | ".join(_JSON_TYPES[t] for t in wanted)
        return [f"{field}conflicting values {_show(value)} and {names} "
                f"(mismatched types {_cue_type(value)} and {names})"]
    if kind == "pattern":
        pattern = json.dumps(error.validator_value, ensure_ascii=False)
        return [f"{field}invalid value {_show(value)} (out of bound =~{pattern})"]
    if kind == "minLength":
        return [f'{field}invalid value {_show(value)} (out of bound !="")']
    if kind in _BOUNDS:
        return [f"{field}invalid value {_show(value)} (out of bound {_BOUNDS[kind]}{error.validator_value})"]
    if kind == "enum":
        return [f"{field}conflicting values {_show(value)} and {' | '.join(map(_show, error.validator_value))}"]
    if kind in ("minProperties", "maxProperties"):  # only #Matcher bounds its keys
        return [f"{field}a matcher map takes exactly one operator ({', '.join(schema['properties'])})"]
    if kind == "oneOf" and all(set(b) == {"required"} for b in error.validator_value):
        return [f"{field}exactly one of {', '.join(b['required'][0] for b in error.validator_value)} is required"]
    return [f"{field}{error.message}"]


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "{...}"
    if isinstance(value, list):
        return "[...]"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + '..."'


def _cue_type(value: Any) -> str:
    return {bool: "bool", int: "int", float: "float", str: "string", dict: "struct", list: "list",
            type(None): "null"}.get(type(value), type(value).__name__)
