"""Who the deployment's identity provider lets in without a token, decided from the request's
peer address, method, path, version and headers (pure logic; tests/test_box.py and test_container.py do it for real)."""

from __future__ import annotations

import ipaddress

import pytest

from tornado.httputil import HTTPHeaders

from jupyter_mcp.deployment import (
    LOOPBACK,
    BoxNames,
    Knock,
    admission,
    connected_networks,
    hosts_names,
    local_addresses,
    split_host,
)

pytestmark = pytest.mark.unit

ROUTES = """Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0101580A\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t0000580A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
eth1\t0007590A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth1\t0000A8C0\t0107590A\t0003\t0\t0\t0\t0000FFFF\t0\t0\t0
"""


def test_the_networks_a_container_is_on_come_from_its_route_table():
    """Directly connected networks only: not the default route, not a network behind a gateway."""
    assert connected_networks(ROUTES) == [ipaddress.ip_network("10.88.0.0/16"), ipaddress.ip_network("10.89.7.0/24")]
    assert connected_networks("Iface\tDestination\n") == []


NETS = [*LOOPBACK, ipaddress.ip_network("10.88.0.0/16")]
NAMES = BoxNames(own_addresses=frozenset({ipaddress.ip_address("10.88.0.5")}), loopback=frozenset({"localhost"}),
                 own=frozenset({"charly-jupyter", "0f3c2a1b9d8e"}))


def knock(peer="127.0.0.1", host="127.0.0.1:8888", method="POST", path="mcp", version="HTTP/1.1", port=8888,
          query_token=False, **headers):
    return Knock(method, path, version, HTTPHeaders({"Host": host, **{k.replace("_", "-"): v for k, v in headers.items()}}),
                 peer, port, query_token)


@pytest.mark.parametrize("request_, trusted", [
    (knock(), "127.0.0.0/8"),
    (knock(peer="::1", host="[::1]:8888"), "::1/128"),
    (knock(host="localhost:8888"), "127.0.0.0/8"),  # the local box, the same pod (charly rewrites to localhost)
    (knock(peer="::ffff:10.88.0.5", host="charly-jupyter:8888"), "10.88.0.0/16"),  # IPv4 on a dual-stack socket
    (knock(peer="10.88.0.7", host="charly-jupyter:8888"), "10.88.0.0/16"),  # a sibling, by the container's name
    (knock(peer="10.88.0.7", host="10.88.0.5:8888"), "10.88.0.0/16"),  # by its address
    (knock(peer="10.88.0.1", host="127.0.0.1:40123"), "10.88.0.0/16"),  # charly check live: the host's published port
    (knock(method="GET"), "127.0.0.0/8"),  # the MCP stream
    (knock(method="DELETE"), "127.0.0.0/8"),
    (knock(path="api/kernels"), "127.0.0.0/8"),  # Open WebUI's code execution: start a kernel,
    (knock(method="GET", path="api/kernels/5f0e-aa/channels", Upgrade="websocket"), "127.0.0.0/8"),  # run code,
    (knock(method="DELETE", path="api/kernels/5f0e-aa"), "127.0.0.0/8"),  # and shut it down
])
def test_who_gets_in_by_network(request_, trusted):
    assert str(admission(request_, NETS, NAMES)) == trusted


