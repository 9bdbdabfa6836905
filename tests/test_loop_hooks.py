"""Every loop that waits on a kernel has both task hooks, found by shape, not by name.

Seed 000: "Every loop that waits for a cell registers it ... A test now finds the loops by
shape rather than by name, so a fourth is covered on the day it is written." Shapes:

- code is sent to a kernel: a call to ``<x>.execute(code, ...)`` or ``<x>.execute_interactive(...)``
  with the code in a variable or a kernel keyword (not an SQL literal, not a Redis pipeline's
  bare ``execute()``); the same function must call ``register_interrupt`` before it;
- a loop that receives kernel output (awaits ``<x>.get_iopub_msg(...)``) and hands the message
  on to anything must call ``record_output`` inside the loop.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jupyter_mcp"
SENDS = {"execute", "execute_interactive"}
KERNEL_KEYWORDS = {"allow_stdin", "stop_on_error", "silent", "store_history", "user_expressions", "output_hook"}


def _sends_code(call: ast.Call) -> bool:
    if not (isinstance(call.func, ast.Attribute) and call.func.attr in SENDS):
        return False
    if any(k.arg in KERNEL_KEYWORDS for k in call.keywords):
        return True
    return bool(call.args) and not (isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str))


def _calls(node: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)]


def _name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def violations(source: str, where: str) -> list[str]:
    tree = ast.parse(source)
    found = []
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        calls = _calls(fn)
        sends = [c for c in calls if _sends_code(c)]
        hooks = [c.lineno for c in calls if _name(c) == "register_interrupt"]
        for send in sends:
            if not any(line < send.lineno for line in hooks):
                found.append(f"{where}:{send.lineno} {fn.name} sends code without register_interrupt before it")
        for loop in [n for n in ast.walk(fn) if isinstance(n, (ast.While, ast.For, ast.AsyncFor))]:
            receives = [c for c in _calls(loop) if _name(c) == "get_iopub_msg"]
            if not receives:
                continue
            targets = set()
            for assign in [n for n in ast.walk(loop) if isinstance(n, ast.Assign)]:
                if any(isinstance(v, ast.Call) and _name(v) == "get_iopub_msg"
                       for v in ast.walk(assign.value)):
                    targets |= {t.id for t in assign.targets if isinstance(t, ast.Name)}
            handed_on = any(isinstance(arg, ast.Name) and arg.id in targets
                            for c in _calls(loop) for arg in c.args if _name(c) not in ("get",))
            if handed_on and not any(_name(c) == "record_output" for c in _calls(loop)):
                found.append(f"{where}:{loop.lineno} {fn.name} collects kernel output without record_output")
    return found


def test_every_kernel_loop_in_the_package_has_both_hooks():
    problems = []
    loops_checked = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        problems += violations(source, str(path.relative_to(PACKAGE)))
        loops_checked += source.count("get_iopub_msg(")
    assert loops_checked >= 1, "found no kernel loop at all: the shapes no longer match the code"
    assert problems == []


def test_the_checker_catches_a_loop_without_hooks():
    bad = textwrap.dedent('''
        async def new_monitor(client, code, outputs):
            msg_id = client.execute(code)
            while True:
                msg = await client.get_iopub_msg(timeout=1)
                outputs.append(convert(msg))
    ''')
    good = textwrap.dedent('''
        async def new_monitor(client, code, outputs):
            await register_interrupt(client.interrupt)
            msg_id = client.execute(code)
            while True:
                msg = await client.get_iopub_msg(timeout=1)
                outputs.append(convert(msg))
                await record_output(outputs)
    ''')
    assert len(violations(bad, "bad.py")) == 2
    assert violations(good, "good.py") == []
