# SPDX-License-Identifier: BSD-2-Clause
"""Property harnesses of the receive side and of the switch egress, for :func:`verif.formal.check`
(same conventions as :mod:`verif.formal_blocks`: each function returns ``(module, ports,
depths)``).

- :func:`rx_tracker_harness`: the receive tracker's distance rule (docs/protocol.md 5) and
  stream rules;
- :func:`switch_egress_harness`: the egress port of the trimming switch (docs/protocol.md 7):
  never a frame longer than it received, no frame lost or duplicated, stream rules.
"""

from amaranth.hdl import Assert, Assume, Cat, Const, Cover, Fragment, Module, Mux, Signal

from models.layouts import DATA_OPCODES
from models.records import RxVerdict

from .formal import StreamPort, find_signal, past

__all__ = ["GhostFifo", "rx_tracker_harness", "switch_egress_harness",
           "fifo_buffered_equivalence_harness"]

_PSN_BITS = 24


def _covers(m, covers):
    for name, cond in covers.items():
        m.d.comb += Cover(cond, name)


class GhostFifo:
    """A harness-side FIFO of ``depth`` entries of ``width`` bits (registers, shifted on a pop):
    ``push(value)`` in a cycle appends, ``pop`` in a cycle drops ``head``; both in one cycle is
    allowed. ``count`` is the entries held; ``entries[j]`` the j-th oldest (valid when ``j <
    count``). Pushing into a full FIFO or popping an empty one is asserted never to happen (the
    harness's depth is too small, or the block emits more than it took)."""

    def __init__(self, m, depth, width, name):
        self.entries = [Signal(width, name=f"{name}{j}") for j in range(depth)]
        self.count = Signal(range(depth + 1), name=f"{name}_count")
        self.head = self.entries[0]
        self.m, self.depth, self.name = m, depth, name
        self.push_en = Signal(name=f"{name}_push")
        self.push_val = Signal(width, name=f"{name}_push_val")
        self.pop_en = Signal(name=f"{name}_pop")

    def elaborate(self, *, clear=0):
        m, e, n = self.m, self.entries, self.count
        m.d.comb += Assert(~self.pop_en | (n != 0), f"{self.name}: pop of an empty ghost")
        m.d.comb += Assert(~self.push_en | (n != self.depth) | self.pop_en,
                           f"{self.name}: ghost too small")
        with m.If(clear):
            m.d.sync += n.eq(0)
        with m.Else():
            m.d.sync += n.eq(n + self.push_en - self.pop_en)
            at = Signal(range(self.depth + 1), name=f"{self.name}_at")
            m.d.comb += at.eq(n - self.pop_en)
            for j in range(self.depth):
                nxt = e[j + 1] if j + 1 < self.depth else e[j]
                shifted = Mux(self.pop_en, nxt, e[j])
                m.d.sync += e[j].eq(Mux(self.push_en & (at == j), self.push_val, shifted))
        return self


# -- receive tracker -------------------------------------------------------------------------------

# Distance classes of d = (PSN - cack_psn) mod 2^24 (docs/protocol.md 5, distance rule).
_BEHIND, _WINDOW, _BEYOND = 0, 1, 2


