"""Tornado's request handler internals: whether the response is finished, and a header it holds."""

from __future__ import annotations

from typing import Any


def response_finished(handler: Any) -> bool:
    """Whether the handler's response was finished (``RequestHandler._finished``): finishing it
    twice raises, and tornado has no public way to ask."""
    return handler._finished


def response_header(handler: Any, name: str) -> str | None:
    """A header set on the handler's response so far (``RequestHandler._headers``): tornado can set
    and clear one, not read it back."""
    return handler._headers.get(name)