@pytest.mark.parametrize("request_, why", [
    (knock(peer="10.213.0.2"), "not on the deployment's networks"),  # another machine or namespace
    (knock(peer="192.168.1.20"), "not on the deployment's networks"),
    (knock(peer=None), "no peer address"),  # a Unix socket: no address to judge
    (knock(peer="not-an-address"), "no peer address"),
    (knock(method="GET", path="api/terminals"), "only /mcp and kernels"),
    (knock(method="POST", path="api/terminals"), "only /mcp and kernels"),
    (knock(method="GET", path="files/secret.txt"), "only /mcp and kernels"),
    (knock(method="GET", path="api/contents/secret.txt"), "only /mcp and kernels"),
    (knock(method="POST", path="api/sessions"), "only /mcp and kernels"),
    (knock(method="GET", path="lab"), "only /mcp and kernels"),
    (knock(method="GET", path="api/kernels"), "only /mcp and kernels"),  # listing everyone's kernels
    (knock(path="api/kernels/5f0e-aa/restart"), "only /mcp and kernels"),
    (knock(method="GET", path="mcp/../api/terminals"), "only /mcp and kernels"),
    (knock(Origin="http://evil.example"), "a browser's request"),
    (knock(Sec_Fetch_Site="same-origin"), "a browser's request"),  # even same-origin (DNS rebinding)
    (knock(X_Forwarded_For="203.0.113.9"), "relayed by a proxy"),
    (knock(Forwarded="for=203.0.113.9"), "relayed by a proxy"),
    (knock(Via="1.1 relay"), "relayed by a proxy"),
    (knock(X_Forwarded_Host="box.example"), "relayed by a proxy"),
    (knock(X_Forwarded_Proto="https"), "relayed by a proxy"),
    (knock(X_Real_Ip="203.0.113.9"), "relayed by a proxy"),
    (knock(Authorization="token wrong"), "a credential of its own"),  # a credential that failed stays failed
    (knock(query_token=True), "a credential of its own"),
    (knock(version="HTTP/1.0"), "HTTP/1.0: a relay"),  # nginx's default proxy_pass
    (knock(host="rebind.test:8888"), "not a loopback name"),  # a page under another name (DNS rebinding)
    (knock(host="192.0.2.2:9000"), "not a loopback name"),  # socat on the box's machine, named by its client
    (knock(host=""), "not a loopback name"),
    (knock(peer="10.88.0.1", host="192.168.1.10:9000"), "does not name the box"),  # a relay on the host
    (knock(peer="10.88.0.7", host="charly-jupyter:9000"), "does not name the box"),  # the box at another port
    (knock(peer="10.88.0.7", host="rebind.test:8888"), "does not name the box"),
])
def test_who_does_not_get_in_and_why(request_, why):
    verdict = admission(request_, NETS, NAMES)
    assert isinstance(verdict, str) and why in verdict


def test_host_headers_are_split_into_a_name_and_a_port():
    assert split_host("Charly-Jupyter:8888") == ("charly-jupyter", 8888)
    assert split_host("[::1]:8888") == ("::1", 8888)
    assert split_host("localhost.") == ("localhost", None)
    assert split_host("fe80::1") == ("fe80::1", None)


FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     +-- 10.88.0.0/16 2 0 2
        |-- 10.88.0.0
           /16 link UNICAST
        |-- 10.88.0.5
           /32 host LOCAL
     +-- 127.0.0.0/8 2 0 2
        |-- 127.0.0.1
           /32 host LOCAL
"""
IF_INET6 = "fd000000000000000000000000000002 04 40 00 82     eth0\n"
HOSTS = """127.0.0.1 localhost
::1 localhost ip6-localhost
10.88.0.5\t0f3c2a1b9d8e charly-jupyter  # podman: the host name and the container's name
10.88.0.1 host.containers.internal
"""


def test_the_box_knows_its_own_addresses_and_the_names_etc_hosts_gives_them():
    own = local_addresses(FIB_TRIE, IF_INET6)
    assert own == {ipaddress.ip_address(a) for a in ("10.88.0.5", "127.0.0.1", "fd00::2")}
    assert hosts_names(HOSTS, own - {ipaddress.ip_address("127.0.0.1")}) == {"0f3c2a1b9d8e", "charly-jupyter"}
    assert hosts_names(HOSTS, {ipaddress.ip_address("::1"), ipaddress.ip_address("127.0.0.1")}) == \
        {"localhost", "ip6-localhost"}


def test_configured_names_count_only_beyond_the_loopback():
    """`host_names` adds names siblings on the container network may use; a box whose deployment
    is the loopback alone is called by loopback names only."""
    beyond = BoxNames.read(["My-Alias."], beyond_loopback=True)
    assert "my-alias" in beyond.own and "localhost" in beyond.loopback
    assert BoxNames.read(["my-alias"], beyond_loopback=False).own == frozenset()