def rx_tracker_harness(n_qps=1, mpr=128, wimm_max=1, prove=2, cover=8, window=None):
    """RxTracker (``n_qps`` QPs, window ``mpr``): on any event sequence (any opcode, PSN, QP,
    flags), any ticks, any sink timing and any configuration writes (a QP set up only while no
    event is in stage 1 or offered, the block's documented condition),

    - the distance rule (docs/protocol.md 5; profile 1 is the v2 rule here): with ``d = (PSN -
      cack_psn) mod 2^24`` taken at the event's input handshake (the state stage 1 decides on),
      a verdict PLACED (or WIMM_OVERFLOW, the other verdict of an accepted packet) only for
      ``1 <= d <= mpr``; OUT_OF_WINDOW exactly for a data event of an enabled QP without error
      with ``mpr < d < 2^23``; such an event with ``d = 0`` or ``d >= 2^23`` is a DUPLICATE
      (never placed, never NACKed);
    - one verdict per event, in input order, with the event's QPN and PSN, ``placed`` exactly on
      PLACED (a ghost queue of the events' distance classes);
    - ``cack_psn`` of every QP only moves forward, by at most ``mpr`` and only in a commit of a
      placed event (``(new - old) mod 2^24 <= mpr``), except when the QP is set up;
    - the stream rules on ``m_verdict``, ``m_ctrl`` and ``m_cpl`` (asserted), ``s_ev``
      (assumed).

    The harness reads the block's ``q*_cack`` registers (the window is not visible at the ports
    in the cycle of the decision) and states the invariants of its pipeline that make these
    properties inductive (k = 2). ``window`` (default ``mpr``) is the window the harness claims:
    a smaller one must fail (a test of the harness)."""
    from rtl.rx_tracker import (OFF_CACK, RxTracker, _C_CANDIDATE, _C_DROPPED, _C_DUP, _C_OOW,
                                _C_QP_ERROR, qp_addr)

    m = Module()
    dut = RxTracker(n_qps=n_qps, mpr=mpr, wimm_max=wimm_max)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    ev_in = StreamPort(dut.s_ev, "in", "ev").elaborate(m)
    v_out = StreamPort(dut.m_verdict, "out", "verdict").elaborate(m)
    c_out = StreamPort(dut.m_ctrl, "out", "ctrl").elaborate(m)
    p_out = StreamPort(dut.m_cpl, "out", "cpl").elaborate(m)
    cacks = [find_signal(frag, f"q{q}_cack") for q in range(n_qps)]
    d1_valid = find_signal(frag, "d1_valid")

    setup = [Signal(name=f"setup{q}") for q in range(n_qps)]
    for q in range(n_qps):
        m.d.comb += setup[q].eq(dut.cfg_we & (dut.cfg_addr == qp_addr(q, OFF_CACK)))
        # A QP is set up while none of its events is in the tracker's decision (RxTracker
        # docstring); the write wins over a decision of the same cycle.
        m.d.comb += Assume(~setup[q] | (~d1_valid & ~dut.s_ev.valid))

    # The event's distance at its handshake, from the cack_psn of its QP.
    ev = dut.s_ev.p
    qb = max(1, (n_qps - 1).bit_length())
    q_in = ev.qpn[:qb] if n_qps > 1 else Const(0, 1)
    cack_in = Signal(_PSN_BITS, name="cack_in")
    m.d.comb += cack_in.eq(Mux(q_in == 0, cacks[0], cacks[-1]) if n_qps <= 2 else cacks[0])
    if n_qps > 2:
        raise ValueError("rx_tracker_harness: 1 or 2 QPs")
    d = Signal(_PSN_BITS, name="d_in")
    m.d.comb += d.eq(ev.psn - cack_in)
    cls_in = Signal(2, name="d_class_in")
    window = mpr if window is None else window
    m.d.comb += cls_in.eq(Mux(d[-1] | (d == 0), _BEHIND, Mux(d > window, _BEYOND, _WINDOW)))
    is_data = Signal(name="ev_is_data")
    m.d.comb += is_data.eq(Cat(*(ev.opcode == op for op in DATA_OPCODES)).any())
    at_mpr = d == mpr
    far_behind = d[-1]

    # Ghost: per event in the tracker, its class, data flag, PSN, QPN's low bits, d == mpr and
    # d >= 2^23 (for the covers).
    fields = Cat(cls_in, is_data, ev.psn, q_in, at_mpr, far_behind)
    ghost = GhostFifo(m, 4, len(fields), "ghost")
    m.d.comb += [ghost.push_en.eq(ev_in.fire), ghost.push_val.eq(fields),
                 ghost.pop_en.eq(v_out.fire)]
    ghost.elaborate()
    g = ghost.head
    g_cls, g_data, g_psn = g[0:2], g[2], g[3:3 + _PSN_BITS]
    g_q = g[3 + _PSN_BITS:3 + _PSN_BITS + qb]
    g_at_mpr, g_far = g[3 + _PSN_BITS + qb], g[4 + _PSN_BITS + qb]
    m.d.comb += Assert(ghost.count <= 3, "at most 3 events in the tracker")

    vo = dut.m_verdict.p
    verdict = vo.verdict
    fire = v_out.fire

    def distance_rule(entry, accepted, oow, dup, ignored, where, when):
        """The distance rule of one event (ghost ``entry``) against its decision."""
        cls, data = entry[0:2], entry[2]
        m.d.comb += [
            Assert(~(when & accepted) | (cls == _WINDOW), f"{where}: accepted only in window"),
            Assert(~(when & oow) | (data & (cls == _BEYOND)),
                   f"{where}: OUT_OF_WINDOW only beyond the window"),
            Assert(~(when & data & (cls == _BEYOND)) | ignored | oow,
                   f"{where}: beyond the window is OUT_OF_WINDOW"),
            Assert(~(when & data & (cls == _BEHIND)) | ignored | dup,
                   f"{where}: d = 0 or d >= 2^23 is DUPLICATE"),
        ]

    def verdict_is(code_value, *codes):
        return Cat(*(code_value == c for c in codes)).any()

    def by_verdict(code_value):
        return (verdict_is(code_value, RxVerdict.PLACED, RxVerdict.WIMM_OVERFLOW),
                code_value == RxVerdict.OUT_OF_WINDOW, code_value == RxVerdict.DUPLICATE,
                verdict_is(code_value, RxVerdict.DROPPED, RxVerdict.QP_ERROR))

    m.d.comb += [
        Assert(~fire | (ghost.count != 0), "a verdict for an event taken"),
        Assert(~fire | ((vo.psn == g_psn) & (vo.qpn[:qb] == g_q if n_qps > 1 else 1)),
               "verdicts in event order"),
        Assert(~dut.m_verdict.valid | (vo.placed == (verdict == RxVerdict.PLACED)),
               "placed exactly on PLACED"),
    ]
    distance_rule(g, *by_verdict(verdict), "verdict out", fire)

    # Invariants of the pipeline (they make the properties above inductive): the events inside
    # are, oldest first, the verdict register, the output stage's job, stage 1's register, each
    # with the PSN and a decision that keeps the distance rule of its ghost entry.
    sig = {name: find_signal(frag, name) for name in (
        "rep_valid", "j_main", "j_tick", "j_psn", "j_qpn", "j_verdict", "d1_psn", "d1_qpn",
        "d1_cls", "d1_run")}
    job = Signal(name="inv_job")
    m.d.comb += job.eq(sig["rep_valid"] & sig["j_main"])
    m.d.comb += Assert(~(sig["j_tick"] & sig["j_main"]), "inv: a tick job has no verdict")
    m.d.comb += Assert(ghost.count == dut.m_verdict.valid + job + d1_valid,
                       "inv: events inside = verdict + job + stage 1")
    m.d.comb += Assert(sig["d1_run"] <= mpr, "inv: the run is at most mpr")
    at_job = dut.m_verdict.valid
    at_d1 = dut.m_verdict.valid + job
    j_entry = Signal.like(ghost.head, name="inv_job_entry")
    d1_entry = Signal.like(ghost.head, name="inv_d1_entry")
    with m.Switch(at_job):
        for j in range(2):
            with m.Case(j):
                m.d.comb += j_entry.eq(ghost.entries[j])
    with m.Switch(at_d1):
        for j in range(3):
            with m.Case(j):
                m.d.comb += d1_entry.eq(ghost.entries[j])

    def same_event(entry, psn, qpn):
        return (entry[3:3 + _PSN_BITS] == psn) & \
            ((entry[3 + _PSN_BITS:3 + _PSN_BITS + qb] == qpn[:qb]) if n_qps > 1 else 1)

    m.d.comb += [
        Assert(~dut.m_verdict.valid | same_event(g, vo.psn, vo.qpn), "inv: verdict's event"),
        Assert(~job | same_event(j_entry, sig["j_psn"], sig["j_qpn"]), "inv: job's event"),
        Assert(~d1_valid | same_event(d1_entry, sig["d1_psn"], sig["d1_qpn"]),
               "inv: stage 1's event"),
    ]
    distance_rule(g, *by_verdict(verdict), "inv verdict", dut.m_verdict.valid)
    distance_rule(j_entry, *by_verdict(sig["j_verdict"]), "inv job", job)
    c1 = sig["d1_cls"]
    distance_rule(d1_entry, c1 == _C_CANDIDATE, c1 == _C_OOW, c1 == _C_DUP,
                  (c1 == _C_DROPPED) | (c1 == _C_QP_ERROR), "inv stage 1", d1_valid)

    # cack_psn only forward, by at most mpr, outside a set-up.
    for q in range(n_qps):
        prev = past(m, cacks[q], f"cack{q}_prev")
        was_setup = past(m, setup[q], f"setup{q}_prev")
        valid_prev = past(m, 1, f"cack{q}_prev_valid")
        step = Signal(_PSN_BITS, name=f"cack{q}_step")
        m.d.comb += step.eq(cacks[q] - prev)
        m.d.comb += Assert(~valid_prev | was_setup | (step <= mpr),
                           f"QP {q}: cack_psn moves forward by at most mpr")
        moved = valid_prev & ~was_setup & (step != 0)
        _covers(m, {f"cack{q}_moves_by_2": moved & (step == 2)})

    covers = {
        "placed_at_d_mpr": fire & (verdict == RxVerdict.PLACED) & g_at_mpr,
        "out_of_window_beyond": fire & (verdict == RxVerdict.OUT_OF_WINDOW),
        "duplicate_at_d_ge_2_23": fire & (verdict == RxVerdict.DUPLICATE) & g_far & g_data,
        "verdict_stalled": dut.m_verdict.valid & ~dut.m_verdict.ready,
        "ctrl_stalled": dut.m_ctrl.valid & ~dut.m_ctrl.ready,
        "three_events_inside": ghost.count == 3,
        "completion_out": p_out.fire,
    }
    _covers(m, covers)
    ports = ev_in.free_ports() + v_out.free_ports() + c_out.free_ports() + p_out.free_ports() + \
        [dut.tick, dut.cfg_addr, dut.cfg_wdata, dut.cfg_we]
    return m, ports, {"prove": prove, "cover": cover}


