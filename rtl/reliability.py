# SPDX-License-Identifier: BSD-2-Clause
"""The sender reliability block (docs/protocol.md 2.1, 2.2, 4.4, 4.6, 5); golden model
``models/reliability.py``."""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, exact_log2

from models.layouts import NETH, PETH, SETH, NackReason, Opcode, SackVerdict
from models.records import CompletionStatus, EvEvent, RetxCause
from models.reliability import (COUNTERS, K_BITS, PROBE_ID_BITS, RETRY_BITS, TRACE, W_BITS,
                                CLEAN_ANSWERS, DEFAULT_PROBE_ENTRIES, DEFAULT_RING,
                                DEFAULT_TIMER_BITS, DEFAULT_WR_DEPTH, QpConfig, Source)
from rtl.common import records
from rtl.common.config import ConfigMap
from rtl.common.headers import field, pack
from rtl.common.logic import first_set, wire
from rtl.common.ports import config_members, record_members

__all__ = ["Reliability", "ADDR_WIDTH", "ADDR_INFO", "ADDR_STATUS", "ADDR_NOW", "ADDR_PROBE_ID",
           "ADDR_COUNTERS", "PROBE_BASE", "probe_addr", "QP_BASE", "QP_STRIDE", "qp_addr",
           "OFF_SETUP", "OFF_W_MAX", "OFF_MPR", "OFF_K", "OFF_RETRY", "OFF_PERIOD", "OFF_NEXT",
           "OFF_INFO", "SETUP_ENABLE", "MAX_QPS", "MAX_RING", "MAX_PROBE_ENTRIES", "MAX_WR_DEPTH",
           "TRACE_LAYOUT"]

# --- Configuration map (word addresses); see the Reliability docstring ---------------------------

ADDR_WIDTH = 12
ADDR_INFO = 0x000
ADDR_STATUS = 0x001
ADDR_NOW = 0x002
ADDR_PROBE_ID = 0x003
ADDR_COUNTERS = {name: 0x010 + i for i, name in enumerate(COUNTERS)}
PROBE_BASE = 0x040
QP_BASE = 0x100
QP_STRIDE = 8
OFF_SETUP = 0          # write: set up (start PSN, enable in bit 31); read: cack_psn, error, enable
OFF_W_MAX = 1
OFF_MPR = 2
OFF_K = 3
OFF_RETRY = 4
OFF_PERIOD = 5
OFF_NEXT = 6
OFF_INFO = 7
SETUP_ENABLE = 1 << 31


def qp_addr(qp, offset):
    """The word address of ``offset`` in the page of QP ``qp``."""
    return QP_BASE + QP_STRIDE * qp + offset


def probe_addr(entry, word):
    """The word address of word ``word`` (0 or 1) of probe-list entry ``entry``."""
    return PROBE_BASE + 2 * entry + word


MAX_QPS = 32
MAX_RING = 256
MAX_PROBE_ENTRIES = 32
MAX_WR_DEPTH = 256
TRACE_LAYOUT = records.layout(TRACE)

_PSN_BITS = 24
_EV_BITS = 32
_REQ_BITS = 16
_BITMAP_BITS = 64
_KNOWN_REASONS = (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP, NackReason.NO_PKT_BUFFER,
                  NackReason.PSN_OOR_WINDOW, NackReason.UNEXP_EVENT)
_VECTORS = ("live", "acked", "pend", "wt", "wc", "last")


def _serial_ge(a, b):
    """``a >= b`` in 24-bit serial arithmetic (``a - b`` in [0, 2^23))."""
    return ~(a - b)[_PSN_BITS - 1]


def _sext24(value):
    """A signed 16-bit Value extended to 24 bits."""
    return Cat(value, value[15].replicate(_PSN_BITS - 16))


