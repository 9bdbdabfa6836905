"""pycrdt's internals: a document's native (Rust) side."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def observe_natively(ydoc: Any, callback: Callable[[Any], None]) -> Any:
    """Call ``callback(event)`` (``event.update``: the transaction's update) as each transaction of
    ``ydoc`` ends, subscribed on its native document (``Doc._doc``). ``Doc.observe`` would keep the
    Python document in its own callback, a cycle the garbage collector cannot see, which keeps a
    closed room's document alive for ever. The subscription is returned."""
    return ydoc._doc.observe(callback)
