"""Who gets in without the token: the box's own deployment, by the address it connects from.

charly tells a box's siblings where its MCP server is (``CHARLY_MCP_SERVERS``: a name and a
URL) and nothing else; hermes, openwebui and charly's own ``mcp`` check connect with no header.
They reach the box over its container network, or from the host through a port published on
the host's loopback (which the container engine hands in from the network's gateway). This
identity provider lets exactly those in with no token, as one user, and keeps Jupyter's token
(or password) for everyone else: a request from another machine or network namespace keeps
its own address, which is on none of those networks, and is refused unless it sends the token.

A browser never gets in this way (it may run on the host: a page it loads must not reach the
box by its address), nor does a request relayed by a proxy (every client behind it would share
the proxy's address): those use the token or a login, as before. See the README's deploy section.
"""

from __future__ import annotations

import inspect
import ipaddress
import socket
import struct
import time
from pathlib import Path
from typing import Any

from jupyter_server.auth.identity import PasswordIdentityProvider, User
from traitlets import List, Unicode, validate

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
CONTAINER_MARKERS = ("/run/.containerenv", "/.dockerenv")  # podman's and docker's
BROWSER_HEADERS = ("Origin", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest")
PROXY_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-Ip")
CREDENTIAL_HEADERS = ("Authorization",)  # a client that sends a token means it: a wrong one is refused
REREAD_SECONDS = 10.0  # a container can be attached to another network while it runs


def connected_networks(route_table: str) -> list[Network]:
    """The IPv4 networks a machine is directly on, from the text of /proc/net/route (the rows
    with no gateway), leaving out the default route."""
    networks: list[Network] = []
    for line in route_table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8 or fields[2] != "00000000" or fields[1] == "00000000":
            continue
        address = socket.inet_ntoa(struct.pack("<L", int(fields[1], 16)))
        mask = socket.inet_ntoa(struct.pack("<L", int(fields[7], 16)))
        networks.append(ipaddress.ip_network(f"{address}/{mask}", strict=False))
    return networks


def in_container() -> bool:
    return any(Path(marker).exists() for marker in CONTAINER_MARKERS)


def container_networks() -> list[Network]:
    """The networks this container is attached to; none when this is not a container, where the
    connected networks would be a LAN."""
    if not in_container():
        return []
    try:
        return connected_networks(Path("/proc/net/route").read_text())
    except OSError:
        return []


def peer_address(request: Any) -> str | None:
    """The TCP peer of a request: the socket's own address, never a header (Jupyter's
    ``trust_xheaders`` would let a client name its own ``remote_ip``)."""
    address = getattr(getattr(request.connection, "context", None), "address", None)
    return address[0] if isinstance(address, tuple) and address else None


def trusted_by_network(headers: Any, peer: str | None, networks: list[Network]) -> Network | None:
    """The trusted network a request comes from, or None: it must come straight from a client
    that is not a browser and sends no credential of its own, from an address on ``networks``."""
    if peer is None or any(name in headers for name in (*BROWSER_HEADERS, *PROXY_HEADERS, *CREDENTIAL_HEADERS)):
        return None
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return next((net for net in networks if address.version == net.version and address in net), None)


class DeploymentIdentityProvider(PasswordIdentityProvider):
    """Jupyter's token and password, and, without them, the box's deployment by its address."""

    trusted_networks = List(
        Unicode(),
        default_value=["loopback", "container"],
        config=True,
        help="Where a request may come from to get in without the token: CIDR networks, 'loopback' "
        "(127.0.0.0/8 and ::1) and 'container' (the networks this container is attached to, read from "
        "/proc/net/route; none when the server does not run in a podman or docker container). "
        "Default: ['loopback', 'container'].",
    )
    deployment_username = Unicode(
        "deployment",
        config=True,
        help="The user every request let in by its network is (one principal: its MCP sessions and "
        "tasks are shared by the deployment). Default: 'deployment'.",
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._networks: list[Network] = []
        self._read_at = float("-inf")
        self._seen: set[str | None] = set()  # peers already logged

    @validate("trusted_networks")
    def _valid_networks(self, proposal: dict[str, Any]) -> list[str]:
        for entry in proposal["value"]:
            if entry not in ("loopback", "container"):
                ipaddress.ip_network(entry, strict=False)  # a TraitError-worthy ValueError names it
        return proposal["value"]

    def networks(self) -> list[Network]:
        if time.monotonic() - self._read_at > REREAD_SECONDS:
            networks: list[Network] = []
            for entry in self.trusted_networks:
                if entry == "loopback":
                    networks.extend(LOOPBACK)
                elif entry == "container":
                    networks.extend(container_networks())
                else:
                    networks.append(ipaddress.ip_network(entry, strict=False))
            self._networks, self._read_at = networks, time.monotonic()
        return self._networks

    async def get_user(self, handler: Any) -> User | None:  # type: ignore[override]
        user = super().get_user(handler)
        if inspect.isawaitable(user):
            user = await user
        if user is not None:
            return user
        if handler.get_argument("token", ""):
            return None  # a token in the URL was sent and is wrong
        peer = peer_address(handler.request)
        network = trusted_by_network(handler.request.headers, peer, self.networks())
        if network is None:
            return None
        self._log_first(peer, network)
        handler._token_authenticated = True  # no cookie vouches for it: nothing for XSRF to guard
        return User(username=self.deployment_username, name=self.deployment_username,
                    display_name=f"{self.deployment_username} ({peer})")

    def _log_first(self, peer: str | None, network: Network) -> None:
        if peer not in self._seen and len(self._seen) < 1024:
            self._seen.add(peer)
            self.log.info("jupyter_mcp: %s let in without a token, as %r: it is on the deployment's network %s",
                          peer, self.deployment_username, network)
