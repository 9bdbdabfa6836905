"""A kernel's client that behaves the same whether the kernel is local or on a gateway.

Jupyter Server hands out each kernel's client. A local kernel's talks ZeroMQ. A gateway
kernel's (``--GatewayClient.url``: Kernel Gateway, Enterprise Gateway) talks to the gateway
over one websocket that a thread reads into a queue per channel, and it differs where it
matters to the one loop that waits on kernels:

- ``start_channels`` is a coroutine (the local one is not) that opens the websocket
  synchronously (the event loop would wait as long as the gateway takes to answer), without
  the gateway's headers (a gateway that checks its auth token refuses it with 401, while
  JupyterLab's websocket, proxied by Jupyter Server with them, gets in), and reads it in a
  thread that is not a daemon (the process cannot exit while it runs);
- ``get_*_msg`` polls its queue with ``asyncio.sleep(0)``: a busy loop for as long as a cell
  prints nothing;
- ``stop_channels`` closes the websocket and joins the reader thread;
- a closed websocket shows as an error from the queue (the reader finished), not as a dead
  kernel.

``kernel_client`` gives the local client as it is, and wraps a gateway's in ``GatewayClient``:
its websocket opened in a worker thread with the gateway's headers and read by a daemon
thread, closed in another thread, its queues polled with a short sleep, a closed connection
raised as ``ConnectionClosed``.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from typing import Any

import websocket
from jupyter_server.gateway.gateway_client import GatewayClient as GatewaySettings
from jupyter_server.gateway.managers import GatewayKernelClient, GatewayKernelManager
from jupyter_server.utils import url_path_join
from tornado.escape import url_escape

from ..adapters.jupyter_server_internals import gateway_response_router

POLL_MIN_SEC = 0.001  # a gateway queue is polled this soon after a miss, then less often
POLL_MAX_SEC = 0.02  # at most this long between polls: an output's extra latency, at worst


class ConnectionClosed(Exception):
    """The websocket to the gateway closed (the gateway stopped, or the kernel was culled there)."""


def is_remote(kernel_manager: Any) -> bool:
    """Whether the kernel runs on a gateway."""
    return isinstance(kernel_manager, GatewayKernelManager)


def kernel_client(kernel_manager: Any) -> Any:
    """A new client of the kernel ``kernel_manager`` manages, not started."""
    client = kernel_manager.client()
    return GatewayClient(client) if isinstance(client, GatewayKernelClient) else client


class GatewayClient:
    """A gateway kernel's client with the local client's manners (see the module's docstring)."""

    def __init__(self, client: GatewayKernelClient) -> None:
        self.client = client

    @property
    def closed(self) -> bool:
        """The websocket is gone: the gateway closed it, or it stopped."""
        socket = self.client.channel_socket
        return socket is None or not socket.connected

    async def start_channels(self) -> None:
        opening = asyncio.ensure_future(asyncio.to_thread(self._open))
        try:
            await asyncio.shield(opening)
        except asyncio.CancelledError:  # the thread opens it anyway: close it once it is open
            opening.add_done_callback(lambda done: self.stop_channels() if done.exception() is None else None)
            raise

    def _open(self) -> None:
        """Open the kernel's websocket on the gateway, with the headers Jupyter Server sends the
        gateway on every request (its auth token among them), and start reading it."""
        gateway = GatewaySettings.instance()
        client = self.client
        url = url_path_join(gateway.ws_url or "", gateway.kernels_endpoint, url_escape(client.kernel_id), "channels")
        client.channel_socket = websocket.create_connection(
            url, timeout=gateway.KERNEL_LAUNCH_TIMEOUT, enable_multithread=True,
            header=gateway.load_connection_args().get("headers") or {},
            sslopt={"ca_certs": gateway.ca_certs, "certfile": gateway.client_cert, "keyfile": gateway.client_key})
        super(GatewayKernelClient, client).start_channels()  # jupyter_client's: the channels, as queues
        client.response_router = threading.Thread(target=gateway_response_router(client), name="gateway kernel reader",
                                                  daemon=True)
        client.response_router.start()

    def stop_channels(self) -> None:
        """Closed in a daemon thread: nothing waits for the gateway to acknowledge the close."""
        if self.client.channel_socket is not None:
            threading.Thread(target=self.client.stop_channels, name="close gateway kernel client",
                             daemon=True).start()

    async def wait_for_ready(self, timeout: float) -> None:
        """The kernel answered a ``kernel_info_request`` (what jupyter_client waits for too)."""
        deadline = time.monotonic() + timeout
        while True:
            msg_id = self.client.kernel_info()
            try:
                while True:
                    msg = await self.get_shell_msg(timeout=max(0.01, min(1.0, deadline - time.monotonic())))
                    if msg.get("parent_header", {}).get("msg_id") == msg_id:
                        return
            except queue.Empty:
                pass
            except ConnectionClosed as exc:
                raise RuntimeError(str(exc)) from None
            if time.monotonic() >= deadline:
                raise RuntimeError(f"the kernel did not answer within {timeout:g}s")

    def execute(self, code: str, **kwargs: Any) -> str:
        return self.client.execute(code, **kwargs)

    async def get_iopub_msg(self, timeout: float) -> dict[str, Any]:
        return await self._get(self.client.iopub_channel, timeout)

    async def get_shell_msg(self, timeout: float) -> dict[str, Any]:
        return await self._get(self.client.shell_channel, timeout)

    async def get_stdin_msg(self, timeout: float) -> dict[str, Any]:
        return await self._get(self.client.stdin_channel, timeout)

    def input(self, line: str) -> None:
        """The ``input_reply``, named for the stdin channel: jupyter_server's gateway client sends
        a message without its channel, and the gateway then routes it to shell, where the kernel
        never reads it."""
        msg = self.client.session.msg("input_reply", {"value": line})
        self.client.stdin_channel.send({**msg, "channel": "stdin"})

    @staticmethod
    async def _get(channel: Any, timeout: float) -> dict[str, Any]:
        """The next message of a gateway channel's queue (fed by the reader thread), or
        ``queue.Empty`` after ``timeout``: polled, each miss waiting a little longer."""
        deadline = time.monotonic() + timeout
        pause = POLL_MIN_SEC
        while True:
            try:
                return channel.get_nowait()
            except queue.Empty:
                if channel.response_router_finished:
                    raise ConnectionClosed("the websocket to the kernel gateway closed") from None
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                await asyncio.sleep(min(pause, left))
                pause = min(pause * 2, POLL_MAX_SEC)
