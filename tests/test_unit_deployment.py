"""Who the deployment's identity provider lets in without a token, decided from the request's
peer address and headers (pure logic; tests/test_box.py and test_container.py do it for real)."""

from __future__ import annotations

import ipaddress

import pytest

from jupyter_mcp.deployment import LOOPBACK, connected_networks, trusted_by_network

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


@pytest.mark.parametrize("peer, headers, trusted", [
    ("127.0.0.1", {}, "127.0.0.0/8"),
    ("::1", {}, "::1/128"),
    ("::ffff:10.88.0.5", {}, "10.88.0.0/16"),  # an IPv4 client on a dual-stack socket
    ("10.88.0.1", {}, "10.88.0.0/16"),  # the host, through a port published on its loopback
    ("10.213.0.2", {}, None),  # another machine or namespace
    ("192.168.1.20", {}, None),
    ("127.0.0.1", {"Origin": "http://evil.example"}, None),  # a browser's page
    ("127.0.0.1", {"Sec-Fetch-Site": "same-origin"}, None),  # a browser, even same-origin (DNS rebinding)
    ("127.0.0.1", {"X-Forwarded-For": "203.0.113.9"}, None),  # relayed by a proxy
    ("127.0.0.1", {"Forwarded": "for=203.0.113.9"}, None),
    ("127.0.0.1", {"Authorization": "token wrong"}, None),  # a credential that failed stays failed
    (None, {}, None),  # a Unix socket: no address to judge
    ("not-an-address", {}, None),
])
def test_who_gets_in_by_network(peer, headers, trusted):
    network = trusted_by_network(headers, peer, NETS)
    assert (str(network) if network else None) == trusted
