# SPDX-License-Identifier: BSD-2-Clause
"""Topology of a multi-plane two-tier fabric (docs/protocol.md sections 3, 4.1 and 4.5) for the fabric model.

H hosts, P planes. Every plane is an independent two-tier fabric of S T0 switches and T T1
switches: every T0 has ``hosts_per_t0 = H / S`` host-facing ports (port k goes to the host with
downlink port k) and T uplinks (port ``hosts_per_t0 + j`` goes to T1 j); every T1 has S downlinks
(port s goes to T0 s). Every host has one NIC port per plane, cabled to its T0 of that plane; host
``h`` sits under T0 ``h // hosts_per_t0`` at downlink port ``h % hosts_per_t0`` in every plane
(the paper's multi-plane topology scaled down). Full bisection when ``hosts_per_t0 == T``.

Switch identities and routing tables come from :mod:`models.usid` (docs/protocol.md section 3): T0 s of
plane p has uSID ``T0(p, s)`` and routes ``T1(p, j)`` to uplink j and ``HOST(p, k)`` to downlink
k; T1 j routes ``T0(p, s)`` to downlink s. A packet on EV ``ev`` from host a to host b carries
``ev_carrier(ev, t0(a), t0(b), port(b))``; the answer to it carries ``reverse_carrier``.

Addresses (docs/protocol.md 1.1, 1.2): host h's plane-p address ``fd00:0:<p>::<h>``, its NIC address
``fd00:ffff::<h>``; MACs ``02:00:00:<p>:<h>`` (a profile choice for the model, the profile leaves
them to configuration). Nothing here imports cocotb, Amaranth or scapy.
"""

from dataclasses import dataclass

from .usid import DEFAULT_BLOCK, USID_BITS, Role, encode, ev_carrier, parse_block
from .spray import MAX_PLANES, MAX_T1

__all__ = ["Topology", "LinkId", "plane_address", "nic_address", "port_mac", "frame_between", "T0",
           "T1", "HOST"]

T0 = "t0"
T1 = "t1"
HOST = "host"


def plane_address(plane, host):
    """The sender's address on ``plane`` (docs/protocol.md 1.1): ``fd00:0:<plane>::<host>``."""
    return 0xFD00 << 112 | plane << 80 | host


def nic_address(host):
    """The NIC's own address (docs/protocol.md 1.2): ``fd00:ffff::<host>``."""
    return 0xFD00FFFF << 96 | host


def port_mac(plane, host):
    """The MAC of host ``host``'s port on ``plane``: ``02:00:00:<plane>:<host, 16 bits>``."""
    return 0x02 << 40 | plane << 16 | host & 0xFFFF


@dataclass(frozen=True)
class LinkId:
    """One cable, named by its two ends: ``(kind, plane, index)`` of a node, and the port on it.
    Links are full duplex: the fabric model builds one direction object per end."""
    a: tuple
    a_port: int
    b: tuple
    b_port: int


