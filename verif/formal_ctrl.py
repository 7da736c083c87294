# SPDX-License-Identifier: BSD-2-Clause
"""Property harnesses of the control blocks, for :func:`verif.formal.check` (same conventions
as :mod:`verif.formal_blocks`: each function returns ``(module, ports, depths)``).

- :func:`tick_generator_harness`: the 1.024 us tick generator (``rtl/tick_generator.py``):
  ticks exactly where the accumulator rule of ``models/tick.py`` puts them, the first one
  ``ceil(threshold / step)`` cycles after reset, every gap the floor or the ceiling of
  ``threshold / step``, ``tick_count`` stepping exactly on a tick;
- :func:`axil_config_harness`: the AXI4-Lite bridge (``rtl/axil_config.py``) in front of a
  harness model of a configuration port (``rtl/common/config.py``: registers, read latency):
  the AXI-Lite handshake rules, one response per accepted request, writes reaching exactly the
  word their address names, reads returning it, DECERR and SLVERR as documented, the
  arbitration rule;
- :func:`frame_source_harness`: the self-test's frame source (``rtl/selftest_gen.py``): one
  record per request, each record's payload exactly ``ceil(length / (W/8))`` beats with
  ``tlast`` and ``tkeep`` right, stream rules;
- :func:`frame_checker_harness`: the self-test's checker (``rtl/selftest_check.py``): every
  expected frame gets exactly one result, ``ok`` exactly when its received frame was equal
  beat by beat, ``lost`` exactly when none was paired, every received frame consumed once
  (paired or ``extra``).
"""

from types import SimpleNamespace

from amaranth.hdl import (Array, Assert, Cat, Cover, Fragment, Module, Mux, ResetSignal,
                          Signal)

from .formal import StreamPort, find_signal, free_const, past

__all__ = ["tick_generator_harness", "axil_config_harness", "frame_source_harness",
           "frame_checker_harness"]


def _covers(m, covers):
    for name, cond in covers.items():
        m.d.comb += Cover(cond, name)


# -- tick generator --------------------------------------------------------------------------------

# A rate whose period is 2.5 cycles (gaps of 2 and 3, fraction 1_953_125 / 4_882_814 that does
# not reduce, a 23-bit accumulator): every cover is reached within a few cycles of reset.
SHORT_PERIOD_HZ = 2_441_407


