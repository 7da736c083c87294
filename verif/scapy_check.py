# SPDX-License-Identifier: BSD-2-Clause
"""An independent reading of MRC frames by scapy 2.8 (Ether / IPv6 / IPv6 / UDP / BTH).

The project's models build and parse frames from ``models.layouts``; this module reads the same
bytes with scapy's own Ethernet, IPv6, UDP and RoCE (``scapy.contrib.roce``) dissectors and ICRC
code, so a shared mistake in our layout tables cannot hide. Usable from pytest and from cocotb
benches (it imports scapy, not cocotb).

- :func:`dissect` returns the scapy packet.
- :func:`check_frame` asserts the stack, the three length fields and the ICRC, and returns it.

scapy's BTH names differ from ours: ``solicited``/``migreq``/``padcount``/``version``/``dqpn``, and
its 8-bit ``fecn``/``becn``/``resv6`` group is our ``rsvd0``; its 7-bit ``resv7`` holds our
``rsvd1``, ``rtx``, ``ts`` and ``rsvd2`` (``rtx`` is bit 5 of it, see :func:`bth_rtx`).
"""

from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw, bind_layers

__all__ = ["dissect", "check_frame", "bth_rtx", "ROCE_UDP_PORT", "ETH_BYTES", "IPV6_BYTES"]

ROCE_UDP_PORT = 4791
ETH_BYTES = 14
IPV6_BYTES = 40
_STACK = (Ether, IPv6, IPv6, UDP, BTH)

# scapy.contrib.roce binds UDP dport 4791 to BTH when imported; say so explicitly in case a
# future scapy drops that binding (bind_layers is idempotent).
bind_layers(UDP, BTH, dport=ROCE_UDP_PORT)


def dissect(frame):
    """The scapy packet of ``frame`` (Ethernet without FCS), read from the Ethernet header on."""
    return Ether(bytes(frame))


def bth_rtx(pkt):
    """BTH.RTX (docs/protocol.md 1.5) out of scapy's 7-bit ``resv7`` field: its second-highest bit."""
    return (pkt[BTH].resv7 >> 5) & 1


def check_frame(frame):
    """Assert that scapy reads ``frame`` as a well-formed MRC frame and return the scapy packet.

    Checks: the layers are exactly Ether / IPv6 / IPv6 / UDP / BTH (then raw bytes, if any);
    the outer IPv6 payload length is the frame length minus Ethernet and outer IPv6; the inner
    IPv6 payload length and the UDP length are the frame length minus Ethernet and both IPv6
    headers; the ICRC that scapy computes (``BTH.compute_icrc``, RoCEv2 over IPv6) equals the
    frame's last 4 bytes.
    """
    frame = bytes(frame)
    pkt = dissect(frame)
    layers = tuple(layer for layer in pkt.layers() if layer is not Raw)
    assert layers == _STACK, f"scapy reads {pkt.summary()!r}, not Ether/IPv6/IPv6/UDP/BTH"
    outer = pkt[IPv6]
    inner = outer.payload
    udp = pkt[UDP]
    assert outer.plen == len(frame) - ETH_BYTES - IPV6_BYTES, \
        f"outer IPv6 plen {outer.plen} for a {len(frame)} B frame"
    assert inner.plen == len(frame) - ETH_BYTES - 2 * IPV6_BYTES, \
        f"inner IPv6 plen {inner.plen} for a {len(frame)} B frame"
    assert udp.len == inner.plen, f"UDP length {udp.len} != inner IPv6 plen {inner.plen}"
    assert udp.dport == ROCE_UDP_PORT, f"UDP dport {udp.dport}"
    expected = pkt[BTH].compute_icrc(None)
    assert expected == frame[-4:], \
        f"scapy ICRC {expected.hex()} != frame ICRC {frame[-4:].hex()}"
    return pkt