# -- switch egress -----------------------------------------------------------------------------

def _popcount(bits):
    return sum(bits[i] for i in range(len(bits)))


def _register_fifo_buffered_class(made):
    """An :class:`amaranth.lib.fifo.SyncFIFOBuffered` with its storage in registers, for an
    inductive proof: the same ports and timing as Amaranth 0.5's (an inner FIFO of ``depth - 1``
    entries, here register ``slots`` shifted on a read, slot 0 its head; ``r_data`` a register
    loaded from the head when it is empty or read, so a word written in cycle t is ``r_rdy`` in
    t + 2; ``w_rdy`` while the inner FIFO has room; ``level`` = inner level + ``r_rdy``), with
    contents an induction invariant can name (``slots``, ``inner_level``, ``r_data``,
    ``r_rdy``, ``inner_depth``). Each instance made is appended to ``made``. (The generic counterpart of
    :func:`verif.formal_tx_streams._register_fifo_class`, which mimics ``SyncFIFO``.)"""
    from amaranth.lib.fifo import SyncFIFOBuffered

    class RegisterFifoBuffered(SyncFIFOBuffered):
        def __init__(self, *, width, depth):
            if depth < 2:
                raise ValueError("RegisterFifoBuffered: depth must be at least 2")
            super().__init__(width=width, depth=depth)
            n = len(made)
            self.inner_depth = depth - 1
            self.slots = [Signal(width, name=f"dfifo{n}_slot{j}") for j in range(depth - 1)]
            self.inner_level = Signal(range(depth), name=f"dfifo{n}_inner_level")
            made.append(self)

        def elaborate(self, platform):
            m = Module()
            inner_depth = self.depth - 1
            slots, inner = self.slots, self.inner_level
            m.d.comb += [
                self.w_rdy.eq(inner != inner_depth),
                self.level.eq(inner + self.r_rdy),
                self.w_level.eq(self.level), self.r_level.eq(self.level),
            ]
            do_write = self.w_rdy & self.w_en
            do_inner_read = (inner != 0) & (~self.r_rdy | self.r_en)
            at = inner - do_inner_read
            for j in range(inner_depth):
                shifted = Mux(do_inner_read, slots[j + 1] if j + 1 < inner_depth else slots[j],
                              slots[j])
                m.d.sync += slots[j].eq(Mux(do_write & (at == j), self.w_data, shifted))
            m.d.sync += inner.eq(inner + do_write - do_inner_read)
            with m.If(do_inner_read):
                m.d.sync += [self.r_data.eq(slots[0]), self.r_rdy.eq(1)]
            with m.Elif(self.r_en):
                m.d.sync += self.r_rdy.eq(0)
            return m

    return RegisterFifoBuffered


