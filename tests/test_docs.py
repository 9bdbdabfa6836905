"""docs/tools.md is generated from the tools; it must match them."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_tools_reference_is_current():
    sys.path.insert(0, str(ROOT / "docs"))
    import generate_tools

    assert (ROOT / "docs" / "tools.md").read_text() == generate_tools.main(), \
        "docs/tools.md is stale: run `python docs/generate_tools.py`"


def test_every_tool_is_documented_and_named_noun_verb():
    text = (ROOT / "docs" / "tools.md").read_text()
    expected = ["notebook_list", "notebook_create", "notebook_get", "notebook_watch", "notebook_list_users",
                "cell_get", "cell_update", "cell_insert", "cell_delete", "cell_execute", "code_execute", "room_list"]
    for name in expected:
        assert f"## `{name}`" in text
