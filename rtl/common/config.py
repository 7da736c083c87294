# SPDX-License-Identifier: BSD-2-Clause
"""The configuration-port convention (docs/protocol.md section 8).

Every block with configurable state or counters has one port: ``cfg_addr`` (word address),
``cfg_wdata`` (32 bits) and ``cfg_we`` in; ``cfg_rdata`` out. A write takes effect at the clock
edge where ``cfg_we`` is high. Reads need no strobe: ``cfg_rdata`` shows the word at the
``cfg_addr`` of the previous cycle (fixed read latency of one cycle); unmapped addresses read 0.
Counters are 32 bits, wrap, and clear when written (any data); an event in the cycle of the write
is counted after the clear.

A block builds its map with :class:`ConfigMap` and documents it with :meth:`ConfigMap.doc_rows`.
"""

from contextlib import contextmanager

from amaranth.hdl import Const, Mux, Signal, Value

__all__ = ["ConfigMap", "READ_LATENCY", "collect_maps"]

READ_LATENCY = 1

# Lists that collect every ConfigMap built while they are open (collect_maps).
_collectors = []


@contextmanager
def collect_maps():
    """Collect every :class:`ConfigMap` built inside the ``with`` block (the register-map
    generator, ``rtl/regmap.py``, elaborates a top inside it); yields the list."""
    maps = []
    _collectors.append(maps)
    try:
        yield maps
    finally:
        _collectors.remove(maps)


class ConfigMap:
    def __init__(self, m, port, name="cfg"):
        """``port`` is an object with ``cfg_addr``, ``cfg_wdata``, ``cfg_we``, ``cfg_rdata``."""
        self.m = m
        self.port = port
        self.name = name
        self.reads = {}    # addr -> Value
        self.rows = []     # (addr, name, access, doc)
        self.strobed = set()   # addresses whose write strobe the block uses (rtl/regmap.py)
        for maps in _collectors:
            maps.append(self)

    def _claim(self, addr, name, access, doc, value):
        if addr in self.reads:
            raise ValueError(f"{self.name}: address {addr:#x} used twice ({name})")
        if addr >> len(self.port.cfg_addr):
            raise ValueError(f"{self.name}: address {addr:#x} does not fit the port")
        self.reads[addr] = value
        self.rows.append((addr, name, access, doc))

    def write_strobe(self, addr):
        """A Value that is 1 in the cycle of a write to ``addr``."""
        self.strobed.add(addr)
        return self.port.cfg_we & (self.port.cfg_addr == addr)

    def reg(self, addr, name, width=32, init=0, doc=""):
        """A read/write register of up to 32 bits at ``addr``; returns its Signal."""
        if width > 32:
            raise ValueError(f"{self.name}.{name}: a register is at most 32 bits; split it")
        sig = Signal(width, name=f"{self.name}_{name}", init=init)
        with self.m.If(self.write_strobe(addr)):
            self.m.d.sync += sig.eq(self.port.cfg_wdata[:width])
        self._claim(addr, name, "rw", doc, sig)
        return sig

    def wide_reg(self, addr, name, width, init=0, doc=""):
        """A read/write register wider than 32 bits over consecutive words, low word first."""
        sig = Signal(width, name=f"{self.name}_{name}", init=init)
        for i in range(0, width, 32):
            w = min(32, width - i)
            with self.m.If(self.write_strobe(addr + i // 32)):
                self.m.d.sync += sig[i:i + w].eq(self.port.cfg_wdata[:w])
            self._claim(addr + i // 32, f"{name}[{i + w - 1}:{i}]", "rw", doc, sig[i:i + w])
        return sig

    def ro(self, addr, name, value, doc=""):
        """A read-only word."""
        self._claim(addr, name, "ro", doc, value)

    def external(self, addr, name, access, value, doc=""):
        """A word the block reads back by a path of its own (not through :meth:`finish`'s
        multiplexer, e.g. a block-RAM copy): declared for the map and the docs only. ``value``
        names its width and reset value for the register-map generator."""
        self._claim(addr, name, access, doc, value)

    def counter(self, addr, name, event, doc="", registered=False, gate=None):
        """A 32-bit wrapping counter of ``event`` (1 bit: +1, wider: +value), cleared on write.

        ``gate`` (registered counters only): count ``event`` only in cycles where ``gate`` is
        high. Both are registered as they are and the choice is made after the registers, so a
        late ``gate`` (a handshake) drives one flip-flop rather than the reset of every bit of
        a wide event register. Same counts, same clear rule as ``Mux(gate, event, 0)``.

        ``registered`` registers the event before it is counted (the counter's adder then hangs
        off a register, not off the block's paths; a count shows one cycle after its event), and
        the clear becomes a plain synchronous reset of the count (the flip-flops' own reset, no
        LUT per bit): the registered event of the write's cycle is the event of the cycle
        before, so the rule "an event in the cycle of the write is counted after the clear"
        still holds."""
        cnt = Signal(32, name=f"{self.name}_cnt_{name}")
        if gate is not None and not registered:
            raise ValueError(f"counter {name!r}: gate needs registered=True")
        if registered:
            held = Signal.like(Value.cast(event), name=f"{self.name}_ev_{name}")
            self.m.d.sync += held.eq(event)
            if gate is not None:
                held_gate = Signal(name=f"{self.name}_evg_{name}")
                self.m.d.sync += held_gate.eq(gate)
                held = Mux(held_gate, held, 0)
            with self.m.If(self.write_strobe(addr)):
                self.m.d.sync += cnt.eq(0)
            with self.m.Else():
                self.m.d.sync += cnt.eq(cnt + held)
        else:
            with self.m.If(self.write_strobe(addr)):
                self.m.d.sync += cnt.eq(event)
            with self.m.Else():
                self.m.d.sync += cnt.eq(cnt + event)
        self._claim(addr, name, "counter", doc, cnt)
        return cnt

    def finish(self, decoded=False):
        """Build the registered read mux; call once, after every register is declared.

        ``decoded`` builds it as one case per address (a one-hot AND-OR tree, depth log of the
        words) instead of a chain of two-way muxes, whose depth grows with the words (the
        rebuilt blocks use it; the others keep the chain until they are rebuilt, so that their
        Verilog, and their report rows, stay as measured)."""
        if decoded:
            rdata = Signal(32, name=f"{self.name}_rdata_next")
            with self.m.Switch(self.port.cfg_addr):
                for addr, value in sorted(self.reads.items()):
                    with self.m.Case(addr):
                        self.m.d.comb += rdata.eq(value)
        else:
            rdata = Const(0, 32)
            for addr, value in sorted(self.reads.items()):
                rdata = Mux(self.port.cfg_addr == addr, value, rdata)
        self.m.d.sync += self.port.cfg_rdata.eq(rdata)

    def doc_rows(self):
        """(address, name, access, description) rows, sorted by address, for the docs."""
        return sorted(self.rows)