def fifo_buffered_equivalence_harness(width=3, depth=4, bmc=14, cover=10):
    """The register FIFO of :func:`_register_fifo_buffered_class` beside Amaranth's
    ``SyncFIFOBuffered`` of the same width and depth, on the same free ``w_en``, ``r_en``,
    ``w_data`` (and ``rst``): asserted every cycle, the same ``w_rdy``, ``r_rdy`` and
    ``level``, and the same ``r_data`` while ``r_rdy``, so the swap in the egress proof keeps
    the block's timing. Bounded (BMC ``bmc``: the FIFO fills, drains and wraps its memory
    within it); covers: full, and a word read after the memory wrapped."""
    from amaranth.lib.fifo import SyncFIFOBuffered

    m = Module()
    ref = SyncFIFOBuffered(width=width, depth=depth)
    reg = _register_fifo_buffered_class([])(width=width, depth=depth)
    m.submodules.ref, m.submodules.reg = ref, reg
    w_en, r_en = Signal(name="env_w_en"), Signal(name="env_r_en")
    w_data = Signal(width, name="env_w_data")
    for fifo in (ref, reg):
        m.d.comb += [fifo.w_en.eq(w_en), fifo.r_en.eq(r_en), fifo.w_data.eq(w_data)]
    m.d.comb += [
        Assert(ref.w_rdy == reg.w_rdy, "same w_rdy"),
        Assert(ref.r_rdy == reg.r_rdy, "same r_rdy"),
        Assert(ref.level == reg.level, "same level"),
        Assert(~ref.r_rdy | (ref.r_data == reg.r_data), "same r_data while r_rdy"),
    ]
    reads = Signal(4, name="reads")
    with m.If(ref.r_rdy & r_en):
        m.d.sync += reads.eq(reads + (reads != 15))
    _covers(m, {"full": ref.level == depth,
                "read_after_wrap": ref.r_rdy & r_en & (reads >= depth)})
    return m, [w_en, r_en, w_data], {"bmc": bmc, "cover": cover}


