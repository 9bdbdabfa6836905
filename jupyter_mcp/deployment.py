"""Who gets in without the token: the box's own deployment, by where it connects from, and only
to what its siblings use.

What this trusts, first: a TCP relay that runs inside the deployment (``ssh -L`` or ``kubectl
port-forward`` reaching the box's loopback, ``socat`` on its network) passes its client's bytes
unchanged, so when that client names the box in its ``Host`` header it cannot be told apart from
the deployment and gets in; whoever can open such a relay can already reach the box. Every other
relay we know of is refused (below). On a host shared with people or containers you do not
trust, start the box without this provider and give siblings the token.

charly tells a box's siblings where its MCP server is (``CHARLY_MCP_SERVERS``: a name and a
URL) and nothing else; hermes, Open WebUI and charly's own ``mcp`` check connect with no header.
They reach the box over its container network, or from the host through a port published on
the host's loopback (which the container engine hands in from the network's gateway). A request
with no credential gets in, as ``deployment@<its address>`` (each sibling its own principal:
its own sessions, tasks and caps), when all of this holds:

- it comes straight from an address on ``trusted_networks`` (the socket's own peer address,
  never a header);
- it asks for ``/mcp`` or for what Open WebUI's code execution does (start a kernel, open its
  channels, shut it down), and nothing else: no terminals, contents, files, sessions or pages;
- it is not a browser's: no ``Origin`` or ``Sec-Fetch-*``, and its ``Host`` names the box (a
  loopback name, or, from the container network, one of the box's own names or addresses at the
  port it connected to), which a page under any other name (DNS rebinding) cannot send;
- it is not relayed: no forwarding header (``Forwarded``, ``Via``, ``X-Forwarded-*``,
  ``X-Real-Ip``, …), not HTTP/1.0 (nginx's default ``proxy_pass``), and a ``Host`` that names
  the box rather than the relay (what a client of ``socat`` or ``ssh -L`` on another machine
  sends);
- it sends no credential of its own (a wrong token is refused, not overlooked).

Everyone else uses the token or a login, as before. ``admission`` is the decision, a pure
function of the request and what the box is called; ``DeploymentIdentityProvider`` reads the
networks and names (again every ``REREAD_SECONDS``) and logs each refused reason once.
"""

from __future__ import annotations

import inspect
import ipaddress
import re
import socket
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_server.auth.identity import PasswordIdentityProvider, User
from traitlets import List, Unicode, validate

from .adapters.jupyter_server_internals import mark_token_authenticated

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
CONTAINER_MARKERS = ("/run/.containerenv", "/.dockerenv")  # podman's and docker's
BROWSER_HEADERS = ("Origin", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Fetch-User")
PROXY_HEADERS = frozenset({"forwarded", "via", "x-real-ip", "x-client-ip", "client-ip", "true-client-ip",
                           "cf-connecting-ip", "fastly-client-ip", "x-cluster-client-ip", "x-originating-ip",
                           "x-proxyuser-ip"})
PROXY_HEADER_PREFIXES = ("x-forwarded-", "x-original-")
CREDENTIAL_HEADERS = ("Authorization",)  # a client that sends a credential means it: a wrong one is refused
REREAD_SECONDS = 10.0  # a container can be attached to another network while it runs

# What the deployment's siblings use, by method (None: any) and path below the base URL: MCP,
# and Open WebUI's code execution (POST api/kernels, the websocket api/kernels/<id>/channels,
# DELETE api/kernels/<id>; backend/open_webui/utils/code_interpreter.py).
ROUTES = ((None, re.compile(r"mcp")),
          ("POST", re.compile(r"api/kernels")),
          ("GET", re.compile(r"api/kernels/[\w-]+/channels")),
          ("DELETE", re.compile(r"api/kernels/[\w-]+")))


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


def local_addresses(fib_trie: str, if_inet6: str) -> set[Address]:
    """This machine's own addresses, from /proc/net/fib_trie (IPv4: the ``/32 host LOCAL``
    entries) and /proc/net/if_inet6."""
    found: set[Address] = set()
    last = None
    for line in fib_trie.splitlines():
        text = line.strip()
        if text.startswith(("|--", "+--")):
            last = text[3:].split()[0]
        elif text.startswith("/32 host LOCAL") and last:
            found.add(ipaddress.ip_address(last))
    for line in if_inet6.splitlines():
        fields = line.split()
        if fields and len(fields[0]) == 32:
            found.add(ipaddress.ip_address(":".join(fields[0][i:i + 4] for i in range(0, 32, 4))))
    return found


def hosts_names(hosts_file: str, addresses: set[Address]) -> set[str]:
    """The names an /etc/hosts text gives any of ``addresses`` (podman writes the container's
    name and host name there, for its own address)."""
    names: set[str] = set()
    for line in hosts_file.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) < 2:
            continue
        try:
            address = ipaddress.ip_address(fields[0].split("%", 1)[0])
        except ValueError:
            continue
        if address in addresses:
            names.update(name.lower().rstrip(".") for name in fields[1:])
    return names


