"""Cell outputs as an agent reads them.

The document keeps every output exactly as the kernel sent it; what an agent gets
is a readable form: text without ANSI colour codes, errors as name, value and a
plain traceback, images as MCP image content, rich outputs through their best text
representation (an object's placeholder repr, ``<… object>``, gives way to its HTML as
text, markdown, LaTeX or JSON), and very long texts cut with a note saying how much
was left out and where the rest is.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any

from mcp_types import ImageContent, TextContent

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")  # what MCP clients show as images
RICH_TEXT = ("text/markdown", "text/latex", "application/json", "text/html")  # after text/plain, in this order
PLACEHOLDER = re.compile(r"<[^\n]*>")  # text/plain that only names the object: <IPython.core.display.HTML object>
DEFAULT_MAX_CHARS = 20_000
DEFAULT_MAX_IMAGE_BYTES = 1 << 20  # the images one read attaches, in all (decoded bytes)
IN_THE_NOTEBOOK = "the notebook has them all"  # where the rest of a cut output is, for a cell's outputs



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


def truncate(text: str, max_chars: int, rest: str | None = IN_THE_NOTEBOOK) -> str:
    """``text`` cut to ``max_chars`` (0: no limit), with a note of how much was left out and,
    when something keeps it, where (``rest``)."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    where = f"; {rest}" if rest else "; raise max_output_chars to see more"
    return text[:max_chars] + f"\n… [{len(text) - max_chars} more characters not shown{where}]"


class _HTMLText(HTMLParser):
    """HTML's text as a reader sees it: scripts and styles dropped, a line per block, cells apart."""

    BLOCKS = {"p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody",
              "pre", "ul", "ol", "section", "article", "header", "footer", "blockquote", "hr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in ("script", "style"):
            self.hidden += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append("\t")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self.hidden = max(0, self.hidden - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def html_text(html: str) -> str:
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    lines = (re.sub(r"[ \t]+", lambda m: "\t" if "\t" in m.group() else " ", line).strip()
             for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def best_text(data: dict[str, Any]) -> str | None:
    """The most readable text form of a mime bundle: text/plain, unless it is only a placeholder
    repr and a richer form (markdown, LaTeX, JSON, HTML as text) or an image says more."""
    plain = _joined(data["text/plain"]) if "text/plain" in data else None
    richer = [m for m in RICH_TEXT if m in data]
    if plain is not None and not (PLACEHOLDER.fullmatch(plain.strip()) and (richer or image_of(data))):
        return plain
    for mime in richer:
        value = data[mime]
        if mime == "application/json" and not isinstance(value, str):
            return json.dumps(value, indent=1, default=str)[:DEFAULT_MAX_CHARS * 2]
        return html_text(_joined(value)) if mime == "text/html" else _joined(value)
    return None if image_of(data) else plain


def image_of(data: dict[str, Any]) -> str | None:
    """The mime type of the image a bundle carries (one MCP clients show), if any."""
    return next((m for m in IMAGE_TYPES if isinstance(data.get(m), (str, list))), None)


def image_bytes(data: dict[str, Any], mime: str) -> str:
    """The image's base64 text, as MCP carries it (no line breaks)."""
    return "".join(_joined(data[mime]).split())


class Images:
    """The images one read attaches as image content, up to ``max_bytes`` (decoded) in all;
    ``None`` as a budget: name them, attach none."""

    def __init__(self, max_bytes: int | None) -> None:
        self.left = max_bytes
        self.blocks: list[ImageContent] = []

    def note(self, mime: str, b64: str, resource: str | None = None) -> str:
        """Attach the image if it fits; the note that names it where its output is read (and,
        if it is not attached, the output's ``resource``, which serves it)."""
        size = len(b64) * 3 // 4 - b64[-2:].count("=")
        if self.left is None:
            return f"[{mime}, {size:,} bytes: not attached" + (f"; read it as resource {resource}]" if resource else "]")
        if size > self.left:
            where = f"read it as resource {resource}" if resource else "read the cell alone with cell_get"
            return f"[{mime}, {size:,} bytes: not attached, over this answer's image budget; {where}, or raise max_image_bytes]"
        self.left -= size
        self.blocks.append(ImageContent(type="image", data=b64, mime_type=mime))
        return f"[{mime}, {size:,} bytes: image {len(self.blocks)} attached to this answer]"


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


def summarize(outputs: list[dict[str, Any]], max_chars: int, images: Images | None = None,
              rest: str | None = IN_THE_NOTEBOOK, resource: str | None = None) -> list[dict[str, Any]]:
    """Outputs for reading: small, readable, with what was left out named. With ``images``, an
    output's image is attached there (within its budget) and its text names it. With ``resource``
    (the cell's resource URI), what is left out of an output names the output's resource."""
    summary = []
    for at, output in enumerate(outputs if isinstance(outputs, list) else []):
        whole = f"{resource}/outputs/{at}" if resource else None
        where = f"all of it: resource {whole}" if whole else rest
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
        image = image_of(data) if images is not None else None
        if image is None or images is None:  # (no images: no image either)
            item["text"] = truncate(output_text(output), max_chars, where)
        else:  # its text form if it has one beside the image, then the image's note
            text = strip_ansi(best_text(data) or "")
            note = images.note(image, image_bytes(data, image), whole)
            item["text"] = f"{truncate(text, max_chars, where)}\n{note}" if text else note
        summary.append(item)
    return summary


def to_content(outputs: list[dict[str, Any]], max_chars: int = DEFAULT_MAX_CHARS,
               rest: str | None = IN_THE_NOTEBOOK) -> list[Any]:
    """Outputs as MCP content blocks: text (merged, cut to ``max_chars``) and images."""
    blocks: list[Any] = []
    texts: list[str] = []
    for output in outputs if isinstance(outputs, list) else []:
        data = _dict(_dict(output).get("data"))
        image = image_of(data)
        if image is not None:
            blocks.append(ImageContent(type="image", data=image_bytes(data, image), mime_type=image))
            text = best_text(data)
            if text:
                texts.append(strip_ansi(text))
            continue
        texts.append(output_text(output))
    text = "".join(t if t.endswith("\n") else t + "\n" for t in texts if t)
    if text:
        blocks.insert(0, TextContent(type="text", text=truncate(text, max_chars, rest)))
    return blocks