def switch_egress_harness(data_width=64, core_width=256, data_limit=128, control_limit=134,
                          trim_size=134, max_frame=144, control_burst=1, port_down=True,
                          data=True, prove=1, bmc=None, cover=20, slack=0, invariants=True,
                          block=None):
    """SwitchEgressPort (W = ``data_width``, C = ``core_width``, small queues): on any core
    stream of well-formed frames (the ingress's promise: a frame is ``ceil(n / (C/8))`` words,
    ``n = 54 + outer Payload Length <= max_frame`` bytes, ``c_first`` on its first word, the
    ``w_*`` copy one cycle later; gaps between words allowed), any frame of any DSCP, ECN and
    destination, the port going down and up at any time (``port_down``) and any link timing,

    - never a frame longer than it received: every frame out of ``m_axis`` has at most the bytes
      of the frame admitted (``8 x beats`` less the unused lanes of ``tkeep`` on the last); a
      frame not trimmed leaves with exactly its bytes, a trimmed one with ``min(trim_size, n)``;
      no beat carries more bytes than its frame has left, ``tkeep`` is all ones but on the last
      beat, where it is contiguous from lane 0;
    - trimming only of a trimmable frame (TRIMMABLE, TRIMMABLE_RETX) of at least 134 bytes;
    - no frame lost, duplicated or reordered: a ghost queue per class (data, control) of the
      frames enqueued (admitted, port up, not dropped full) equals the block's frames waiting
      (``frames_d``, ``frames_c``); a dequeue takes the head of the queue the block picks, frames
      leave ``m_axis`` in dequeue order, each exactly once; a port-down flush empties both;
    - the stream rules on ``m_axis``: valid, ``tkeep`` and ``tlast`` held until taken, and, with
      ``data``, ``tdata`` too.

    Unbounded (the default, ``prove`` = 1): k-induction of the block with its two descriptor
    FIFOs (``SyncFIFOBuffered``, block RAM) replaced by a register FIFO of the same ports and
    timing (:func:`_register_fifo_buffered_class`; the port's own logic unchanged). The frame
    RAM banks stay as they are: with ``data`` False no property reads ``tdata``, so yosys
    removes the frame ``tdata`` path, and no property depends on the bank pointers (``alloc``,
    ``written``, ``head``, ``r_pos`` decide only *when* a beat is read, never how many, nor
    their ``tkeep``/``tlast``). The invariants (``invariants``) that make the properties
    inductive, each a fact of every reachable state:

    - every ghost entry held is a frame the harness let in (54..``max_frame`` bytes; trimmed
      only if at least 134 bytes and only in the control queue);
    - each queue's byte count ``q`` is the sum of its ghost's stored bytes (trimmed or not) and
      within its limit (so at most ``limit // 54`` frames wait and the ghosts never overflow);
    - each descriptor FIFO holds its ghost: level = ghost count, ``r_data`` (when ``r_rdy``) the
      head's stored bytes, inner slot j the bytes of ghost entry ``j + r_rdy``;
    - the reader: the frames dequeued and not yet out (``ghost_out``) are the last beat held in
      the output register, if any, plus the frame being read (``reading`` != 0); a beat before a
      last one in the output register belongs to the frame being read; the beats of the head
      frame taken (``beats_out``), held in the register and still to read sum to its beats;
      ``r_keep`` is the last-beat ``tkeep`` of the frame being read, a held last beat carries its
      frame's, a held beat before the last all ones;
    - the harness's flush is the block's (``was_up``).

    Measured on this machine (2 cores, shared with other solver jobs): the defaults (``tdata``
    included) prove (k = 1) in about 4 s and cover (20) in 18 to 55 s; limits 256/300, frames
    up to 200 B and a control burst of 2 prove in about 50 s (W = 128, C = 512 with limits of
    600/700 did not close in 10 minutes). The cover of a trimmed frame out (step 19) and of a
    data frame served after a control burst (step 16) are added when ``cover >= 20``.
    ``bmc`` (default none) adds a bounded check from reset of the same harness; ``invariants``
    False leaves the invariants out (the properties alone, for a BMC whose counterexample fails
    a property at the ports, not an invariant; the block as it is then, with its
    ``SyncFIFOBuffered`` s: BMC 12 without ``tdata`` in about 15 s, each step past 14 about
    doubles, depth 20 took about 10 minutes). ``slack`` (default 0) is added to
    the length the harness allows a frame out: a negative value claims frames shorter than they
    are and must fail (a test of the harness); ``block`` (default
    :class:`rtl.switch_egress.SwitchEgressPort`) lets a test prove a broken port fails.
    """
    from types import SimpleNamespace
    from unittest import mock

    from amaranth.utils import exact_log2

    from models.layouts import IPV6, OUTER_OFFSET, TRIM_MIN_BYTES
    from models.switch import MIN_FRAME
    from models.switch_queue import CONTROL_DSCPS, TRIMMABLE_DSCPS
    from rtl import switch_egress as egress_mod
    from rtl.common.headers import field
    from rtl.switch_egress import HEAD_BYTES, SwitchEgressPort

    block = block or SwitchEgressPort
    m = Module()
    dut = block(port=0, data_width=data_width, core_width=core_width,
                data_limit=data_limit, control_limit=control_limit, trim_size=trim_size,
                max_frame=max_frame, control_burst=control_burst, port_width=1)
    fifos = []
    if invariants:
        with mock.patch.object(egress_mod, "SyncFIFOBuffered",
                               _register_fifo_buffered_class(fifos)):
            frag = Fragment.get(dut, "formal")
    else:
        frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    word_bytes = core_width // 8
    beat_bytes = data_width // 8
    len_width = max_frame.bit_length()

    # --- the core stream: well-formed frames -----------------------------------------------------
    c_valid = Signal(name="env_c_valid")
    c_dest = Signal(name="env_c_dest")
    c_head = Signal(HEAD_BYTES * 8, name="env_c_head")
    w_data = Signal(core_width, name="env_w_data")
    words_left = Signal(range(max_frame // word_bytes + 2), name="env_words_left")
    first = Signal(name="env_first")
    m.d.comb += first.eq(words_left == 0)
    length = Signal(17, name="env_length")
    m.d.comb += length.eq(MIN_FRAME + field(IPV6, c_head, "payload_length", base=OUTER_OFFSET))
    m.d.comb += Assume(~(c_valid & first) | (length <= max_frame))
    words = (length + word_bytes - 1) // word_bytes
    c_last = Signal(name="env_c_last")
    m.d.comb += c_last.eq(c_valid & Mux(first, words == 1, words_left == 1))
    with m.If(c_valid):
        m.d.sync += words_left.eq(Mux(first, words, words_left) - 1)
    m.d.comb += [
        dut.c_valid.eq(c_valid), dut.c_first.eq(first), dut.c_dest.eq(c_dest),
        dut.c_head.eq(c_head),
        dut.w_valid.eq(past(m, c_valid, "env_w_valid")),
        dut.w_last.eq(past(m, c_last, "env_w_last")),
        dut.w_data.eq(w_data),
        dut.kmin.eq(2 * MIN_FRAME), dut.kmax.eq(3 * MIN_FRAME), dut.seed_we.eq(0),
    ]
    up = Signal(name="env_up")
    fabric = Signal(name="env_fabric")
    m.d.comb += [dut.up.eq(up if port_down else 1), dut.fabric_facing.eq(fabric)]
    flush = Signal(name="env_flush")
    env_was_up = past(m, dut.up, "env_was_up", init=1)
    m.d.comb += flush.eq(env_was_up & ~dut.up)

    # --- admission, as the ports report it ---------------------------------------------------------
    dscp = field(IPV6, c_head, "dscp", base=OUTER_OFFSET)
    is_control = Cat(*(dscp == d for d in CONTROL_DSCPS)).any()
    trimmable = Cat(*(dscp == d for d in TRIMMABLE_DSCPS)).any()
    hit = c_valid & first & (c_dest == 0)
    m.d.comb += Assert(dut.admit == hit, "admit: a first word of this port")
    enqueued = Signal(name="enqueued")
    m.d.comb += enqueued.eq(hit & dut.up & ~dut.ev_full)
    m.d.comb += Assert(~dut.ev_trimmed | (enqueued & trimmable & (length >= TRIM_MIN_BYTES)),
                       "only a trimmable frame of at least 134 bytes is trimmed")
    to_control = is_control | dut.ev_trimmed

    # Ghost queues (data, control): frame bytes in, trimmed.
    entry = Cat(length[:len_width], dut.ev_trimmed)
    pick = find_signal(frag, "pick")
    frames = [find_signal(frag, "frames_d"), find_signal(frag, "frames_c")]
    ghosts = []
    for k in range(2):
        ghost = GhostFifo(m, dut.descriptor_depths[k], len(entry), f"ghost_{'dc'[k]}")
        mine = enqueued & (to_control if k else ~to_control)
        m.d.comb += [ghost.push_en.eq(mine & ~flush), ghost.push_val.eq(entry),
                     ghost.pop_en.eq(dut.dequeue & (pick == k) & ~flush)]
        ghost.elaborate(clear=flush)
        m.d.comb += Assert(ghost.count == frames[k], f"queue {'dc'[k]}: frames waiting = ghost")
        ghosts.append(ghost)
    m.d.comb += Assert(~(dut.dequeue & flush), "no dequeue in the flush cycle")

    # Frames dequeued and not yet out, in order.
    sent = GhostFifo(m, 3, len(entry), "ghost_out")
    beat = dut.m_axis.p
    if data:
        o = StreamPort(dut.m_axis, "out", "o").elaborate(m)
    else:
        o = StreamPort(SimpleNamespace(valid=dut.m_axis.valid, ready=dut.m_axis.ready,
                                       payload=Cat(beat.keep, beat.last)), "out", "o").elaborate(m)
    m.d.comb += [sent.push_en.eq(dut.dequeue),
                 sent.push_val.eq(Mux(pick, ghosts[1].head, ghosts[0].head)),
                 sent.pop_en.eq(o.fire & beat.last)]
    sent.elaborate()
    m.d.comb += Assert(sent.count <= 2, "at most two frames between dequeue and the link")
    m.d.comb += Assert(~o.fire | (sent.count != 0), "a beat out of a dequeued frame")

    # --- the frame out against the frame in ---------------------------------------------------------
    def e_len(e):
        return e[:len_width]

    def e_trim(e):
        return e[len_width]

    def stored_of(e):
        """The bytes the block keeps of ghost entry ``e``: min(trim_size, n) when trimmed."""
        return Mux(e_trim(e) & (e_len(e) > trim_size), trim_size, e_len(e))

    head_len, head_trim = e_len(sent.head), e_trim(sent.head)
    expected = Signal(len_width, name="expected_bytes")
    m.d.comb += expected.eq(stored_of(sent.head))
    beats_out = Signal(range(max_frame // beat_bytes + 2), name="beats_out")
    with m.If(o.fire):
        m.d.sync += beats_out.eq(Mux(beat.last, 0, beats_out + 1))
    bytes_out = Signal(len_width + 1, name="bytes_out")   # this frame's, this beat included
    m.d.comb += bytes_out.eq(beats_out * beat_bytes + _popcount(beat.keep))
    full_keep = (1 << beat_bytes) - 1
    contiguous = Cat(*(beat.keep == (1 << j) - 1 for j in range(1, beat_bytes + 1))).any()
    m.d.comb += [
        Assert(~dut.m_axis.valid | beat.last | (beat.keep == full_keep),
               "tkeep all ones before the last beat"),
        Assert(~dut.m_axis.valid | contiguous, "tkeep contiguous from lane 0"),
        Assert(~o.fire | beat.last | (bytes_out < expected), "no beat past the frame's bytes"),
        Assert(~(o.fire & beat.last) | (bytes_out == expected),
               "a frame out has its bytes, trimmed or not"),
        Assert(~(o.fire & beat.last) | (bytes_out <= head_len + slack),
               "never a frame longer than it received"),
    ]

    if invariants:
        lb = exact_log2(beat_bytes)

        def beats_of(e):
            return (stored_of(e) + beat_bytes - 1) >> lb

        def keep_of(e):
            """``tkeep`` of the last beat of ghost entry ``e``'s frame out."""
            used = (stored_of(e) - 1)[:lb] + 1
            return ((Const(1, beat_bytes + 1) << used) - 1)[:beat_bytes]

        def admitted(e, control):
            """Ghost entry ``e`` is a frame the harness lets in (the environment's assumption
            and the block's trimming rule, both checked where the entry is pushed)."""
            ok = (e_len(e) >= MIN_FRAME) & (e_len(e) <= max_frame) & \
                (~e_trim(e) | (e_len(e) >= TRIM_MIN_BYTES))
            return ok if control else ok & ~e_trim(e)

        def held(ghost, control, what):
            for j, e in enumerate(ghost.entries):
                m.d.comb += Assert(~(j < ghost.count) | admitted(e, control),
                                   f"inv {what}: entry {j} a frame let in")

        q = [dut.q_data, dut.q_control]
        for k, (ghost, fifo) in enumerate(zip(ghosts, fifos)):
            qn = "dc"[k]
            # Pushed from the admission (length assumed 54..max_frame, trimming asserted).
            held(ghost, k, f"queue {qn}")
            # q adds the stored bytes of each frame enqueued and drops the dequeued frame's
            # (its descriptor, which is the ghost's head); a frame is enqueued only if it fits.
            total = sum(Mux(j < ghost.count, stored_of(e), 0)
                        for j, e in enumerate(ghost.entries))
            m.d.comb += [
                Assert(q[k] == total, f"inv queue {qn}: q = bytes of the frames waiting"),
                Assert(q[k] <= dut.limits[k], f"inv queue {qn}: q within its limit"),
            ]
            # The descriptor FIFO is written with each frame enqueued, read on each dequeue, as
            # the ghost; both are cleared by the flush.
            m.d.comb += [
                # (the sum widened: ``level`` wraps an inner level out of range)
                Assert(fifo.inner_level + fifo.r_rdy == ghost.count,
                       f"inv queue {qn}: descriptors = ghost"),
                Assert(~fifo.r_rdy | (fifo.r_data == stored_of(ghost.entries[0])),
                       f"inv queue {qn}: descriptor out = ghost head"),
            ]
            for j, slot in enumerate(fifo.slots):
                e = Mux(fifo.r_rdy, ghost.entries[j + 1], ghost.entries[j])
                m.d.comb += Assert(~(j < fifo.inner_level) | (slot == stored_of(e)),
                                   f"inv queue {qn}: descriptor slot {j} = ghost")

        # The reader. A dequeue (only with nothing left to read) pushes ghost_out and loads
        # ``reading`` with the frame's beats, ``r_keep`` with its last tkeep; each beat issued
        # goes into the output register (only when it is free) and decrements ``reading``; the
        # last beat taken pops ghost_out.
        reading = find_signal(frag, "reading")
        r_keep = find_signal(frag, "r_keep")
        ov, ol, okeep = dut.m_axis.valid, beat.last, beat.keep
        holds_last = Signal(name="inv_holds_last")
        being_read = Signal(name="inv_being_read")
        m.d.comb += [holds_last.eq(ov & ol), being_read.eq(reading != 0)]
        held(sent, 1, "out")
        rd = Mux(holds_last, sent.entries[1], sent.entries[0])   # the frame being read
        m.d.comb += [
            Assert(sent.count == holds_last + being_read,
                   "inv out: frames dequeued = last beat held + frame being read"),
            Assert(~(ov & ~ol) | being_read, "inv out: a beat before the last: frame being read"),
            Assert(~being_read | (r_keep == keep_of(rd)), "inv out: r_keep of the frame read"),
            # Nothing of the next frame is read before the last beat of the one before is taken
            # (a beat is issued only into a free output register).
            Assert(~(being_read & holds_last) | (reading == beats_of(sent.entries[1])),
                   "inv out: next frame unread behind a held last beat"),
            Assert(~(being_read & ~holds_last) |
                   (beats_out + ov + reading == beats_of(sent.head)),
                   "inv out: beats taken + held + to read = the frame's beats"),
            Assert(~holds_last | ((beats_out + 1 == beats_of(sent.head)) &
                                  (okeep == keep_of(sent.head))),
                   "inv out: a held last beat is its frame's last, with its tkeep"),
            Assert(~(ov & ~ol) | (okeep == full_keep), "inv out: a held beat before the last full"),
            Assert((sent.count != 0) | (beats_out == 0), "inv out: no frame, no beat counted"),
            # Both follow up with the same init and reset.
            Assert(find_signal(frag, "was_up") == env_was_up, "inv: the harness's flush"),
        ]

    covers = {
        "next_frame_dequeued_behind_a_last_beat": o.fire & beat.last & (sent.count == 2),
        "output_stalled": dut.m_axis.valid & ~dut.m_axis.ready,
    }
    if cover is not None and cover >= 20:
        # A data frame served past waiting control frames (after one control frame sent,
        # step 16), and a trimmed frame (at least 17 beats) out, in step 19 at the earliest.
        covers["data_frame_after_control_burst"] = dut.dequeue & ~pick & (frames[1] != 0)
        covers["trimmed_frame_out_shorter"] = o.fire & beat.last & head_trim & \
            (bytes_out < head_len)
    if port_down:
        # A frame being sent when the port goes down leaves whole.
        flushed_while_sent = Signal(name="flushed_while_sent")
        with m.If(o.fire & beat.last):
            m.d.sync += flushed_while_sent.eq(0)
        with m.If(flush & (sent.count != 0)):
            m.d.sync += flushed_while_sent.eq(1)
        covers["frame_sent_whole_across_a_flush"] = o.fire & beat.last & flushed_while_sent
    _covers(m, covers)
    ports = [c_valid, c_dest, c_head, w_data, up, fabric] + o.free_ports()
    return m, ports, {"bmc": bmc, "prove": prove, "cover": cover, "memory_map": not data}
