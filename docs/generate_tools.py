"""Write docs/tools.md from the tools themselves (their docstrings and input schemas).

The docstrings are what agents read; generating the reference from them keeps one
source. ``python docs/generate_tools.py`` rewrites the file; a test checks it is current.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

HEADER = """# Tools

Generated from the tools' own descriptions and schemas by `python docs/generate_tools.py`
(a test fails when this file is stale). Every notebook and cell tool works on the live
collaborative document of the notebook (the one JupyterLab shows), attaching to its
room or creating it. A refused call returns an MCP tool error (`isError: true`) whose
text says what was wrong and what is allowed; nothing is changed by a refused call.

Common errors, for every tool that takes a `path`: the path escapes the workspace,
is an absolute path outside it, resolves outside it through a symlink, contains NUL
or control characters, is empty, or does not end in `.ipynb`; there is no notebook
at the path; the file has more than one hard link (another name may be outside the
workspace), or changed while it was read (a symlink swapped in); the file is not a
readable notebook. For every tool that takes
`cell_id`/`index`: no cell has that id, the index is out of range, or neither was given.
"""


def _type(schema: dict, defs: dict | None = None) -> str:
    if "$ref" in schema and defs is not None:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return name if name in defs else "object"
    if "anyOf" in schema:
        return " or ".join(_type(s, defs) for s in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}), defs)}"
    return kind


def _result(schema: dict) -> list[str]:
    """The result's fields, from the tool's output schema."""
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    rows = ["Result (structured content, also published as the tool's output schema):\n",
            "| field | type | always |", "|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        rows.append(f"| `{name}` | {_type(prop, defs)} | {'yes' if name in required else 'no'} |")
    return rows + [""]


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
        if mcp_tool.output_schema:
            parts.extend(_result(mcp_tool.output_schema))
        hints = mcp_tool.annotations
        if hints is not None:
            flags = [k for k in ("read_only_hint", "destructive_hint") if getattr(hints, k, None)]
            if flags:
                parts.append(f"Annotations: {', '.join(f.replace('_hint', '').replace('_', '-') for f in flags)}.\n")
    return "\n".join(parts).rstrip() + "\n"


async def tools():
    """The real server's tools (listing them needs nothing running)."""
    from jupyter_mcp.tools.server import build_server
    from jupyter_mcp.tasks import InMemoryTaskStore, TaskManager

    tasks = TaskManager(InMemoryTaskStore(), default_ttl_ms=1, max_ttl_ms=1, poll_interval_ms=1)
    return await build_server("jupyter", None, tasks).list_tools(run_middleware=False)


def main() -> str:
    return render(asyncio.run(tools()))


if __name__ == "__main__":
    out = Path(__file__).with_name("tools.md")
    out.write_text(main())
    sys.stdout.write(f"wrote {out}\n")
