# SPDX-License-Identifier: BSD-2-Clause
"""A fault-injectable link for the RTL fabric: cut, loss, delay and rate set at run time.

Golden model: ``models/link.py``; bench: ``tb/test_link.py``.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.utils import bits_for

from models.link import COUNTERS, LIMIT, MIN_LATENCY, REGISTER_BITS, REGISTER_RESET, \
    SEED_ZERO_LOADS
from models.records import FrameUser
from models.switch_queue import LFSR_TAPS

from .common.config import ConfigMap
from .common.ports import axis_members, check_width, config_members

__all__ = ["Link", "ADDR", "ADDR_LFSR", "ADDR_LEVEL", "ADDR_COUNTERS", "FIFO_MARGIN",
           "MAX_USER_WIDTH"]

# Configuration map (word addresses); see the Link docstring.
ADDR = {"up": 0x00, "loss": 0x01, "seed": 0x02, "delay": 0x03, "rate": 0x04}
ADDR_LFSR = 0x08
ADDR_LEVEL = 0x09
ADDR_COUNTERS = {name: 0x10 + i for i, name in enumerate(COUNTERS)}
FIFO_MARGIN = 2             # FIFO depth beyond delay_max: full line rate at delay = delay_max
MAX_USER_WIDTH = 64


def _lfsr_next(state):
    """One step of the Galois LFSR of docs/protocol.md 4.3 (shift right, taps 0xB400)."""
    return (state >> 1) ^ Mux(state[0], LFSR_TAPS, 0)


class Link(wiring.Component):
    """One direction of a link between two AXI-Stream ports, with faults a controller sets through
    the configuration port while traffic runs: cut, random loss, extra delay, reduced rate.

    Beats pass unchanged (``tdata``, ``tkeep``, ``tlast``, ``tuser`` as they come: a ``tkeep`` with
    holes, or zero on a beat that is not the last, is the sender's problem and passes as it is).
    Every decision is per frame and taken at the frame's first beat (its *start*) with the
    register values before that clock edge; a frame that started always passes or is dropped
    whole, so no frame is ever truncated or merged with another. In order:

    - ``up`` = 0 (cut): the frame is dropped (``frames_cut``);
    - the link's 16-bit Galois LFSR (docs/protocol.md 4.3, taps 0xB400) steps once at every frame start,
      whatever the decision, and ``r`` is its new value: ``r < loss`` drops the frame
      (``frames_lost``);
    - otherwise the frame passes, each beat with the ``delay`` and ``rate`` of the frame's start.

    A dropped frame is consumed at line rate: its beats are accepted and discarded. Register writes
    therefore take effect from the next frame start (a frame starting in the cycle of the write
    sees the old value); writing ``seed`` reloads the LFSR at once (in the cycle of a frame start
    the frame draws from the old state, the next one from the seed). ``models/link.py`` predicts
    every decision, every counter and the exact cycle every beat leaves.

    Parameters
    ----------
    data_width : 64, 128, 256 or 512
        Bits per beat (W) of both streams.
    delay_max : 0..65535
        The largest delay (cycles); the FIFO holds ``delay_max + 2`` beats (default 64).
    rate_max : 1..65535
        The largest ``rate`` (default 255).
    user_width : 0..64
        Bits of ``tuser`` (default 1, :class:`models.records.FrameUser`; 0: no ``tuser`` ports).

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset.
    ``s_axis_tdata/tkeep/tlast/tvalid/tready/tuser``: frames in. ``s_axis_tready`` is low only when
    the FIFO is full (so never inside a frame being dropped: it writes nothing).
    ``m_axis_tdata/tkeep/tlast/tvalid/tready/tuser``: the frames that pass, beat for beat, in order
    (registered outputs). Backpressure holds the link, it never loses a beat.
    ``cfg_addr/cfg_wdata/cfg_we/cfg_rdata``: configuration port (``rtl/common/config.py``: reads
    have one cycle of latency, unmapped words read 0, counters clear when written).

    Configuration map (word addresses)
    ----------------------------------
    ====  ====  ===================================================================================
    0x00  rw    ``up``, bit 0: 1 = frames pass, 0 = cut (reset 1)
    0x01  rw    ``loss``, bits 15..0: frames whose LFSR value is below it are dropped (reset 0)
    0x02  rw    ``seed``, bits 15..0: a write reloads the LFSR (0 loads 0xACE1; reset 0xACE1)
    0x03  rw    ``delay``, bits 15..0: cycles a beat stays at least (above delay_max: delay_max)
    0x04  rw    ``rate``, bits 15..0: at most one beat per rate + 1 cycles (above rate_max:
                rate_max; reset 0, full rate)
    0x08  ro    LFSR state (the ``r`` of the latest frame start, or the seed just loaded)
    0x09  ro    beats held (FIFO and output register); 0 when the link is empty
    0x10  cnt   frames passed (counted as their last beat leaves)
    0x11  cnt   frames dropped by the cut (counted at their start)
    0x12  cnt   frames dropped by loss (counted at their start)
    0x13  cnt   beats passed (counted as they leave)
    ====  ====  ===================================================================================

    Latency and throughput
    ----------------------
    Edges: a beat arrives at the edge that accepts it on ``s_axis`` (``a``) and leaves at the edge
    that accepts it on ``m_axis`` (``o``). Beat i of the passed beats enters the output register at
    edge ``t_i = max(a_i + max(1, delay - 1), o_(i-1) + rate)`` and leaves at the first edge after
    ``t_i`` where ``m_axis_tready`` is high. So every beat stays at least ``max(delay, 2)``
    cycles, and consecutive beats leave at least ``rate + 1`` cycles apart. With ``delay`` <= 2
    the latency is 2 cycles (``delay`` > 2: exactly ``delay``), and with ``rate`` 0 and the sink
    ready the link passes one beat per cycle with no bubbles between back-to-back frames, at any
    delay up to ``delay_max``, ``s_axis_tready`` staying high.

    Inside: the passed beats wait in a FIFO (``data``) of ``delay_max + 2`` beats; beside it a
    FIFO of release stamps (a free-running cycle counter plus ``delay - 1``) pops each stamp as
    its cycle comes, counting the beats released; the head of the data FIFO loads the output
    register when it is released, the register is free and ``rate`` cycles have passed since the
    previous beat left. Stamps wait at most ``delay_max`` cycles before their cycle and at most
    the FIFO depth after, so they compare exactly on a short counter however long the sink stalls.
    """

    def __init__(self, data_width=64, delay_max=64, rate_max=255, user_width=FrameUser.WIDTH):
        check_width("Link", data_width)
        for name, value, low in (("delay_max", delay_max, 0), ("rate_max", rate_max, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= LIMIT:
                raise ValueError(f"Link: {name} must be {low}..{LIMIT}, not {value!r}")
        if isinstance(user_width, bool) or not isinstance(user_width, int) or \
                not 0 <= user_width <= MAX_USER_WIDTH:
            raise ValueError(f"Link: user_width must be 0..{MAX_USER_WIDTH}, not {user_width!r}")
        self.data_width = data_width
        self.delay_max = delay_max
        self.rate_max = rate_max
        self.user_width = user_width
        self.depth = delay_max + FIFO_MARGIN
        self.latency = MIN_LATENCY
        # Stamps lie within (delay_max + depth + 1) cycles of now: one sign bit more than that.
        self.stamp_bits = bits_for(delay_max + self.depth + 2) + 1
        super().__init__({
            **config_members(),
            **axis_members("s_axis", data_width, user_width, sink=True),
            **axis_members("m_axis", data_width, user_width, sink=False),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.data_width // 8
        delay_bits = bits_for(self.delay_max)
        rate_bits = bits_for(self.rate_max)

        # --- configuration -----------------------------------------------------------------
        cfg = ConfigMap(m, self, "link")
        regs = {name: cfg.reg(ADDR[name], name, REGISTER_BITS[name], init=REGISTER_RESET[name],
                              doc=f"{name} (Link docstring)") for name in ADDR}
        up, loss = regs["up"], regs["loss"]
        delay_eff = Signal(delay_bits)
        rate_eff = Signal(rate_bits)
        m.d.comb += [
            delay_eff.eq(Mux(regs["delay"] > self.delay_max, self.delay_max, regs["delay"])),
            rate_eff.eq(Mux(regs["rate"] > self.rate_max, self.rate_max, regs["rate"])),
        ]
        lfsr = Signal(16, init=REGISTER_RESET["seed"])
        cfg.ro(ADDR_LFSR, "lfsr", lfsr, doc="LFSR state")

        # --- input: frame decisions ---------------------------------------------------------
        in_frame = Signal()             # a frame's first beat has been taken, not its last
        f_drop = Signal()               # the frame in progress: its decision, delay and rate
        f_delay = Signal(delay_bits)
        f_rate = Signal(rate_bits)
        r = Signal(16)
        start_drop = Signal()
        m.d.comb += [
            r.eq(_lfsr_next(lfsr)),
            start_drop.eq(~up | (r < loss)),
        ]
        first = ~in_frame
        drop = Mux(first, start_drop, f_drop)
        beat_delay = Mux(first, delay_eff, f_delay)
        beat_rate = Mux(first, rate_eff, f_rate)

        beat_layout = data.StructLayout({"data": self.data_width, "keep": lanes, "last": 1,
                                         "user": self.user_width, "rate": rate_bits})
        m.submodules.data = data_fifo = SyncFIFO(width=beat_layout.size, depth=self.depth)
        m.submodules.stamps = stamp_fifo = SyncFIFO(width=self.stamp_bits, depth=self.depth)
        now = Signal(self.stamp_bits)
        m.d.sync += now.eq(now + 1)

        s_fire = Signal()
        write = Signal()
        user = self.s_axis.p.user if self.user_width else []
        m.d.comb += [
            # A dropped frame writes nothing: the FIFO, not full at its start, stays so.
            self.s_axis.ready.eq(data_fifo.w_rdy),
            s_fire.eq(self.s_axis.valid & self.s_axis.ready),
            write.eq(self.s_axis.valid & ~drop),       # fires when data_fifo.w_rdy
            data_fifo.w_en.eq(write),
            data_fifo.w_data.eq(Cat(self.s_axis.p.data, self.s_axis.p.keep, self.s_axis.p.last,
                                    user, beat_rate)),
            # The stamp FIFO holds a subset of the data FIFO's beats: never full when it is not.
            stamp_fifo.w_en.eq(write & data_fifo.w_rdy),
            stamp_fifo.w_data.eq(now + beat_delay - 1),
        ]
        with m.If(s_fire):
            m.d.sync += in_frame.eq(~self.s_axis.p.last)
            with m.If(first):
                m.d.sync += [
                    lfsr.eq(r),
                    f_drop.eq(start_drop),
                    f_delay.eq(delay_eff),
                    f_rate.eq(rate_eff),
                ]
        with m.If(cfg.write_strobe(ADDR["seed"])):      # after the step: the reload wins
            wdata = self.cfg_wdata[:16]
            m.d.sync += lfsr.eq(Mux(wdata == 0, SEED_ZERO_LOADS, wdata))

        cut_event, lost_event = Signal(), Signal()
        m.d.comb += [
            cut_event.eq(s_fire & first & ~up),
            lost_event.eq(s_fire & first & up & (r < loss)),
        ]

        # --- release: stamps pop as their cycle comes ---------------------------------------
        stamp_due = Signal()
        since = Signal(self.stamp_bits)         # now - stamp, modulo 2^stamp_bits
        m.d.comb += [
            since.eq(now - stamp_fifo.r_data),
            stamp_due.eq(stamp_fifo.r_rdy & ~since[-1]),
            stamp_fifo.r_en.eq(stamp_due),
        ]
        released = Signal(range(self.depth + 1))     # data FIFO beats whose stamp has popped

        # --- output: the released head, the rate gap, the output register ---------------------
        head = beat_layout(data_fifo.r_data)
        m_fire = Signal()
        cool = Signal(range(self.rate_max + 1), init=self.rate_max)   # cycles since a beat left
        rate_ok = Mux(self.m_axis.valid, head.rate == 0, cool >= head.rate)
        load = Signal()
        m.d.comb += [
            m_fire.eq(self.m_axis.valid & self.m_axis.ready),
            load.eq(data_fifo.r_rdy & ((released != 0) | stamp_due) &
                    (~self.m_axis.valid | self.m_axis.ready) & rate_ok),
            data_fifo.r_en.eq(load),
        ]
        m.d.sync += released.eq(released + stamp_due - load)
        with m.If(m_fire):
            m.d.sync += cool.eq(1)
        with m.Elif(cool != self.rate_max):
            m.d.sync += cool.eq(cool + 1)

        with m.If(load):
            m.d.sync += [
                self.m_axis.valid.eq(1),
                self.m_axis.p.data.eq(head.data),
                self.m_axis.p.keep.eq(head.keep),
                self.m_axis.p.last.eq(head.last),
            ]
            if self.user_width:
                m.d.sync += self.m_axis.p.user.eq(head.user)
        with m.Elif(self.m_axis.ready):
            m.d.sync += self.m_axis.valid.eq(0)

        cfg.ro(ADDR_LEVEL, "level", data_fifo.level + self.m_axis.valid, doc="beats held")
        events = {"frames_passed": m_fire & self.m_axis.p.last, "frames_cut": cut_event,
                  "frames_lost": lost_event, "beats_passed": m_fire}
        docs = {"frames_passed": "frames passed", "frames_cut": "frames dropped by the cut",
                "frames_lost": "frames dropped by loss", "beats_passed": "beats passed"}
        for name in COUNTERS:
            cfg.counter(ADDR_COUNTERS[name], name, events[name], doc=docs[name])
        cfg.finish()
        return m
