# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the AXI4-Lite configuration bridge (``rtl/axil_config.py``) and of a block's
configuration map as the bridge reaches it (docs/protocol.md section 8, ``rtl/common/config.py``).

The bridge serves one transaction at a time, in the order it accepts them (a write is accepted
when both its AW and its W beat have been taken, a read when its AR beat has been taken), so a
host's view is a sequence of word accesses:

- the byte address selects word ``address >> 2`` (bits 1..0 are ignored); an address with a bit
  set at or above ``addr_width + 2`` answers DECERR and reaches no register (reads give 0);
- a write whose ``wstrb`` is not 0xF answers SLVERR and writes nothing (the maps hold whole words
  and counters clear on any write, so a partial write must not happen);
- any other write is performed and answers OKAY; any other read answers OKAY with the word.

:class:`AxilConfigModel` applies that to a target with ``write(word, value)`` and ``read(word)``;
:class:`RegisterMapModel` is such a target: read/write registers, read-only words and counters
of the :class:`rtl.common.config.ConfigMap` convention (unmapped words read 0, writes to them are
ignored). :func:`write_cycles` and :func:`read_cycles` give the bridge's back-to-back rates.

Nothing here imports cocotb, Amaranth or scapy.
"""

__all__ = ["OKAY", "EXOKAY", "SLVERR", "DECERR", "FULL_STRB", "MASK32", "RESP_NAMES",
           "word_of", "write_response", "read_response", "write_cycles", "read_cycles",
           "AxilConfigModel", "RegisterMapModel"]

OKAY, EXOKAY, SLVERR, DECERR = 0, 1, 2, 3      # AXI BRESP/RRESP codes
RESP_NAMES = {OKAY: "OKAY", EXOKAY: "EXOKAY", SLVERR: "SLVERR", DECERR: "DECERR"}
FULL_STRB = 0xF
MASK32 = 0xFFFF_FFFF


def word_of(address, addr_width):
    """The word address of byte ``address`` on a target of ``addr_width`` word-address bits, or
    None when a bit at or above ``addr_width + 2`` is set (DECERR)."""
    if address >> (addr_width + 2):
        return None
    return address >> 2


def write_response(address, strb, addr_width):
    """BRESP of a write: DECERR (address out of range) before SLVERR (``strb`` not 0xF)."""
    if word_of(address, addr_width) is None:
        return DECERR
    return OKAY if strb == FULL_STRB else SLVERR


def read_response(address, addr_width):
    """RRESP of a read."""
    return DECERR if word_of(address, addr_width) is None else OKAY


def write_cycles():
    """Cycles per write, back to back, with AW and W together and BREADY high: the handshake
    cycle, then the cycle of ``cfg_we`` and BVALID (B taken at its end)."""
    return 2


def read_cycles(read_latency):
    """Cycles per read, back to back, with RREADY high: the AR handshake, ``read_latency`` + 1
    cycles to present ``cfg_addr`` and capture ``cfg_rdata``, then the RVALID cycle."""
    return read_latency + 3


class AxilConfigModel:
    """The bridge seen as a sequence of transactions on ``target``."""

    def __init__(self, addr_width, target):
        if not 1 <= addr_width <= 30:
            raise ValueError(f"addr_width must be 1..30, not {addr_width!r}")
        self.addr_width = addr_width
        self.target = target

    def write(self, address, data, strb=FULL_STRB):
        """One write; returns BRESP."""
        resp = write_response(address, strb, self.addr_width)
        if resp == OKAY:
            self.target.write(address >> 2, data & MASK32)
        return resp

    def read(self, address):
        """One read; returns ``(RRESP, RDATA)``."""
        resp = read_response(address, self.addr_width)
        if resp != OKAY:
            return resp, 0
        return resp, self.target.read(address >> 2) & MASK32


class RegisterMapModel:
    """A configuration map: ``rw`` registers (``width`` bits, reset value), ``ro`` words and
    32-bit counters that wrap and clear on any write; unmapped words read 0."""

    def __init__(self):
        self.kinds = {}     # word -> "rw" | "ro" | "counter"
        self.widths = {}
        self.values = {}

    def _claim(self, word, kind, value, width=32):
        if word in self.kinds:
            raise ValueError(f"word {word:#x} mapped twice")
        self.kinds[word] = kind
        self.widths[word] = width
        self.values[word] = value & ((1 << width) - 1)

    def reg(self, word, width=32, init=0):
        self._claim(word, "rw", init, width)

    def ro(self, word, value):
        self._claim(word, "ro", value)

    def counter(self, word):
        self._claim(word, "counter", 0)

    def count(self, word, amount=1):
        """Events of counter ``word``."""
        if self.kinds.get(word) != "counter":
            raise ValueError(f"word {word:#x} is not a counter")
        self.values[word] = (self.values[word] + amount) & MASK32

    def write(self, word, value):
        kind = self.kinds.get(word)
        if kind == "rw":
            self.values[word] = value & ((1 << self.widths[word]) - 1)
        elif kind == "counter":
            self.values[word] = 0

    def read(self, word):
        return self.values.get(word, 0)