class Reliability(wiring.Component):
    """The sender reliability block of ``n_qps`` QPs, record by record equal to
    ``models/reliability.py`` (its module docstring fixes every rule: PSN limit, send records,
    SACK and NACK processing, timers, the probe list, completions, QP errors).

    Structure. One engine takes one job at a time: a pending PSN limit (after a set-up or a QP error), a tick,
    or one input record (round robin over the four inputs). Per QP, the state searched per record
    lives in registers: ``cack_psn``, ``next_psn``, the window, the work-request FIFO pointers
    and, per metadata entry (``ring`` per QP, PSN ``p`` in entry ``p mod ring``), bit vectors
    live (outstanding), acked, retransmission pending, WAIT_TIMER, WAIT_CACK and last, plus the
    timer deadline (``timer_bits`` bits). Bulk state is in block RAM: per entry the latest copy's
    EV, the ``req_id`` and the timeout count; per QP the work-request FIFO (``wr_depth``
    ``req_id``\\ s). The probe list (``probe_entries`` entries) is in registers.

    Timer wheel. Every outstanding PSN whose timer runs sits in the slot ``deadline mod
    2^timer_bits`` of a wheel turned by the tick; the slot is kept beside the PSN, so the PSNs of
    a slot come out of a parallel compare. At each tick the engine computes, for every QP, the
    PSNs whose slot is the new tick count (and clears the probes whose timeout it is), then
    retransmits them one by one (QP order, PSN order), then sends the probes due. Deadlines are
    at most ``2^timer_bits`` ticks ahead: the timeout exponent is used as ``min(k,
    timer_bits - 1)`` and a probe period of 0 means ``2^timer_bits`` (as in the model).

    The tick. ``tick_count`` is the shared tick generator's count (``rtl/tick_generator.py``; its
    one-cycle ``tick`` is not needed). After reset the engine takes the count as its own ``now``
    and then applies every step of it, one tick at a time, ahead of any input, so a tick is
    never lost while outputs stall the engine.

    Trace. ``m_trace`` carries one :data:`models.reliability.TRACE` record per input taken
    (source, ``now``) and one per tick applied (source TICK, the new ``now``), in processing
    order: the model fed the same inputs in that order (``Reliability.apply``) produces the same
    records on every output stream (docs/protocol.md section 8). Connect it to a sink that is always
    ready if unused (the engine waits for the trace register like for any output).

    Latency and throughput (outputs ready): an input is taken in cycle t (its trace record and
    a block RAM read go out), processed in cycle t + 1, and the next input can be taken in
    cycle t + 2: a new PSN, a retransmission's send record, a NACK, an EV_MARKED record and a work
    request take **2 cycles**; a SACK takes 2 cycles plus 2 per work request it completes and 2
    per PSN it releases from WAIT_CACK (measured: 4 cycles for a SACK completing one work
    request, its PSN limit out 2 cycles and its completion 4 cycles after its handshake); a tick
    takes 3 cycles plus 2 per timer that fires and 1 per probe due; a QP error 1 cycle plus 2
    per pending work request. Outputs are registered; an output that is not free holds the
    engine (no record is lost).

    Parameters
    ----------
    n_qps : power of two, 1..32 (default 4)
        QPs; QP q is local ``qpn`` q.
    ring : power of two, 4..256 (default 64)
        Metadata entries per QP: the window of a QP is ``min(w_max, mpr, ring)``.
    probe_entries : 1..32 (default 8)
        Probe-list entries (shared by all QPs).
    wr_depth : power of two, 2..256 (default 16)
        Pending work requests per QP.
    timer_bits : 4..16 (default 10)
        Bits of a deadline (timeouts up to ``2^(timer_bits - 1)`` ticks).

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset (every QP disabled, the probe list
    empty, counters 0; the block RAMs are not cleared and need not be).
    ``s_send_tdata/tvalid/tready``: :data:`models.records.SEND_RECORD` (``qpn``, ``psn``, ``ev``,
    ``req_id``, ``rtx``, ``flushed``, ``last``; the other fields are not used).
    ``s_fb_tdata/tvalid/tready``: :data:`models.records.FEEDBACK_RECORD` (SACK or NACK).
    ``s_marked_tdata/tvalid/tready``: :data:`models.records.EV_MARKED` (the EV table's answers).
    ``s_wr_tdata/tvalid/tready``: :data:`models.records.WORK_REQUEST` taps (``qpn``, ``req_id``).
    The four input ``tready`` depend on the inputs' ``tvalid`` (round-robin arbitration).
    ``tick_count``: the tick generator's 32-bit count.
    ``qp_error`` (``n_qps``, out): bit q is QP q's error state (set by a QP error, cleared by a
    set-up).
    ``m_retx``: :data:`models.records.RETX_REQUEST`; ``m_limit``:
    :data:`models.records.PSN_LIMIT`; ``m_retire``: :data:`models.records.RETIRE`; ``m_cpl``:
    :data:`models.records.COMPLETION` (``is_recv`` = 0, ``msn`` = ``imm`` = 0); ``m_ev``:
    :data:`models.records.EV_EVENT` (SKIP, BAD, RECOVERED); ``m_ctrl``:
    :data:`models.records.CONTROL_RECORD` (probes: opcode RELIABILITY_PROBE, PETH with the
    probe_id); ``m_trace``: :data:`TRACE_LAYOUT`. Each ``*_tdata/tvalid/tready``.
    ``cfg_addr`` (12 bits) ``/cfg_wdata/cfg_we/cfg_rdata``: configuration port
    (``rtl/common/config.py``: read latency 1, unmapped words read 0, counters 32 bits, wrapping,
    cleared when written).

    Configuration map (word addresses)
    ----------------------------------
    ================  ====  ===============================================================
    0x000             ro    n_qps (7..0), log2 ring (11..8), probe_entries (19..12),
                            log2 wr_depth (23..20), timer_bits (28..24)
    0x001             ro    bit 0: busy (a job, a pending tick or limit, or an output held)
    0x002             ro    now: the tick count the engine has applied
    0x003             ro    the next probe_id
    0x010 .. 0x028    cnt   the counters of ``models.reliability.COUNTERS``, in that order
    0x040 + 2e        ro    probe entry e: valid (0), probe outstanding (1), clean answers
                            (3..2), QP (15..8), probe_id (31..16)
    0x041 + 2e        ro    probe entry e: EV
    Q = 0x100 + 8 q         QP q < n_qps
    Q + 0             rw    write: set the QP up: start PSN = wdata[23:0] (``cack_psn`` =
                            start - 1, ``next_psn`` = start), enable = wdata[31]; every state
                            of the QP cleared, its probe entries freed, the window latched as
                            min(w_max, mpr, ring), and (enabled) its first PSN limit sent.
                            Read: cack_psn (23..0), error (30), enable (31)
    Q + 1             rw    w_max (15..0), reset 64
    Q + 2             rw    mpr in PSNs (15..0), reset 1024
    Q + 3             rw    timeout exponent k (3..0), reset 6: timeout 2^k ticks
    Q + 4             rw    retry_limit (3..0), reset 7
    Q + 5             rw    probe period in ticks (timer_bits - 1..0), reset 64 mod 2^timer_bits
    Q + 6             ro    next_psn
    Q + 7             ro    window (15..0), pending work requests (31..16)
    ================  ====  ===============================================================

    Write a QP's parameters before its set-up, and set a QP up while the block holds no record
    of it (status bit 0 clear, or its traffic stopped): the write takes effect at once.
    """

    def __init__(self, n_qps=4, ring=DEFAULT_RING, probe_entries=DEFAULT_PROBE_ENTRIES,
                 wr_depth=DEFAULT_WR_DEPTH, timer_bits=DEFAULT_TIMER_BITS):
        def check(name, value, ok, what):
            if not isinstance(value, int) or isinstance(value, bool) or not ok(value):
                raise ValueError(f"Reliability: {name} must be {what}, not {value!r}")

        def power_of_two(v):
            return v > 0 and not v & (v - 1)

        check("n_qps", n_qps, lambda v: power_of_two(v) and v <= MAX_QPS,
              f"a power of two from 1 to {MAX_QPS}")
        check("ring", ring, lambda v: power_of_two(v) and 4 <= v <= MAX_RING,
              f"a power of two from 4 to {MAX_RING}")
        check("probe_entries", probe_entries, lambda v: 1 <= v <= MAX_PROBE_ENTRIES,
              f"1..{MAX_PROBE_ENTRIES}")
        check("wr_depth", wr_depth, lambda v: power_of_two(v) and 2 <= v <= MAX_WR_DEPTH,
              f"a power of two from 2 to {MAX_WR_DEPTH}")
        check("timer_bits", timer_bits, lambda v: 4 <= v <= 16, "4..16")
        self.n_qps = n_qps
        self.ring = ring
        self.probe_entries = probe_entries
        self.wr_depth = wr_depth
        self.timer_bits = timer_bits
        super().__init__({
            **config_members(ADDR_WIDTH),
            **record_members("s_send", records.SEND_RECORD, sink=True),
            **record_members("s_fb", records.FEEDBACK_RECORD, sink=True),
            **record_members("s_marked", records.EV_MARKED, sink=True),
            **record_members("s_wr", records.WORK_REQUEST, sink=True),
            "tick_count": In(32),
            "qp_error": Out(n_qps),
            **record_members("m_retx", records.RETX_REQUEST, sink=False),
            **record_members("m_limit", records.PSN_LIMIT, sink=False),
            **record_members("m_retire", records.RETIRE, sink=False),
            **record_members("m_cpl", records.COMPLETION, sink=False),
            **record_members("m_ev", records.EV_EVENT, sink=False),
            **record_members("m_ctrl", records.CONTROL_RECORD, sink=False),
            **record_members("m_trace", TRACE_LAYOUT, sink=False),
        })

    def elaborate(self, platform):
        m = Module()
        nq, R, P, D, tb = (self.n_qps, self.ring, self.probe_entries, self.wr_depth,
                           self.timer_bits)
        qb, rb, db = exact_log2(nq), exact_log2(R), exact_log2(D)
        qw = max(1, qb)
        pw = max(1, bits_for(P - 1))
        defaults = QpConfig()
        cfg = ConfigMap(m, self)

        def per_qp(name, width, init=0):
            return [Signal(width, name=f"q{q}_{name}", init=init) for q in range(nq)]

        def qindex(qpn):
            return qpn[:qb] if qb else Const(0, 1)

        def entry_addr(q, idx):
            return Cat(idx, q[:qb]) if qb else idx

        # --- state ------------------------------------------------------------------------------
        enable = per_qp("enable", 1)
        error = per_qp("error", 1)
        m.d.comb += self.qp_error.eq(Cat(*error))
        cack = per_qp("cack", _PSN_BITS)
        nxt = per_qp("next", _PSN_BITS)
        win = per_qp("window", bits_for(R))
        wr_head = per_qp("wr_head", db)
        wr_count = per_qp("wr_count", bits_for(D))
        vec = {n: per_qp(n, R) for n in _VECTORS}
        deadline = [[Signal(tb, name=f"q{q}_deadline{i}") for i in range(R)] for q in range(nq)]
        fire = per_qp("fire", R)
        limit_pending = Signal(nq)

        w_max, mpr, k_exp, retry_limit, period = [], [], [], [], []
        for q in range(nq):
            w_max.append(cfg.reg(qp_addr(q, OFF_W_MAX), f"q{q}_w_max", W_BITS,
                                 init=defaults.w_max, doc="w_max"))
            mpr.append(cfg.reg(qp_addr(q, OFF_MPR), f"q{q}_mpr", W_BITS, init=defaults.mpr,
                               doc="mpr"))
            k_exp.append(cfg.reg(qp_addr(q, OFF_K), f"q{q}_k", K_BITS,
                                 init=defaults.timeout_exp, doc="timeout exponent"))
            retry_limit.append(cfg.reg(qp_addr(q, OFF_RETRY), f"q{q}_retry", RETRY_BITS,
                                       init=defaults.retry_limit, doc="retry_limit"))
            period.append(cfg.reg(qp_addr(q, OFF_PERIOD), f"q{q}_period", tb,
                                  init=defaults.probe_period % (1 << tb), doc="probe period"))

        m.submodules.ev_mem = ev_mem = Memory(shape=_EV_BITS, depth=nq * R, init=[])
        m.submodules.req_mem = req_mem = Memory(shape=_REQ_BITS, depth=nq * R, init=[])
        m.submodules.retry_mem = retry_mem = Memory(shape=RETRY_BITS, depth=nq * R, init=[])
        m.submodules.wr_mem = wr_mem = Memory(shape=_REQ_BITS, depth=nq * D, init=[])
        ev_rd, ev_wr = ev_mem.read_port(), ev_mem.write_port()
        req_rd, req_wr = req_mem.read_port(), req_mem.write_port()
        retry_rd, retry_wr = retry_mem.read_port(), retry_mem.write_port()
        wr_rd, wr_wr = wr_mem.read_port(), wr_mem.write_port()

        p_valid = Signal(P)
        p_outst = Signal(P)
        p_q = [Signal(qw, name=f"p{e}_q") for e in range(P)]
        p_ev = [Signal(_EV_BITS, name=f"p{e}_ev") for e in range(P)]
        p_count = [Signal(2, name=f"p{e}_count") for e in range(P)]
        p_id = [Signal(PROBE_ID_BITS, name=f"p{e}_id") for e in range(P)]
        p_due = [Signal(tb, name=f"p{e}_due") for e in range(P)]
        p_tmo = [Signal(tb, name=f"p{e}_tmo") for e in range(P)]
        due = Signal(P)
        probe_id = Signal(PROBE_ID_BITS)

        now = Signal(32)
        synced = Signal()

        # --- per-entry updates: set and clear masks, one deadline write per cycle ---------------
        vset = {n: [Signal(R, name=f"q{q}_{n}_set") for q in range(nq)] for n in _VECTORS}
        vclr = {n: [Signal(R, name=f"q{q}_{n}_clr") for q in range(nq)] for n in _VECTORS}
        for n in _VECTORS:
            for q in range(nq):
                m.d.sync += vec[n][q].eq((vec[n][q] & ~vclr[n][q]) | vset[n][q])
        de_en = Signal()
        de_q = Signal(qw)
        de_idx = Signal(rb)
        de_val = Signal(tb)
        with m.If(de_en):
            m.d.sync += Array(Array(d) for d in deadline)[de_q][de_idx].eq(de_val)

        def onehot(idx):
            return Cat(*(idx == i for i in range(R)))

        def set_bits(name, q, mask):
            m.d.comb += Array(vset[name])[q].eq(mask)

        def clear_bits(name, q, mask):
            m.d.comb += Array(vclr[name])[q].eq(mask)

        def timeout_of(q):
            k = Array(k_exp)[q]
            return Mux(k > tb - 1, 1 << (tb - 1), Const(1, tb) << k[:bits_for(tb - 1)])[:tb]

        # --- outputs: a register per stream; "go" loads it with the fields a state assigns -----
        # (The fields are assigned in the sync domain, so fields no state assigns stay 0.)
        def output(prefix):
            go = Signal(name=f"{prefix}_go")
            port = getattr(self, prefix)
            valid, ready = port.valid, port.ready
            with m.If(go):
                m.d.sync += valid.eq(1)
            with m.Elif(ready):
                m.d.sync += valid.eq(0)
            free = wire(m, ~valid | ready, 1, f"{prefix}_free")
            return SimpleNamespace(go=go, data=port.p, free=free)

        o_retx, o_limit, o_retire, o_cpl, o_ev, o_ctrl, o_trace = (
            output(f"m_{name}") for name in ("retx", "limit", "retire", "cpl", "ev", "ctrl",
                                              "trace"))

        def emit(out, **fields):
            m.d.comb += out.go.eq(1)
            m.d.sync += [getattr(out.data, name).eq(value) for name, value in fields.items()]

        def emit_retx(q, psn, ev, cause):
            emit(o_retx, qpn=q, psn=psn, avoid_ev=ev, cause=cause)

        def emit_ev(q, ev, kind):
            emit(o_ev, qpn=q, ev=ev, kind=kind)

        def emit_completion(q, req_id, status):
            emit(o_cpl, qpn=q, req_id=req_id, status=status)
            emit(o_retire, qpn=q, req_id=req_id)

        cpl_free = o_cpl.free & o_retire.free

        events = {name: Signal(name=f"count_{name}") for name in COUNTERS}

        def count(name):
            m.d.comb += events[name].eq(1)

        # --- jobs -------------------------------------------------------------------------------
        j_send = Signal(records.SEND_RECORD)
        j_fb = Signal(records.FEEDBACK_RECORD)
        j_marked = Signal(records.EV_MARKED)
        j_wr = Signal(records.WORK_REQUEST)
        rr = Signal(2)                       # round-robin pointer over the four inputs
        l_q = Signal(qw)                     # QP of the loop running
        todo = Signal(R)                     # entries left in a completion / WAIT_CACK loop
        l_start = Signal(rb)                 # their PSN order starts here
        wc_todo = Signal(R)                  # WAIT_CACK releases after the completions
        wc_start = Signal(rb)
        l_idx = Signal(rb)                   # the entry whose block RAM words were read
        flush_status = Signal(4)
        flush_to_fire = Signal()             # the flush interrupts a tick's timer loop

        def circular_first(vector, start, name):
            """``(any, index)`` of the first set bit of ``vector`` at or after ``start``."""
            upper = wire(m, Cat(*(vector[i] & (start <= i) for i in range(R))), R, f"{name}_up")
            any_up, idx_up = first_set(m, upper, R, f"{name}_fu")
            any_all, idx_all = first_set(m, vector, R, f"{name}_fa")
            return any_all, wire(m, Mux(any_up, idx_up, idx_all), rb, f"{name}_idx")

        def start_error(q, status, to_fire):
            """The QP enters the error state; its pending work requests are flushed next."""
            count("qp_error")
            m.d.sync += [Array(error)[q].eq(1), Array(fire)[q].eq(0), l_q.eq(q),
                         flush_status.eq(status), flush_to_fire.eq(to_fire),
                         limit_pending.eq(limit_pending | (1 << q))]   # closed at next_psn
            m.d.sync += p_valid.eq(p_valid & ~Cat(*(p_q[e] == q for e in range(P))))
            m.next = "FLUSH_PICK"

        # Read addresses: driven per state, default the input being taken.
        src_valid = Cat(self.s_send.valid, self.s_fb.valid, self.s_marked.valid,
                        self.s_wr.valid)
        rr_upper = Cat(*(src_valid[i] & (rr <= i) for i in range(4)))
        any_upper, idx_upper = first_set(m, rr_upper, 4, "rr_up")
        any_src, idx_all = first_set(m, src_valid, 4, "rr_all")
        pick = wire(m, Mux(any_upper, idx_upper, idx_all), 2, "pick")
        fb_psn = field(NETH, self.s_fb.p.ext, "nack_psn")
        in_addr = Mux(pick == Source.SEND,
                      entry_addr(qindex(self.s_send.p.qpn), self.s_send.p.psn[:rb]),
                      entry_addr(qindex(self.s_fb.p.qpn), fb_psn[:rb]))
        # The read ports hold their data unless a state reads (IDLE: the input being taken).
        m.d.comb += [ev_rd.addr.eq(in_addr), ev_rd.en.eq(0), req_rd.en.eq(0),
                     retry_rd.addr.eq(in_addr), retry_rd.en.eq(0), wr_rd.en.eq(0)]

        # --- tick step (computed every cycle, committed in IDLE) ---------------------------------
        now_next = wire(m, now + 1, 32, "now_next")
        lo_next = now_next[:tb]
        fire_now = [wire(m, Mux(enable[q] & ~error[q], vec["live"][q] & ~vec["acked"][q] &
                                ~vec["pend"][q], 0) &
                         Cat(*(deadline[q][i] == lo_next for i in range(R))), R, f"q{q}_fire_now")
                    for q in range(nq)]
        p_timeout = wire(m, p_valid & p_outst & Cat(*(p_tmo[e] == lo_next for e in range(P))), P,
                         "p_timeout")
        due_now = wire(m, p_valid & Cat(*(p_due[e] == lo_next for e in range(P))), P, "due_now")

        busy_state = Signal()

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += ev_rd.en.eq(1)
                pend_any, pend_q = first_set(m, limit_pending, nq, "limit_q")
                tick_due = synced & (now != self.tick_count)
                with m.If(~synced):
                    m.d.sync += [now.eq(self.tick_count), synced.eq(1)]
                with m.Elif(pend_any):
                    with m.If(o_limit.free):
                        emit(o_limit, qpn=pend_q,
                             psn_limit=Mux(Array(error)[pend_q], Array(nxt)[pend_q],
                                           Array(cack)[pend_q] + 1 + Array(win)[pend_q]))
                        m.d.sync += limit_pending.eq(limit_pending & ~(1 << pend_q))
                with m.Elif(tick_due):
                    with m.If(o_trace.free):
                        emit(o_trace, source=Source.TICK, tick=now_next)
                        m.d.sync += [now.eq(now_next), due.eq(due_now),
                                     p_outst.eq(p_outst & ~p_timeout)]
                        for e in range(P):
                            with m.If(p_timeout[e]):
                                m.d.sync += p_count[e].eq(0)
                        for q in range(nq):
                            m.d.sync += fire[q].eq(fire_now[q])
                        m.next = "FIRE_PICK"
                with m.Elif(any_src & o_trace.free):
                    emit(o_trace, source=pick, tick=now)
                    m.d.sync += rr.eq(pick + 1)
                    with m.Switch(pick):
                        with m.Case(Source.SEND):
                            m.d.comb += self.s_send.ready.eq(1)
                            m.d.sync += j_send.eq(self.s_send.p)
                            m.next = "SEND"
                        with m.Case(Source.FEEDBACK):
                            m.d.comb += self.s_fb.ready.eq(1)
                            m.d.sync += j_fb.eq(self.s_fb.p)
                            m.next = "FB"
                        with m.Case(Source.MARKED):
                            m.d.comb += self.s_marked.ready.eq(1)
                            m.d.sync += j_marked.eq(self.s_marked.p)
                            m.next = "MARKED"
                        with m.Case(Source.WORK_REQUEST):
                            m.d.comb += self.s_wr.ready.eq(1)
                            m.d.sync += j_wr.eq(self.s_wr.p)
                            m.next = "WR"
                m.d.comb += busy_state.eq(~synced | pend_any | tick_due)

            # --- send records ---------------------------------------------------------------------
            with m.State("SEND"):
                m.d.comb += busy_state.eq(1)
                rec = j_send
                q = wire(m, qindex(rec.qpn), qw, "send_q")
                active = (rec.qpn < nq) & Array(enable)[q] & ~Array(error)[q]
                cack_q, next_q = Array(cack)[q], Array(nxt)[q]
                idx = rec.psn[:rb]
                bit = onehot(idx)
                out_count = wire(m, next_q - cack_q - 1, _PSN_BITS, "send_out_count")
                outstanding = wire(m, (rec.psn - cack_q - 1)[:_PSN_BITS] < out_count, 1,
                                   "send_outstanding")
                e_acked = Array(vec["acked"])[q].bit_select(idx, 1)
                e_pend = Array(vec["pend"])[q].bit_select(idx, 1)
                addr = entry_addr(q, idx)
                deadline_new = (now + timeout_of(q))[:tb]
                with m.If(~active):
                    count("send_dropped")
                    m.next = "IDLE"
                with m.Elif(rec.flushed):
                    ok = outstanding & ~e_acked & ~e_pend & (ev_rd.data == rec.ev)
                    with m.If(~ok):
                        count("send_stale")
                        m.next = "IDLE"
                    with m.Elif(o_retx.free):
                        count("send_flushed")
                        count("retx")
                        emit_retx(rec.qpn, rec.psn, rec.ev, RetxCause.FLUSHED)
                        set_bits("pend", q, bit)
                        clear_bits("wt", q, bit)
                        clear_bits("wc", q, bit)
                        m.next = "IDLE"
                with m.Elif(rec.rtx):
                    with m.If(outstanding & ~e_acked & e_pend):
                        count("send_retx")
                        clear_bits("pend", q, bit)
                        m.d.comb += [ev_wr.en.eq(1), ev_wr.addr.eq(addr), ev_wr.data.eq(rec.ev),
                                     de_en.eq(1), de_q.eq(q), de_idx.eq(idx),
                                     de_val.eq(deadline_new)]
                    with m.Else():
                        count("send_stale")
                    m.next = "IDLE"
                with m.Else():
                    with m.If((rec.psn == next_q) & (out_count < Array(win)[q])):
                        count("send")
                        set_bits("live", q, bit)
                        set_bits("last", q, Mux(rec.last, bit, 0))
                        for name in ("acked", "pend", "wt", "wc"):
                            clear_bits(name, q, bit)
                        clear_bits("last", q, Mux(rec.last, 0, bit))
                        m.d.comb += [ev_wr.en.eq(1), ev_wr.addr.eq(addr), ev_wr.data.eq(rec.ev),
                                     req_wr.en.eq(1), req_wr.addr.eq(addr),
                                     req_wr.data.eq(rec.req_id),
                                     retry_wr.en.eq(1), retry_wr.addr.eq(addr),
                                     retry_wr.data.eq(0),
                                     de_en.eq(1), de_q.eq(q), de_idx.eq(idx),
                                     de_val.eq(deadline_new)]
                        m.d.sync += Array(nxt)[q].eq(next_q + 1)
                    with m.Else():
                        count("send_bad")
                    m.next = "IDLE"

            # --- feedback -------------------------------------------------------------------------
            with m.State("FB"):
                m.d.comb += busy_state.eq(1)
                rec = j_fb
                ext = rec.ext
                q = wire(m, qindex(rec.qpn), qw, "fb_q")
                active = (rec.qpn < nq) & Array(enable)[q] & ~Array(error)[q]
                cack_q, next_q = Array(cack)[q], Array(nxt)[q]
                out_count = wire(m, next_q - cack_q - 1, _PSN_BITS, "fb_out_count")
                start = wire(m, (cack_q + 1)[:rb], rb, "fb_start")
                is_sack = rec.opcode == Opcode.SACK
                is_nack = rec.opcode == Opcode.NACK

                # SACK decode (docs/protocol.md 2.1, 5): in the QP's PSN order from cack_psn + 1 ("rel").
                s_cack = field(SETH, ext, "cack_psn")
                s_m = field(SETH, ext, "m")
                s_pr = field(SETH, ext, "pr")
                s_ev = field(SETH, ext, "entropy")
                s_id = field(SETH, ext, "probe_id")
                s_bitmap = field(SETH, ext, "sack_bitmap")
                sack_bad = wire(m, _serial_ge(s_cack, next_q), 1, "sack_bad")
                d_cack = wire(m, s_cack - cack_q, _PSN_BITS, "sack_dcack")
                cum_len = wire(m, Mux(d_cack[-1], 0, d_cack), _PSN_BITS, "sack_cum_len")
                trigger = wire(m, s_cack + _sext24(field(SETH, ext, "ack_psn_offset")),
                               _PSN_BITS, "sack_trigger")
                t_rel = wire(m, trigger - cack_q - 1, _PSN_BITS, "sack_t_rel")
                base = wire(m, s_cack + _sext24(field(SETH, ext, "sack_offset")), _PSN_BITS,
                            "sack_base")
                # bitmap bit j (PSN base + j) sits at rel r = j - e, e = cack_psn + 1 - base.
                shift = wire(m, cack_q + 1 - base + R, _PSN_BITS, "sack_shift")
                shift_ok = shift < R + _BITMAP_BITS
                in_order = Cat(*(s_bitmap[_BITMAP_BITS - 1 - j] for j in range(_BITMAP_BITS)))
                spread = Cat(Const(0, R), in_order)
                bm_rel = wire(m, Mux(shift_ok, (spread >> shift[:bits_for(R + _BITMAP_BITS)])[:R],
                                     0), R, "sack_bm_rel")
                cum_rel = Cat(*(cum_len > r for r in range(R)))
                trig_rel = Cat(*((t_rel == r) & ~s_pr for r in range(R)))
                out_rel = Cat(*(out_count > r for r in range(R)))
                x_rel = wire(m, (cum_rel | bm_rel | trig_rel) & out_rel, R, "sack_x_rel")

                def rotl(x, s, name):        # y[i] = x[(i - s) mod R]
                    return wire(m, (Cat(x, x) >> (R - s)[:rb + 1])[:R], R, name)

                def rotr(x, s, name):        # y[i] = x[(i + s) mod R]
                    return wire(m, (Cat(x, x) >> s)[:R], R, name)

                acked_q = Array(vec["acked"])[q]
                acked_rel = wire(m, rotr(acked_q, start, "sack_acked_rel") | x_rel, R,
                                 "sack_all_rel")
                z_any, z_idx = first_set(m, ~acked_rel, R, "sack_zero")
                run = wire(m, Mux(z_any, z_idx, R), rb + 1, "sack_run")
                passed = rotl(Cat(*(run > r for r in range(R))), start, "sack_passed")
                x_idx = rotl(x_rel, start, "sack_x_idx")
                new_acked = wire(m, acked_q | x_idx, R, "sack_new_acked")
                moved = run != 0
                cpl_vec = wire(m, Array(vec["last"])[q] & passed, R, "sack_cpl")
                wc_vec = wire(m, Mux(moved, Array(vec["wc"])[q] & Array(vec["live"])[q] &
                                     ~new_acked & ~passed, 0), R, "sack_wc")
                new_cack = wire(m, cack_q + run, _PSN_BITS, "sack_new_cack")
                skip = s_m == SackVerdict.SKIP_ONCE
                match = wire(m, Cat(*(p_valid[e] & p_outst[e] & (p_q[e] == q) &
                                      (p_ev[e] == s_ev) & (p_id[e] == s_id)
                                      for e in range(P))), P, "probe_match")
                m_any, m_idx = first_set(m, match, P, "probe_match_first")
                clean = s_m == SackVerdict.NONE
                m_count = Array(p_count)[m_idx]
                recovered = s_pr & m_any & clean & (m_count == CLEAN_ANSWERS - 1)

                # NACK decode (docs/protocol.md 2.2).
                n_reason = field(NETH, ext, "nack_reason")
                n_psn = field(NETH, ext, "nack_psn")
                n_ev = field(NETH, ext, "entropy")
                n_idx = n_psn[:rb]
                n_bit = onehot(n_idx)
                known = Cat(*(n_reason == r for r in _KNOWN_REASONS)).any()
                nack_bad = ~known | _serial_ge(n_psn, next_q)
                n_out = (n_psn - cack_q - 1)[:_PSN_BITS] < out_count
                n_fresh = n_out & ~Array(vec["acked"])[q].bit_select(n_idx, 1)
                n_flight = ~(Array(vec["pend"])[q] | Array(vec["wt"])[q] |
                             Array(vec["wc"])[q]).bit_select(n_idx, 1)
                n_act = n_fresh & n_flight & (ev_rd.data == n_ev)
                n_trimmed = (n_reason == NackReason.TRIMMED) | \
                    (n_reason == NackReason.TRIMMED_LASTHOP)
                n_skip = n_reason == NackReason.TRIMMED

                with m.If(~is_sack & ~is_nack):
                    count("fb_bad")
                    m.next = "IDLE"
                with m.Elif(~active):
                    count("fb_dropped")
                    m.next = "IDLE"
                with m.Elif(is_sack & sack_bad):
                    count("fb_bad")
                    m.next = "IDLE"
                with m.Elif(is_sack):
                    with m.If((~(skip | recovered) | o_ev.free) & (~moved | o_limit.free)):
                        count("sack")
                        with m.If(skip):
                            emit_ev(rec.qpn, s_ev, EvEvent.SKIP)
                        with m.If(moved):
                            emit(o_limit, qpn=rec.qpn, psn_limit=new_cack + 1 + Array(win)[q])
                        set_bits("acked", q, new_acked & ~passed)
                        clear_bits("acked", q, passed)
                        clear_bits("live", q, passed)
                        m.d.sync += [Array(cack)[q].eq(new_cack), l_q.eq(q), todo.eq(cpl_vec),
                                     l_start.eq(start), wc_todo.eq(wc_vec),
                                     wc_start.eq((start + run)[:rb])]
                        with m.If(s_pr):
                            with m.If(m_any):
                                count("probe_answer")
                                m.d.sync += p_outst.eq(p_outst & ~(1 << m_idx))
                                with m.If(recovered):
                                    count("recovered")
                                    emit_ev(rec.qpn, s_ev, EvEvent.RECOVERED)
                                    m.d.sync += p_valid.eq(p_valid & ~(1 << m_idx))
                                m.d.sync += Array(p_count)[m_idx].eq(
                                    Mux(clean, m_count + 1, 0))
                            with m.Else():
                                count("probe_stale")
                        with m.If(cpl_vec.any()):
                            m.next = "CPL_PICK"
                        with m.Elif(wc_vec.any()):
                            m.next = "WC_PICK"
                        with m.Else():
                            m.next = "IDLE"
                with m.Elif(nack_bad):
                    count("fb_bad")
                    m.next = "IDLE"
                with m.Else():
                    retx_needed = n_act & n_trimmed
                    with m.If((~n_skip | o_ev.free) & (~retx_needed | o_retx.free)):
                        count("nack")
                        with m.If(n_skip):
                            emit_ev(rec.qpn, n_ev, EvEvent.SKIP)
                        with m.If(n_fresh & (n_reason == NackReason.UNEXP_EVENT)):
                            start_error(q, CompletionStatus.QP_ERROR, 0)
                        with m.Elif(n_act & n_trimmed):
                            count("retx")
                            emit_retx(rec.qpn, n_psn, n_ev, RetxCause.NACK_TRIMMED)
                            set_bits("pend", q, n_bit)
                            m.next = "IDLE"
                        with m.Elif(n_act & (n_reason == NackReason.NO_PKT_BUFFER)):
                            set_bits("wt", q, n_bit)
                            m.d.comb += [de_en.eq(1), de_q.eq(q), de_idx.eq(n_idx),
                                         de_val.eq((now + Array(period)[q])[:tb])]
                            m.next = "IDLE"
                        with m.Elif(n_act & (n_reason == NackReason.PSN_OOR_WINDOW)):
                            set_bits("wc", q, n_bit)
                            m.next = "IDLE"
                        with m.Else():
                            count("fb_stale")
                            m.next = "IDLE"

            # --- completions after a SACK, then the WAIT_CACK releases --------------------------
            with m.State("CPL_PICK"):
                m.d.comb += busy_state.eq(1)
                _, first = circular_first(todo, l_start, "cpl_pick")
                m.d.comb += [req_rd.en.eq(1), req_rd.addr.eq(entry_addr(l_q, first))]
                m.d.sync += l_idx.eq(first)
                m.next = "CPL_EMIT"
            with m.State("CPL_EMIT"):
                m.d.comb += busy_state.eq(1)
                count_q = Array(wr_count)[l_q]
                with m.If(cpl_free):
                    emit_completion(l_q, req_rd.data, CompletionStatus.OK)
                    rest = todo & ~onehot(l_idx)
                    m.d.sync += todo.eq(rest)
                    with m.If(count_q == 0):
                        count("wr_missing")
                    with m.Else():
                        m.d.sync += [Array(wr_count)[l_q].eq(count_q - 1),
                                     Array(wr_head)[l_q].eq(Array(wr_head)[l_q] + 1)]
                    with m.If(rest.any()):
                        m.next = "CPL_PICK"
                    with m.Elif(wc_todo.any()):
                        m.next = "WC_PICK"
                    with m.Else():
                        m.next = "IDLE"
            with m.State("WC_PICK"):
                m.d.comb += busy_state.eq(1)
                _, first = circular_first(wc_todo, wc_start, "wc_pick")
                m.d.comb += [ev_rd.en.eq(1), ev_rd.addr.eq(entry_addr(l_q, first))]
                m.d.sync += l_idx.eq(first)
                m.next = "WC_EMIT"
            with m.State("WC_EMIT"):
                m.d.comb += busy_state.eq(1)
                with m.If(o_retx.free):
                    count("retx")
                    bit = onehot(l_idx)
                    psn = Array(cack)[l_q] + 1 + (l_idx - Array(cack)[l_q] - 1)[:rb]
                    emit_retx(l_q, psn, ev_rd.data, RetxCause.CACK_MOVED)
                    set_bits("pend", l_q, bit)
                    clear_bits("wc", l_q, bit)
                    rest = wc_todo & ~bit
                    m.d.sync += wc_todo.eq(rest)
                    with m.If(rest.any()):
                        m.next = "WC_PICK"
                    with m.Else():
                        m.next = "IDLE"

            # --- a tick: timers (QP order, PSN order), then probes ------------------------------
            with m.State("FIRE_PICK"):
                m.d.comb += busy_state.eq(1)
                f_any, f_q = first_set(m, Cat(*(fire[q].any() for q in range(nq))), nq, "fire_q")
                fq = wire(m, f_q, qw, "fire_pick_q")
                f_start = wire(m, (Array(cack)[fq] + 1)[:rb], rb, "fire_start")
                _, first = circular_first(Array(fire)[fq], f_start, "fire_pick")
                addr = entry_addr(fq, first)
                m.d.comb += [ev_rd.addr.eq(addr), retry_rd.addr.eq(addr)]
                m.d.comb += [ev_rd.en.eq(1), retry_rd.en.eq(1)]
                m.d.sync += [l_q.eq(fq), l_idx.eq(first)]
                with m.If(f_any):
                    m.next = "FIRE_EMIT"
                with m.Else():
                    m.next = "PROBE"
            with m.State("FIRE_EMIT"):
                m.d.comb += busy_state.eq(1)
                q = l_q
                bit = onehot(l_idx)
                cack_q = Array(cack)[q]
                psn = wire(m, cack_q + 1 + (l_idx - cack_q - 1)[:rb], _PSN_BITS, "fire_psn")
                waiting = (Array(vec["wt"])[q] | Array(vec["wc"])[q]).bit_select(l_idx, 1)
                exceeded = retry_rd.data >= Array(retry_limit)[q]
                with m.If(waiting):
                    with m.If(o_retx.free):
                        count("retx")
                        emit_retx(q, psn, ev_rd.data, RetxCause.NACK_OTHER)
                        set_bits("pend", q, bit)
                        clear_bits("wt", q, bit)
                        clear_bits("wc", q, bit)
                        m.d.sync += Array(fire)[q].eq(Array(fire)[q] & ~bit)
                        m.next = "FIRE_PICK"
                with m.Elif(exceeded):
                    count("timeout")
                    start_error(q, CompletionStatus.RETRY_EXCEEDED, 1)
                with m.Elif(o_retx.free & o_ev.free):
                    count("timeout")
                    count("retx")
                    emit_retx(q, psn, ev_rd.data, RetxCause.TIMEOUT)
                    emit_ev(q, ev_rd.data, EvEvent.BAD)
                    set_bits("pend", q, bit)
                    m.d.comb += [retry_wr.en.eq(1), retry_wr.addr.eq(entry_addr(q, l_idx)),
                                 retry_wr.data.eq(retry_rd.data + 1)]
                    m.d.sync += Array(fire)[q].eq(Array(fire)[q] & ~bit)
                    m.next = "FIRE_PICK"
            with m.State("PROBE"):
                m.d.comb += busy_state.eq(1)
                d_any, d_e = first_set(m, due, P, "due_first")
                e = wire(m, d_e, pw, "probe_e")
                q = Array(p_q)[e]
                alive = p_valid.bit_select(e, 1)
                outst = p_outst.bit_select(e, 1)
                with m.If(~d_any):
                    m.next = "IDLE"
                with m.Elif(~alive | outst | o_ctrl.free):
                    m.d.sync += due.eq(due & ~(1 << e))
                    with m.If(alive):
                        m.d.sync += Array(p_due)[e].eq((now + Array(period)[q])[:tb])
                    with m.If(alive & ~outst):
                        count("probe")
                        emit(o_ctrl, qpn=q, opcode=Opcode.PROBE, ev=Array(p_ev)[e],
                             ext=pack(PETH, probe_id=probe_id))
                        m.d.sync += [p_outst.eq(p_outst | (1 << e)),
                                     Array(p_id)[e].eq(probe_id), probe_id.eq(probe_id + 1),
                                     Array(p_tmo)[e].eq((now + timeout_of(q))[:tb])]

            # --- QP error: every pending work request completes with the cause -------------------
            with m.State("FLUSH_PICK"):
                m.d.comb += busy_state.eq(1)
                head = Array(wr_head)[l_q]
                m.d.comb += [wr_rd.en.eq(1), wr_rd.addr.eq(Cat(head, l_q[:qb]) if qb else head)]
                with m.If(Array(wr_count)[l_q] != 0):
                    m.next = "FLUSH_EMIT"
                with m.Elif(flush_to_fire):
                    m.next = "FIRE_PICK"
                with m.Else():
                    m.next = "IDLE"
            with m.State("FLUSH_EMIT"):
                m.d.comb += busy_state.eq(1)
                with m.If(cpl_free):
                    emit_completion(l_q, wr_rd.data, flush_status)
                    m.d.sync += [Array(wr_count)[l_q].eq(Array(wr_count)[l_q] - 1),
                                 Array(wr_head)[l_q].eq(Array(wr_head)[l_q] + 1)]
                    m.next = "FLUSH_PICK"

            # --- EV_MARKED: the EV joins the probe list ------------------------------------------
            with m.State("MARKED"):
                m.d.comb += busy_state.eq(1)
                rec = j_marked
                q = wire(m, qindex(rec.qpn), qw, "marked_q")
                active = (rec.qpn < nq) & Array(enable)[q] & ~Array(error)[q]
                held = Cat(*(p_valid[e] & (p_q[e] == q) & (p_ev[e] == rec.ev)
                             for e in range(P))).any()
                free_any, free_e = first_set(m, ~p_valid, P, "probe_free")
                with m.If(~active):
                    count("marked_dropped")
                with m.Elif(rec.valid):
                    count("marked")
                    with m.If(~held & free_any):
                        m.d.sync += [p_valid.eq(p_valid | (1 << free_e)),
                                     p_outst.eq(p_outst & ~(1 << free_e)),
                                     Array(p_q)[free_e].eq(q), Array(p_ev)[free_e].eq(rec.ev),
                                     Array(p_count)[free_e].eq(0),
                                     Array(p_due)[free_e].eq((now + Array(period)[q])[:tb])]
                    with m.Elif(~held):
                        count("probe_full")
                m.next = "IDLE"

            # --- work request taps ------------------------------------------------------------
            with m.State("WR"):
                m.d.comb += busy_state.eq(1)
                rec = j_wr
                q = wire(m, qindex(rec.qpn), qw, "wr_q")
                known = (rec.qpn < nq) & Array(enable)[q]
                failed = Array(error)[q]
                count_q = Array(wr_count)[q]
                with m.If(~known | (~failed & (count_q == D))):
                    count("wr_dropped")
                    m.next = "IDLE"
                with m.Elif(failed):
                    with m.If(cpl_free):
                        count("wr")
                        emit_completion(rec.qpn, rec.req_id, CompletionStatus.QP_ERROR)
                        m.next = "IDLE"
                with m.Else():
                    count("wr")
                    tail = (Array(wr_head)[q] + count_q)[:db]
                    m.d.comb += [wr_wr.en.eq(1),
                                 wr_wr.addr.eq(Cat(tail, q[:qb]) if qb else tail),
                                 wr_wr.data.eq(rec.req_id)]
                    m.d.sync += Array(wr_count)[q].eq(count_q + 1)
                    m.next = "IDLE"

        with m.If(o_cpl.go):
            count("completion")

        # --- configuration: QP set-up (wins over the engine in the same cycle) and reads -------
        for q in range(nq):
            with m.If(cfg.write_strobe(qp_addr(q, OFF_SETUP))):
                start_psn = self.cfg_wdata[:_PSN_BITS]
                window = Mux(w_max[q] < mpr[q], w_max[q], mpr[q])
                m.d.sync += [
                    enable[q].eq(self.cfg_wdata[31]), error[q].eq(0),
                    cack[q].eq(start_psn - 1), nxt[q].eq(start_psn),
                    win[q].eq(Mux(window < R, window, R)),
                    wr_head[q].eq(0), wr_count[q].eq(0), fire[q].eq(0),
                    limit_pending.bit_select(q, 1).eq(self.cfg_wdata[31]),
                    p_valid.eq(p_valid & ~Cat(*(p_q[e] == q for e in range(P)))),
                ]
                for n in _VECTORS:
                    m.d.sync += vec[n][q].eq(0)
            cfg.ro(qp_addr(q, OFF_SETUP), f"q{q}_cack", Cat(cack[q], Const(0, 6), error[q],
                                                            enable[q]),
                   doc="write: set up (start PSN, enable in bit 31); read: cack_psn, error, "
                       "enable")
            cfg.ro(qp_addr(q, OFF_NEXT), f"q{q}_next", nxt[q], doc="next_psn")
            cfg.ro(qp_addr(q, OFF_INFO), f"q{q}_info",
                   Cat(win[q], Const(0, 16 - len(win[q])), wr_count[q]),
                   doc="window, pending work requests")
        for e in range(P):
            cfg.ro(probe_addr(e, 0), f"p{e}_state",
                   Cat(p_valid[e], p_outst[e], p_count[e], Const(0, 4), p_q[e],
                       Const(0, 8 - qw), p_id[e]), doc="probe entry state")
            cfg.ro(probe_addr(e, 1), f"p{e}_ev", p_ev[e], doc="probe entry EV")
        for name in COUNTERS:
            cfg.counter(ADDR_COUNTERS[name], name, events[name], doc=name)
        cfg.ro(ADDR_INFO, "info", Const(nq | rb << 8 | P << 12 | db << 20 | tb << 24, 32),
               doc="parameters")
        outputs_held = Cat(*(getattr(self, f"m_{s}").valid for s in
                             ("retx", "limit", "retire", "cpl", "ev", "ctrl", "trace"))).any()
        cfg.ro(ADDR_STATUS, "status", busy_state | outputs_held, doc="busy")
        cfg.ro(ADDR_NOW, "now", now, doc="the tick count applied")
        cfg.ro(ADDR_PROBE_ID, "probe_id", probe_id, doc="the next probe_id")
        cfg.finish()
        return m
