"""Kernel messages as nbformat outputs: what a run produced, and the iopub messages turned
into outputs and document events as JupyterLab turns them."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

OutputEvent = dict[str, Any]  # {"kind": "output" | "stream" | "clear" | "update", ...}
#: Called with each event and the whole list of outputs so far (after the event).
OnEvent = Callable[[OutputEvent, list[dict[str, Any]]], Awaitable[None]]
#: How a run ended: "aborted" is the kernel refusing a request right after an earlier one failed.
RunStatus = Literal["ok", "error", "timeout", "interrupted", "aborted"]


@dataclass
class Execution:
    """What one execution produced."""

    status: RunStatus = "ok"
    execution_count: int | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    message: str | None = None  # a note for the agent (timeout, interrupt)


class Collector:
    """Turns iopub messages into nbformat outputs and document events, as JupyterLab does."""

    def __init__(self, result: Execution, on_event: OnEvent | None) -> None:
        self.result = result
        self.on_event = on_event
        self.clear_on_next = False
        self.displays: defaultdict[str, list[int]] = defaultdict(list)

    async def emit(self, event: OutputEvent) -> None:
        if self.on_event is not None:
            await self.on_event(event, self.result.outputs)

    async def handle(self, msg: dict[str, Any]) -> None:
        """Apply one message to the outputs."""
        kind = msg["msg_type"]
        content = msg["content"]
        outputs = self.result.outputs
        if kind == "execute_input":
            count = content.get("execution_count")
            if count is not None:
                self.result.execution_count = int(count)
            return
        if kind == "clear_output":
            if content.get("wait"):
                self.clear_on_next = True
                return
            await self._clear()
        elif kind == "update_display_data":
            indexes = self.displays.get(_display_id(content) or "", [])
            if not indexes:
                return
            update = _output_from_msg("display_data", content)
            for i in indexes:
                outputs[i] = {**outputs[i], "data": update["data"], "metadata": update["metadata"]}
                await self.emit({"kind": "update", "index": i, "output": outputs[i]})
        elif kind in ("stream", "display_data", "execute_result", "error"):
            await self._append(kind, content)

    async def _append(self, kind: str, content: dict[str, Any]) -> None:
        """A new output (or more text for the last stream), after a pending clear_output(wait=True)."""
        outputs = self.result.outputs
        if self.clear_on_next:
            await self._clear()
        output = _output_from_msg(kind, content)
        if kind == "stream" and outputs and outputs[-1].get("output_type") == "stream" \
                and outputs[-1].get("name") == output.get("name"):
            outputs[-1] = {**outputs[-1], "text": outputs[-1]["text"] + output["text"]}
            await self.emit({"kind": "stream", "index": len(outputs) - 1, "text": output["text"]})
            return
        outputs.append(output)
        display_id = _display_id(content)
        if display_id:
            self.displays[display_id].append(len(outputs) - 1)
        await self.emit({"kind": "output", "index": len(outputs) - 1, "output": output})

    async def _clear(self) -> None:
        self.clear_on_next = False
        self.result.outputs.clear()
        self.displays.clear()
        await self.emit({"kind": "clear"})


def _display_id(content: dict[str, Any]) -> str | None:
    """The display id a message is tracked by: only a string is one (anything else a kernel put
    there, a list say, is not used for display tracking; the output is still stored)."""
    transient = content.get("transient")
    display_id = transient.get("display_id") if isinstance(transient, dict) else None
    return display_id if isinstance(display_id, str) else None


#: Mime types whose value may be any JSON (nbformat v4's schema); every other one holds text.
_JSON_MIME = re.compile(r"^application/(.*\+)?json$")


def _text(value: Any) -> str:
    """A value that must be a string, as one: itself, or its JSON text (what the kernel sent)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # not JSON after all (a fake kernel): its repr
        return repr(value)


def _multiline(value: Any) -> str | list[str]:
    """An nbformat multiline string: a string, or a list of strings (each item as text)."""
    if isinstance(value, list):
        return [_text(v) for v in value]
    return _text(value)


def _mimebundle(value: Any) -> dict[str, Any]:
    """A mime bundle that nbformat accepts: JSON mime types keep any JSON, every other value is
    text (a number sent as ``text/plain`` becomes its JSON text, ``5`` → ``"5"``)."""
    if not isinstance(value, dict):
        return {}
    return {str(mime): data if _JSON_MIME.match(str(mime)) else _multiline(data) for mime, data in value.items()}


def _output_from_msg(kind: str, content: dict[str, Any]) -> dict[str, Any]:
    """An nbformat v4 output for an iopub message, valid whatever the kernel put in it (built
    directly: validating every output through nbformat's schema costs more than the kernel
    round trip). A value of the wrong type is stored as its text, so the run that produced it
    still answers, and every later read of the notebook works."""
    if not isinstance(content, dict):
        content = {}
    if kind == "stream":
        name = content.get("name")
        text = content.get("text", "")
        return {"output_type": "stream", "name": name if isinstance(name, str) else "stdout",
                "text": "".join(_multiline(text)) if isinstance(text, list) else _text(text)}
    if kind == "error":
        traceback = content.get("traceback") or []
        return {"output_type": "error", "ename": _text(content.get("ename", "")),
                "evalue": _text(content.get("evalue", "")),
                "traceback": [_text(t) for t in (traceback if isinstance(traceback, list) else [traceback])]}
    metadata = content.get("metadata")
    output: dict[str, Any] = {"output_type": kind, "data": _mimebundle(content.get("data")),
              "metadata": dict(metadata) if isinstance(metadata, dict) else {}}
    if kind == "execute_result":
        count = content.get("execution_count")
        output["execution_count"] = int(count) if isinstance(count, (int, float)) and not isinstance(count, bool) \
            and count >= 0 else None
    return output
