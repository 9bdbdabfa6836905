"""The package's calls go one way (docs/ARCHITECTURE.md, "Layers"): each subpackage is a layer
with a rule of what it may import, checked over everything it imports, directly or not; no
import circle; only the rooms module touches jupyter-server-ydoc's internals. Read from the
source, every import (module level or inside a function) counted."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "jupyter_mcp"
#: Attributes private to jupyter-server-ydoc's rooms and extension, and to jupyter-ydoc's YNotebook.
YDOC_INTERNALS = {"_document", "_document_load_progressively", "_document_progressively_loaded", "_room_locks",
                  "_save_to_disc", "_ymeta", "ywebsocket_server", "file_loaders", "cleaner"}


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
}
PLUG_INS = {"jupyter_mcp.deployment", "jupyter_mcp.ystore", "jupyter_mcp.client"}
COMPOSERS = {"jupyter_mcp", "jupyter_mcp.app"}  # app composes the layers; the package's entry point loads it


def layer_of(module: str) -> str:
    if module in SHARED:
        return "shared"
    if module in PLUG_INS:
        return "plug-in"
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


def breaches(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """Per module, what it reaches that its layer's rule forbids (the package inits of a
    layer excepted: importing ``jupyter_mcp.tasks`` names the layer itself)."""
    found = {}
    for module in edges:
        layer = layer_of(module)
        if module in COMPOSERS or module.startswith("jupyter_mcp.testing") or layer not in MAY_REACH:
            continue
        allowed = MAY_REACH[layer] | ({layer} if layer == "shared" else set())
        shared_ok = layer not in ("tasks", "plug-in")
        bad = sorted(m for m in reachable(edges, module)
                     if layer_of(m) not in allowed and not (shared_ok and layer_of(m) == "shared"))
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
    assert "jupyter_mcp.tasks.hooks" in edges["jupyter_mcp.tasks.manager"]
    assert "jupyter_mcp.notebooks.cells" in edges["jupyter_mcp.tools.operations"]  # `from . import cells`


def test_no_import_circle():
    assert cycles(graph()) == []


def test_only_the_rooms_module_touches_ydoc_internals():
    touching = {}
    for path in PACKAGE.rglob("*.py"):
        names = {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}
        if names & YDOC_INTERNALS:
            touching[module_name(path)] = sorted(names & YDOC_INTERNALS)
    assert set(touching) == {"jupyter_mcp.notebooks.rooms"}, touching
