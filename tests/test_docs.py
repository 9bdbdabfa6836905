"""docs/tools.md is generated from the tools; it must match them."""

from __future__ import annotations

import asyncio
import importlib.util
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent


def generator():
    """docs/generate_tools.py, loaded from its file."""
    spec = importlib.util.spec_from_file_location("generate_tools", ROOT / "docs" / "generate_tools.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tools_reference_is_current():
    generate_tools = generator()
    assert (ROOT / "docs" / "tools.md").read_text() == generate_tools.main(), \
        "docs/tools.md is stale: run `python docs/generate_tools.py`"


NOUNS = {"file", "notebook", "cell", "code", "kernel", "room"}
VERBS = {"list", "create", "get", "watch", "update", "insert", "delete", "execute", "edit", "move", "clear",
         "interrupt", "restart", "select", "search"}


def test_every_tool_is_documented_and_named_noun_verb():
    """Every tool the server lists is named <noun>_<verb>[_<object>] and has its section;
    no section describes a tool that is not there."""
    names = [t.name for t in asyncio.run(generator().tools())]
    assert len(names) == len(set(names)) and names
    for name in names:
        noun, verb, *rest = name.split("_") + [""]
        assert noun in NOUNS and verb in VERBS and len(rest) <= 2, f"{name} is not <noun>_<verb>"
    text = (ROOT / "docs" / "tools.md").read_text()
    assert sorted(re.findall(r"^## `([a-z_]+)`", text, re.M)) == sorted(names)
