"""docs/tools.md is generated from the tools; it must match them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_tools_reference_is_current():
    sys.path.insert(0, str(ROOT / "docs"))
    import generate_tools

    assert (ROOT / "docs" / "tools.md").read_text() == generate_tools.main(), \
        "docs/tools.md is stale: run `python docs/generate_tools.py`"


NOUNS = {"notebook", "cell", "code", "kernel", "room"}
VERBS = {"list", "create", "get", "watch", "update", "insert", "delete", "execute", "edit", "move", "clear",
         "interrupt", "restart"}


def test_every_tool_is_documented_and_named_noun_verb():
    """Every tool the server lists is named <noun>_<verb>[_<object>] and has its section;
    no section describes a tool that is not there."""
    sys.path.insert(0, str(ROOT / "docs"))
    import asyncio

    import generate_tools

    names = [t.name for t in asyncio.run(generate_tools.tools())]
    assert len(names) == len(set(names)) and names
    for name in names:
        noun, verb, *rest = name.split("_") + [""]
        assert noun in NOUNS and verb in VERBS and len(rest) <= 2, f"{name} is not <noun>_<verb>"
    text = (ROOT / "docs" / "tools.md").read_text()
    assert sorted(re.findall(r"^## `([a-z_]+)`", text, re.M)) == sorted(names)
