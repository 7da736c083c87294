# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""The RTL fabric's address map and parameter checks (``sim/rtl_fabric.py``); no simulation."""

import pytest

from models.fabric_topology import Topology
from sim.rtl_controller import peer_of
from sim.rtl_fabric import AddressMap, RtlFabric
from rtl.link import ADDR_COUNTERS as LINK_COUNTERS
from rtl.nic_engine import ADDR_WIDTH as NIC_ADDR_WIDTH


@pytest.mark.parametrize("size", [dict(hosts=2, planes=1, t0s=2, t1s=2),
                                  dict(hosts=4, planes=4, t0s=2, t1s=2)])
def test_windows_are_disjoint_and_fit(size):
    """Every node's window lies apart from the others' and the map fits the bridge, at the small
    size and at the issue's default (4 hosts, 4 planes of 2 T0s and 2 T1s)."""
    topo = Topology(**size)
    amap = AddressMap(topo)
    assert amap.addr_width <= 30
    windows = amap.windows()
    assert len(windows) == topo.hosts + topo.planes * (topo.t0s + topo.t1s) + \
        2 * len(topo.links())
    spans = sorted((base, base + (1 << bits)) for _, base, bits in windows)
    assert all(end <= nxt for (_, end), (nxt, _) in zip(spans, spans[1:]))
    assert all(end <= 1 << amap.addr_width for _, end in spans)
    cable = topo.links()[-1]
    assert amap.link(cable, "down", LINK_COUNTERS["frames_cut"]) == \
        windows[-1][1] + LINK_COUNTERS["frames_cut"]
    assert amap.nic(1, 5) == 1 << NIC_ADDR_WIDTH | 5


def test_too_many_hosts_for_the_bridge():
    with pytest.raises(ValueError, match="word-address bits"):
        AddressMap(Topology(hosts=64, planes=1, t0s=8, t1s=8))


def test_switch_port_count_checked():
    """One T0 makes every T1 a one-port switch: refused with a clear error."""
    with pytest.raises(ValueError, match="2..8"):
        RtlFabric(Topology(hosts=2, planes=1, t0s=1, t1s=1))


@pytest.mark.parametrize("hosts", [2, 4, 8])
def test_qp_pairing(hosts):
    """QP q of h and QP q of its peer point at each other, never at themselves."""
    for q in range(8):
        for h in range(hosts):
            peer = peer_of(h, q, hosts)
            assert peer != h and peer_of(peer, q, hosts) == h


def test_issue_default_size_constructs():
    """The issue's default fabric (4 hosts, 4 planes of 2 T0s and 2 T1s) passes every parameter
    check: 16 switches, 64 links, NICs of 4 plane ports."""
    fabric = RtlFabric(Topology(hosts=4, planes=4, t0s=2, t1s=2))
    assert (len(fabric.switches), len(fabric.links)) == (16, 64)
    assert fabric.nic_params["n_planes"] == 4
