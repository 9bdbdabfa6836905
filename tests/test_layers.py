"""The package's calls go one way (docs/ARCHITECTURE.md, "Layers"): each subpackage is a layer
with a rule of what it may import, checked over everything it imports, directly or not; no
import circle; a dependency's private surfaces are reached only from the adapters
(``jupyter_mcp/adapters/``), jupyter-server-ydoc's internals only from its adapter; the process
measures are taken only by app.py. Read from the source, every import (module level or inside a
function) counted."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parent.parent / "jupyter_mcp"
ADAPTERS = PACKAGE / "adapters"
#: Attributes private to jupyter-server-ydoc's rooms, loaders and extension, and to jupyter-ydoc's YNotebook.
YDOC_INTERNALS = {"_document", "_document_load_progressively", "_document_progressively_loaded", "_room_locks",
                  "_save_to_disc", "_ymeta", "ywebsocket_server", "file_loaders", "cleaner", "_file", "_update_lock",
                  "_file_format", "_file_type", "_on_outofband_change", "_contents_manager", "_file_id_manager",
                  "_current_path", "_monitor", "monitor_task"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The jupyter_mcp modules ``path`` imports."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("jupyter_mcp"):
                continue
            for alias in node.names:  # `from . import cells` imports the module jupyter_mcp.notebooks.cells
                sub = f"{target}.{alias.name}"
                found.add(sub if (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists() else target)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("jupyter_mcp")}
    return found - {here}


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                found.append(trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    return found



#: The shared vocabulary every layer may speak: errors, who is calling, what they may do.
SHARED = {"jupyter_mcp.errors", "jupyter_mcp.identity", "jupyter_mcp.permissions", "jupyter_mcp._version"}
#: Each layer and the layers it may reach (its own always; the shared modules unless said).
MAY_REACH = {
    "transport": {"transport"},
    "tools": {"tools", "notebooks", "kernels", "tasks"},
    "notebooks": {"notebooks"},
    "kernels": {"kernels"},
    "tasks": {"tasks"},  # the tasks package knows nothing of notebooks, not even the shared modules
    "shared": set(),
    "plug-in": set(),  # classes named in a configuration: the box's identity provider, the update store, the client
    "process": set(),  # what the server changes in its whole process (imported by app.py alone)
    "adapters": set(),  # a dependency's private surfaces: nothing of ours, not even the shared modules
}
#: The layer every other one may reach (and that reaches nothing of ours).
EVERYONES = "adapters"
PLUG_INS = {"jupyter_mcp.deployment", "jupyter_mcp.ystore", "jupyter_mcp.client"}
COMPOSERS = {"jupyter_mcp", "jupyter_mcp.app"}  # app composes the layers; the package's entry point loads it


def layer_of(module: str) -> str:
    if module in SHARED:
        return "shared"
    if module in PLUG_INS:
        return "plug-in"
    if module == "jupyter_mcp.process":
        return "process"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in MAY_REACH else module


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen - {start}


def allowed_layers(layer: str) -> set[str]:
    """The layers a module of ``layer`` may reach, its own excepted (a subpackage reaches its own
    modules freely): its rule, the adapters, and the shared modules unless its rule says not."""
    shared_ok = layer not in ("tasks", "plug-in", "process", EVERYONES)
    return (MAY_REACH[layer] - {layer}) | ({"shared"} if shared_ok or layer == "shared" else set()) | (
        {EVERYONES} if layer != EVERYONES else set())


def breaches(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """Per module, what it reaches that its layer's rule forbids (the package inits of a
    layer excepted: importing ``jupyter_mcp.tasks`` names the layer itself)."""
    found = {}
    for module in edges:
        layer = layer_of(module)
        if module in COMPOSERS or module.startswith("jupyter_mcp.testing") or layer not in MAY_REACH:
            continue
        allowed = allowed_layers(layer) | ({layer} if layer != EVERYONES else set())  # an adapter stands alone
        bad = sorted(m for m in reachable(edges, module) if layer_of(m) not in allowed)
        if bad:
            found[module] = bad
    return found


def test_the_layer_check_sees_a_breach_through_another_module():
    edges = {"jupyter_mcp.kernels.runs": {"jupyter_mcp.kernels.input"},
             "jupyter_mcp.kernels.input": {"jupyter_mcp.tasks.binding"},
             "jupyter_mcp.tasks.binding": set(),
             "jupyter_mcp.tools.declarations": {"jupyter_mcp.kernels.runs"}}
    assert breaches(edges) == {"jupyter_mcp.kernels.runs": ["jupyter_mcp.tasks.binding"],
                               "jupyter_mcp.kernels.input": ["jupyter_mcp.tasks.binding"]}
    assert breaches({"jupyter_mcp.tasks.manager": {"jupyter_mcp.errors"}}) == {
        "jupyter_mcp.tasks.manager": ["jupyter_mcp.errors"]}
    assert breaches({"jupyter_mcp.tasks.binding": {"jupyter_mcp.adapters.fastmcp_lowlevel"},
                     "jupyter_mcp.adapters.fastmcp_lowlevel": {"jupyter_mcp.errors"},
                     "jupyter_mcp.adapters.sdk_client": {"jupyter_mcp.adapters.sdk_server"}}) == {
        "jupyter_mcp.tasks.binding": ["jupyter_mcp.errors"],
        "jupyter_mcp.adapters.fastmcp_lowlevel": ["jupyter_mcp.errors"],
        "jupyter_mcp.adapters.sdk_client": ["jupyter_mcp.adapters.sdk_server"]}


def test_every_module_is_in_a_layer():
    unplaced = {m for m in graph() if layer_of(m) not in MAY_REACH and m not in COMPOSERS
                and not m.startswith("jupyter_mcp.testing")}
    assert unplaced == set()


def test_each_layer_reaches_only_what_its_rule_allows():
    assert breaches(graph()) == {}


def test_the_checker_sees_a_circle_and_the_real_imports():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    edges = graph()
    assert "jupyter_mcp.kernels.sessions" in edges["jupyter_mcp.tools.execution"]
    assert "jupyter_mcp.tasks.hooks" in edges["jupyter_mcp.tasks.running"]
    assert "jupyter_mcp.notebooks.cells" in edges["jupyter_mcp.tools.operations"]  # `from . import cells`


def test_no_import_circle():
    assert cycles(graph()) == []


def test_only_the_ydoc_adapter_touches_ydoc_internals():
    touching = {}
    for path in PACKAGE.rglob("*.py"):
        if PACKAGE / "testing" in path.parents:
            continue  # the test parts count a server's objects wherever they are
        tree = ast.parse(path.read_text())
        names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)  # getattr(room, "cleaner", None)
                  and isinstance(n.value, str)}
        if names & YDOC_INTERNALS:
            touching[module_name(path)] = sorted(names & YDOC_INTERNALS)
    assert set(touching) == {"jupyter_mcp.adapters.ydoc_rooms"}, touching


def test_only_app_takes_the_process_measures():
    assert {m for m, targets in graph().items() if "jupyter_mcp.process" in targets} == {"jupyter_mcp.app"}


# -- a dependency's private surfaces: in the adapters only ----------------------------------------------

OWN_PRIVATE_MODULES = {"_version"}
GETTERS = {"getattr", "hasattr", "setattr", "delattr"}


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def ours(path: Path) -> bool:
    """A module whose private names count as ours: not an adapter, not a test part."""
    return ADAPTERS not in path.parents and PACKAGE / "testing" not in path.parents


def own_private_names() -> set[str]:
    """Every ``_name`` our own package defines: functions, classes, assigned names and class
    attributes, attributes set on ``self``/``cls``."""
    names: set[str] = set()
    for path in filter(ours, PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return {name for name in names if is_private(name)}


def private_uses(tree: ast.AST, own: set[str]) -> list[str]:
    """A dependency's private surfaces used in a module: ``x._name`` (``self``'s too: an inherited
    private) and ``getattr(x, "_name")`` for a name we do not define, a private name compared with
    (a ``__qualname__`` match), a private module imported or a private name imported from one of
    theirs, an attribute set on a class or module imported from a dependency (a class-level patch)."""
    found = []
    theirs: set[str] = set()  # names bound by imports from dependencies
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if any(is_private(part) and part not in OWN_PRIVATE_MODULES for part in alias.name.split(".")):
                    found.append(f"line {node.lineno}: import {alias.name}")
                if not alias.name.startswith("jupyter_mcp"):
                    theirs.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if any(is_private(part) and part not in OWN_PRIVATE_MODULES for part in module.split(".")):
                found.append(f"line {node.lineno}: from {module} import ...")
            if not node.level and not module.startswith("jupyter_mcp") and module != "__future__":
                for alias in node.names:
                    theirs.add(alias.asname or alias.name)
                    if is_private(alias.name):
                        found.append(f"line {node.lineno}: from {module} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr) and node.attr not in own:
            found.append(f"line {node.lineno}: ._{node.attr[1:]}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in GETTERS \
                and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and is_private(name.value) \
                    and name.value not in own:
                found.append(f"line {node.lineno}: {node.func.id}(…, {name.value!r})")
            if node.func.id == "setattr" and isinstance(node.args[0], ast.Name) and node.args[0].id in theirs:
                found.append(f"line {node.lineno}: setattr({node.args[0].id}, …) patches a dependency")
        elif isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and isinstance(side.value, str) and is_private(side.value) \
                        and side.value.isidentifier() and side.value not in own:
                    found.append(f"line {node.lineno}: compared with {side.value!r}")
        elif isinstance(node, ast.Assign | ast.AugAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id in theirs:
                    found.append(f"line {node.lineno}: {target.value.id}.{target.attr} = … patches a dependency")
    return found


def test_the_private_surface_check_sees_each_kind_of_use():
    own = {"_mine"}
    source = """