def in_container() -> bool:
    return any(Path(marker).exists() for marker in CONTAINER_MARKERS)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def container_networks() -> list[Network]:
    """The networks this container is attached to; none when this is not a container, where the
    connected networks would be a LAN."""
    return connected_networks(_read("/proc/net/route")) if in_container() else []


@dataclass(frozen=True)
class BoxNames:
    """What the box is called: ``loopback`` from anywhere (``localhost``, and the names /etc/hosts
    gives loopback addresses), ``own`` (its host name, the names /etc/hosts gives its own
    addresses, configured names) only from the container network, at the port connected to."""

    own_addresses: frozenset[Address] = frozenset()
    loopback: frozenset[str] = frozenset({"localhost"})
    own: frozenset[str] = frozenset()

    @classmethod
    def read(cls, extra: list[str], beyond_loopback: bool) -> BoxNames:
        """From this machine's /etc/hosts, addresses and host name; its own names only when the
        deployment reaches beyond loopback (a box on loopback alone is called by loopback names)."""
        hosts = _read("/etc/hosts")
        loopback_addresses = {a for a in map(_address, hosts.split()) if a is not None and a.is_loopback}
        loopback = {"localhost"} | hosts_names(hosts, loopback_addresses)
        if not beyond_loopback:
            return cls(loopback=frozenset(loopback))
        addresses = local_addresses(_read("/proc/net/fib_trie"), _read("/proc/net/if_inet6"))
        addresses = {a for a in addresses if not a.is_loopback}
        own = hosts_names(hosts, addresses) | {socket.gethostname().lower()} | {e.lower().rstrip(".") for e in extra}
        return cls(frozenset(addresses), frozenset(loopback), frozenset(own - loopback))


def _address(text: str) -> Address | None:
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    return address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped else address