def tick_generator_harness(clk_hz=250_000_000, block=None, cover=12, prove=2,
                           claim_gaps=None):
    """TickGenerator at ``clk_hz``, with any number of resets at any time:

    - exact: a harness phase kept the way ``models/tick.py`` states the rule (``phase = n *
      step mod threshold``, a tick in the cycle after ``phase + step`` reaches ``threshold``)
      and a harness tick count: ``tick`` and ``tick_count`` equal them in every cycle;
    - period: the first tick after reset comes in cycle ``ceil(threshold / step)``; every
      later gap between two ticks is ``floor`` or ``ceil`` of ``threshold / step`` (exactly
      256 cycles at 250 MHz), and no gap is longer (none missed); ``claim_gaps`` replaces the
      allowed gaps (a false claim for the tests);
    - ``tick_count`` steps by one exactly in a tick's cycle, else holds.

    Inductive (k = 2) through the invariants that the block's accumulator is the harness
    phase and that the cycles since the last tick are ``floor(acc / step)`` of it.
    Covers (at :data:`SHORT_PERIOD_HZ`; at 250 MHz the first tick is 256 cycles away): the
    first tick, a short and a long gap, a change of gap, a tick after a reset in mid-period.
    """
    from rtl.tick_generator import TickGenerator

    block = block or TickGenerator
    m = Module()
    dut = block(clk_hz)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    from models.tick import tick_fraction
    step, threshold = tick_fraction(clk_hz)
    lo, hi = threshold // step, -(-threshold // step)
    gaps = claim_gaps if claim_gaps is not None else sorted({lo, hi})
    acc = find_signal(frag, "acc")

    # The spec's rule, written as the model states it (the sum compared with the threshold).
    phase = Signal(range(threshold), name="phase")
    total = Signal(range(2 * threshold), name="phase_sum")
    m.d.comb += total.eq(phase + step)
    wraps = total >= threshold
    g_tick = Signal(name="g_tick")
    g_count = Signal(32, name="g_count")
    m.d.sync += [phase.eq(Mux(wraps, total - threshold, total)), g_tick.eq(wraps),
                 g_count.eq(g_count + wraps)]
    m.d.comb += [Assert(dut.tick == g_tick, "tick exactly where the rule puts it"),
                 Assert(dut.tick_count == g_count, "tick_count = ticks since reset"),
                 Assert(acc == phase, "accumulator = n * step mod threshold")]

    # Gaps between ticks, counted by the harness.
    gw = max(hi, 2).bit_length() + 1
    gap = Signal(gw, name="gap")            # cycles since the last tick (or since reset)
    ever = Signal(name="ever_ticked")
    m.d.sync += gap.eq(Mux(dut.tick, 1, gap + 1))
    with m.If(dut.tick):
        m.d.sync += ever.eq(1)
    m.d.comb += Assert(gap <= hi, "no gap longer than ceil(threshold / step)")
    m.d.comb += Assert(~dut.tick | ever | (gap == hi), "first tick in cycle ceil(thr / step)")
    in_gaps = Cat(*(gap == g for g in gaps)).any()
    m.d.comb += Assert(~(dut.tick & ever) | in_gaps, "gap between ticks is floor or ceil")
    # tick_count steps only on a tick.
    prev_count = past(m, dut.tick_count, "prev_count")
    m.d.comb += Assert(dut.tick_count == (prev_count + dut.tick)[:32], "tick_count steps on a tick")
    # Induction invariants: cycles since the last tick from the accumulator.
    m.d.comb += Assert(~(~ever & ~dut.tick) | (acc == gap * step), "first period: acc")
    m.d.comb += Assert(~(ever & ~dut.tick) | ((gap * step <= acc) & (acc < (gap + 1) * step)),
                       "later period: acc")
    m.d.comb += Assert(~dut.tick | (acc < step), "tick: acc below step")

    # Covers.
    last_gap = Signal(gw, name="last_gap")
    with m.If(dut.tick):
        m.d.sync += last_gap.eq(gap)
    rst = ResetSignal("sync")
    mid_reset = Signal(name="mid_period_reset", reset_less=True)
    with m.If(rst & (gap != 0) & ~dut.tick & ever):
        m.d.sync += mid_reset.eq(1)
    covers = {"first_tick": dut.tick & ~ever,
              "short_gap": dut.tick & ever & (gap == lo),
              "long_gap": dut.tick & ever & (gap == hi),
              "gap_change": dut.tick & ever & (last_gap != 0) & (last_gap != gap),
              "tick_after_mid_period_reset": dut.tick & ~ever & mid_reset}
    _covers(m, covers)
    return m, [], {"prove": prove, "cover": cover}


# -- AXI4-Lite configuration bridge ----------------------------------------------------------------

