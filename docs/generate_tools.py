"""Write docs/tools.md from the tools themselves (their docstrings and input schemas).

The docstrings are what agents read; generating the reference from them keeps one
source. ``python docs/generate_tools.py`` rewrites the file; a test checks it is current.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from types import SimpleNamespace

HEADER = """# Tools

Generated from the tools' own descriptions and schemas by `python docs/generate_tools.py`
(a test fails when this file is stale). Every notebook and cell tool works on the live
collaborative document of the notebook (the one JupyterLab shows), attaching to its
room or creating it. A refused call returns an MCP tool error (`isError: true`) whose
text says what was wrong and what is allowed; nothing is changed by a refused call.

Common errors, for every tool that takes a `path`: the path escapes the workspace,
is an absolute path outside it, resolves outside it through a symlink, contains NUL
or control characters, is empty, or does not end in `.ipynb`; there is no notebook
at the path; the file is not a readable notebook. For every tool that takes
`cell_id`/`index`: no cell has that id, the index is out of range, or neither was given.
"""


def _type(schema: dict) -> str:
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    return kind


def render(tools) -> str:
    parts = [HEADER]
    for tool in sorted(tools, key=lambda t: t.name):
        mcp_tool = tool.to_mcp_tool()
        schema = mcp_tool.input_schema
        required = set(schema.get("required", []))
        parts.append(f"\n## `{tool.name}`\n\n{(tool.description or '').strip()}\n")
        props = schema.get("properties", {})
        if props:
            parts.append("\n| argument | type | default | meaning |\n|---|---|---|---|")
            for name, prop in props.items():
                default = "required" if name in required else json.dumps(prop.get("default"))
                desc = (prop.get("description") or "").replace("|", "\\|")
                parts.append(f"| `{name}` | {_type(prop)} | {default} | {desc} |")
            parts.append("")
        hints = mcp_tool.annotations
        if hints is not None:
            flags = [k for k in ("read_only_hint", "destructive_hint") if getattr(hints, k, None)]
            if flags:
                parts.append(f"Annotations: {', '.join(f.replace('_hint', '').replace('_', '-') for f in flags)}.\n")
    return "\n".join(parts).rstrip() + "\n"


async def tools():
    from jupyter_mcp.mcp_server import build_server

    from jupyter_mcp.mcp_server import partial_result
    from jupyter_mcp.tasks import InMemoryTaskStore, TaskManager

    fake = SimpleNamespace(server_name="jupyter", rooms=None, kernels=None, root_dir="/", serverapp=None,
                           tasks=TaskManager(InMemoryTaskStore(), render_partial=partial_result))
    return await build_server(fake).list_tools(run_middleware=False)


def main() -> str:
    return render(asyncio.run(tools()))


if __name__ == "__main__":
    out = Path(__file__).with_name("tools.md")
    out.write_text(main())
    sys.stdout.write(f"wrote {out}\n")
