"""jupyter_server's internals: its stop handler, its request handler's authentication state, and
its gateway kernel client's reader."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: What ``user_found_so_far`` answers before jupyter_server looked for the request's user.
NOT_LOOKED_YET = object()


def signal_stop_handler(serverapp: Any) -> Callable[[int, Any], None]:
    """The server's own SIGTERM handler (``ServerApp._signal_stop``), which stops the server with
    its stop hooks run: jupyter_server installs it for SIGINT only when stdin is a terminal."""
    return serverapp._signal_stop


def mark_token_authenticated(handler: Any) -> None:
    """Tell jupyter_server the request is authenticated without a cookie (``_token_authenticated``,
    what its token check sets), so it skips the XSRF check, which guards cookies only."""
    handler._token_authenticated = True


def user_found_so_far(handler: Any) -> Any:
    """The user jupyter_server found for the request (``_jupyter_current_user``; falsy: nobody), or
    ``NOT_LOOKED_YET``: its XSRF check runs before and after it looks, and only the public
    ``current_user`` would look now."""
    return getattr(handler, "_jupyter_current_user", NOT_LOOKED_YET)


def gateway_response_router(client: Any) -> Callable[[], None]:
    """The gateway kernel client's websocket reader (``GatewayKernelClient._route_responses``), to
    run in a thread of our own: its ``start_channels`` would open the websocket on the event loop."""
    return client._route_responses
