"""Cell outputs as an agent reads them.

The document keeps every output exactly as the kernel sent it; what an agent gets
is a readable form: text without ANSI colour codes, errors as name, value and a
plain traceback, images as MCP image content, rich outputs through their best text
representation, and very long texts cut with a note saying how much was left out.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp_types import ImageContent, TextContent

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
IMAGE_TYPES = ("image/png", "image/jpeg")
TEXT_PREFERENCE = ("text/plain", "text/markdown", "text/latex", "application/json", "text/html")
DEFAULT_MAX_CHARS = 20_000


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def _str(value: Any) -> str:
    """Any stored value as text: a string as it is, anything else as its JSON text (a notebook
    written by another tool may hold ``"text/plain": 5``; a read must not fail on it)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _joined(value: Any) -> str:
    return "".join(_str(v) for v in value) if isinstance(value, list) else _str(value)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _optional_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def truncate(text: str, max_chars: int) -> str:
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n… [{len(text) - max_chars} more characters not shown; the notebook has them all]"


def best_text(data: dict[str, Any]) -> str | None:
    """The most readable text form of a mime bundle."""
    for mime in TEXT_PREFERENCE:
        if mime in data:
            value = data[mime]
            if mime == "application/json" and not isinstance(value, str):
                return json.dumps(value, indent=1, default=str)[:DEFAULT_MAX_CHARS * 2]
            text = _joined(value)
            if mime == "text/html":
                text = re.sub(r"<[^>]+>", "", text)
            return text
    return None


def output_text(output: dict[str, Any]) -> str:
    """One output as plain text (images are named, not inlined); never fails on an odd output."""
    output = _dict(output)
    kind = output.get("output_type")
    if kind == "stream":
        return strip_ansi(_joined(output.get("text", "")))
    if kind == "error":
        traceback = output.get("traceback") or []
        traceback = strip_ansi("\n".join(_str(t) for t in (traceback if isinstance(traceback, list) else [traceback])))
        # IPython's traceback already ends with "ename: evalue"; others may not have one
        return traceback or f"{_str(output.get('ename', 'Error'))}: {_str(output.get('evalue', ''))}"
    data = _dict(output.get("data"))
    text = best_text(data)
    images = [str(m) for m in data if str(m).startswith("image/")]
    if text is None and images:
        return f"[{', '.join(images)}]"
    return strip_ansi(text or "")


def summarize(outputs: list[dict[str, Any]], max_chars: int) -> list[dict[str, Any]]:
    """Outputs for notebook_get / cell_get: small, readable, with what was left out named."""
    summary = []
    for output in outputs if isinstance(outputs, list) else []:
        output = _dict(output)
        kind = output.get("output_type")
        item: dict[str, Any] = {"output_type": _str(kind) if kind is not None else "unknown"}
        if kind == "stream":
            item["name"] = _str(output.get("name", "stdout"))
        if kind == "error":
            item["ename"] = _optional_str(output.get("ename"))
            item["evalue"] = _optional_str(output.get("evalue"))
        data = _dict(output.get("data"))
        if data:
            item["mime_types"] = sorted(str(m) for m in data)
        item["text"] = truncate(output_text(output), max_chars)
        summary.append(item)
    return summary


def to_content(outputs: list[dict[str, Any]], max_chars: int = DEFAULT_MAX_CHARS) -> list[Any]:
    """Outputs as MCP content blocks: text (merged, cut to ``max_chars``) and images."""
    blocks: list[Any] = []
    texts: list[str] = []
    for output in outputs if isinstance(outputs, list) else []:
        data = _dict(_dict(output).get("data"))
        image = next((m for m in IMAGE_TYPES if isinstance(data.get(m), (str, list))), None)
        if image is not None:
            blocks.append(ImageContent(type="image", data=_joined(data[image]).replace("\n", ""), mime_type=image))
            text = best_text({k: v for k, v in data.items() if k != "text/plain"})
            if text:
                texts.append(text)
            continue
        texts.append(output_text(output))
    text = "".join(t if t.endswith("\n") else t + "\n" for t in texts if t)
    if text:
        blocks.insert(0, TextContent(type="text", text=truncate(text, max_chars)))
    return blocks
