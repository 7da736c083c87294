# SPDX-License-Identifier: BSD-2-Clause
"""A fault-injectable link for the RTL fabric: cut, loss, delay and rate set at run time.

Golden model: ``models/link.py``; bench: ``tb/test_link.py``.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO as _SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.utils import bits_for

from models.link import COUNTERS, LIMIT, MIN_LATENCY, REGISTER_BITS, REGISTER_RESET, \
    SEED_ZERO_LOADS
from models.records import FrameUser
from models.switch_queue import LFSR_TAPS, lfsr_step

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


class SyncFIFO(_SyncFIFO):
    """Amaranth's ``SyncFIFO`` (same ports and timing: ``r_data`` shows the head, a write is
    readable from the next cycle, ``level`` counts the entries) built for speed:

    - ``w_rdy`` and ``r_rdy`` are registers, so that a write enable and ``s_axis_tready`` hang
      off a flip-flop, not off a compare of ``level``;
    - the storage is in distributed RAM: the link's output register loads straight from
      ``r_data``, so Yosys would otherwise fold it into a block RAM's read port, whose
      unregistered output (about 5.6 ns clock to out on the ECP5) would drive ``m_axis``;
    - the word is split in two memories, each with its own pointers (the second holds entry i
      at address i + 1), so that no pointer drives the address of every RAM cell.

    (The formal harness of verif/formal_tx_streams.py swaps this name for its register FIFO.)"""

    def elaborate(self, platform):
        m = Module()
        depth = self.depth
        w_rdy = Signal(init=1)
        r_rdy = Signal()
        do_write = Signal()
        do_read = Signal()
        m.d.comb += [
            self.w_rdy.eq(w_rdy),
            self.r_rdy.eq(r_rdy),
            self.w_level.eq(self.level),
            self.r_level.eq(self.level),
            do_write.eq(self.w_en & w_rdy),
            do_read.eq(self.r_en & r_rdy),
        ]
        half = (self.width + 1) // 2
        data = []
        for i, (lo, hi) in enumerate(((0, half), (half, self.width))):
            if lo == hi:
                continue
            storage = Memory(shape=hi - lo, depth=depth, init=[],
                             attrs={"ram_style": "distributed"})
            m.submodules[f"storage{i}"] = storage
            w_port = storage.write_port()
            r_port = storage.read_port(domain="comb")
            produce = Signal(range(depth), init=i % depth, name=f"produce{i}")
            consume = Signal(range(depth), init=i % depth, name=f"consume{i}")
            m.d.comb += [
                w_port.addr.eq(produce),
                w_port.data.eq(self.w_data[lo:hi]),
                w_port.en.eq(do_write),
                r_port.addr.eq(consume),
            ]
            data.append(r_port.data)
            with m.If(do_write):
                m.d.sync += produce.eq(Mux(produce == depth - 1, 0, produce + 1))
            with m.If(do_read):
                m.d.sync += consume.eq(Mux(consume == depth - 1, 0, consume + 1))
        m.d.comb += self.r_data.eq(Cat(*data))
        with m.If(do_write & ~do_read):
            m.d.sync += [
                self.level.eq(self.level + 1),
                w_rdy.eq(self.level != depth - 1),
                r_rdy.eq(1),
            ]
        with m.If(do_read & ~do_write):
            m.d.sync += [
                self.level.eq(self.level - 1),
                w_rdy.eq(1),
                r_rdy.eq(self.level != 1),
            ]
        return m


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
    ``s_axis_tdata/tkeep/tlast/tvalid/tready/tuser``: frames in. ``s_axis_tready``, a register,
    is low only when the FIFO is full (so never inside a frame being dropped: it writes nothing).
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

    Inside: the passed beats wait in a FIFO (``data``, distributed RAM) of ``delay_max + 2``
    beats. Their releases are a line of ``max(1, delay_max - 1)`` bits, one per coming cycle:
    a passed beat taken at edge ``a`` is set to be released at edge
    ``max(a + max(1, delay - 1), previous release + 1)``, one release per edge at most and in
    order, which loads at the same edges as the rule above (the beat before leaves after its
    own release anyway); a counter keeps the beats released and not yet loaded. A memory beside
    the FIFO keeps each beat's rate, read one entry ahead, so that the head's rate is a register.
    The head of the data FIFO loads the output register when it is released, the register is
    free and ``rate`` cycles have passed since the previous beat left. Every decision is taken
    from registers: the LFSR's next values and their compares with ``loss`` (computed a cycle
    ahead, from ``cfg_wdata`` when written), whether a beat taken now is dropped, the effective
    ``delay`` and ``rate`` (registered as written), the FIFO's ready flags, the release line,
    the head's rate and the rate gap, so that ``m_axis_tready`` and ``s_axis_tvalid`` only
    select among them (no path from an input to ``s_axis_tready``, which is a register). The
    configuration read-back is one registered multiplexer (one case per word).
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
        # Release positions (cycles ahead) a beat can be given: 0 .. max(0, delay_max - 2).
        self.release_positions = max(1, delay_max - 1)
        super().__init__({
            **config_members(),
            **axis_members("s_axis", data_width, user_width, sink=True),
            **axis_members("m_axis", data_width, user_width, sink=False),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.data_width // 8
        positions = self.release_positions
        pos_bits = bits_for(positions - 1)
        rate_bits = bits_for(self.rate_max)
        wd16 = self.cfg_wdata[:16]

        # --- configuration -----------------------------------------------------------------
        cfg = ConfigMap(m, self, "link")
        regs = {name: cfg.reg(ADDR[name], name, REGISTER_BITS[name], init=REGISTER_RESET[name],
                              doc=f"{name} (Link docstring)") for name in ADDR}
        up, loss = regs["up"], regs["loss"]
        seed_we = cfg.write_strobe(ADDR["seed"])
        loss_we = cfg.write_strobe(ADDR["loss"])
        up_we = cfg.write_strobe(ADDR["up"])

        # The effective delay and rate, registered as they are written (from cfg_wdata), in the
        # forms the release and the rate gap use: dm1 = max(0, min(delay, delay_max) - 2) (the
        # release position of a beat that waits for no other) and its zero flag; the rate, its
        # zero flag and whether it is at most 1.
        dm1_eff = Signal(pos_bits, name="dm1_eff")
        dz_eff = Signal(init=1, name="dz_eff")
        rate_eff = Signal(rate_bits, name="rate_eff")
        rz_eff = Signal(init=1, name="rz_eff")
        rle1_eff = Signal(init=1, name="rle1_eff")
        with m.If(cfg.write_strobe(ADDR["delay"])):
            big, small = wd16 > self.delay_max, wd16 <= 2
            m.d.sync += [
                dm1_eff.eq(Mux(big, max(self.delay_max - 2, 0), Mux(small, 0, wd16 - 2))),
                dz_eff.eq(Mux(big, self.delay_max <= 2, small)),
            ]
        with m.If(cfg.write_strobe(ADDR["rate"])):
            big = wd16 > self.rate_max
            m.d.sync += [
                rate_eff.eq(Mux(big, self.rate_max, wd16)),
                rz_eff.eq(~big & (wd16 == 0)),
                rle1_eff.eq(Mux(big, self.rate_max <= 1, wd16 <= 1)),
            ]

        # --- input: frame decisions ---------------------------------------------------------
        # The LFSR state, its next value (the r the next frame start draws) and the decision
        # of a frame starting in this cycle are all registers: each is computed one cycle
        # ahead from the next values of the LFSR, up and loss (a register write in the cycle
        # before a frame start is seen by it, as in the model).
        seed = REGISTER_RESET["seed"]
        lfsr = Signal(16, init=seed, name="lfsr")
        r_next = Signal(16, init=lfsr_step(seed), name="r_next")      # lfsr_next(lfsr)
        start_drop = Signal(name="start_drop")     # a frame starting now: ~up | (r < loss)
        start_lost = Signal(name="start_lost")     # a frame starting now: up & (r < loss)
        cfg.ro(ADDR_LFSR, "lfsr", lfsr, doc="LFSR state")

        in_frame = Signal(name="in_frame")   # a frame's first beat has been taken, not its last
        f_drop = Signal(name="f_drop")       # the frame in progress: its decision, delay, rate
        f_dm1 = Signal(pos_bits, name="f_dm1")
        f_dz = Signal(name="f_dz")
        f_rate = Signal(rate_bits, name="f_rate")
        f_rz = Signal(name="f_rz")
        f_le1 = Signal(name="f_le1")
        first = ~in_frame
        drop = Signal(name="drop_now")     # = Mux(first, start_drop, f_drop), a register
        in_dm1 = Mux(first, dm1_eff, f_dm1)
        in_dz = Mux(first, dz_eff, f_dz)
        in_rate = Mux(first, rate_eff, f_rate)
        in_rz = Mux(first, rz_eff, f_rz)
        in_le1 = Mux(first, rle1_eff, f_le1)

        m.submodules.data = data_fifo = SyncFIFO(
            width=self.data_width + lanes + 1 + self.user_width, depth=self.depth)
        s_fire = Signal()
        start = Signal()
        write = Signal()
        w_acc = Signal()                # a passed beat written into the FIFO
        user = self.s_axis.p.user if self.user_width else []
        m.d.comb += [
            # A dropped frame writes nothing: the FIFO, not full at its start, stays so.
            self.s_axis.ready.eq(data_fifo.w_rdy),
            s_fire.eq(self.s_axis.valid & self.s_axis.ready),
            start.eq(s_fire & first),
            write.eq(self.s_axis.valid & ~drop),       # fires when data_fifo.w_rdy
            w_acc.eq(write & data_fifo.w_rdy),
            data_fifo.w_en.eq(write),
            data_fifo.w_data.eq(Cat(self.s_axis.p.data, self.s_axis.p.keep, self.s_axis.p.last,
                                    user)),
        ]
        with m.If(s_fire):
            m.d.sync += in_frame.eq(~self.s_axis.p.last)
        with m.If(start):
            m.d.sync += [
                f_drop.eq(start_drop),
                f_dm1.eq(dm1_eff),
                f_dz.eq(dz_eff),
                f_rate.eq(rate_eff),
                f_rz.eq(rz_eff),
                f_le1.eq(rle1_eff),
            ]

        # The LFSR steps at a frame start; a seed write reloads it (after the step: the reload
        # wins). Beside the next r and the one after it, the two compares with loss are
        # registers too (lt_next, lt_after), so that the next decision is one LUT past them: a
        # frame start shifts them (the new compare is two LFSR steps ahead), a loss or seed
        # write computes both from cfg_wdata. A cfg write names one address, so a seed, a loss
        # and an up write never come together.
        lt_next = Signal(name="lt_next")       # r_next < loss
        lt_after = Signal(name="lt_after")     # lfsr_next(r_next) < loss
        r_after = _lfsr_next(r_next)                   # the r after the next one
        r_after2 = _lfsr_next(r_after)
        zero = wd16 == 0
        seed_value = Mux(zero, SEED_ZERO_LOADS, wd16)
        seed_r = Mux(zero, lfsr_step(SEED_ZERO_LOADS), _lfsr_next(wd16))
        seed_r2 = Mux(zero, lfsr_step(lfsr_step(SEED_ZERO_LOADS)), _lfsr_next(_lfsr_next(wd16)))
        lt_next_ns, lt_after_ns = Signal(), Signal()
        with m.If(seed_we):
            m.d.comb += [lt_next_ns.eq(seed_r < loss), lt_after_ns.eq(seed_r2 < loss)]
        with m.Elif(loss_we):
            c_next, c_after, c_after2 = r_next < wd16, r_after < wd16, r_after2 < wd16
            m.d.comb += [lt_next_ns.eq(Mux(start, c_after, c_next)),
                         lt_after_ns.eq(Mux(start, c_after2, c_after))]
        with m.Elif(start):
            m.d.comb += [lt_next_ns.eq(lt_after), lt_after_ns.eq(r_after2 < loss)]
        with m.Else():
            m.d.comb += [lt_next_ns.eq(lt_next), lt_after_ns.eq(lt_after)]
        up_ns = Mux(up_we, self.cfg_wdata[0], up)
        start_drop_ns = Signal()
        m.d.comb += start_drop_ns.eq(~up_ns | lt_next_ns)
        m.d.sync += [
            lt_next.eq(lt_next_ns),
            lt_after.eq(lt_after_ns),
            start_drop.eq(start_drop_ns),
            start_lost.eq(up_ns & lt_next_ns),
            # first in the next cycle: after a last beat, or if no beat is taken now
            drop.eq(Mux(Mux(s_fire, self.s_axis.p.last, first), start_drop_ns,
                        Mux(start, start_drop, f_drop))),
        ]
        with m.If(seed_we):
            m.d.sync += [lfsr.eq(seed_value), r_next.eq(seed_r)]
        with m.Elif(start):
            m.d.sync += [lfsr.eq(r_next), r_next.eq(r_after)]

        cut_event, lost_event = Signal(), Signal()
        m.d.comb += [
            cut_event.eq(start & ~up),
            lost_event.eq(start & start_lost),
        ]

        # --- release: a line of the coming release edges ----------------------------------
        # Beat i of the passed beats is released at edge E_i = max(a_i + D_i, E_(i-1) + 1)
        # (D = max(1, delay - 1)): at most one release per edge, in order, and the same load
        # edges as a_i + D_i alone (the beat before leaves after E_(i-1) anyway). line[k] is a
        # release at the edge k cycles ahead (bit 0: the coming edge); a passed beat taken at
        # edge a is inserted at position p = max(dm1, fl) of the next cycle's line, fl being
        # the position of the latest insert (0 when released): at once when p = 0, else one
        # cycle later, from registers (ins_q, ins_p), at position p - 1.
        line = Signal(positions, name="release_line")
        fl = Signal(pos_bits, name="release_floor")
        fl_z = Signal(init=1, name="release_floor_zero")        # fl == 0
        ins_q = Signal(name="release_insert")
        ins_p = Signal(pos_bits, name="release_insert_pos")
        p = Signal(pos_bits)
        p_zero = Signal()
        m.d.comb += [
            p.eq(Mux(in_dm1 > fl, in_dm1, fl)),
            p_zero.eq(in_dz & fl_z),
        ]
        m.d.sync += [ins_q.eq(w_acc & ~p_zero), ins_p.eq(p)]
        with m.If(w_acc):
            m.d.sync += [fl.eq(p), fl_z.eq(p_zero)]
        with m.Else():
            m.d.sync += [fl.eq(Mux(fl_z, 0, fl - 1)), fl_z.eq(fl <= 1)]
        line_next = []
        for k in range(positions):
            bit = line[k + 1] | (ins_q & (ins_p == k + 1)) if k + 1 < positions else Const(0)
            if k == 0:
                bit = bit | (w_acc & p_zero)
            line_next.append(bit)
        m.d.sync += line.eq(Cat(*line_next))

        load = Signal()                 # the head of the FIFO enters the output register
        released = Signal(range(self.depth + 1), name="released")  # released, not loaded
        released_nz = Signal(name="released_nz")
        head_released = Signal()
        m.d.comb += head_released.eq(released_nz | line[0])
        m.d.sync += released.eq(released + line[0] - load)
        with m.If(line[0] & ~load):
            m.d.sync += released_nz.eq(1)
        with m.Elif(~line[0] & load):
            m.d.sync += released_nz.eq(released != 1)

        # --- the head's rate, registered -------------------------------------------------
        # A copy of each passed beat's rate (and its zero flag) in a memory beside the FIFO,
        # read one entry ahead, so that the rate of the FIFO's head is a register (h_rate).
        level = data_fifo.level
        lvl_z, lvl_1 = Signal(), Signal()
        m.d.comb += [lvl_z.eq(~data_fifo.r_rdy), lvl_1.eq(level == 1)]
        m.submodules.rates = rates = Memory(shape=rate_bits + 1, depth=self.depth, init=[],
                                          attrs={"ram_style": "distributed"})
        rates_w = rates.write_port()
        rates_r = rates.read_port(domain="comb")
        w_ptr = Signal(range(self.depth), name="rates_w_ptr")
        r_ptr = Signal(range(self.depth), init=1 % self.depth, name="rates_r_ptr")  # head + 1
        m.d.comb += [
            rates_w.addr.eq(w_ptr),
            rates_w.data.eq(Cat(in_rate, in_rz)),
            rates_w.en.eq(w_acc),
            rates_r.addr.eq(r_ptr),
        ]
        with m.If(w_acc):
            m.d.sync += w_ptr.eq(Mux(w_ptr == self.depth - 1, 0, w_ptr + 1))
        with m.If(load):
            m.d.sync += r_ptr.eq(Mux(r_ptr == self.depth - 1, 0, r_ptr + 1))
        h_rate = Signal(rate_bits, name="head_rate")
        h_rz = Signal(name="head_rate_zero")
        with m.If(load & ~lvl_1):                       # the next beat is in the FIFO
            m.d.sync += [h_rate.eq(rates_r.data[:rate_bits]), h_rz.eq(rates_r.data[-1])]
        with m.Elif(w_acc & (lvl_z | load)):             # the beat written now is the head
            m.d.sync += [h_rate.eq(in_rate), h_rz.eq(in_rz)]

        # The rate gap: cool_next is the cycles since a beat left as the next cycle counts
        # them if none leaves now (saturating at rate_max); rate_ok is "cycles since a beat
        # left >= the head's rate", kept right whenever the output register is empty (a load
        # fills it, and it empties only as a beat leaves).
        m_fire = Signal()
        cool_next = Signal(range(self.rate_max + 1), init=self.rate_max, name="cool_next")
        rate_ok = Signal(init=1, name="rate_ok")
        m.d.comb += m_fire.eq(self.m_axis.valid & self.m_axis.ready)
        with m.If(m_fire):
            m.d.sync += cool_next.eq(min(2, self.rate_max))
        with m.Elif(cool_next != self.rate_max):
            m.d.sync += cool_next.eq(cool_next + 1)
        ge_in = Mux(first, cool_next >= rate_eff, cool_next >= f_rate)
        m.d.sync += rate_ok.eq(Mux(m_fire, Mux(lvl_z, in_le1, h_rate <= 1),
                                   Mux(lvl_z, ge_in, cool_next >= h_rate)))

        # --- output: the released head, the rate gap, the output register ---------------------
        m.d.comb += [
            load.eq(data_fifo.r_rdy & head_released &
                    Mux(self.m_axis.valid, self.m_axis.ready & h_rz, rate_ok)),
            data_fifo.r_en.eq(load),
        ]
        head = data_fifo.r_data
        fields = [self.m_axis.p.data, self.m_axis.p.keep, self.m_axis.p.last]
        if self.user_width:
            fields.append(self.m_axis.p.user)
        # The payload registers load whenever the output is free (an enable of one LUT on a
        # large fanout); valid says whether a beat was loaded.
        with m.If(~self.m_axis.valid | self.m_axis.ready):
            m.d.sync += [self.m_axis.valid.eq(load), Cat(*fields).eq(head)]

        held = Signal(range(self.depth + 2), name="held")   # FIFO level + output register
        m.d.sync += held.eq(held + w_acc - m_fire)
        cfg.ro(ADDR_LEVEL, "level", held, doc="beats held")
        events = {"frames_passed": m_fire & self.m_axis.p.last, "frames_cut": cut_event,
                  "frames_lost": lost_event, "beats_passed": m_fire}
        docs = {"frames_passed": "frames passed", "frames_cut": "frames dropped by the cut",
                "frames_lost": "frames dropped by loss", "beats_passed": "beats passed"}
        for name in COUNTERS:
            cfg.counter(ADDR_COUNTERS[name], name, events[name], doc=docs[name])
        cfg.finish(decoded=True)
        return m
