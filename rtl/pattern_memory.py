# SPDX-License-Identifier: BSD-2-Clause
"""Host memory without block RAM for the NIC self-test: an AXI4 slave whose read data is a pure
function of the address and whose writes are checked against the same function; golden model
``models/selftest_nic.py``."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from models.selftest_nic import PATTERN_SALT, PatternMemoryModel, PatternWindow
from rtl.common.axi import axi4
from rtl.common.ports import check_width
from rtl.selftest_gen import xorshift64

__all__ = ["PatternMemory", "pattern_beat", "COUNTERS"]

COUNTERS = PatternMemoryModel.COUNTERS
_B_DEPTH = 4            # write responses waiting for BREADY


def pattern_beat(m, addr, data_width, name):
    """The pattern (:func:`models.selftest_nic.pattern_word` per 8 bytes) of the bus word at
    byte address ``addr`` (a Value; its low log2(W/8) bits are ignored), as a W-bit Signal."""
    n = data_width // 64
    kb = exact_log2(n)
    high = addr[3 + kb:]
    words = []
    for k in range(n):
        word = Cat(Const(k, kb), high, Const(0, 64)) if kb else Cat(high, Const(0, 64))
        words.append(xorshift64(xorshift64(word[:64] ^ PATTERN_SALT)))
    out = Signal(data_width, name=name)
    m.d.comb += out.eq(Cat(*words))
    return out


def _align(addr, size):
    """``addr`` aligned down to 2^size bytes."""
    return addr & (Const((1 << len(addr)) - 1, len(addr)) << size)[:len(addr)]


class PatternMemory(wiring.Component):
    """An AXI4 slave standing for host memory (:mod:`models.selftest_nic`): reads return the
    pattern, writes are compared with it.

    Reads: the R data of a beat is the pattern of the bus word holding its address, so a read of
    any address, length and alignment returns the bytes the pattern has there. Writes: a beat
    whose bus word lies in the check window ``[check_base, check_base + span)`` has each strobed
    byte compared with the pattern byte of its source address ``source_base | (addr mod span)``
    and counted good or bad; a beat outside the window with any strobe counts ``outside_beats``.
    Every write burst gets a B response (OKAY, its AWID, in order) after its last beat.

    Bursts: INCR (AWBURST/ARBURST are not looked at), any ARSIZE/AWSIZE up to the bus width
    (beat n > 0 at the start address aligned to 2^size plus n 2^size), 1..256 beats, no 4 KB
    rule. The burst ends after AWLEN + 1 beats whatever WLAST says; a beat whose WLAST disagrees
    counts ``last_errors``.

    Parameters
    ----------
    data_width : 64, 128, 256 or 512
        The AXI data width.
    window : :class:`models.selftest_nic.PatternWindow`
        ``source_base``, ``check_base`` and ``span``.
    addr_width : int
        The AXI address width (default 64; the window must fit it).
    id_width : int
        AXI ID bits (default 1).

    Ports
    -----
    ``s_axi_*``: the AXI4 slave (AR, R, AW, W, B), named as cocotbext-axi's
    ``AxiBus.from_prefix(dut, "s_axi")`` expects.
    ``inject`` in: a one-cycle pulse flips bit 0 of every byte of the next R beat loaded (the
    beat after the one on the bus, or the first beat of the next burst).
    ``good_bytes``, ``bad_bytes``, ``write_beats``, ``outside_beats``, ``read_beats``,
    ``write_bursts``, ``read_bursts``, ``last_errors`` out: 32-bit wrapping counters
    (:data:`COUNTERS`), ``write_bursts`` counted at a burst's last beat.
    ``clk``, ``rst``: the sync domain.

    Latency and throughput: one R beat and one W beat per cycle, back to back across bursts (one
    burst address waits in a register on each side, so ``arready`` and ``awready`` depend on
    registers only). The first R beat is valid the cycle after the AR handshake (when no burst
    is under way); the B response of a burst two cycles after its last W beat. A W beat reaches
    the counters three cycles after its handshake.
    """

    def __init__(self, data_width=64, window=PatternWindow(), addr_width=64, id_width=1):
        check_width("PatternMemory", data_width)
        if not isinstance(window, PatternWindow):
            raise ValueError(f"PatternMemory: window must be a PatternWindow, not {window!r}")
        if not isinstance(addr_width, int) or not 12 <= addr_width <= 64 or \
                max(window.source_base, window.check_base) + window.span > 1 << addr_width:
            raise ValueError(f"PatternMemory: addr_width must be 12..64 and hold the window, "
                             f"not {addr_width!r}")
        if not isinstance(id_width, int) or not 1 <= id_width <= 16:
            raise ValueError(f"PatternMemory: id_width must be 1..16, not {id_width!r}")
        self.data_width, self.window = data_width, window
        self.addr_width, self.id_width = addr_width, id_width
        super().__init__({
            "s_axi": In(axi4(data_width, addr_width, id_width)),
            "inject": In(1),
            **{name: Out(32) for name in COUNTERS},
        })

    def _burst_regs(self, name):
        return dict(addr=Signal(self.addr_width, name=f"{name}_addr"),
                    len=Signal(8, name=f"{name}_len"), size=Signal(3, name=f"{name}_size"),
                    id=Signal(self.id_width, name=f"{name}_id"))

    def _side(self, m, ch, name):
        """The address channel ``ch`` ("ar" or "aw") into a pending register; returns
        (pending valid, pending registers, channel registers as a dict, handshake)."""
        pend_valid = Signal(name=f"{name}_pend_valid")
        pend = self._burst_regs(f"{name}_pend")
        chan = {k: getattr(self.s_axi, f"{ch}{k}") for k in ("addr", "len", "size", "id")}
        ready = getattr(self.s_axi, f"{ch}ready")
        m.d.comb += ready.eq(~pend_valid)
        fire = getattr(self.s_axi, f"{ch}valid") & ready
        return pend_valid, pend, chan, fire

    def _advance(self, m, free, cur, cur_valid, pend_valid, pend, chan, fire, step_beat,
                 start_burst):
        """The burst register ``cur`` takes the pending burst, or the one on the channel, when
        it is free; ``step_beat`` is called for a beat within the burst."""
        def start(src):
            m.d.sync += [cur["addr"].eq(src["addr"]), cur["len"].eq(src["len"]),
                         cur["size"].eq(src["size"]), cur["id"].eq(src["id"]),
                         cur_valid.eq(1)]
            start_burst(src)

        with m.If(free):
            with m.If(pend_valid):
                start(pend)
                m.d.sync += pend_valid.eq(fire)
                with m.If(fire):
                    m.d.sync += [pend[k].eq(chan[k]) for k in pend]
            with m.Elif(fire):
                start(chan)
            with m.Else():
                m.d.sync += cur_valid.eq(0)
        with m.Else():
            with m.If(fire):
                m.d.sync += [pend_valid.eq(1), *[pend[k].eq(chan[k]) for k in pend]]
            step_beat()

    def elaborate(self, platform):
        m = Module()
        W, B = self.data_width, self.data_width // 8
        window = self.window
        span_bits = exact_log2(window.span)
        counts = {name: getattr(self, name) for name in COUNTERS}

        def next_addr(addr, size):
            return (_align(addr, size) + (Const(1, 8) << size))[:self.addr_width]

        # --- reads ---------------------------------------------------------------------------
        ar_pend_valid, ar_pend, ar_chan, ar_fire = self._side(m, "ar", "ar")
        rd = self._burst_regs("rd")          # addr: the next beat's; len: beats after this one
        rvalid = Signal()
        rdata = Signal(W)
        armed = Signal()
        r_fire = rvalid & self.s_axi.rready
        r_last = rd["len"] == 0
        r_free = ~rvalid | (r_fire & r_last)
        load_addr = Signal(self.addr_width)
        load = Signal()
        flip = Const(int.from_bytes(b"\x01" * B, "little"), W)
        word = pattern_beat(m, load_addr, W, "r_pattern")
        with m.If(self.inject):
            m.d.sync += armed.eq(1)
        with m.If(load):
            m.d.sync += rdata.eq(word ^ Mux(armed | self.inject, flip, 0))
            m.d.sync += armed.eq(0)
        m.d.comb += [
            self.s_axi.rvalid.eq(rvalid), self.s_axi.rdata.eq(rdata),
            self.s_axi.rlast.eq(r_last), self.s_axi.rid.eq(rd["id"]), self.s_axi.rresp.eq(0),
        ]

        def read_start(src):
            m.d.comb += [load.eq(1), load_addr.eq(src["addr"])]
            m.d.sync += [rd["addr"].eq(next_addr(src["addr"], src["size"])),
                         counts["read_bursts"].eq(counts["read_bursts"] + 1)]

        def read_step():
            with m.If(r_fire):
                m.d.comb += [load.eq(1), load_addr.eq(rd["addr"])]
                m.d.sync += [rd["addr"].eq(next_addr(rd["addr"], rd["size"])),
                             rd["len"].eq(rd["len"] - 1)]

        self._advance(m, r_free, rd, rvalid, ar_pend_valid, ar_pend, ar_chan, ar_fire,
                      read_step, read_start)
        with m.If(r_fire):
            m.d.sync += counts["read_beats"].eq(counts["read_beats"] + 1)

        # --- writes --------------------------------------------------------------------------
        aw_pend_valid, aw_pend, aw_chan, aw_fire = self._side(m, "aw", "aw")
        wr = self._burst_regs("wr")          # addr: this beat's; len: beats after this one
        w_active = Signal()
        m.submodules.b_fifo = b_fifo = SyncFIFOBuffered(width=self.id_width, depth=_B_DEPTH)
        m.d.comb += self.s_axi.wready.eq(w_active & b_fifo.w_rdy)
        w_fire = self.s_axi.wvalid & self.s_axi.wready
        w_end = w_fire & (wr["len"] == 0)
        m.d.comb += [
            b_fifo.w_en.eq(w_end), b_fifo.w_data.eq(wr["id"]),
            self.s_axi.bvalid.eq(b_fifo.r_rdy), self.s_axi.bid.eq(b_fifo.r_data),
            self.s_axi.bresp.eq(0), b_fifo.r_en.eq(self.s_axi.bready),
        ]

        def write_step():
            with m.If(w_fire):
                m.d.sync += [wr["addr"].eq(next_addr(wr["addr"], wr["size"])),
                             wr["len"].eq(wr["len"] - 1)]

        self._advance(m, ~w_active | w_end, wr, w_active, aw_pend_valid, aw_pend, aw_chan,
                      aw_fire, write_step, lambda src: None)
        with m.If(w_end):
            m.d.sync += counts["write_bursts"].eq(counts["write_bursts"] + 1)
        with m.If(w_fire):
            m.d.sync += counts["write_beats"].eq(counts["write_beats"] + 1)
        with m.If(w_fire & (self.s_axi.wlast != (wr["len"] == 0))):
            m.d.sync += counts["last_errors"].eq(counts["last_errors"] + 1)

        # Check pipeline: 1) the beat registered, 2) lanes compared, 3) counted.
        c_valid = Signal()
        c_addr = Signal(self.addr_width)
        c_data = Signal(W)
        c_strb = Signal(B)
        m.d.sync += c_valid.eq(w_fire)
        with m.If(w_fire):
            m.d.sync += [c_addr.eq(wr["addr"]), c_data.eq(self.s_axi.wdata),
                         c_strb.eq(self.s_axi.wstrb)]
        source = Cat(c_addr[:span_bits],
                     Const(window.source_base >> span_bits, self.addr_width - span_bits))
        expected = pattern_beat(m, source, W, "w_pattern")
        inside = c_addr[span_bits:] == window.check_base >> span_bits
        good_mask, bad_mask = Signal(B), Signal(B)
        outside = Signal()
        match = Cat(*[c_data[8 * k:8 * k + 8] == expected[8 * k:8 * k + 8] for k in range(B)])
        m.d.sync += [
            good_mask.eq(Mux(c_valid & inside, c_strb & match, 0)),
            bad_mask.eq(Mux(c_valid & inside, c_strb & ~match, 0)),
            outside.eq(c_valid & ~inside & c_strb.any()),
        ]

        def popcount(bits):
            terms = [bits[k] for k in range(B)]
            while len(terms) > 1:
                terms = [a + b for a, b in zip(terms[::2], terms[1::2])]
            return terms[0]

        m.d.sync += [
            counts["good_bytes"].eq(counts["good_bytes"] + popcount(good_mask)),
            counts["bad_bytes"].eq(counts["bad_bytes"] + popcount(bad_mask)),
            counts["outside_beats"].eq(counts["outside_beats"] + outside),
        ]
        return m