def axil_config_harness(addr_width=1, read_latency=1, axil_addr_width=None, block=None,
                        inductive=True, bmc=12, cover=None):
    """AxilConfig (``addr_width`` word bits, ``axil_addr_width`` default ``addr_width + 3``,
    so one address bit above the port answers DECERR) in front of a harness model of a
    configuration port: ``2**addr_width`` registers written at the edge where ``m_cfg_we`` is
    high, read with ``read_latency`` cycles (``m_cfg_rdata`` the word at ``m_cfg_addr`` of
    ``read_latency`` cycles before). On any master behaviour that keeps the AXI rules:

    - assumed of the master: AWVALID, WVALID, ARVALID held until their READY with address,
      data and strobe stable; asserted of the bridge: BVALID held until BREADY with BRESP
      stable, RVALID until RREADY with RDATA and RRESP stable;
    - one transaction at a time and one response per request: AW beats taken minus B beats
      is 0 or 1, likewise W and AR/R; no AW, W or AR taken while a transaction is open (its
      other write beat excepted); BVALID only once both the AW and the W beat are taken,
      RVALID only after an AR beat;
    - a write: BVALID the cycle after its second beat; BRESP DECERR for an address bit at or
      above ``addr_width + 2``, else SLVERR for ``wstrb`` != 0xF, else OKAY;
      ``m_cfg_we`` high for exactly one cycle, exactly for an OKAY write, with ``m_cfg_addr``
      = byte address bits ``addr_width + 1 .. 2`` and ``m_cfg_wdata`` the data (so the write
      reaches exactly that register of the model and no other);
    - a read: RVALID ``read_latency + 2`` cycles after AR; RRESP OKAY with RDATA the model's
      register the address names, or DECERR with RDATA 0 and ``m_cfg_addr`` unchanged;
    - arbitration: with no transaction open and a read and a write waiting, the kind not
      served last goes first (a write after reset); a half-taken write excludes a read.

    ``inductive``: k-induction of depth ``max(2, read_latency + 1)`` through invariants on the
    bridge's registers (held beats, state, wait counter, the last kind served); else BMC of
    depth ``bmc`` (the broken bridges of the tests, whose registers may differ).

    Covers: an OKAY, a SLVERR and a DECERR write, a DECERR read, a read of a word written
    before (non-zero), W before AW, AW before W, B and R stalled, a read chosen over a
    waiting write.
    """
    from rtl.axil_config import AxilConfig
    from models.axil_config import DECERR, OKAY, SLVERR

    block = block or AxilConfig
    A = addr_width
    X = axil_addr_width or A + 3
    m = Module()
    dut = block(A, read_latency, X)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    d = dut

    def port(valid, ready, payload, role, name, width=8):
        return StreamPort(SimpleNamespace(valid=valid, ready=ready, payload=payload), role,
                          name, count_width=width).elaborate(m)

    aw = port(d.s_axil_awvalid, d.s_axil_awready, d.s_axil_awaddr, "in", "aw")
    w = port(d.s_axil_wvalid, d.s_axil_wready, Cat(d.s_axil_wdata, d.s_axil_wstrb), "in", "w")
    ar = port(d.s_axil_arvalid, d.s_axil_arready, d.s_axil_araddr, "in", "ar")
    b = port(d.s_axil_bvalid, d.s_axil_bready, d.s_axil_bresp, "out", "b")
    r = port(d.s_axil_rvalid, d.s_axil_rready, Cat(d.s_axil_rdata, d.s_axil_rresp), "out", "r")

    # The configuration port's model: registers, read latency.
    regs = Array(Signal(32, name=f"reg{j}") for j in range(1 << A))
    with m.If(d.m_cfg_we):
        m.d.sync += regs[d.m_cfg_addr].eq(d.m_cfg_wdata)
    rd = regs[d.m_cfg_addr]
    for j in range(read_latency):
        rd = past(m, rd, f"cfg_rd{j}")
    m.d.comb += d.m_cfg_rdata.eq(rd)

    # Open transactions (beats taken minus responses taken).
    def held(a, b, name):
        out = Signal(8, name=name)
        m.d.comb += out.eq(a.taken - b.taken)
        return out
    aw_held_n, w_held_n, ar_held_n = held(aw, b, "aw_n"), held(w, b, "w_n"), held(ar, r, "ar_n")
    aw_open = Signal(name="aw_open")
    w_open = Signal(name="w_open")
    ar_open = Signal(name="ar_open")
    m.d.comb += [aw_open.eq(aw_held_n != 0), w_open.eq(w_held_n != 0),
                 ar_open.eq(ar_held_n != 0)]
    m.d.comb += [
        Assert(aw_held_n <= 1, "one AW per B, no B without AW"),
        Assert(w_held_n <= 1, "one W per B, no B without W"),
        Assert(ar_held_n <= 1, "one AR per R, no R without AR"),
        Assert(~((aw_open | w_open) & ar_open), "one transaction at a time"),
        Assert(~d.s_axil_bvalid | (aw_open & w_open), "B only after both AW and W"),
        Assert(~d.s_axil_rvalid | ar_open, "R only after AR"),
        Assert(~(aw.fire & aw_open), "no AW while one is held"),
        Assert(~(w.fire & w_open), "no W while one is held"),
        Assert(~(ar.fire & (aw_open | w_open | ar_open)), "no AR while a transaction is open"),
        Assert(~((aw.fire | w.fire) & ar_open), "no write beat during a read"),
    ]

    # The write as taken.
    g_awaddr = Signal(X, name="g_awaddr")
    g_wdata = Signal(32, name="g_wdata")
    g_wstrb = Signal(4, name="g_wstrb")
    with m.If(aw.fire):
        m.d.sync += g_awaddr.eq(d.s_axil_awaddr)
    with m.If(w.fire):
        m.d.sync += [g_wdata.eq(d.s_axil_wdata), g_wstrb.eq(d.s_axil_wstrb)]
    w_range = g_awaddr[A + 2:] == 0
    w_resp = Mux(~w_range, DECERR, Mux(g_wstrb != 0xF, SLVERR, OKAY))
    complete = (aw.fire | aw_open) & (w.fire | w_open) & ~d.s_axil_bvalid
    b_first = Signal(name="b_first")        # the first cycle of a B beat
    m.d.comb += b_first.eq(d.s_axil_bvalid & ~past(m, d.s_axil_bvalid, "b_was_valid"))
    m.d.comb += [
        Assert(d.s_axil_bvalid == past(m, complete, "write_completed") |
               (past(m, d.s_axil_bvalid & ~d.s_axil_bready, "b_was_stalled")),
               "BVALID the cycle after the write's second beat, until BREADY"),
        Assert(~d.s_axil_bvalid | (d.s_axil_bresp == w_resp), "BRESP as documented"),
        Assert(d.m_cfg_we == (b_first & (w_resp == OKAY)), "m_cfg_we exactly for an OKAY write"),
        Assert(~d.m_cfg_we | ((d.m_cfg_addr == g_awaddr[2:A + 2]) & (d.m_cfg_wdata == g_wdata)),
               "the write reaches the word its address names"),
    ]

    # The read as taken.
    g_araddr = Signal(X, name="g_araddr")
    with m.If(ar.fire):
        m.d.sync += g_araddr.eq(d.s_axil_araddr)
    r_range = g_araddr[A + 2:] == 0
    age = Signal(range(read_latency + 4), name="ar_age")     # cycles since the AR beat
    with m.If(ar.fire):
        m.d.sync += age.eq(1)
    with m.Elif(ar_open & (age <= read_latency + 1)):
        m.d.sync += age.eq(age + 1)
    m.d.comb += Assert(~(ar_open & (age <= read_latency + 1)) | ~d.s_axil_rvalid,
                       "RVALID not before read_latency + 2 cycles")
    m.d.comb += Assert(~(ar_open & (age == read_latency + 2)) | d.s_axil_rvalid,
                       "RVALID read_latency + 2 cycles after AR")
    m.d.comb += Assert(~d.s_axil_rvalid | (d.s_axil_rresp == Mux(r_range, OKAY, DECERR)),
                       "RRESP OKAY or DECERR by the address")
    m.d.comb += Assert(~d.s_axil_rvalid | (d.s_axil_rdata ==
                                           Mux(r_range, regs[g_araddr[2:A + 2]], 0)),
                       "RDATA the register the address names (0 for DECERR)")
    cfg_addr_before = past(m, d.m_cfg_addr, "cfg_addr_before")
    m.d.comb += Assert(~(ar_open & ~r_range) | (d.m_cfg_addr == cfg_addr_before),
                       "a DECERR read leaves m_cfg_addr unchanged")
    m.d.comb += Assert(~(ar_open & r_range & (age >= 1)) | (d.m_cfg_addr == g_araddr[2:A + 2]),
                       "a read shows its word on m_cfg_addr")

    # Arbitration (the rules section).
    last_write = Signal(name="g_last_write")
    with m.If(ar.fire):
        m.d.sync += last_write.eq(0)
    with m.If(complete):
        m.d.sync += last_write.eq(1)
    quiet = ~aw_open & ~w_open & ~ar_open
    both_wait = quiet & d.s_axil_arvalid & (d.s_axil_awvalid | d.s_axil_wvalid)
    write_granted = d.s_axil_awready | d.s_axil_wready
    m.d.comb += [
        Assert(~both_wait | (d.s_axil_arready == last_write), "read first after a write"),
        Assert(~both_wait | (write_granted == ~last_write), "write first after a read"),
        Assert(~(quiet & (d.s_axil_arvalid | d.s_axil_awvalid | d.s_axil_wvalid)) |
               d.s_axil_arready | write_granted, "a request in quiet is served"),
        Assert(~(aw_open ^ w_open) | ~d.s_axil_arready, "a half-taken write excludes reads"),
        Assert(~(aw_open & ~w_open) | ~d.s_axil_wvalid | d.s_axil_wready, "W taken to finish"),
        Assert(~(w_open & ~aw_open) | ~d.s_axil_awvalid | d.s_axil_awready,
               "AW taken to finish"),
    ]

    if inductive:
        # Induction invariants: the bridge's registers are what the transactions left.
        def sig(name):
            return find_signal(frag, name)
        state = sig("axil_state")       # IDLE, WRITE_RESP, READ_WAIT, READ_RESP
        m.d.comb += [
            Assert(sig("aw_held") == (aw_open & ~w_open), "inv: aw_held"),
            Assert(sig("w_held") == (w_open & ~aw_open), "inv: w_held"),
            Assert(~sig("aw_held") | (sig("aw_addr") == g_awaddr), "inv: aw_addr"),
            Assert(~sig("w_held") | ((sig("w_data") == g_wdata) & (sig("w_strb") == g_wstrb)),
                   "inv: w_data"),
            Assert(sig("last_write") == last_write, "inv: last_write"),
            Assert((state == 1) == d.s_axil_bvalid, "inv: WRITE_RESP"),
            Assert((state == 3) == d.s_axil_rvalid, "inv: READ_RESP"),
            Assert((state == 2) == (ar_open & ~d.s_axil_rvalid), "inv: READ_WAIT"),
            Assert(d.s_axil_bvalid == (aw_open & w_open), "inv: B open"),
            Assert(~(state == 2) | (sig("wait") == read_latency + 1 - age), "inv: wait"),
            Assert(~ar_open | (d.s_axil_rresp == Mux(r_range, OKAY, DECERR)), "inv: rresp"),
            Assert(~d.m_cfg_we | d.s_axil_bvalid, "inv: we in a write"),
            Assert(~ar_open | (age >= 1), "inv: age"),
        ]
    covers = {
        "write_okay": b.fire & (d.s_axil_bresp == OKAY),
        "write_slverr": b.fire & (d.s_axil_bresp == SLVERR),
        "write_decerr": b.fire & (d.s_axil_bresp == DECERR),
        "read_decerr": r.fire & (d.s_axil_rresp == DECERR),
        "read_back_written": r.fire & (d.s_axil_rresp == OKAY) & (d.s_axil_rdata != 0),
        "w_before_aw": aw.fire & w_open,
        "aw_before_w": w.fire & aw_open,
        "b_stalled": d.s_axil_bvalid & ~d.s_axil_bready,
        "r_stalled": d.s_axil_rvalid & ~d.s_axil_rready,
        "read_over_waiting_write": both_wait & d.s_axil_arready,
    }
    _covers(m, covers)
    ports = [d.s_axil_awvalid, d.s_axil_awaddr, d.s_axil_awprot, d.s_axil_wvalid,
             d.s_axil_wdata, d.s_axil_wstrb, d.s_axil_arvalid, d.s_axil_araddr,
             d.s_axil_arprot, d.s_axil_bready, d.s_axil_rready]
    depths = {"cover": cover or 13 + read_latency}
    if inductive:
        depths["prove"] = max(2, read_latency + 1)
    else:
        depths["bmc"] = bmc
    return m, ports, depths


