# SPDX-License-Identifier: BSD-2-Clause
"""The receive tracker (docs/protocol.md 2.1, 2.2, 5): per-QP receive state, SACK/NACK decisions and
Write-with-Immediate completions; golden model ``models/rx_tracker.py``."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In
from amaranth.utils import bits_for, ceil_log2, exact_log2

from models.layouts import (CC_STATE, NETH, SETH, DATA_OPCODES, IMM_OPCODES, Dscp, Ecn,
                            NackReason, Opcode)
from models.records import CompletionStatus, RxVerdict
from models.rx_tracker import (BITMAP_BITS, MPR_DEFAULT, MPR_MAX, MPR_UNIT, SACK_EVERY,
                               WIMM_MAX_DEFAULT)
from rtl.common.logic import first_set as _first_set, wire as _wire
from rtl.common import records
from rtl.common.config import ConfigMap
from rtl.common.headers import pack
from rtl.common.ports import config_members, record_members

__all__ = ["RxTracker", "ADDR_WIDTH", "ADDR_INFO", "ADDR_STATUS", "ADDR_COUNTERS", "COUNTERS",
           "QP_BASE", "QP_STRIDE", "OFF_CACK", "OFF_STATE", "OFF_OOO", "OFF_PLACED",
           "OFF_LAST_PSN", "OFF_LAST_EV", "qp_addr", "SETUP_ENABLE", "MAX_QPS", "MAX_WIMM",
           "CYCLES_PER_EVENT", "LATENCY"]

# --- Configuration map (word addresses); see the RxTracker docstring -----------------------------

ADDR_WIDTH = 12
ADDR_INFO = 0x000
ADDR_STATUS = 0x001
COUNTERS = ("placed", "duplicate", "out_of_window", "trimmed", "access_error", "wimm_overflow",
            "qp_error", "probe", "dropped", "sack", "nack", "completion", "tick")
ADDR_COUNTERS = {name: 0x010 + i for i, name in enumerate(COUNTERS)}
QP_BASE = 0x100
QP_STRIDE = 8
OFF_CACK = 0          # write: set the QP up; read: cack_psn and the enable bit
OFF_STATE = 1
OFF_OOO = 2
OFF_PLACED = 3
OFF_LAST_PSN = 4
OFF_LAST_EV = 5
SETUP_ENABLE = 1 << 31


def qp_addr(qp, offset):
    """The word address of ``offset`` in the page of QP ``qp``."""
    return QP_BASE + QP_STRIDE * qp + offset


MAX_QPS = 64
MAX_WIMM = 64
CYCLES_PER_EVENT = 2      # back to back, outputs ready, at most one completion per event
LATENCY = 3               # input handshake in cycle t -> its outputs valid in cycle t + 3

_GROUP = BITMAP_BITS      # the bitmap is searched and read in aligned groups of 64 bits
_GROUP_BITS = exact_log2(_GROUP)
_PSN_BITS = 24

# Classes decided in stage 1 (in the order of the model's checks).
_C_DROPPED, _C_QP_ERROR, _C_PROBE, _C_OOW, _C_DUP, _C_TRIMMED, _C_ACCESS, _C_CANDIDATE = range(8)


def _popcount(m, bits, name):
    """The number of set bits among 1-bit Values (an adder tree)."""
    values = [(b, 1) for b in bits]
    level = 0
    while len(values) > 1:
        merged = []
        for i in range(0, len(values), 2):
            if i + 1 == len(values):
                merged.append(values[i])
                continue
            (a, wa), (b, wb) = values[i], values[i + 1]
            w = max(wa, wb) + 1
            merged.append((_wire(m, a + b, w, f"{name}_{level}_{i}"), w))
        values = merged
        level += 1
    return values[0][0]


def _ge_mask(m, x, n, name):
    """The ``n``-bit thermometer ``bit i = (i >= x)`` of an index ``x`` (``n`` a multiple of 64):
    whole groups compared by their index, one 64-bit shift for the group that holds ``x``."""
    hi, lo = x[_GROUP_BITS:], x[:_GROUP_BITS]
    part = _wire(m, (Const((1 << _GROUP) - 1, _GROUP) << lo)[:_GROUP], _GROUP, f"{name}_part")
    groups = [Mux(hi < j, Const((1 << _GROUP) - 1, _GROUP), Mux(hi == j, part, 0))
              for j in range(n // _GROUP)]
    return _wire(m, Cat(*groups), n, name)


def _one_hot(m, x, n, name):
    """The ``n``-bit one-hot decode of an index ``x`` (``n`` a multiple of 64), by groups: a
    64-bit decode of the low bits, enabled in the group the high bits name."""
    hi, lo = x[_GROUP_BITS:], x[:_GROUP_BITS]
    part = _wire(m, (Const(1, _GROUP) << lo)[:_GROUP], _GROUP, f"{name}_part")
    return _wire(m, Cat(*(Mux(hi == j, part, 0) for j in range(n // _GROUP))), n, name)


class RxTracker(wiring.Component):
    """The receive tracker of ``n_qps`` QPs, decision by decision equal to ``models/rx_tracker.py``
    (its module docstring fixes every rule: window, duplicates, trims, access errors,
    Write-with-Immediate completions and their ``wimm_max`` limit, the SACK policy, SACK fields).

    Per QP the state lives in registers: ``cack_psn``, the MPR-bit bitmap (a ring indexed by
    ``psn % mpr``), ``ooo_count``, placed bytes, the count of 4, the coalescing timer, the last
    accepted packet (PSN, EV, CE), the error and enable bits, and the waiting
    Write-with-Immediate completions: ``wimm_max + 1`` slots of (PSN, MSN, immediate) used as a
    circular buffer kept in PSN order (head and count per QP). A completion is inserted at its
    place (the slots after it move by one), released ones leave by the head, and the output
    stage reads them from the slots they leave (a slot is rewritten only by the next decision of
    the same QP, which waits for the output stage).

    Decision pipeline, one event at a time per stage:

    1. search (the cycle of the input handshake): the QP's bitmap with the arriving PSN's bit
       set is searched for the first zero from ``cack_psn + 1`` around the ring (a zero test
       and a priority encoder per 64-bit group, a masked encoder for the group where the search
       starts, then a priority encoder over the groups after it and over all groups); the
       classification of the model's checks (QP unknown or disabled, QP error, probe, beyond the
       window, duplicate, trimmed, access) is taken from the same state.
    2. commit: ``cack_psn`` moves by the run found, the bits of the run are cleared (two
       thermometer masks), counters, the timer and the completion slots are updated, the
       ``wimm_max`` check is made, and the job of the output stage is written.
    3. output: the verdict record, the SACK or NACK (the SACK built from the committed state:
       bitmap window from two 64-bit groups shifted to the base PSN) and the completions, one per
       cycle.

    Stage 1 of an event runs only after stage 2 of the one before has committed (it reads the
    state), so stage 1 of event k+1 overlaps stage 3 of event k: back to back, with the outputs
    ready and at most one completion per event, an event takes **2 cycles** (the shortest data
    frame, 138 bytes, takes 3 cycles at a 512-bit core and 18 at 64). An event accepted in cycle
    t has its verdict, SACK/NACK and first completion valid in cycle **t + 3**. Each further
    completion released by the same event adds a cycle (up to ``wimm_max + 1`` on an overflow).

    Backpressure: ``s_ev_tready`` is a register (high when stage 1 is free); stage 2 waits while
    the output stage is busy, and the output stage waits until the output registers it needs
    are free (verdict and control record together, then each completion), so any sink may stall
    the tracker without loss. Outputs follow the stream rules.

    Ticks: ``tick`` (one-cycle pulses of the shared 1.024 us tick generator) is counted, held
    pending (at most 2: two ticks in a row already stop every timer, so more change nothing) and
    applied in stage 2, ahead of the next event: every QP's timer counts at once and each QP whose
    timer fires (lowest QP first) gets a SACK triggered by its last accepted packet, emitted by
    the output stage before any later event's output. The verdict of each event reports in
    ``ticks`` how many ticks were applied since the previous verdict (saturated at 3), so a model
    fed the events and those ticks in the same order decides the same (docs/protocol.md section 8).

    Parameters
    ----------
    n_qps : power of two, 1..64 (default 4)
        QPs; QP q is local ``qpn`` q.
    mpr : power of two, 128..16384 (default 1024)
        The receive window in PSNs (the SACK's ``mpr`` field is ``mpr / 128``).
    wimm_max : 1..64 (default 16)
        Write-with-Immediate completions that may wait per QP; one more is a QP error.

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset (every QP disabled, state cleared).
    ``s_ev_tdata/tvalid/tready``: events (:data:`models.records.RX_EVENT`): data packets that
    passed the receiver's checks, and reliability probes (``opcode`` PROBE).
    ``tick``: the 1.024 us tick (a one-cycle pulse).
    ``m_verdict_tdata/tvalid/tready``: one :data:`models.records.RX_VERDICT` per event, in order.
    ``m_ctrl_tdata/tvalid/tready``: SACKs (``ext`` = SETH|CC_STATE), probe answers (``pr`` = 1)
    and NACKs (``ext`` = NETH) as :data:`models.records.CONTROL_RECORD`, exactly the model's
    ``Sack.control_record`` / ``Nack.control_record``; ``qpn`` is the local QP.
    ``m_cpl_tdata/tvalid/tready``: Write-with-Immediate completions
    (:data:`models.records.COMPLETION`, ``is_recv`` = ``has_imm`` = 1, ``req_id`` 0) in MSN order
    per QP: OK when released, QP_ERROR and WIMM_OVERFLOW on the flush of an overflow.
    ``cfg_addr`` (12 bits) ``/cfg_wdata/cfg_we/cfg_rdata``: configuration port
    (``rtl/common/config.py``: read latency 1, unmapped words read 0, counters 32 bits, wrapping,
    cleared when written).

    Configuration map (word addresses)
    ----------------------------------
    ================  ====  =============================================================
    0x000             ro    n_qps (bits 7..0), mpr / 128 (15..8), wimm_max (23..16)
    0x001             ro    bit 0: busy (an event, a tick or an output in the tracker)
    0x010 .. 0x01c    cnt   verdicts placed, duplicate, out_of_window, trimmed, access_error,
                            wimm_overflow, qp_error, probe, dropped; then control records
                            sack, nack; completion records; tick pulses received
    Q = 0x100 + 8 q         QP q < n_qps
    Q + 0             rw    write: set the QP up: ``cack_psn`` = wdata[23:0] - 1 (the start
                            PSN minus one), every other state cleared (bitmap, counters,
                            timer, last packet, completions, error), enable = wdata[31].
                            Read: cack_psn (23..0), enable (31)
    Q + 1             ro    since_sack (1..0), timer running (2), timer ticks (3), error (4),
                            enable (5), last CE (6), waiting completions (15..8)
    Q + 2             ro    ooo_count (14..0)
    Q + 3             ro    placed payload bytes (mod 2^32)
    Q + 4             ro    last accepted PSN
    Q + 5             ro    last accepted EV
    ================  ====  =============================================================

    Events for a QP that is not below ``n_qps`` or not enabled, and events whose opcode is
    neither a data opcode nor PROBE, are dropped with verdict DROPPED (counted) and change
    nothing. Set a QP up while none of its events is in the tracker (status bit 0 clear, or its
    traffic stopped): the write takes effect at once and wins over a decision of the same cycle.
    """

    def __init__(self, n_qps=4, mpr=MPR_DEFAULT, wimm_max=WIMM_MAX_DEFAULT):
        def check(name, value, ok, what):
            if not isinstance(value, int) or isinstance(value, bool) or not ok(value):
                raise ValueError(f"RxTracker: {name} must be {what}, not {value!r}")

        def power_of_two(v):
            return v > 0 and not v & (v - 1)

        check("n_qps", n_qps, lambda v: power_of_two(v) and v <= MAX_QPS,
              f"a power of two from 1 to {MAX_QPS}")
        check("mpr", mpr, lambda v: power_of_two(v) and MPR_UNIT <= v <= MPR_MAX,
              f"a power of two from {MPR_UNIT} to {MPR_MAX}")
        check("wimm_max", wimm_max, lambda v: 1 <= v <= MAX_WIMM, f"1..{MAX_WIMM}")
        self.n_qps = n_qps
        self.mpr = mpr
        self.wimm_max = wimm_max
        self.cycles_per_event = CYCLES_PER_EVENT
        self.latency = LATENCY
        super().__init__({
            **config_members(ADDR_WIDTH),
            **record_members("s_ev", records.RX_EVENT, sink=True),
            "tick": In(1),
            **record_members("m_verdict", records.RX_VERDICT, sink=False),
            **record_members("m_ctrl", records.CONTROL_RECORD, sink=False),
            **record_members("m_cpl", records.COMPLETION, sink=False),
        })

    def elaborate(self, platform):
        m = Module()
        nq, mpr, wmax = self.n_qps, self.mpr, self.wimm_max
        qb = exact_log2(nq)
        mb = exact_log2(mpr)
        ngroups = mpr // _GROUP
        slots = wmax + 1                      # one more: the overflowing completion
        sb = max(1, ceil_log2(slots))
        nb = bits_for(slots)
        ones = (1 << mpr) - 1

        cfg = ConfigMap(m, self)

        # --- per-QP state (registers) -------------------------------------------------------
        def per_qp(name, width):
            return [Signal(width, name=f"q{q}_{name}") for q in range(nq)]

        enable = per_qp("enable", 1)
        error = per_qp("error", 1)
        cack = per_qp("cack", _PSN_BITS)
        bitmap = per_qp("bitmap", mpr)
        ooo = per_qp("ooo", 15)
        placed_bytes = per_qp("placed", 32)
        since = per_qp("since", 2)
        uncovered = per_qp("uncovered", 1)
        ticks = per_qp("ticks", 1)
        last_psn = per_qp("last_psn", _PSN_BITS)
        last_ev = per_qp("last_ev", 32)
        last_ce = per_qp("last_ce", 1)
        w_head = per_qp("w_head", sb)
        w_count = per_qp("w_count", nb)
        w_psn = [[Signal(_PSN_BITS, name=f"q{q}_w{s}_psn") for s in range(slots)]
                 for q in range(nq)]
        w_msn = [[Signal(16, name=f"q{q}_w{s}_msn") for s in range(slots)] for q in range(nq)]
        w_imm = [[Signal(32, name=f"q{q}_w{s}_imm") for s in range(slots)] for q in range(nq)]

        def index_of(qpn):
            return qpn[:qb] if qb else Const(0, 1)

        # --- stage 1: search and classify (reads the state) ---------------------------------
        ev = self.s_ev.p
        d1_valid = Signal()
        d1_fire = Signal()
        m.d.comb += [self.s_ev.ready.eq(~d1_valid), d1_fire.eq(self.s_ev.valid & ~d1_valid)]

        q1 = _wire(m, index_of(ev.qpn), max(1, qb), "s1_q")
        cack1 = _wire(m, Array(cack)[q1], _PSN_BITS, "s1_cack")
        bm1 = _wire(m, Array(bitmap)[q1], mpr, "s1_bitmap")
        qp_ok = (ev.qpn < nq) & Array(enable)[q1]
        is_probe = ev.opcode == Opcode.PROBE
        is_data = Cat(*(ev.opcode == op for op in DATA_OPCODES)).any()
        dist = _wire(m, ev.psn - cack1, _PSN_BITS, "s1_dist")       # psn - cack_psn, mod 2^24
        behind = dist[-1] | (dist == 0)                              # at or below cack_psn
        beyond = ~behind & (dist > mpr)
        psn_index = ev.psn[:mb]
        seen = bm1.bit_select(psn_index, 1)
        trimmed = (ev.dscp == Dscp.TRIMMED) | (ev.dscp == Dscp.TRIMMED_LASTHOP)
        cls = Signal(3, name="s1_class")
        with m.If(~qp_ok | ~(is_data | is_probe)):
            m.d.comb += cls.eq(_C_DROPPED)
        with m.Elif(Array(error)[q1]):
            m.d.comb += cls.eq(_C_QP_ERROR)
        with m.Elif(is_probe):
            m.d.comb += cls.eq(_C_PROBE)
        with m.Elif(beyond):
            m.d.comb += cls.eq(_C_OOW)
        with m.Elif(behind | seen):
            m.d.comb += cls.eq(_C_DUP)
        with m.Elif(trimmed):
            m.d.comb += cls.eq(_C_TRIMMED)
        with m.Elif(~ev.access_ok):
            m.d.comb += cls.eq(_C_ACCESS)
        with m.Else():
            m.d.comb += cls.eq(_C_CANDIDATE)

        # The run of received PSNs from cack_psn + 1 once this PSN's bit is set: the first zero
        # at or after `start` around the ring.
        with_bit = _wire(m, bm1 | _one_hot(m, psn_index, mpr, "s1_bit"), mpr, "s1_with_bit")
        start1 = _wire(m, (cack1 + 1)[:mb], mb, "s1_start")
        zero_any, zero_first = [], []
        for j in range(ngroups):
            a, i = _first_set(m, ~with_bit[_GROUP * j:_GROUP * (j + 1)], _GROUP, f"s1_g{j}")
            zero_any.append(a)
            zero_first.append(i)
        start_hi, start_lo = start1[_GROUP_BITS:], start1[:_GROUP_BITS]
        start_group = Array(with_bit.word_select(j, _GROUP) for j in range(ngroups))[start_hi]
        from_lo = (Const((1 << _GROUP) - 1, _GROUP) << start_lo)[:_GROUP]
        hit_here, at_here = _first_set(m, ~start_group & from_lo, _GROUP, "s1_here")
        zero_groups = Cat(*zero_any)
        after = Cat(*(zero_any[j] & (start_hi < j) for j in range(ngroups)))
        hit_after, group_after = _first_set(m, after, ngroups, "s1_after")
        hit_any, group_any = _first_set(m, zero_groups, ngroups, "s1_any")
        first = Array(zero_first)
        zero_at = _wire(m, Mux(hit_here, Cat(at_here, start_hi),
                               Mux(hit_after, Cat(first[group_after], group_after),
                                   Cat(first[group_any], group_any))), mb, "s1_zero_at")
        run = Mux(hit_any, (zero_at - start1)[:mb], mpr)

        d1 = {name: Signal(width, name=f"d1_{name}") for name, width in (
            ("q", max(1, qb)), ("qpn", 24), ("cls", 3), ("psn", _PSN_BITS), ("ev", 32),
            ("ce", 1), ("trimmed", 1), ("dscp_lasthop", 1), ("ackreq", 1), ("rtx", 1), ("wimm", 1),
            ("msn", 16), ("imm", 32), ("length", 16), ("probe_id", 16), ("ahead", mb + 1),
            ("run", mb + 1), ("zero_at", mb), ("found", 1))}
        with m.If(d1_fire):
            m.d.sync += [
                d1_valid.eq(1),
                d1["q"].eq(q1), d1["qpn"].eq(ev.qpn), d1["cls"].eq(cls), d1["psn"].eq(ev.psn),
                d1["ev"].eq(ev.ev), d1["ce"].eq(ev.ecn == Ecn.CE), d1["trimmed"].eq(trimmed),
                d1["dscp_lasthop"].eq(ev.dscp == Dscp.TRIMMED_LASTHOP),
                d1["ackreq"].eq(ev.ackreq), d1["rtx"].eq(ev.rtx),
                d1["wimm"].eq(Cat(*(ev.opcode == op for op in IMM_OPCODES)).any()),
                d1["msn"].eq(ev.msn), d1["imm"].eq(ev.imm), d1["length"].eq(ev.payload_length),
                d1["probe_id"].eq(ev.probe_id), d1["ahead"].eq(dist[:mb + 1]),
                d1["run"].eq(run), d1["zero_at"].eq(zero_at), d1["found"].eq(hit_any),
            ]

        # --- the output stage's job registers -----------------------------------------------
        rep_valid = Signal()
        rep_done = Signal()
        j_tick = Signal()                      # a tick job: SACKs of the fired timers
        j_fire = Signal(nq)
        j_main = Signal()                      # verdict (and control record) still to load
        j_q = Signal(max(1, qb))
        j_qpn = Signal(24)
        j_psn = Signal(_PSN_BITS)
        j_verdict = Signal(4)
        j_ticks = Signal(2)
        j_ctrl = Signal()                      # a control record goes with the verdict
        j_nack = Signal()
        j_reason = Signal(8)
        j_tpsn = Signal(_PSN_BITS)             # the trigger (SACK) or NACKed packet
        j_tev = Signal(32)
        j_skip = Signal()
        j_pr = Signal()
        j_probe_id = Signal(16)
        j_cpl = Signal(nb)                     # completions still to emit
        j_rp = Signal(sb)                      # slot of the next one
        j_flush = Signal()
        j_ovf_slot = Signal(sb)

        # --- stage 2: commit ----------------------------------------------------------------
        tick_pending = Signal(2)
        ticks_since = Signal(2)
        d2_free = ~rep_valid | rep_done
        do_tick = Signal()
        do_event = Signal()
        m.d.comb += [
            do_tick.eq(d2_free & (tick_pending != 0)),
            do_event.eq(d2_free & (tick_pending == 0) & d1_valid),
        ]
        with m.If(do_event):              # never with d1_fire (d1_valid 1 against 0)
            m.d.sync += d1_valid.eq(0)
        with m.If(self.tick & ~do_tick):
            m.d.sync += tick_pending.eq(Mux(tick_pending == 2, 2, tick_pending + 1))
        with m.Elif(~self.tick & do_tick):
            m.d.sync += tick_pending.eq(tick_pending - 1)

        q2 = d1["q"]
        cls2 = d1["cls"]
        cack2 = _wire(m, Array(cack)[q2], _PSN_BITS, "s2_cack")
        ahead = d1["ahead"]
        run2 = d1["run"]
        head2 = _wire(m, Array(w_head)[q2], sb, "s2_head")
        count2 = _wire(m, Array(w_count)[q2], nb, "s2_count")
        out_of_order = ahead > 1
        candidate = cls2 == _C_CANDIDATE
        overflow = _wire(m, candidate & d1["wimm"] & out_of_order & (count2 >= wmax), 1,
                         "s2_overflow")
        placing = _wire(m, candidate & ~overflow, 1, "s2_placing")
        inserting = _wire(m, candidate & d1["wimm"], 1, "s2_inserting")

        # Completion slots of the QP: logical position, validity, PSN relative to cack_psn.
        sel_psn = [Array(w_psn[q][s] for q in range(nq))[q2] for s in range(slots)]
        logical, before_new, released = [], [], []
        for s in range(slots):
            pos = _wire(m, Mux(s >= head2, s - head2, s + slots - head2), sb, f"s2_lpos{s}")
            valid = pos < count2
            rel = _wire(m, (sel_psn[s] - cack2)[:mb + 1], mb + 1, f"s2_rel{s}")
            logical.append(pos)
            before_new.append(valid & (rel < ahead))
            released.append(valid & (rel <= run2))
        insert_at = _wire(m, _popcount(m, before_new, "s2_insert_at"), nb, "s2_insert_pos")
        new_released = d1["wimm"] & (ahead <= run2)
        release = _wire(m, _popcount(m, released, "s2_released") + new_released, nb,
                        "s2_release")
        emit = _wire(m, Mux(overflow, count2 + 1, Mux(placing, release, 0)), nb, "s2_emit")
        head_sum = _wire(m, head2 + emit, sb + 1, "s2_head_sum")
        new_head = Mux(head_sum >= slots, head_sum - slots, head_sum)
        new_count = Mux(overflow, 0, count2 + inserting - emit)
        ovf_sum = _wire(m, head2 + insert_at, sb + 1, "s2_ovf_sum")

        # The run's bits leave the ring: [start, zero_at) around it, or all of it.
        start2 = _wire(m, (cack2 + 1)[:mb], mb, "s2_start")
        from_start = _ge_mask(m, start2, mpr, "s2_from_start")
        from_zero = _ge_mask(m, d1["zero_at"], mpr, "s2_from_zero")
        clear = _wire(m, Mux(~d1["found"], ones,
                             Mux(d1["zero_at"] >= start2, from_start & ~from_zero,
                                 from_start | ~from_zero)), mpr, "s2_clear")
        new_bit = _one_hot(m, d1["psn"][:mb], mpr, "s2_new_bit")

        since2 = Array(since)[q2]
        count_next = since2 + 1
        at_once = out_of_order | d1["ce"] | d1["rtx"] | d1["ackreq"] | (run2 > 1)
        sack_placed = at_once | (count_next >= SACK_EVERY)
        sacked = Signal()       # this event ends with a SACK: the count and the timer restart
        m.d.comb += sacked.eq((cls2 == _C_DUP) | (cls2 == _C_PROBE) | (placing & sack_placed))

        verdict = Signal(4)
        with m.Switch(cls2):
            for c, v in ((_C_DROPPED, RxVerdict.DROPPED), (_C_QP_ERROR, RxVerdict.QP_ERROR),
                         (_C_PROBE, RxVerdict.PROBE), (_C_OOW, RxVerdict.OUT_OF_WINDOW),
                         (_C_DUP, RxVerdict.DUPLICATE), (_C_TRIMMED, RxVerdict.TRIMMED),
                         (_C_ACCESS, RxVerdict.ACCESS_ERROR)):
                with m.Case(c):
                    m.d.comb += verdict.eq(v)
            with m.Default():
                m.d.comb += verdict.eq(Mux(overflow, RxVerdict.WIMM_OVERFLOW, RxVerdict.PLACED))
        is_nack = (cls2 == _C_OOW) | (cls2 == _C_TRIMMED) | (cls2 == _C_ACCESS)
        reason = Mux(cls2 == _C_OOW, NackReason.PSN_OOR_WINDOW,
                     Mux(cls2 == _C_ACCESS, NackReason.UNEXP_EVENT,
                         Mux(d1["dscp_lasthop"], NackReason.TRIMMED_LASTHOP,
                             NackReason.TRIMMED)))

        # The timers of every QP on a tick.
        timer_active = [enable[q] & ~error[q] & uncovered[q] for q in range(nq)]
        fired = _wire(m, Cat(*(timer_active[q] & ticks[q] for q in range(nq))), nq, "s2_fired")

        with m.If(do_tick):
            m.d.sync += [ticks_since.eq(Mux(ticks_since == 3, 3, ticks_since + 1)),
                         j_tick.eq(1), j_fire.eq(fired), j_main.eq(0), j_cpl.eq(0),
                         rep_valid.eq(fired.any())]
            for q in range(nq):
                with m.If(timer_active[q]):
                    with m.If(ticks[q]):
                        m.d.sync += [since[q].eq(0), uncovered[q].eq(0), ticks[q].eq(0)]
                    with m.Else():
                        m.d.sync += ticks[q].eq(1)
        with m.Elif(do_event):
            m.d.sync += [
                ticks_since.eq(0), rep_valid.eq(1), j_tick.eq(0), j_main.eq(1),
                j_q.eq(q2), j_qpn.eq(d1["qpn"]), j_psn.eq(d1["psn"]), j_verdict.eq(verdict),
                j_ticks.eq(ticks_since),
                j_ctrl.eq(sacked | is_nack), j_nack.eq(is_nack), j_reason.eq(reason),
                j_tpsn.eq(Mux(cls2 == _C_PROBE, cack2, d1["psn"])), j_tev.eq(d1["ev"]),
                j_skip.eq(d1["ce"] | ((cls2 == _C_PROBE) & d1["trimmed"])),
                j_pr.eq(cls2 == _C_PROBE), j_probe_id.eq(d1["probe_id"]),
                j_cpl.eq(emit), j_rp.eq(head2), j_flush.eq(overflow),
                j_ovf_slot.eq(Mux(ovf_sum >= slots, ovf_sum - slots, ovf_sum)),
            ]
            for q in range(nq):
                with m.If(q2 == q):
                    with m.If(sacked):
                        m.d.sync += [since[q].eq(0), uncovered[q].eq(0), ticks[q].eq(0)]
                    with m.Elif(placing):
                        m.d.sync += since[q].eq(count_next)
                        with m.If(~uncovered[q]):
                            m.d.sync += [uncovered[q].eq(1), ticks[q].eq(0)]
                    with m.If(placing):
                        m.d.sync += [
                            cack[q].eq(cack2 + run2),
                            bitmap[q].eq((bitmap[q] | new_bit) & ~clear),
                            ooo[q].eq(ooo[q] + out_of_order),
                            placed_bytes[q].eq(placed_bytes[q] + d1["length"]),
                            last_psn[q].eq(d1["psn"]), last_ev[q].eq(d1["ev"]),
                            last_ce[q].eq(d1["ce"]),
                        ]
                    with m.If(overflow):
                        m.d.sync += error[q].eq(1)
                    with m.If(placing | overflow):
                        m.d.sync += [w_head[q].eq(new_head), w_count[q].eq(new_count)]
                    with m.If(inserting):
                        for s in range(slots):
                            prev = (s - 1) % slots
                            with m.If(logical[s] == insert_at):
                                m.d.sync += [w_psn[q][s].eq(d1["psn"]), w_msn[q][s].eq(d1["msn"]),
                                             w_imm[q][s].eq(d1["imm"])]
                            with m.Elif(logical[s] > insert_at):
                                m.d.sync += [w_psn[q][s].eq(w_psn[q][prev]),
                                             w_msn[q][s].eq(w_msn[q][prev]),
                                             w_imm[q][s].eq(w_imm[q][prev])]

        verdict_counts = {"placed": RxVerdict.PLACED, "duplicate": RxVerdict.DUPLICATE,
                          "out_of_window": RxVerdict.OUT_OF_WINDOW, "trimmed": RxVerdict.TRIMMED,
                          "access_error": RxVerdict.ACCESS_ERROR,
                          "wimm_overflow": RxVerdict.WIMM_OVERFLOW,
                          "qp_error": RxVerdict.QP_ERROR, "probe": RxVerdict.PROBE,
                          "dropped": RxVerdict.DROPPED}
        for name, code in verdict_counts.items():
            cfg.counter(ADDR_COUNTERS[name], name, do_event & (verdict == code),
                        doc=f"events with verdict {name}")

        # --- stage 3: output ----------------------------------------------------------------
        v_out, c_out, p_out = self.m_verdict.p, self.m_ctrl.p, self.m_cpl.p
        v_free = ~self.m_verdict.valid | self.m_verdict.ready
        c_free = ~self.m_ctrl.valid | self.m_ctrl.ready
        p_free = ~self.m_cpl.valid | self.m_cpl.ready

        _, fire_q = _first_set(m, j_fire, nq, "s3_fire")
        main_go = _wire(m, rep_valid & ~j_tick & j_main & v_free & (~j_ctrl | c_free), 1,
                        "s3_main_go")
        cpl_go = _wire(m, rep_valid & ~j_tick & (j_cpl != 0) & p_free, 1, "s3_cpl_go")
        timer_go = _wire(m, rep_valid & j_tick & c_free, 1, "s3_timer_go")
        event_done = (~j_main | main_go) & ((j_cpl == 0) | ((j_cpl == 1) & cpl_go))
        fire_rest = j_fire & (j_fire - 1)
        m.d.comb += rep_done.eq(rep_valid & Mux(j_tick, timer_go & (fire_rest == 0),
                                                event_done))
        d2_load = do_tick | do_event            # a new job replaces the finished one
        with m.If(rep_done & ~d2_load):
            m.d.sync += rep_valid.eq(0)
        with m.If(main_go & ~d2_load):
            m.d.sync += j_main.eq(0)
        with m.If(timer_go & ~d2_load):
            m.d.sync += j_fire.eq(fire_rest)

        # The SACK (or NACK) of the job: from the committed state of its QP.
        bq = _wire(m, Mux(j_tick, fire_q, j_q), max(1, qb), "s3_q")
        b_tpsn = _wire(m, Mux(j_tick, Array(last_psn)[bq], j_tpsn), _PSN_BITS, "s3_trigger")
        b_ev = _wire(m, Mux(j_tick, Array(last_ev)[bq], j_tev), 32, "s3_ev")
        b_skip = _wire(m, Mux(j_tick, Array(last_ce)[bq], j_skip), 1, "s3_skip")
        b_pr = _wire(m, ~j_tick & j_pr, 1, "s3_pr")
        b_cack = _wire(m, Array(cack)[bq], _PSN_BITS, "s3_cack")
        b_bitmap = _wire(m, Array(bitmap)[bq], mpr, "s3_bitmap")
        offset = _wire(m, b_tpsn - b_cack, _PSN_BITS, "s3_offset")
        too_far = offset[-1] & ~offset[15:].all()             # below -32768: clamp
        ack_offset = _wire(m, Mux(too_far, 0x8000, offset[:16]), 16, "s3_ack_offset")
        aligned = Cat(Const(0, 6), b_tpsn[6:])
        aligned_off = _wire(m, aligned - b_cack, _PSN_BITS, "s3_aligned_off")
        at_cack = aligned_off[-1] | (aligned_off == 0)
        sack_offset = _wire(m, Mux(at_cack, 1, aligned_off[:mb + 1]), mb + 1, "s3_sack_offset")
        base = _wire(m, Mux(at_cack, b_cack + 1, aligned)[:mb], mb, "s3_base")
        base_group = base[_GROUP_BITS:]
        groups = Array(b_bitmap.word_select(j, _GROUP) for j in range(ngroups))
        next_group = (base_group + 1)[:mb - _GROUP_BITS]
        pair = _wire(m, Cat(groups[base_group], groups[next_group]), 2 * _GROUP, "s3_pair")
        window = _wire(m, (pair >> base[:_GROUP_BITS])[:_GROUP], _GROUP, "s3_window")
        room = _wire(m, mpr - sack_offset, mb + 1, "s3_room")     # PSNs after base in window
        inside = _wire(m, Cat(*(room >= i for i in range(_GROUP))), _GROUP, "s3_inside")
        kept = _wire(m, window & inside, _GROUP, "s3_kept")
        sack_bitmap = Cat(*(kept[_GROUP - 1 - i] for i in range(_GROUP)))
        probe_id = _wire(m, Mux(b_pr, j_probe_id, 0), 16, "s3_probe_id")
        b_ooo = _wire(m, Array(ooo)[bq], 15, "s3_ooo")
        b_placed = _wire(m, Array(placed_bytes)[bq], 32, "s3_placed")
        seth = pack(SETH, m=b_skip, pr=b_pr, ack_psn_offset=ack_offset, entropy=b_ev,
                    probe_id=probe_id, cack_psn=b_cack, mpr=mpr // MPR_UNIT,
                    sack_offset=sack_offset, sack_bitmap=sack_bitmap)
        cc = pack(CC_STATE, ooo_count=b_ooo, placed_256=b_placed[8:])
        neth = pack(NETH, nack_reason=j_reason, entropy=j_tev, nack_psn=j_tpsn)
        is_nack_out = ~j_tick & j_nack

        with m.If(main_go):
            m.d.sync += [self.m_verdict.valid.eq(1), v_out.qpn.eq(j_qpn), v_out.psn.eq(j_psn),
                         v_out.verdict.eq(j_verdict),
                         v_out.placed.eq(j_verdict == RxVerdict.PLACED),
                         v_out.ticks.eq(j_ticks)]
        with m.Elif(self.m_verdict.ready):
            m.d.sync += self.m_verdict.valid.eq(0)
        ctrl_load = (main_go & j_ctrl) | timer_go
        with m.If(ctrl_load):
            m.d.sync += [self.m_ctrl.valid.eq(1),
                         c_out.qpn.eq(Mux(j_tick, bq, j_qpn)),
                         c_out.opcode.eq(Mux(is_nack_out, Opcode.NACK, Opcode.SACK)),
                         c_out.ev.eq(b_ev),
                         c_out.ext.eq(Mux(is_nack_out, neth, Cat(seth, cc)))]
        with m.Elif(self.m_ctrl.ready):
            m.d.sync += self.m_ctrl.valid.eq(0)

        # Completions: the slot j_rp of the job's QP.
        slot_msn = Array(Array(w_msn[q]) for q in range(nq))[j_q][j_rp]
        slot_imm = Array(Array(w_imm[q]) for q in range(nq))[j_q][j_rp]
        status = Mux(~j_flush, CompletionStatus.OK,
                     Mux(j_rp == j_ovf_slot, CompletionStatus.WIMM_OVERFLOW,
                         CompletionStatus.QP_ERROR))
        with m.If(cpl_go):
            m.d.sync += [self.m_cpl.valid.eq(1), p_out.qpn.eq(j_qpn), p_out.req_id.eq(0),
                         p_out.msn.eq(slot_msn), p_out.status.eq(status), p_out.is_recv.eq(1),
                         p_out.has_imm.eq(1), p_out.imm.eq(slot_imm)]
            with m.If(~d2_load):
                m.d.sync += [j_cpl.eq(j_cpl - 1), j_rp.eq(Mux(j_rp == slots - 1, 0, j_rp + 1))]
        with m.Elif(self.m_cpl.ready):
            m.d.sync += self.m_cpl.valid.eq(0)

        cfg.counter(ADDR_COUNTERS["sack"], "sack", ctrl_load & ~is_nack_out,
                    doc="SACKs and probe answers emitted")
        cfg.counter(ADDR_COUNTERS["nack"], "nack", ctrl_load & is_nack_out, doc="NACKs emitted")
        cfg.counter(ADDR_COUNTERS["completion"], "completion", cpl_go,
                    doc="completions emitted")
        cfg.counter(ADDR_COUNTERS["tick"], "tick", self.tick, doc="tick pulses received")

        # --- configuration: QP set-up (wins over a decision of the same cycle) and reads ----
        for q in range(nq):
            with m.If(cfg.write_strobe(qp_addr(q, OFF_CACK))):
                m.d.sync += [
                    enable[q].eq(self.cfg_wdata[31]), error[q].eq(0),
                    cack[q].eq(self.cfg_wdata[:_PSN_BITS] - 1), bitmap[q].eq(0), ooo[q].eq(0),
                    placed_bytes[q].eq(0), since[q].eq(0), uncovered[q].eq(0), ticks[q].eq(0),
                    last_psn[q].eq(0), last_ev[q].eq(0), last_ce[q].eq(0), w_head[q].eq(0),
                    w_count[q].eq(0),
                ]
            cfg.ro(qp_addr(q, OFF_CACK), f"q{q}_cack", Cat(cack[q], Const(0, 7), enable[q]),
                   doc="write: set up (start PSN, enable in bit 31); read: cack_psn, enable")
            cfg.ro(qp_addr(q, OFF_STATE), f"q{q}_state",
                   Cat(since[q], uncovered[q], ticks[q], error[q], enable[q], last_ce[q],
                       Const(0, 1), w_count[q]), doc="timer, error, waiting completions")
            cfg.ro(qp_addr(q, OFF_OOO), f"q{q}_ooo", ooo[q], doc="ooo_count")
            cfg.ro(qp_addr(q, OFF_PLACED), f"q{q}_placed", placed_bytes[q], doc="placed bytes")
            cfg.ro(qp_addr(q, OFF_LAST_PSN), f"q{q}_last_psn", last_psn[q], doc="last PSN")
            cfg.ro(qp_addr(q, OFF_LAST_EV), f"q{q}_last_ev", last_ev[q], doc="last EV")
        cfg.ro(ADDR_INFO, "info", Const(nq | (mpr // MPR_UNIT) << 8 | wmax << 16, 32),
               doc="n_qps, mpr / 128, wimm_max")
        busy = d1_valid | rep_valid | (tick_pending != 0) | self.m_verdict.valid | \
            self.m_ctrl.valid | self.m_cpl.valid
        cfg.ro(ADDR_STATUS, "status", busy, doc="busy")
        cfg.finish()
        return m
