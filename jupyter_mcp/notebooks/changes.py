"""Watching a live document and describing its changes in an agent's terms."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from typing_extensions import NotRequired, TypedDict  # pydantic needs these on Python < 3.12

from .cells import id_of
from .rooms import LiveNotebook


class Change(TypedDict):
    """``kind``: the cell field that changed ("source", "outputs", "execution_count", "cell_type",
    "metadata", ...), or "cells_inserted", "cells_deleted", "notebook_metadata"."""

    kind: str
    cell_id: NotRequired[str | None]
    cell_index: NotRequired[int]
    cell_ids: NotRequired[list[str | None]]  # cells_inserted
    count: NotRequired[int]  # cells_deleted


class Watched(TypedDict):
    path: str
    changed: bool
    changes: list[Change]
    waited_seconds: float


def describe_changes(ynb: Any, events: list[Any]) -> list[Change]:
    """What a batch of deep events on ``ycells`` changed.

    Must run inside the observer callback: events only live for their transaction.
    """
    changes: list[Change] = []
    for event in events:
        path = list(event.path)
        if not path:  # the cell list itself: inserts and deletes
            position = 0
            for op in event.delta:
                if "retain" in op:
                    position += op["retain"]
                elif "insert" in op:
                    ids = [id_of(c) for c in op["insert"]]
                    changes.append({"kind": "cells_inserted", "cell_index": position, "cell_ids": ids})
                    position += len(ids)
                elif "delete" in op:
                    changes.append({"kind": "cells_deleted", "cell_index": position, "count": op["delete"]})
            continue
        index = path[0]
        try:
            changed_id = id_of(ynb.ycells[index])
        except (IndexError, TypeError):
            changed_id = None
        if len(path) > 1:
            kinds = [str(path[1])]
        else:
            kinds = [k for k in getattr(event, "keys", {}) if k != "execution_state"] or ["execution_state"]
        for kind in kinds:
            change: Change = {"kind": kind, "cell_id": changed_id, "cell_index": index}
            if change not in changes:
                changes.append(change)
    return changes


async def watch(nb: LiveNotebook, timeout: float) -> Watched:
    """Wait for the first change to the notebook after this call, or ``timeout``."""
    ynb = nb.doc
    changes: list[Change] = []
    fired = asyncio.Event()

    def on_cells(events: list[Any]) -> None:
        changes.extend(describe_changes(ynb, events))
        fired.set()

    def on_meta(events: list[Any]) -> None:
        changes.append({"kind": "notebook_metadata"})
        fired.set()

    subscriptions = [(ynb.ycells, ynb.ycells.observe_deep(on_cells)), (nb.ymeta, nb.ymeta.observe_deep(on_meta))]
    started = time.monotonic()
    try:
        await asyncio.wait_for(fired.wait(), timeout)
    except asyncio.TimeoutError:
        pass
    finally:
        for shared, subscription in subscriptions:
            shared.unobserve(subscription)
    return {"path": nb.path, "changed": bool(changes), "changes": changes,
            "waited_seconds": round(time.monotonic() - started, 3)}
