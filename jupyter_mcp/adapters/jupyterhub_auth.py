"""JupyterHub's single-user authentication internals."""

from __future__ import annotations

from typing import Any


def hub_user_of_request(handler: Any) -> dict | None:
    """What the hub said of this request's token or login (``HubAuthenticated._cached_hub_user``,
    kept per request), to tell a client why it was let in as nobody: the hub's own answer is a bare 403."""
    return getattr(handler, "_cached_hub_user", None)