import anyio._backends._asyncio
from mcp.shared._httpx_utils import create_mcp_http_client
from threading import _register_atexit
from jupyter_server_ydoc.loaders import FileLoader
from .._version import __version__
client._route_responses
self._headers
self._mine
other._mine
getattr(room, "_document_load_progressively", False)
getattr(handler, "_mine", None)
t.get_coro().__qualname__ == "_shutdown_watcher"
setattr(FileLoader, "load_content", None)
FileLoader.maybe_save_content = None
"""
    assert set(private_uses(ast.parse(source), own)) == {
        "line 2: import anyio._backends._asyncio", "line 3: from mcp.shared._httpx_utils import ...",
        "line 4: from threading import _register_atexit", "line 7: ._route_responses", "line 8: ._headers",
        "line 11: getattr(…, '_document_load_progressively')", "line 13: compared with '_shutdown_watcher'",
        "line 14: setattr(FileLoader, …) patches a dependency",
        "line 15: FileLoader.maybe_save_content = … patches a dependency"}


def test_private_surfaces_of_dependencies_are_used_only_in_the_adapters():
    own = own_private_names()
    assert {"_flush_logged", "_resolved", "_asgi"} <= own  # the collection sees our own names
    assert "_document" not in own and "_session_owners" not in own
    found = {}
    for path in filter(ours, PACKAGE.rglob("*.py")):
        uses = private_uses(ast.parse(path.read_text()), own)
        if uses:
            found[str(path.relative_to(PACKAGE.parent))] = uses
    assert found == {}, "a dependency's private surface used outside jupyter_mcp/adapters/: " \
                        "move it into the dependency's adapter, with a test in tests/test_adapters.py"


def test_the_architecture_states_the_rules_this_module_checks():
    """docs/ARCHITECTURE.md's Layers table says, for each layer, what it may import: the same
    sets as ``allowed_layers`` (a row's words before any ';' name them)."""
    import re

    text = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text()
    rows = {"`transport/`": "transport", "`tools/`": "tools", "`notebooks/`": "notebooks", "`kernels/`": "kernels",
            "`tasks/`": "tasks", "`adapters/`": "adapters", "shared:": "shared", "plug-ins:": "plug-in",
            "`process.py`": "process"}
    stated = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 3 and any(cells[0].startswith(key) for key in rows):
            layer = next(rows[key] for key in rows if cells[0].startswith(key))
            words = cells[2].split(";")[0]
            named = {rows[f"`{n}/`"] for n in re.findall(r"`(\w+)/`", words)}
            named |= {"shared"} if ("shared modules" in words or "each other" in words) else set()
            named |= {"adapters"} if "adapters" in words else set()
            stated[layer] = named - {layer} if layer != "shared" else named
    assert stated == {layer: allowed_layers(layer) for layer in rows.values()}


def test_the_architecture_names_only_modules_that_exist():
    import re

    text = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text()
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", text))
    places = (PACKAGE, PACKAGE.parent, PACKAGE.parent / "tests", PACKAGE / "testing", PACKAGE / "tasks",
              PACKAGE.parent / "checks", PACKAGE.parent / "benchmarks")
    assert {name for name in named if not any((place / name).exists() for place in places)} == set()