# -- self-test frame source ------------------------------------------------------------------------

def frame_source_harness(data_width=64, max_payload=16, ports=0, passes=0, block=None,
                         inductive=True, bmc=10, cover=12, seq_bits=3):
    """FrameSource (``rtl/selftest_gen.py``; default W = 64, no switch, payloads up to 16
    bytes) on any request sequence (send or check, any timing; the requester assumed to hold
    ``req_valid`` and ``req_check`` until ``req_ready``) and any sink timing:

    - stream rules on ``m_hdr`` (the whole 1022-bit record) and ``m_axis`` (tdata, tkeep,
      tlast, tuser);
    - frames out = frames requested: requests taken minus records taken is 0 or 1, records
      taken minus frames finished (the last payload beat, or the record of a frame without
      payload) is 0 or 1, never negative; ``req_ready`` exactly when every requested frame is
      out; a record only after a request, a payload beat only after its record;
    - each frame's payload is exactly ``ceil(length / (W/8))`` beats, ``length <=
      max_payload``, ``tkeep`` all ones before the last beat and the first ``length - W/8 *
      (beats - 1)`` lanes on it, ``tlast`` on the last only, ``tuser`` 0;
    - (bounded only, ``inductive=False``) frame ``k`` of the check sequence is made from the
      same state as frame ``k`` of the send sequence (free ``k`` below ``2**seq_bits``): the
      same ``inner_src`` (``R`` and ``~R``), length, opcode and first payload beat.

    ``inductive``: k-induction (k = 2) through invariants on the block's payload registers;
    else BMC of depth ``bmc``. Covers: a frame without payload, a frame of the longest
    payload, a partial last beat, a stalled record and a stalled beat, a check frame, back to
    back frames, and (bounded) the check frame ``k`` compared.
    """
    from models.selftest import SelfTestConfig
    from rtl.selftest_gen import FrameSource

    block = block or FrameSource
    cfg = SelfTestConfig(data_width=data_width, ports=ports, passes=passes,
                         max_payload=max_payload)
    lanes_b = data_width // 8
    m = Module()
    dut = block(cfg)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    req = StreamPort(SimpleNamespace(valid=dut.req_valid, ready=dut.req_ready,
                                     payload=dut.req_check), "in", "req").elaborate(m)
    hdr = StreamPort(dut.m_hdr, "out", "hdr").elaborate(m)
    pay = StreamPort(dut.m_axis, "out", "pay").elaborate(m)

    length = dut.m_hdr.p.length
    done = Signal(8, name="frames_done")
    ends = (hdr.fire & (length == 0)) | (pay.fire & dut.m_axis.p.last)
    with m.If(ends):
        m.d.sync += done.eq(done + 1)
    req_out = Signal(8, name="req_out")         # requested, record not yet taken
    hdr_out = Signal(8, name="hdr_out")         # record taken, payload not yet finished
    m.d.comb += [req_out.eq(req.taken - hdr.taken), hdr_out.eq(hdr.taken - done)]
    m.d.comb += [
        Assert(req_out <= 1, "one record per request, none without"),
        Assert(hdr_out <= 1, "one payload per record, none without"),
        Assert(~(req_out & hdr_out).any(), "one frame at a time"),
        Assert(dut.req_ready == ((req_out == 0) & (hdr_out == 0)),
               "req_ready exactly when the frames are out"),
        Assert(dut.m_hdr.valid == (req_out == 1), "a record exactly while requested"),
        Assert(dut.m_axis.valid == (hdr_out == 1), "payload beats exactly after the record"),
        Assert(~dut.m_hdr.valid | (length <= max_payload), "length within max_payload"),
        Assert(~ends | ~(hdr.fire & pay.fire), "one end per cycle"),
    ]
    # The payload's shape from the record's length.
    f_len = Signal(16, name="f_len")
    beat = Signal(range(max_payload // lanes_b + 2), name="f_beat")
    with m.If(hdr.fire):
        m.d.sync += [f_len.eq(length), beat.eq(0)]
    with m.If(pay.fire):
        m.d.sync += beat.eq(beat + 1)
    left = Signal(17, name="f_left")            # bytes of the frame from this beat on
    m.d.comb += left.eq(f_len - beat * lanes_b)
    is_last = left <= lanes_b
    keep_want = Cat(*[left > lane for lane in range(lanes_b)])
    m.d.comb += [
        Assert(~dut.m_axis.valid | (f_len != 0) & (left > 0), "no beat past the length"),
        Assert(~dut.m_axis.valid | (dut.m_axis.p.last == is_last), "tlast on the last beat only"),
        Assert(~dut.m_axis.valid | (dut.m_axis.p.keep == keep_want), "tkeep from the length"),
        Assert(~dut.m_axis.valid | (dut.m_axis.p.user == 0), "tuser 0"),
    ]
    if inductive:
        def sig(name):
            return find_signal(frag, name)
        m.d.comb += [
            Assert(~dut.m_axis.valid | (f_len <= max_payload), "inv: frame length"),
            Assert(~dut.m_axis.valid | (sig("remaining") == left), "inv: remaining"),
            Assert(~dut.m_axis.valid | (sig("last") == is_last), "inv: last"),
            Assert(~dut.m_axis.valid | (sig("keep") == keep_want), "inv: keep"),
            Assert(sig("length") <= max_payload, "inv: length register"),
        ]
    kind = Signal(name="hdr_is_check")          # the kind of the record offered
    with m.If(req.fire):
        m.d.sync += kind.eq(dut.req_check)
    covers = {
        "empty_frame": hdr.fire & (length == 0),
        "longest_frame_last_beat": pay.fire & dut.m_axis.p.last & (f_len == max_payload),
        "partial_last_beat": pay.fire & dut.m_axis.p.last & ~dut.m_axis.p.keep[-1],
        "hdr_stalled": dut.m_hdr.valid & ~dut.m_hdr.ready,
        "beat_stalled": dut.m_axis.valid & ~dut.m_axis.ready,
        "check_frame_payload": pay.fire & kind,
        "back_to_back": req.fire & past(m, ends, "just_ended"),
    }
    ports = [dut.req_valid, dut.req_check] + hdr.free_ports() + pay.free_ports()
    if not inductive:
        # Frame k of both sequences from the same state.
        k, k_port = free_const(m, seq_bits, "seq_k")
        ports.append(k_port)
        n_send = Signal(seq_bits + 1, name="n_send")
        n_check = Signal(seq_bits + 1, name="n_check")
        with m.If(hdr.fire):
            with m.If(kind):
                m.d.sync += n_check.eq(n_check + 1)
            with m.Else():
                m.d.sync += n_send.eq(n_send + 1)
        rec = dut.m_hdr.p
        now = Cat(rec.inner_src, rec.length, rec.opcode)
        saved = [Signal(len(now), name="send_k_rec"), Signal(len(now), name="check_k_rec")]
        seen = [Signal(name="send_k_seen"), Signal(name="check_k_seen")]
        beat0 = [Signal(data_width, name="send_k_beat0"),
                 Signal(data_width, name="check_k_beat0")]
        in_k = [Signal(name="send_k_open"), Signal(name="check_k_open")]
        for j, (n, is_kind) in enumerate(((n_send, ~kind), (n_check, kind))):
            with m.If(hdr.fire & is_kind & (n == k)):
                m.d.sync += [saved[j].eq(now), seen[j].eq(1), in_k[j].eq(rec.length != 0)]
            with m.If(pay.fire & in_k[j]):
                m.d.sync += in_k[j].eq(0)
                with m.If(beat == 0):
                    m.d.sync += beat0[j].eq(dut.m_axis.p.data)
        both = seen[0] & seen[1] & ~in_k[0] & ~in_k[1]
        m.d.comb += Assert(~both | (saved[0] == saved[1]), "check frame k record = send frame k")
        m.d.comb += Assert(~both | (beat0[0] == beat0[1]), "check frame k payload = send frame k")
        covers["check_k_compared"] = both & (k != 0) & (saved[0][-24:-8] != 0)
    _covers(m, covers)
    depths = {"cover": cover}
    if inductive:
        depths["prove"] = 2
    else:
        depths["bmc"] = bmc
    return m, ports, depths


# -- self-test frame checker -----------------------------------------------------------------------

def frame_checker_harness(data_width=64, window=4, timeout=2, block=None, bmc=10, cover=12):
    """FrameChecker (``rtl/selftest_check.py``; W = 64, window 4, timeout 2) on any two frame
    streams (sources assumed to keep the stream rules; any data, keep, last, sequence
    numbers):

    - at most one of ``res_ok``, ``res_bad``, ``res_lost``, ``res_extra`` per cycle;
    - every expected frame gets exactly one result: expected frames finished (last beat
      taken) minus results is 0 or 1, and a result comes only for a finished frame;
    - the result is the harness's verdict of that frame, judged from the handshakes alone:
      ``lost`` exactly when its first beat was taken without a received beat or a later beat
      was taken alone while its received frame had not ended (the timeout), else ``ok``
      exactly when every beat was taken together with a received beat equal in ``tkeep``,
      ``tlast`` and every kept byte and no received beat of its frame was taken alone (a
      corrupted, short or long frame is ``bad``);
    - every received frame is consumed once: ``res_extra`` exactly the cycle after the last
      beat of a received frame whose first beat was taken alone (an unpaired frame); after a
      timeout inside a pair, the rest of the received frame counts as a frame of its own (the
      block's rule: the expected frame is consumed, the received one waits).

    Bounded (depth ``bmc``). Covers: an ok frame, a corrupted frame counted bad (one byte
    differs), a frame lost by timeout, a frame lost to a received frame ahead, an extra frame,
    a frame bad for ending early.
    """
    from rtl.selftest_check import FrameChecker

    block = block or FrameChecker
    lanes = data_width // 8
    m = Module()
    dut = block(data_width, window, timeout)
    m.submodules.dut = dut
    exp = StreamPort(dut.exp, "in", "exp").elaborate(m)
    rx = StreamPort(dut.rx, "in", "rx").elaborate(m)
    e, x = dut.exp, dut.rx
    res = Cat(dut.res_ok, dut.res_bad, dut.res_lost, dut.res_extra)
    m.d.comb += Assert((res & (res - 1)) == 0, "one result per cycle")

    # The harness's judgement from the handshakes.
    both = exp.fire & rx.fire
    lane_diff = Cat(*[e.p.keep[k] & (e.p.data[8 * k:8 * k + 8] != x.p.data[8 * k:8 * k + 8])
                      for k in range(lanes)])
    differ = (e.p.keep != x.p.keep) | (e.p.last != x.p.last) | lane_diff.any()
    e_first = Signal(init=1, name="exp_first")      # the next exp beat starts a frame
    x_first = Signal(init=1, name="rx_first")
    e_lost = Signal(name="exp_frame_lost")           # first beat taken alone
    e_bad = Signal(name="exp_frame_bad")
    x_paired = Signal(name="rx_frame_paired")        # the current rx frame started paired
    with m.If(exp.fire):
        m.d.sync += e_first.eq(e.p.last)
    with m.If(rx.fire):
        m.d.sync += x_first.eq(x.p.last)
    # A received beat taken alone inside a paired frame makes the pair bad.
    paired_now = Mux(x_first, both, x_paired)
    with m.If(rx.fire):
        m.d.sync += x_paired.eq(paired_now)
    rx_alone_in_pair = rx.fire & ~exp.fire & ~x_first & x_paired
    # An expected beat taken alone inside a pair whose received frame has not ended: the
    # timeout (the received frame stopped); the frame is lost and the rest of the received
    # frame starts a new one for the checker (its next beat is compared as a first beat).
    alone_mid_pair = Signal(name="exp_alone_mid_pair")
    m.d.comb += alone_mid_pair.eq(exp.fire & ~rx.fire & ~e_first & ~x_first & x_paired)
    with m.If(alone_mid_pair):
        m.d.sync += x_first.eq(1)
    lost_now = Mux(e_first, ~rx.fire, e_lost | alone_mid_pair)
    bad_now = Signal(name="exp_bad_now")
    m.d.comb += bad_now.eq((e_bad & ~e_first) | (both & differ) | (exp.fire & ~rx.fire & ~e_first))
    with m.If(exp.fire):
        m.d.sync += [e_lost.eq(lost_now), e_bad.eq(bad_now)]
    with m.Elif(rx_alone_in_pair):
        m.d.sync += e_bad.eq(1)
    # The verdict waits in ``pend`` until the result (after the exp frame's last beat; in the
    # drain of a longer received frame, later).
    pend = Signal(name="pend")
    pend_lost = Signal(name="pend_lost")
    pend_bad = Signal(name="pend_bad")
    result = dut.res_ok | dut.res_bad | dut.res_lost
    m.d.comb += [
        Assert(~result | pend, "a result only for a finished expected frame"),
        Assert(~dut.res_lost | pend_lost, "lost exactly when unpaired (lost)"),
        Assert(~dut.res_ok | (~pend_lost & ~pend_bad & ~rx_alone_in_pair), "ok only if equal"),
        Assert(~dut.res_bad | (~pend_lost & (pend_bad | rx_alone_in_pair)), "bad when not equal"),
        Assert(~(pend & exp.fire & ~result), "no expected beat while a result waits"),
    ]
    e_end = exp.fire & e.p.last
    with m.If(e_end):
        m.d.sync += [pend.eq(1), pend_lost.eq(lost_now), pend_bad.eq(bad_now)]
    with m.Elif(result):
        m.d.sync += pend.eq(0)
    with m.Elif(rx_alone_in_pair):
        m.d.sync += pend_bad.eq(1)
    # Expected frames finished minus results: 0 or 1.
    n_end = Signal(8, name="exp_frames")
    n_res = Signal(8, name="results")
    with m.If(e_end):
        m.d.sync += n_end.eq(n_end + 1)
    with m.If(result):
        m.d.sync += n_res.eq(n_res + 1)
    n_wait = Signal(8, name="results_waiting")
    m.d.comb += n_wait.eq(n_end - n_res)
    m.d.comb += Assert((n_wait <= 1) & (n_wait == pend), "one result per expected frame")
    # Received frames: unpaired ones are extra, the cycle after their last beat.
    extra_end = past(m, rx.fire & x.p.last & ~paired_now, "rx_unpaired_end")
    m.d.comb += Assert(dut.res_extra == extra_end, "extra exactly for an unpaired frame")

    mid_frame = ~e_first
    covers = {
        "ok": dut.res_ok & past(m, both & ~e_first, "ok_multi"),
        "corrupted_bad": dut.res_bad & past(m, both & lane_diff.any() & (e.p.keep == x.p.keep) &
                                               (e.p.last == x.p.last) & e.p.last, "one_byte"),
        "lost_timeout": dut.res_lost & past(m, exp.fire & e.p.last & e_first & ~x.valid,
                                            "lost_idle"),
        "lost_ahead": dut.res_lost & past(m, exp.fire & e_first & x.valid, "lost_with_rx"),
        "extra": dut.res_extra,
        "short_rx_bad": dut.res_bad & past(m, exp.fire & ~rx.fire & mid_frame, "short"),
    }
    _covers(m, covers)
    return m, exp.free_ports() + rx.free_ports(), {"bmc": bmc, "cover": cover}
