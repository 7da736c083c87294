# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of direct placement: payload packets written to host memory through an AXI4 write
master (docs/protocol.md sections 1.5, 5 and 8).

The block takes one :data:`models.records.PLACE_COMMAND` per received frame that passed the
receiver's checks, in frame order: ``va`` (where the payload's first byte goes), ``length`` (the
payload length without pad) and ``place`` (the receive tracker's verdict: 1 = write it; 0 =
duplicate, trimmed, out of window, access error, ... : write nothing). Pairing with the payload
stream (docs/protocol.md 8): a command with ``length`` 0 owns no payload beats; any other owns the next
payload packet, up to and including its ``tlast`` beat, whatever its size.

A placed payload is written as INCR bursts of full-width beats (``AWSIZE`` = log2(W/8)) from the
beat-aligned address below ``va``: beat ``j`` of the packet covers ``[base + j W/8, base + (j+1)
W/8)`` with ``base = va - va % (W/8)``, and lane ``i`` of it is strobed exactly when it holds a
payload byte, ``0 <= j W/8 + i - va % (W/8) < length``. A burst ends at the packet's last beat or
where the next beat starts a new ``boundary``-byte block, ``boundary = min(4096, 256 W/8)``, so a
burst never crosses 4 KB and never exceeds 256 beats (AXI4). Addresses are taken modulo
2^``addr_width``.

Defined answers to bad input (the RTL does exactly this; both are compared in the bench):