@dataclass(frozen=True)
class Topology:
    """H hosts, P planes, S T0s and T T1s per plane (see the module docstring).

    ``link_gbps`` is the bit rate of every link (NIC ports included), ``link_delay_ns`` the
    propagation delay of every link, ``switch_latency_ns`` the time from a frame's last bit in
    to its admission at the egress port (store and forward), ``wire_overhead`` the bytes a frame
    costs on the wire beyond its own (preamble 8, FCS 4, inter-frame gap 12 = 24 by default),
    ``block`` the uSID locator block.
    """
    hosts: int = 4
    planes: int = 4
    t0s: int = 2
    t1s: int = 2
    link_gbps: float = 100.0
    link_delay_ns: float = 100.0
    switch_latency_ns: float = 0.0
    wire_overhead: int = 24
    block: int = DEFAULT_BLOCK

    def __post_init__(self):
        def integer(name, low, high):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"topology: {name} must be an integer {low}..{high}, "
                                 f"not {value!r}")

        integer("hosts", 2, 1 << 16)
        integer("planes", 1, MAX_PLANES)
        integer("t0s", 1, 1023)
        integer("t1s", 1, MAX_T1)
        integer("wire_overhead", 0, 64)
        if self.hosts % self.t0s:
            raise ValueError(f"topology: {self.hosts} hosts do not divide over {self.t0s} T0s")
        if self.hosts_per_t0 > 1023:
            raise ValueError("topology: more than 1023 hosts under one T0 (10-bit uSID index)")
        for name in ("link_gbps", "link_delay_ns", "switch_latency_ns"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"topology: {name} must be a number >= 0, not {value!r}")
        if self.link_gbps <= 0:
            raise ValueError("topology: link_gbps must be positive")
        object.__setattr__(self, "block", parse_block(self.block))

    # --- placement -------------------------------------------------------------------------------

    @property
    def hosts_per_t0(self):
        return self.hosts // self.t0s

    @property
    def full_bisection(self):
        """True when every T0 has as many uplinks as host ports."""
        return self.hosts_per_t0 == self.t1s

    def t0_of(self, host):
        """The T0 (index, the same in every plane) above ``host``."""
        return host // self.hosts_per_t0

    def port_of(self, host):
        """The downlink port of ``host`` on its T0 (the index of its HOST uSID)."""
        return host % self.hosts_per_t0

    def host_at(self, t0, port):
        return t0 * self.hosts_per_t0 + port

    def same_t0(self, a, b):
        return self.t0_of(a) == self.t0_of(b)

    # --- switches --------------------------------------------------------------------------------

    def switch_ports(self, role):
        """Ports of a T0 (host ports then uplinks) or of a T1 (one per T0)."""
        return self.hosts_per_t0 + self.t1s if role == T0 else self.t0s

    def uplink_port(self, t1):
        """The port of a T0 that goes to T1 ``t1``."""
        return self.hosts_per_t0 + t1

    def fabric_facing(self, role, port):
        """True for ports that face switches (ECN marking, DSCP TRIMMED); host ports are not."""
        return role == T1 or port >= self.hosts_per_t0

    def own_usid(self, role, plane, index):
        return encode(plane, Role.T0 if role == T0 else Role.T1, index)

    def key(self, usid):
        """The 48-bit exact-match key of ``usid`` under the locator block."""
        return self.block << USID_BITS | usid

    def routes(self, role, plane, index):
        """The static exact-match table of a switch (docs/protocol.md 3): ``{48-bit key: egress port}``.

        T0: ``T1(p, j)`` -> uplink j, ``HOST(p, k)`` -> host port k. T1: ``T0(p, s)`` -> port s.
        The table does not depend on ``index``: every switch of a tier holds the same entries.
        """
        if role == T0:
            table = {self.key(encode(plane, Role.T1, j)): self.uplink_port(j)
                     for j in range(self.t1s)}
            table.update({self.key(encode(plane, Role.HOST, k)): k
                          for k in range(self.hosts_per_t0)})
            return table
        return {self.key(encode(plane, Role.T0, s)): s for s in range(self.t0s)}

    def table_depth(self, role):
        return len(self.routes(role, 0, 0))

    # --- paths -----------------------------------------------------------------------------------

    def carrier(self, ev, src, dst):
        """The outer destination of a packet from host ``src`` to host ``dst`` on ``ev``."""
        return ev_carrier(ev, self.t0_of(src), self.t0_of(dst), self.port_of(dst), self.block)

    def crosses(self, src, dst, t0):
        """True when a packet from ``src`` to ``dst`` crosses a T0-T1 link of T0 ``t0`` (on the
        plane and T1 of its EV): it changes T0 and leaves or enters under ``t0``."""
        s, d = self.t0_of(src), self.t0_of(dst)
        return s != d and t0 in (s, d)

    def capacity_share(self):
        """The capacity share of one T0-T1 link (metrics.md): 2 / (P x S x T)."""
        return 2 / (self.planes * self.t0s * self.t1s)

    def links(self):
        """Every cable, host ports to T0s then T0 uplinks to T1s, as :class:`LinkId` (``a`` is
        the lower tier)."""
        out = []
        for p in range(self.planes):
            for h in range(self.hosts):
                out.append(LinkId((HOST, p, h), 0, (T0, p, self.t0_of(h)), self.port_of(h)))
            for s in range(self.t0s):
                for j in range(self.t1s):
                    out.append(LinkId((T0, p, s), self.uplink_port(j), (T1, p, j), s))
        return out

    def describe(self):
        """One line naming the topology as metrics.md asks."""
        return (f"{self.hosts} hosts x {self.planes} planes, {self.t0s} T0s and {self.t1s} T1s per "
                f"plane ({self.hosts_per_t0} hosts per T0"
                f"{', full bisection' if self.full_bisection else ''}), links {self.link_gbps:g} "
                f"Gb/s, {self.link_delay_ns:g} ns, switch latency {self.switch_latency_ns:g} ns")


def frame_between(topo, src, dst, ev, psn=1, payload=b"\x5a" * 1000, dscp_rtx=0):
    """A real WRITE_ONLY frame from host ``src`` to host ``dst`` of ``topo`` on ``ev``
    (:mod:`models.packets`; QPN 3, VA 0x1000, R_Key 7), for tests of the fabric and its flows."""
    from .layouts import Opcode
    from .packets import Addresses, build_frame, data_packet

    plane = ev & 0xF
    addr = Addresses(eth_dst=1, eth_src=2, outer_src=plane_address(plane, src),
                     outer_dst=topo.carrier(ev, src, dst), inner_src=nic_address(src),
                     inner_dst=nic_address(dst))
    hdr, body = data_packet(addr, opcode=Opcode.WRITE_ONLY, ev=ev, dest_qpn=3, psn=psn, rqmsn=0,
                            msn=0, va=0x1000, rkey=7, dma_length=len(payload), payload=payload,
                            rtx=dscp_rtx)
    return build_frame(hdr, body)
