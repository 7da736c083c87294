# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the switch's uN shift-and-forward stage (``rtl/un_stage.py``, docs/protocol.md section 3).

A frame (Ethernet without FCS, as bytes) goes in; out comes either the frame with its outer
IPv6 header rewritten (the destination shifted when the switch's own uSID is active, the Hop Limit
decremented) and its egress port, or a drop reason. Every other byte passes unchanged: the outer
Payload Length is not checked here (the switch's admission stage does that, docs/protocol.md section 7),
and the ICRC does not cover the outer header (docs/protocol.md 1.6), so it stays valid.

Checks, in this order; the first that fails names the drop, each counted by its reason
(:data:`REASONS`, also the counter names, with 'forwarded' for the frames that pass):

1. ``short``: the frame is shorter than Ethernet + outer IPv6 (54 bytes), so the stage cannot
   read the outer header (whatever its first bytes say);
2. ``not_ipv6``: the EtherType is not 0x86DD or the outer IP version is not 6;
3. ``hop_limit``: an outer Hop Limit of 0 or 1 on arrival;
4. ``no_route``: no valid table entry holds the lookup key (DA[127:80] after the shift).

Checks 3 and 4 and the rewrite are :func:`models.usid.un_step`. The table (``table_depth``
entries, each a 48-bit key, a port and a valid bit) is searched in index order: when several valid
entries hold the key, the lowest index wins (the RTL's priority encoder).

The configuration starts as the RTL comes out of reset: own block ``fd00:0200``, own uSID 0x0000
(which no valid carrier holds), every table entry invalid, every counter 0.
Nothing here imports cocotb, Amaranth or scapy.
"""

from typing import NamedTuple

from .layouts import ETH, IPV6, ETHERTYPE_IPV6, OUTER_OFFSET, INNER_OFFSET
from .usid import DEFAULT_BLOCK, KEY_BITS, Forward, parse_block, un_step

__all__ = ["UnStageModel", "Forwarded", "Entry", "REASONS", "DROP_REASONS", "SHORT", "NOT_IPV6",
           "HOP_LIMIT", "NO_ROUTE", "FORWARDED", "MIN_FRAME", "HOP_LIMIT_BYTE", "DST_BYTE"]

SHORT = "short"
NOT_IPV6 = "not_ipv6"
HOP_LIMIT = "hop_limit"
NO_ROUTE = "no_route"
FORWARDED = "forwarded"
DROP_REASONS = (SHORT, NOT_IPV6, HOP_LIMIT, NO_ROUTE)   # in the order they are checked
REASONS = (FORWARDED,) + DROP_REASONS

MIN_FRAME = INNER_OFFSET                                        # 54: Ethernet + outer IPv6
ETHERTYPE_BYTE = ETH["ethertype"].offset // 8                   # 12
VERSION_BYTE = OUTER_OFFSET + IPV6["version"].offset // 8       # 14 (high nibble)
HOP_LIMIT_BYTE = OUTER_OFFSET + IPV6["hop_limit"].offset // 8   # 21
DST_BYTE = OUTER_OFFSET + IPV6["dst"].offset // 8               # 38..53


class Entry(NamedTuple):
    """One exact-match table entry."""
    key: int
    port: int
    valid: bool


class Forwarded(NamedTuple):
    """A forwarded frame: the rewritten bytes and the egress port."""
    frame: bytes
    port: int


class UnStageModel:
    """The uN stage of one switch ingress: configuration, table, counters, and :meth:`process`."""

    def __init__(self, table_depth=64, port_width=4):
        if not isinstance(table_depth, int) or not 1 <= table_depth <= 1024:
            raise ValueError(f"table_depth must be 1..1024, not {table_depth!r}")
        if not isinstance(port_width, int) or not 1 <= port_width <= 16:
            raise ValueError(f"port_width must be 1..16, not {port_width!r}")
        self.table_depth = table_depth
        self.port_width = port_width
        self.own_block = DEFAULT_BLOCK
        self.own_usid = 0
        self.entries = [Entry(0, 0, False)] * table_depth
        self.counters = dict.fromkeys(REASONS, 0)
        self._routes = {}

    def set_own(self, block=None, usid=None):
        """Set the own locator block (32 bits, int or text) and/or the own uSID (16 bits)."""
        if block is not None:
            self.own_block = parse_block(block)
        if usid is not None:
            if not isinstance(usid, int) or not 0 <= usid < 1 << 16:
                raise ValueError(f"own uSID {usid!r} is not a 16-bit value")
            self.own_usid = usid

    def set_entry(self, index, key, port, valid=True):
        """Write table entry ``index``: 48-bit ``key`` (block << 16 | uSID), ``port``, valid bit."""
        if not isinstance(index, int) or not 0 <= index < self.table_depth:
            raise ValueError(f"table index {index!r} is not in 0..{self.table_depth - 1}")
        if not isinstance(key, int) or not 0 <= key < 1 << KEY_BITS:
            raise ValueError(f"key {key!r} is not a 48-bit value")
        if not isinstance(port, int) or not 0 <= port < 1 << self.port_width:
            raise ValueError(f"port {port!r} does not fit in {self.port_width} bits")
        self.entries[index] = Entry(key, port, bool(valid))
        routes = {}
        for entry in self.entries:
            if entry.valid:
                routes.setdefault(entry.key, entry.port)   # the lowest index wins
        self._routes = routes

    def lookup(self, key):
        """The port of the lowest valid entry holding ``key``, or None."""
        return self._routes.get(key)

    def clear_counter(self, name):
        """A counter write clears it (docs/protocol.md section 8)."""
        if name not in self.counters:
            raise ValueError(f"no counter {name!r}; counters are {REASONS}")
        self.counters[name] = 0

    def decide(self, frame):
        """A :class:`models.usid.Forward` or the drop reason of ``frame``, without counting it."""
        frame = bytes(frame)
        if len(frame) < MIN_FRAME:
            return SHORT
        ethertype = int.from_bytes(frame[ETHERTYPE_BYTE:ETHERTYPE_BYTE + 2], "big")
        if ethertype != ETHERTYPE_IPV6 or frame[VERSION_BYTE] >> 4 != 6:
            return NOT_IPV6
        da = int.from_bytes(frame[DST_BYTE:DST_BYTE + 16], "big")
        return un_step(da, frame[HOP_LIMIT_BYTE], self._routes, self.own_usid, self.own_block)

    def process(self, frame):
        """Count and return the stage's answer to ``frame``: a :class:`Forwarded` or the drop
        reason (one of :data:`DROP_REASONS`)."""
        frame = bytes(frame)
        result = self.decide(frame)
        if not isinstance(result, Forward):
            self.counters[result] += 1
            return result
        self.counters[FORWARDED] += 1
        out = bytearray(frame)
        out[HOP_LIMIT_BYTE] = result.hop_limit
        out[DST_BYTE:DST_BYTE + 16] = result.da.to_bytes(16, "big")
        return Forwarded(bytes(out), result.port)