- a packet shorter than ``length`` (``short_payload``): only the bytes it holds are strobed; the
  bursts keep the lengths the command gave (the beats after the packet's end carry no strobe);
- a packet longer than ``length`` (``long_payload``): bytes past ``length`` are never strobed; the
  excess beats are consumed and discarded up to ``tlast``;
- ``tkeep`` follows :func:`models.header_inserter.packet_bytes`: ignored on every beat but the
  last; on the last beat the packet ends at its first lane whose keep is 0.

So a write never leaves ``[va, va + length)``, and a bad packet never disturbs the next one.
Counters (word addresses of the configuration map) are in :data:`COUNTERS`.

Nothing here imports cocotb, Amaranth or scapy.
"""

from collections import Counter
from dataclasses import dataclass

__all__ = ["PlacementModel", "Burst", "Beat", "Placement", "COUNTERS", "INFO", "AXI_BOUNDARY",
           "MAX_BURST_BEATS", "burst_boundary", "plan_bursts", "DATA_WIDTHS"]

DATA_WIDTHS = (64, 128, 256, 512)
AXI_BOUNDARY = 4096          # an AXI burst never crosses a 4 KB boundary
MAX_BURST_BEATS = 256        # AXI4 INCR bursts: AWLEN 0..255

# The configuration map (word addresses): 32-bit counters, cleared when written.
COUNTERS = {
    "commands": 0x00,        # commands accepted
    "placed": 0x01,          # packets written (place = 1, length > 0)
    "discarded": 0x02,       # packets consumed and discarded (place = 0, length > 0)
    "empty": 0x03,           # commands with length 0 (no payload beats)
    "placed_bytes": 0x04,    # the lengths of the packets written
    "bursts": 0x05,          # AW handshakes
    "beats": 0x06,           # W handshakes
    "resp_okay": 0x07,       # B responses OKAY or EXOKAY
    "resp_error": 0x08,      # B responses SLVERR or DECERR
    "short_payload": 0x09,   # placed packets with fewer bytes than length
    "long_payload": 0x0A,    # placed packets with more bytes than length (excess discarded)
}
# Read-only words.
INFO = {"data_width": 0x10, "outstanding": 0x11, "status": 0x12}


def burst_boundary(data_width):
    """The block no burst crosses: 4 KB, or 256 beats when that is less."""
    return min(AXI_BOUNDARY, MAX_BURST_BEATS * data_width // 8)


@dataclass(frozen=True)
class Burst:
    """One AW handshake: beat-aligned ``addr`` and ``beats`` (``AWLEN`` + 1)."""
    addr: int
    beats: int


@dataclass(frozen=True)
class Beat:
    """One W handshake: ``data`` (W/8 bytes, lane order; lanes not strobed hold 0 here and are
    not compared), ``strobe`` (bit i = lane i) and ``last``."""
    data: bytes
    strobe: int
    last: bool

    def strobed(self):
        """``data`` with every lane not strobed set to 0, for comparisons."""
        return bytes(b if self.strobe >> i & 1 else 0 for i, b in enumerate(self.data))


@dataclass(frozen=True)
class Placement:
    """What one command produced: its bursts and its beats, in order."""
    bursts: tuple = ()
    beats: tuple = ()


def plan_bursts(va, length, data_width, addr_width=64):
    """The bursts that write ``length`` bytes at ``va`` (none for ``length`` 0)."""
    lanes = data_width // 8
    if length <= 0:
        return []
    modulus = 1 << addr_width
    boundary = burst_boundary(data_width)
    align = va % lanes
    base = (va - align) % modulus
    left = (align + length + lanes - 1) // lanes
    bursts = []
    addr = base
    while left:
        beats = min(left, (boundary - addr % boundary) // lanes)
        bursts.append(Burst(addr, beats))
        addr = (addr + beats * lanes) % modulus
        left -= beats
    return bursts


class PlacementModel:
    """The placement block's AXI4 writes and counters, one command at a time.

    ``data_width`` is W (64, 128, 256 or 512: the core width); ``addr_width`` (12..64) the AXI
    address width. :attr:`memory` holds every byte written (address -> byte), later writes over
    earlier ones.
    """

    def __init__(self, data_width=64, addr_width=64):
        if data_width not in DATA_WIDTHS:
            raise ValueError(f"PlacementModel: data_width must be one of {DATA_WIDTHS}, "
                             f"not {data_width!r}")
        if not isinstance(addr_width, int) or not 12 <= addr_width <= 64:
            raise ValueError(f"PlacementModel: addr_width must be 12..64, not {addr_width!r}")
        self.data_width = data_width
        self.addr_width = addr_width
        self.lanes = data_width // 8
        self.memory = {}
        self.counters = Counter({name: 0 for name in COUNTERS})

    def info(self):
        """The read-only words of an idle block (every B response received)."""
        return {"data_width": self.data_width, "outstanding": 0, "status": 0}

    def push(self, command, packet=None):
        """Process one command (a dict with ``va``, ``length``, ``place``) and the payload bytes
        of its packet (``packet``: the bytes the block takes, see the module docstring; ``None``
        or empty for a command of length 0). Returns a :class:`Placement`."""
        length, place = command["length"], command["place"]
        self.counters["commands"] += 1
        if length == 0:
            self.counters["empty"] += 1
            return Placement()
        if not place:
            self.counters["discarded"] += 1
            return Placement()
        data = bytes(packet or b"")
        self.counters["placed"] += 1
        self.counters["placed_bytes"] += length
        if len(data) < length:
            self.counters["short_payload"] += 1
        elif len(data) > length:
            self.counters["long_payload"] += 1
        lanes, va = self.lanes, command["va"]
        modulus = 1 << self.addr_width
        align = va % lanes
        kept = data[:length]
        bursts = plan_bursts(va, length, self.data_width, self.addr_width)
        beats = []
        index = 0                                   # beat of the packet
        for burst in bursts:
            for k in range(burst.beats):
                chunk = bytearray(lanes)
                strobe = 0
                for lane in range(lanes):
                    byte = index * lanes + lane - align
                    if 0 <= byte < len(kept):
                        chunk[lane] = kept[byte]
                        strobe |= 1 << lane
                beats.append(Beat(bytes(chunk), strobe, k == burst.beats - 1))
                index += 1
        for k, byte in enumerate(kept):
            self.memory[(va + k) % modulus] = byte
        self.counters["bursts"] += len(bursts)
        self.counters["beats"] += len(beats)
        self.counters["resp_okay"] += len(bursts)
        return Placement(tuple(bursts), tuple(beats))
