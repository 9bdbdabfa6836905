"""The package's calls go one way (docs/ARCHITECTURE.md): no import circle, the kernel and
document layers know nothing of tasks, the tasks package nothing of notebooks, and only the
rooms module touches jupyter-server-ydoc's internals. Read from the source, every import
(module level or inside a function) counted."""

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
            for alias in node.names:  # `from . import cells` imports the module jupyter_mcp.cells
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


def test_the_checker_sees_a_circle_and_the_real_imports():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    edges = graph()
    assert "jupyter_mcp.kernels" in edges["jupyter_mcp.execution"]
    assert "jupyter_mcp.tasks.hooks" in edges["jupyter_mcp.tasks.manager"]
    assert "jupyter_mcp.cells" in edges["jupyter_mcp.notebooks"]  # `from . import cells`


def test_no_import_circle():
    assert cycles(graph()) == []


@pytest.mark.parametrize("module", ["jupyter_mcp.kernels", "jupyter_mcp.cells", "jupyter_mcp.rooms",
                                    "jupyter_mcp.changes", "jupyter_mcp.sweeper", "jupyter_mcp.presence",
                                    "jupyter_mcp.outputs", "jupyter_mcp.paths"])
def test_lower_layers_import_nothing_of_tasks(module):
    assert not {m for m in graph()[module] if m.startswith("jupyter_mcp.tasks")}


def test_the_tasks_package_imports_nothing_of_notebooks():
    outside = {m for name, deps in graph().items() if name.startswith("jupyter_mcp.tasks")
               for m in deps if not m.startswith("jupyter_mcp.tasks")}
    assert outside == set()


def test_only_the_rooms_module_touches_ydoc_internals():
    touching = {}
    for path in PACKAGE.rglob("*.py"):
        names = {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}
        if names & YDOC_INTERNALS:
            touching[module_name(path)] = sorted(names & YDOC_INTERNALS)
    assert set(touching) == {"jupyter_mcp.rooms"}, touching