def split_host(host: str) -> tuple[str, int | None]:
    """A Host header as (lower-case name or address, port or None)."""
    host = host.strip().lower()
    if host.startswith("["):  # [v6]:port
        name, _, rest = host[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif host.count(":") == 1:
        name, port = host.split(":")
    else:
        name, port = host, ""
    return name.rstrip("."), int(port) if port.isdigit() else None


@dataclass(frozen=True)
class Knock:
    """A request as the door sees it."""

    method: str
    path: str  # below the base URL, as Tornado routes it (not decoded)
    version: str
    headers: Any  # a case-insensitive mapping
    peer: str | None  # the socket's peer address
    port: int | None  # the local port the request connected to
    query_token: bool = field(default=False)  # a ?token= was sent


def admission(knock: Knock, networks: list[Network], names: BoxNames) -> Network | str:
    """The trusted network a credential-less request comes from, or why it is not let in."""
    address = _address(knock.peer) if knock.peer else None
    if address is None:
        return "no peer address"
    network = next((net for net in networks if address.version == net.version and address in net), None)
    if network is None:
        return "not on the deployment's networks"
    if not any((method is None or method == knock.method) and pattern.fullmatch(knock.path)
               for method, pattern in ROUTES):
        return "only /mcp and kernels are open without the token"
    headers = knock.headers
    if any(name in headers for name in BROWSER_HEADERS):
        return "a browser's request"
    relayed = [name for name in headers if name.lower() in PROXY_HEADERS or name.lower().startswith(PROXY_HEADER_PREFIXES)]
    if relayed:
        return f"relayed by a proxy ({relayed[0]})"
    if knock.query_token or any(name in headers for name in CREDENTIAL_HEADERS):
        return "it sends a credential of its own"
    if knock.version != "HTTP/1.1":
        return f"{knock.version}: a relay (nginx's proxy_pass speaks HTTP/1.0 by default)"
    name, port = split_host(headers.get("Host", ""))
    host_address = _address(name)
    if name in names.loopback or (host_address is not None and host_address.is_loopback):
        return network
    if address.is_loopback:
        return "its Host is not a loopback name (a browser's page under another name, or a relay)"
    if (name in names.own or host_address in names.own_addresses) and (port or 80) == knock.port:
        return network
    return "its Host does not name the box (a browser's page under another name, or a relay)"


def peer_address(request: Any) -> str | None:
    """The TCP peer of a request: the socket's own address, never a header (Jupyter's
    ``trust_xheaders`` would let a client name its own ``remote_ip``)."""
    address = getattr(getattr(request.connection, "context", None), "address", None)
    return address[0] if isinstance(address, tuple) and address else None


def local_port(request: Any) -> int | None:
    """The port the request connected to (the server's own socket)."""
    try:
        return request.connection.stream.socket.getsockname()[1]
    except (AttributeError, OSError, IndexError):
        return None


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
    host_names = List(
        Unicode(),
        config=True,
        help="More names siblings on the container network call the box by (network aliases; docker's "
        "container name, which docker does not write into /etc/hosts), besides its host name and the "
        "names /etc/hosts gives its addresses (podman writes the container's name there). Default: none.",
    )
    deployment_username = Unicode(
        "deployment",
        config=True,
        help="The name every request let in by its network goes by, followed by '@' and its address: "
        "each address is its own principal (its MCP sessions, tasks and caps). Default: 'deployment'.",
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._networks: list[Network] = []
        self._names = BoxNames()
        self._read_at = float("-inf")
        self._logged: set[tuple[str | None, str]] = set()

    @validate("trusted_networks")
    def _valid_networks(self, proposal: dict[str, Any]) -> list[str]:
        for entry in proposal["value"]:
            if entry not in ("loopback", "container"):
                ipaddress.ip_network(entry, strict=False)  # a TraitError-worthy ValueError names it
        return proposal["value"]

    def networks(self) -> list[Network]:
        self._reread()
        return self._networks

    def names(self) -> BoxNames:
        self._reread()
        return self._names

    def _reread(self) -> None:
        if time.monotonic() - self._read_at <= REREAD_SECONDS:
            return
        networks: list[Network] = []
        for entry in self.trusted_networks:
            if entry == "loopback":
                networks.extend(LOOPBACK)
            elif entry == "container":
                networks.extend(container_networks())
            else:
                networks.append(ipaddress.ip_network(entry, strict=False))
        self._networks = networks
        self._names = BoxNames.read(self.host_names, any(not net.is_loopback for net in networks))
        self._read_at = time.monotonic()

    async def get_user(self, handler: Any) -> User | None:
        user = super().get_user(handler)
        if inspect.isawaitable(user):
            user = await user
        if user is not None:
            return user
        request = handler.request
        base = handler.base_url if handler.base_url.endswith("/") else handler.base_url + "/"
        if not request.path.startswith(base):
            return None
        peer = peer_address(request)
        knock = Knock(request.method, request.path[len(base):], request.version, request.headers, peer,
                      local_port(request), query_token=bool(handler.get_argument("token", "")))
        verdict = admission(knock, self.networks(), self.names())
        if isinstance(verdict, str):
            self._log_once(peer, f"needs the token: {verdict}", debug=verdict.startswith("not on"))
            return None
        name = f"{self.deployment_username}@{_address(peer or '')}"
        self._log_once(peer, f"let in without a token, as {name}: it is on the deployment's network {verdict}")
        mark_token_authenticated(handler)  # no cookie vouches for it: nothing for XSRF to guard
        return User(username=name, name=name, display_name=name)

    def _log_once(self, peer: str | None, what: str, debug: bool = False) -> None:
        if (peer, what) not in self._logged and len(self._logged) < 1024:
            self._logged.add((peer, what))
            (self.log.debug if debug else self.log.info)("jupyter_mcp: %s %s", peer, what)
