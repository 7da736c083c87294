# SPDX-License-Identifier: BSD-2-Clause
"""Property harnesses of the transmit side (the spray scheduler, the segmenter's PSN limit) and of
the switch's uN stage, for :func:`verif.formal.check`.

Each function returns ``(module, ports, depths)`` as in :mod:`verif.formal_blocks`: the harness,
its free inputs and the depths of the modes that pass. Every harness leaves the block's
configuration port free (any table or register write at any time, interleaved with the streams)
and ``rst`` free, assumes the stream rules (docs/protocol.md section 8) of the sources that drive
the block's inputs, asserts them of its outputs and covers the interesting case of each property.
"""

from types import SimpleNamespace
from unittest import mock

from amaranth.hdl import Array, Assert, Assume, Cat, Cover, Fragment, Module, Mux, Signal

from .formal import StreamPort, find_signal, free_const, past
from .formal_tx_streams import _assigns, _register_fifo_class, source_of

__all__ = ["spray_scheduler_harness", "segmenter_psn_limit_harness", "un_stage_harness"]


def _covers(m, covers):
    for name, cond in covers.items():
        m.d.comb += Cover(cond, name)


def _serial_before(a, b, width=24):
    """``a`` comes before ``b`` in ``width``-bit serial arithmetic (docs/protocol.md 5)."""
    diff = (b - a)[:width]
    return (diff != 0) & ~diff[width - 1]


# -- spray scheduler (docs/protocol.md 4.3, 4.4) -------------------------------------------------

def spray_scheduler_harness(n_qps=1, n_planes=2, slots=2, backups=1, *, inductive=False,
                            block=None, depth=None, cover=10):
    """SprayScheduler: under any sequence of requests, EV events and configuration writes
    (table loads, slot state writes, seeds, enables, plane mask: the whole configuration port
    free), with ``rst`` free, asserted:

    - the stream rules on ``m_ans`` and ``m_marked`` (those of ``s_req`` and ``s_ev`` assumed);
    - the choice (docs/protocol.md 4.3): in every cycle of a decision (the block's
      ``count_decisions`` strobe: a request leaves stage C with a slot found), the slot it
      chose (position ``sel_pos`` XOR the mask, plane ``cp``) is GOOD or SKIP in the block's
      state registers (``state_<q>_<p>``, 2 bits per slot: G 0, S 1, A 2, D 3) of the row it
      searched: never ASSUMED_BAD or DENIED; the next cycle's answer is that choice (``found``,
      ``plane``, ``slot``, ``position``). These hold from any state: k-induction closes
      (``inductive=True`` keeps only them and the stream rules, depth 2).

    With ``inductive=False`` (bounded), also, from reset:

    - one answer per request, in order: requests taken minus answers taken is 0..3 and equals
      the block's ``pipe_busy``; each answer carries its request's ``qpn``;
    - the choice seen at the ports: an answer with ``found`` = 1 names a QP below ``n_qps``, a
      plane below N and a slot whose state in the cycle before the answer appeared (its
      decision) was GOOD or SKIP;
    - the v1 avoid rule (4.3): an answer to a request with ``avoid_valid`` never names the
      avoided EV on the avoided EV's plane.

    Covers (both modes): a decision that picked a SKIP slot; one that picked a GOOD slot while
    the other slot of its plane was ASSUMED_BAD or DENIED; an answer ``found`` = 0; an EV
    reported marked on ``m_marked``; an answer held while its sink stalls; and (bounded) an
    answer on the avoided EV's plane to a request that avoids an EV. All reached within 7 cycles
    (a state write or an event through the engine, then a request: latency 3).
    """
    from models.spray import EV_PLANE_BITS, SlotState
    from rtl.spray_scheduler import SprayScheduler

    block = block or SprayScheduler
    m = Module()
    dut = block(n_qps, n_planes, slots, backups)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    req = StreamPort(dut.s_req, "in", "req", count_width=4).elaborate(m)
    ev = StreamPort(dut.s_ev, "in", "ev").elaborate(m)
    ans = StreamPort(dut.m_ans, "out", "ans", count_width=4).elaborate(m)
    marked = StreamPort(dut.m_marked, "out", "marked").elaborate(m)
    a = dut.m_ans.p
    qb = max(1, (n_qps - 1).bit_length())
    pw = max(1, (n_planes - 1).bit_length())
    ab = (slots - 1).bit_length()
    G, S = int(SlotState.GOOD), int(SlotState.SKIP)

    def slot_state(row, slot):
        """The 2-bit state of ``slot`` in a row of 2-bit states."""
        return row.word_select(slot[:ab], 2) if slots > 1 else row[:2]

    # The decision, in its cycle, from the block's own registers.
    states = [[find_signal(frag, f"state_{q}_{p}") for p in range(n_planes)]
              for q in range(n_qps)]
    decide = find_signal(frag, "count_decisions")
    c_q, cp = find_signal(frag, "c_q"), find_signal(frag, "cp")
    sel_pos, sel_lfsr = find_signal(frag, "sel_pos"), find_signal(frag, "sel_lfsr")
    dec_row = Signal(2 * slots * n_planes, name="decision_row")
    m.d.comb += dec_row.eq(Array(Cat(*states[q]) for q in range(n_qps))[c_q])
    dec_slot = Signal(max(1, ab), name="decision_slot")
    m.d.comb += dec_slot.eq(sel_pos ^ sel_lfsr[:ab] if ab else 0)
    dec_plane_row = Signal(2 * slots, name="decision_plane_row")
    m.d.comb += dec_plane_row.eq(dec_row.word_select(cp, 2 * slots) if n_planes > 1
                                 else dec_row)
    dec_state = Signal(2, name="decision_state")
    m.d.comb += dec_state.eq(slot_state(dec_plane_row, dec_slot))
    m.d.comb += [
        Assert(~decide | (cp < n_planes), "a decision picks a plane below N"),
        Assert(~decide | (dec_state == G) | (dec_state == S),
               "a decision picks a GOOD or SKIP slot"),
    ]
    # The answer that appears next is that decision (d_valid: the block's answer register).
    new_answer = Signal(name="new_answer")
    was_valid = past(m, dut.m_ans.valid, "ans_was_valid")
    was_taken = past(m, ans.fire, "ans_was_taken")
    m.d.comb += new_answer.eq(dut.m_ans.valid & (~was_valid | was_taken))
    was_decide = past(m, decide, "was_decision")
    m.d.comb += [
        Assert(~(new_answer & a.found) | was_decide, "an answer found is a decision"),
        Assert(~was_decide | (new_answer & a.found & (a.plane == past(m, cp, "dec_plane")) &
                              (a.slot == past(m, dec_slot, "dec_slot")) &
                              (a.position == past(m, sel_pos, "dec_pos"))),
               "the decision is answered next"),
    ]
    other_bad = Signal(name="other_slot_bad")
    if slots > 1:
        m.d.comb += other_bad.eq(slot_state(dec_plane_row, dec_slot ^ 1)[1])
    covers = {
        "decision_picked_skip": decide & (dec_state == S),
        "decision_picked_good_beside_bad": decide & (dec_state == G) & other_bad,
        "answer_nothing_found": new_answer & ~a.found,
        "marked_ev_reported": marked.fire & dut.m_marked.p.valid,
        "answer_stalled": dut.m_ans.valid & ~dut.m_ans.ready & past(m, dut.m_ans.valid
                                                                    & ~dut.m_ans.ready, "st"),
    }

    if not inductive:
        # One answer per request, in order: a shadow queue of the requests in flight.
        held = Signal(4, name="req_held")
        m.d.comb += held.eq(req.taken - ans.taken)
        m.d.comb += [Assert(held <= 3, "at most 3 requests in flight"),
                     Assert(find_signal(frag, "pipe_busy") == (held != 0),
                            "requests in flight: the pipeline is busy")]
        sh_qpn = Array(Signal(24, name=f"sh_qpn{j}") for j in range(4))
        sh_avoid = Array(Signal(name=f"sh_avoid{j}") for j in range(4))
        sh_avoid_ev = Array(Signal(32, name=f"sh_avoid_ev{j}") for j in range(4))
        with m.If(req.fire):
            m.d.sync += [sh_qpn[req.taken[:2]].eq(dut.s_req.p.qpn),
                         sh_avoid[req.taken[:2]].eq(dut.s_req.p.avoid_valid),
                         sh_avoid_ev[req.taken[:2]].eq(dut.s_req.p.avoid_ev)]
        oldest = ans.taken[:2]
        m.d.comb += Assert(~dut.m_ans.valid | (a.qpn == sh_qpn[oldest]),
                           "each answer carries its request's qpn")
        # The choice seen at the ports: the answered slot's state in its decision's cycle.
        snap = Signal(2 * slots * n_planes * n_qps, name="state_at_decision")
        m.d.sync += snap.eq(Cat(*(states[q][p] for q in range(n_qps)
                                  for p in range(n_planes))))
        page = Signal(range(n_qps * n_planes), name="answer_page")
        m.d.comb += page.eq(a.qpn[:qb] * n_planes + a.plane[:pw])
        chosen = Signal(2, name="answer_state")
        m.d.comb += chosen.eq(slot_state(snap.word_select(page, 2 * slots), a.slot))
        decided = new_answer & a.found
        m.d.comb += [
            Assert(~decided | ((a.plane < n_planes) & (a.slot < slots) & (a.qpn < n_qps)),
                   "found names a plane and slot of a QP"),
            Assert(~decided | (chosen == G) | (chosen == S),
                   "the answered slot was GOOD or SKIP at its decision"),
        ]
        avoid_ev = sh_avoid_ev[oldest]
        on_plane = sh_avoid[oldest] & (a.plane == avoid_ev[:EV_PLANE_BITS])
        m.d.comb += Assert(~(dut.m_ans.valid & a.found & on_plane) | (a.ev != avoid_ev),
                           "the avoided EV is not chosen")
        covers["avoid_on_its_plane"] = dut.m_ans.valid & a.found & on_plane
        covers["answer_picked_skip"] = decided & (chosen == S)
    _covers(m, covers)
    ports = req.free_ports() + ev.free_ports() + ans.free_ports() + marked.free_ports() + \
        [dut.cfg_addr, dut.cfg_wdata, dut.cfg_we]
    if inductive:
        return m, ports, {"prove": depth or 2, "cover": cover}
    return m, ports, {"bmc": depth or 12, "cover": cover}


# -- segmenter: the PSN limit (docs/protocol.md 5, v1) ---------------------------------------------

def segmenter_psn_limit_harness(n_qps=1, wrs_per_qp=2, pmtu=256, data_width=64,
                                max_outstanding=2, *, block=None, bmc=10, cover=12,
                                small_payload=True, prove=None):
    """Segmenter (the block of TxEngine that enforces the PSN limit; the whole engine, with the
    scheduler, path building, header inserter and splitter, is far beyond what smtbmc unrolls
    here): under any work requests, retransmit requests, retires, PSN_LIMIT records, AXI read
    timing and data, and configuration writes (QP contexts: enable and start PSN), with ``rst``
    free, asserted:

    - the PSN limit (docs/protocol.md 5, "v1 today in the RTL": new PSNs stop at psn_limit,
      exclusive; PSN_LIMIT says so too): the harness keeps its own copy of each QP's limit from
      the ports alone (the start PSN written to the QP's context word, then each PSN_LIMIT
      record of an enabled QP, as the model's ``psn_limit`` takes it) and, in every cycle the
      block decides a new packet (its ``decide`` strobe without ``decide_rtx``), the PSN it
      gives it (the QP's ``next_psn_<q>`` register) is before that limit in 24-bit serial
      arithmetic;
    - the decision is what leaves: for a free decision number k, the k-th record out on
      ``m_pkt`` is the k-th decision (same ``rtx``; for a new packet the same QP and PSN), so
      every new-PSN record out was below its QP's limit when it was decided (asserted at the
      port too);
    - the stream rules on ``m_pkt``, ``m_axis`` and the AR channel (address, length, size,
      burst, id held with ``arvalid`` until ``arready``), those of the four record inputs and of
      the R channel assumed.

    ``small_payload`` holds the work requests' addresses, R_Key, immediate and request id and
    the R data at 0 (none steers a PSN decision) and lengths below 2 PMTU.

    ``prove`` None: bounded (BMC ``bmc`` cycles from reset, the block as it is). ``prove`` = k:
    the same properties by k-induction (from any state: unbounded), of the segmenter with its
    record FIFO (a ``SyncFIFOBuffered`` of 8 TX_PACKET records, a memory no invariant can name)
    swapped for a register FIFO of the same ports (:func:`_register_fifo_class`: ``r_data``
    from slot 0; a record written is offered one cycle later instead of two, nothing else of
    the block changes; the fetch FIFO and the read queue stay as they are, they feed no
    property). The invariants, on the block's registers by name (:func:`_segmenter_invariants`):
    the harness's limit and enable copies are the block's (``psn_limit_<q>``, bit 31 of
    ``seg_qp<q>_context``); the decisions not yet out are the records in the S1..S3 stages and
    the record FIFO (at most 8: a decision waits for room); decision k, while inside, sits at
    the place its distance from the output names, with its ``rtx`` and, when new, its QP and
    PSN; a new decision k was before its limit. Covers: a new PSN decided one below the limit
    (the last one it allows) and seen on ``m_pkt``; a QP held at its limit with packets unsent;
    a decision across the PSN wrap (0xFFFFFF); a payload beat out.
    """
    from models.segmenter import QP_CONTEXT
    from rtl.segmenter import Segmenter

    block = block or Segmenter
    m = Module()
    dut = block(data_width, n_qps, wrs_per_qp, pmtu, max_outstanding)
    made = []
    if prove is not None:
        from rtl import segmenter as segmenter_mod
        from rtl.common import records
        register_fifo = _register_fifo_class(made)
        buffered = segmenter_mod.SyncFIFOBuffered

        def fifo(*, width, depth):      # the record FIFO only (its width: one TX_PACKET)
            if width == records.TX_PACKET.size:
                return register_fifo(width=width, depth=depth)
            return buffered(width=width, depth=depth)
        with mock.patch.object(segmenter_mod, "SyncFIFOBuffered", fifo):
            frag = Fragment.get(dut, "formal")
        if len(made) != 1:
            raise LookupError(f"segmenter harness: {len(made)} record FIFOs swapped, not 1")
    else:
        frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    axi = dut.m_axi
    ins = [StreamPort(getattr(dut, n), "in", n[2:]).elaborate(m)
           for n in ("s_wr", "s_retx", "s_retire", "s_limit")]
    r = StreamPort(SimpleNamespace(valid=axi.rvalid, ready=axi.rready,
                                   payload=Cat(axi.rdata, axi.rresp, axi.rid, axi.rlast)),
                   "in", "r").elaborate(m)
    pkt = StreamPort(dut.m_pkt, "out", "pkt", count_width=6).elaborate(m)
    pay = StreamPort(dut.m_axis, "out", "pay").elaborate(m)
    ar = StreamPort(SimpleNamespace(valid=axi.arvalid, ready=axi.arready,
                                    payload=Cat(axi.araddr, axi.arlen, axi.arsize, axi.arburst,
                                                axi.arid, axi.arcache, axi.arprot,
                                                axi.arlock)), "out", "ar").elaborate(m)
    qb = max(1, (n_qps - 1).bit_length())
    if small_payload:
        wr = dut.s_wr.p
        m.d.comb += [Assume(wr.local_addr == 0), Assume(wr.remote_va == 0),
                     Assume(wr.rkey == 0), Assume(wr.imm == 0), Assume(wr.req_id == 0),
                     Assume(wr.length < 2 * pmtu), Assume(axi.rdata == 0)]

    # The limit in force, from the ports: start PSN at a context write, then PSN_LIMIT records.
    lim = [Signal(24, name=f"limit_shadow_{q}") for q in range(n_qps)]
    en = [Signal(name=f"enable_shadow_{q}") for q in range(n_qps)]
    lrec = dut.s_limit.p
    for q in range(n_qps):
        with m.If(dut.s_limit.valid & dut.s_limit.ready & (lrec.qpn == q) & en[q]):
            m.d.sync += lim[q].eq(lrec.psn_limit)
        with m.If(dut.cfg_we & (dut.cfg_addr == QP_CONTEXT + q)):
            m.d.sync += [lim[q].eq(dut.cfg_wdata[:24]), en[q].eq(dut.cfg_wdata[31])]
    decide = find_signal(frag, "decide")
    d_rtx = find_signal(frag, "decide_rtx")
    dq = find_signal(frag, "serve_index")
    next_psn = Array(find_signal(frag, f"next_psn_{q}") for q in range(n_qps))
    alloc = [find_signal(frag, f"alloc_psn_{q}") for q in range(n_qps)]
    lim_arr = Array(lim)
    d_psn = Signal(24, name="decided_psn")
    d_lim = Signal(24, name="decided_limit")
    m.d.comb += [d_psn.eq(next_psn[dq]), d_lim.eq(lim_arr[dq])]
    new = Signal(name="decide_new")
    m.d.comb += new.eq(decide & ~d_rtx)
    before = Signal(name="decided_before_limit")
    m.d.comb += before.eq(_serial_before(d_psn, d_lim))
    m.d.comb += Assert(~new | before, "a new PSN is decided only before its QP's limit")

    # The k-th decision is the k-th record out.
    decisions = Signal(6, name="decisions")
    with m.If(decide):
        m.d.sync += decisions.eq(decisions + 1)
    k, k_port = free_const(m, 6, "k")
    tag_seen, tag_rtx, tag_q = Signal(name="tag_seen"), Signal(name="tag_rtx"), Signal(qb)
    tag_psn, tag_before = Signal(24, name="tag_psn"), Signal(name="tag_before")
    tag_at_limit = Signal(name="tag_at_limit")
    with m.If(decide & (decisions == k)):
        m.d.sync += [tag_seen.eq(1), tag_rtx.eq(d_rtx), tag_q.eq(dq), tag_psn.eq(d_psn),
                     tag_before.eq(before), tag_at_limit.eq(((d_psn + 1)[:24] == d_lim))]
    p = dut.m_pkt.p
    out_k = Signal(name="pkt_out_k")
    m.d.comb += out_k.eq(pkt.fire & (pkt.taken == k))
    m.d.comb += [
        Assert((decisions - pkt.taken)[:6] <= 16, "records out never ahead of decisions"),
        Assert(~out_k | (tag_seen & (p.rtx == tag_rtx)), "record k is decision k"),
        Assert(~out_k | p.rtx | ((p.qpn == tag_q) & (p.psn == tag_psn)),
               "new record k carries decision k's QP and PSN"),
        Assert(~out_k | p.rtx | tag_before, "a new PSN out was before its limit at decision"),
    ]
    if prove is not None:
        _segmenter_invariants(m, frag, made[0], locals())
    blocked = Cat(*(en[q] & (next_psn[q] != alloc[q]) & ~_serial_before(next_psn[q], lim[q])
                    & (find_signal(frag, f"retx_waiting_{q}") == 0)
                    for q in range(n_qps))).any()
    _covers(m, {
        "new_psn_at_limit_decided": new & ((d_psn + 1)[:24] == d_lim),
        "new_psn_at_limit_out": out_k & ~p.rtx & tag_at_limit,
        "qp_held_at_limit": blocked,
        "decision_across_psn_wrap": new & (d_psn == 0xFFFFFF),
        "payload_beat_out": pay.fire,
    })
    ports = [x for port in ins for x in port.free_ports()] + \
        [axi.rvalid, axi.rdata, axi.rresp, axi.rid, axi.rlast] + \
        pkt.free_ports() + pay.free_ports() + ar.free_ports() + \
        [k_port, dut.cfg_addr, dut.cfg_wdata, dut.cfg_we]
    if prove is not None:
        return m, ports, {"prove": prove, "cover": cover}
    return m, ports, {"bmc": bmc, "cover": cover}


def _segmenter_invariants(m, frag, rec_fifo, h):
    """The strengthening invariants of :func:`segmenter_psn_limit_harness`'s k-induction
    (``h``: the harness's locals), each true in every reachable state; the reason is beside
    each."""
    from rtl.common import records

    dut, n_qps, lim, en = h["dut"], h["n_qps"], h["lim"], h["en"]
    pkt, k, decisions = h["pkt"], h["k"], h["decisions"]
    tag_seen, tag_rtx, tag_q, tag_psn = h["tag_seen"], h["tag_rtx"], h["tag_q"], h["tag_psn"]
    tag_before = h["tag_before"]
    for q in range(n_qps):
        # The copies change on the same events as the block's registers: a context write sets
        # both (limit = start PSN, enable = bit 31), a PSN_LIMIT record of an enabled QP below
        # n_qps (the block's l_take) sets both limits; rst clears both.
        m.d.comb += [
            Assert(lim[q] == find_signal(frag, f"psn_limit_{q}"),
                   f"inv: limit copy {q} is the block's psn_limit"),
            Assert(en[q] == find_signal(frag, f"seg_qp{q}_context")[31],
                   f"inv: enable copy {q} is the block's"),
        ]
    # The S1..S3 pipeline registers, named through the registers they feed (the RTL leaves
    # s1/s2 unnamed): s3_valid <- s2_valid <- s1_valid, s3.rtx <- s2_rtx <- s1_rtx, ...
    s3 = records.TX_PACKET(find_signal(frag, "s3"))
    s3_valid = find_signal(frag, "s3_valid")
    s2_valid = source_of(frag, "s3_valid")
    s1_valid = _driver(frag, s2_valid)
    s2_rtx, s2_q = _driver(frag, s3.rtx), _driver(frag, s3.qpn)
    s1_rtx, s1_q = _driver(frag, s2_rtx), _driver(frag, s2_q)
    s2_psn, s1_psn = find_signal(frag, "s2_psn"), find_signal(frag, "s1_psn")
    level = rec_fifo.level
    # Decisions not yet out: one per valid stage, then the FIFO's records (each decision
    # enters S1, moves one stage per cycle, is written into the FIFO from S3 and leaves it on
    # m_pkt; nothing else writes or drops one).
    held = Signal(6, name="inv_held")
    m.d.comb += held.eq(decisions - pkt.taken)
    in_flight = Signal(3, name="inv_in_flight")
    m.d.comb += in_flight.eq(s1_valid + s2_valid + s3_valid)
    m.d.comb += [
        Assert(held == level + in_flight, "inv: decisions not out = stages + FIFO records"),
        # a decision waits until the FIFO has room for the stages' records and its own
        # (decide_room: level + in_flight < 8), so the FIFO is never written full
        Assert(level + in_flight <= rec_fifo.depth, "inv: FIFO room for the records in flight"),
    ]
    # Decision k while inside (its distance from the output below held) was seen, and sits at
    # that distance: FIFO slot j, then S3, S2, S1 (oldest first).
    dist = Signal(6, name="inv_k_dist")
    m.d.comb += dist.eq(k - pkt.taken)
    inside = Signal(name="inv_k_inside")
    m.d.comb += inside.eq(dist < held)
    m.d.comb += [
        Assert(~inside | tag_seen, "inv: decision k inside was seen"),
        # the harness asserts "before" at every new decision and tag_before copies it
        Assert(~tag_seen | tag_rtx | tag_before, "inv: a new decision k was before its limit"),
    ]

    def is_k(rtx, qpn, psn):
        return (rtx == tag_rtx) & (rtx | ((qpn == tag_q) & (psn == tag_psn)))

    for j, slot in enumerate(rec_fifo.slots):
        r = records.TX_PACKET(slot)
        m.d.comb += Assert(~((dist == j) & (j < level)) | is_k(r.rtx, r.qpn, r.psn),
                           f"inv: decision k in FIFO slot {j}")
    at3 = Signal(6, name="inv_pos_s3")
    at2 = Signal(6, name="inv_pos_s2")
    at1 = Signal(6, name="inv_pos_s1")
    m.d.comb += [at3.eq(level), at2.eq(level + s3_valid), at1.eq(level + s3_valid + s2_valid)]
    m.d.comb += [
        Assert(~(s3_valid & (dist == at3)) | is_k(s3.rtx, s3.qpn, s3.psn),
               "inv: decision k in S3"),
        Assert(~(s2_valid & (dist == at2)) | is_k(s2_rtx, s2_q, s2_psn),
               "inv: decision k in S2"),
        Assert(~(s1_valid & (dist == at1)) | is_k(s1_rtx, s1_q, s1_psn),
               "inv: decision k in S1"),
    ]


def _driver(fragment, target):
    """The signal ``s`` of the one assignment ``target.eq(s)`` in ``fragment`` (``target`` a
    signal or a field of one, compared as the statement's left side): names an unnamed register
    of a block through the register it feeds, as :func:`verif.formal_tx_streams.source_of` does
    by name. Raises ``LookupError`` unless there is exactly one."""
    from amaranth.hdl import Value
    from amaranth.hdl._ast import Slice

    def key(value):     # a signal by identity, a field (slice of a signal) by its bits
        if isinstance(value, Slice) and isinstance(value.value, Signal):
            return (id(value.value), value.start, value.stop)
        return (id(value),) if isinstance(value, Signal) else None

    want = key(Value.cast(target))
    found = {}
    for statements in fragment.statements.values():
        for stmt in _assigns(statements):
            if key(stmt.lhs) == want and isinstance(stmt.rhs, Signal):
                found[id(stmt.rhs)] = stmt.rhs
    if want is None or len(found) != 1:
        raise LookupError(f"_driver: {len(found)} signals assigned to {target!r}")
    return next(iter(found.values()))


# -- uN stage (docs/protocol.md 3, 8) -------------------------------------------------------------

def _register_memory_class(made, ghost_width=8):
    """A stand-in for :class:`amaranth.lib.memory.Memory` with its words in registers
    (``words``): the ports a block uses as there (``write_port()``: ``addr``, ``data``, ``en``,
    written at the clock edge; ``read_port(domain="comb")``: ``addr``, ``data``, asynchronous),
    contents an induction invariant can name. Beside each word a *ghost* word (``ghosts``, not
    read by the block) takes ``ghost_w`` (driven by the harness) at each write, so that the
    harness can tag what it stores. Each instance made is appended to ``made``."""
    from amaranth.hdl import Elaboratable, Shape

    class RegisterMemory(Elaboratable):
        def __init__(self, *, shape, depth, init=()):
            width = Shape.cast(shape).width
            self.depth = depth
            n = len(made)
            self.words = [Signal(width, name=f"mem{n}_word{j}") for j in range(depth)]
            self.ghosts = [Signal(ghost_width, name=f"mem{n}_ghost{j}") for j in range(depth)]
            self.ghost_w = Signal(ghost_width, name=f"mem{n}_ghost_w")
            self._writes, self._reads = [], []
            self._width = width
            made.append(self)

        def write_port(self):
            port = SimpleNamespace(addr=Signal(range(self.depth), name="rm_w_addr"),
                                   data=Signal(self._width, name="rm_w_data"),
                                   en=Signal(name="rm_w_en"))
            self._writes.append(port)
            return port

        def read_port(self, domain="comb"):
            if domain != "comb":
                raise NotImplementedError("RegisterMemory: asynchronous read ports only")
            port = SimpleNamespace(addr=Signal(range(self.depth), name="rm_r_addr"),
                                   data=Signal(self._width, name="rm_r_data"))
            self._reads.append(port)
            return port

        def elaborate(self, platform):
            m = Module()
            for w in self._writes:
                for j, word in enumerate(self.words):
                    with m.If(w.en & (w.addr == j)):
                        m.d.sync += [word.eq(w.data), self.ghosts[j].eq(self.ghost_w)]
            for r in self._reads:
                m.d.comb += r.data.eq(Array(self.words)[r.addr])
            return m

    return RegisterMemory


# The stages of the uN stage's k-induction (verif.formal.check_staged), by assertion message:
# the FIFO level, pointers and counts, the beat FIFO's tags, the decision queue's tags one kind
# at a time, the head decision, then the properties.
UN_STAGE_STAGES = [
    r"level within|s_ready only|beats inside|beat index|queue pointers|queue count|queue flag|"
    r"headers undecided",
    r"FIFO slot|FIFO empty|frames before the FIFO",
    r"newest: the last decision", r"oldest: follows the head", r"follows word", r"tags near",
    r"head|decision",
    r".",
]


def un_stage_harness(data_width=64, table_depth=1, port_width=1, *, bmc=18, cover=18,
                     prove=None, data=True, invariants=True):
    """UnStage (W = 64, one table entry, 1-bit ports; table, own block and uSID free through
    the configuration port): under any frames in (the stream rules of ``s_axis`` assumed; any
    lengths, tkeep, Ethernet and IPv6 fields), asserted:

    - the stream rules on ``m_axis`` (data, keep, last, user and ``tdest`` held until taken);
    - no beat or frame invented: beats out never exceed beats in, frames out (``tlast``) never
      exceed frames in, and a beat out of a frame not yet complete at the input is never a
      ``tlast`` ahead of the input's;
    - one decision per frame (``dec_valid``, in frame order): decisions never exceed frames
      whose header completed, frames out never exceed forwarded decisions;
    - ``tdest`` constant over a frame.

    ``prove`` None: bounded (BMC ``bmc`` cycles from reset, the block as it is): the first
    frame's header takes 7 beats at W = 64 and its first beat leaves ``H + 4`` = 11 cycles after
    it entered. The counting properties are then stated modulo ``2**8`` ("beats in minus beats
    out at most 128"), which only holds for traces shorter than 128 dropped beats or frames.

    ``prove`` = k: k-induction (from any state: unbounded) of the exact forms that imply them,
    with the beats and frames the block discards counted (a beat leaving the beat FIFO under a
    drop decision, ``move`` with ``head.drop``; a frame discarded: its last beat so): beats in
    less beats out less beats discarded is at most the FIFO depth + 1 (never negative: no beat
    invented); frames in less frames out less frames discarded likewise, and is not 0 when a
    ``tlast`` leaves; frames discarded never exceed the drop decisions of the decision port,
    frames out never exceed its forward decisions. The block's beat FIFO
    (``SyncFIFOBuffered``) is swapped for a register FIFO of the same ports
    (:func:`verif.formal_tx_streams._register_fifo_class`: ``r_data`` from slot 0, a beat is at
    the output one cycle earlier) and its decision queue (a ``Memory``) for registers
    (:func:`_register_memory_class`, same ports and timing); the rest of the block is unchanged.
    The invariants (:func:`_un_stage_invariants`) read its registers by name. At W = 64 with
    ``data=False`` the induction of every assertion at once does not finish within 15 minutes
    (k = 1 and k = 2, yices); in stages (:func:`verif.formal.check_staged` with
    :data:`UN_STAGE_STAGES`, k = 1) each closes in seconds to a minute or two.
    Covers: a frame forwarded whole (its ``tlast`` out), a frame dropped, an output stall inside
    a frame.
    """
    from rtl import un_stage as un_mod
    from rtl.un_stage import UnStage

    m = Module()
    dut = UnStage(data_width, table_depth, port_width, decision_port=True)
    fifos, mems = [], []
    if prove is not None:
        with mock.patch.object(un_mod, "SyncFIFOBuffered", _register_fifo_class(fifos, 8)), \
                mock.patch.object(un_mod, "Memory", _register_memory_class(mems, 16)):
            frag = Fragment.get(dut, "formal")
        if (len(fifos), len(mems)) != (1, 1):
            raise LookupError(f"un_stage harness: {len(fifos)} FIFOs, {len(mems)} memories "
                              "swapped, not 1 and 1")
    else:
        frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    i = StreamPort(dut.s_axis, "in", "i").elaborate(m)
    if data:
        o = StreamPort(dut.m_axis, "out", "o").elaborate(m)
    else:       # the stream rules without tdata (nothing then reads the data path)
        q = dut.m_axis.p
        o = StreamPort(SimpleNamespace(valid=dut.m_axis.valid, ready=dut.m_axis.ready,
                                       payload=Cat(q.keep, q.last, q.user, q.dest)),
                       "out", "o").elaborate(m)
    i_frames = Signal(8, name="i_frames")
    o_frames = Signal(8, name="o_frames")
    fwd = Signal(8, name="forwarded")
    decisions = Signal(8, name="decisions")
    with m.If(i.fire & dut.s_axis.p.last):
        m.d.sync += i_frames.eq(i_frames + 1)
    with m.If(o.fire & dut.m_axis.p.last):
        m.d.sync += o_frames.eq(o_frames + 1)
    with m.If(dut.dec_valid):
        m.d.sync += decisions.eq(decisions + 1)
        with m.If(dut.dec_reason == 0):
            m.d.sync += fwd.eq(fwd + 1)
    # A frame whose last beat is in, or one whose header (the first H beats) is in (the beat
    # index saturates at H, as the block's: a frame of any length).
    in_beat = Signal(range(dut.header_beats + 1), name="i_beat_in_frame")
    with m.If(i.fire):
        m.d.sync += in_beat.eq(Mux(dut.s_axis.p.last, 0,
                                   Mux(in_beat == dut.header_beats, in_beat, in_beat + 1)))
    headers = Signal(8, name="headers_in")
    m.d.comb += headers.eq(i_frames + (in_beat >= dut.header_beats))
    out_mid = Signal(name="o_inside_frame")
    with m.If(o.fire):
        m.d.sync += out_mid.eq(~dut.m_axis.p.last)
    dest = Signal(port_width, name="o_frame_dest")
    with m.If(o.fire & ~out_mid):
        m.d.sync += dest.eq(dut.m_axis.p.dest)
    m.d.comb += [
        Assert((headers - decisions)[:8] <= 128, "a decision per frame header, no more"),
        Assert((fwd - o_frames)[:8] <= 128, "frames out never ahead of forwarded decisions"),
        Assert(~(dut.m_axis.valid & out_mid) | (dut.m_axis.p.dest == dest),
               "tdest constant over a frame"),
    ]
    if prove is None:
        m.d.comb += [
            Assert((i.taken - o.taken)[:8] <= 128, "beats out never ahead of beats in"),
            Assert((i_frames - o_frames)[:8] <= 128, "frames out never ahead of frames in"),
            Assert(~(o.fire & dut.m_axis.p.last) | (o_frames != i_frames),
                   "a frame's last beat out only after its last beat in"),
        ]
    elif invariants:
        _un_stage_invariants(m, frag, dut, fifos[0], mems[0], locals())
    _covers(m, {
        "frame_forwarded_whole": o.fire & dut.m_axis.p.last,
        "frame_dropped": dut.dec_valid & (dut.dec_reason != 0),
        "output_stalled_inside_frame": dut.m_axis.valid & ~dut.m_axis.ready & out_mid,
    })
    ports = i.free_ports() + o.free_ports() + [dut.cfg_addr, dut.cfg_wdata, dut.cfg_we]
    if prove is not None:
        return m, ports, {"prove": prove, "cover": cover}
    return m, ports, {"bmc": bmc, "cover": cover}


def _un_stage_invariants(m, frag, dut, fifo, queue, h):
    """The exact counting properties of :func:`un_stage_harness` in ``prove`` mode and the
    strengthening invariants of its k-induction (``h``: the harness's locals), each true in
    every reachable state; the reason is beside each.

    No invariant counts bits over the FIFO or the queue (a sum of 14 bits against a counter is
    a pigeonhole problem the solver does not close in minutes); the harness tags instead, as
    ghost words beside the storage: each beat in the beat FIFO with its frame's number (frames
    whose ``tlast`` came in before it), each decision in the queue and at the head with the
    forward and drop decisions before it. Neighbouring tags then differ by one slot's ``tlast``
    or one entry's drop bit, and the oldest and newest tags meet the harness's counters: every
    invariant is local."""
    from amaranth.lib import data

    from models.records import FrameUser

    i, o, i_frames, o_frames = h["i"], h["o"], h["i_frames"], h["o_frames"]
    fwd, decisions, in_beat, headers = h["fwd"], h["decisions"], h["in_beat"], h["headers"]
    out_mid, dest = h["out_mid"], h["dest"]
    H, W, pw = dut.header_beats, dut.data_width, dut.port_width
    n_dec, depth = queue.depth, fifo.depth
    beat_layout = data.StructLayout({"data": W, "keep": W // 8, "last": 1,
                                     "user": FrameUser.WIDTH})
    dec_layout = data.StructLayout({"drop": 1, "shift": 1, "hop_out": 8, "tail": 80,
                                    "port": pw})
    head = dec_layout(find_signal(frag, "head"))
    head_valid, head_free = find_signal(frag, "head_valid"), find_signal(frag, "head_free")
    move = find_signal(frag, "move")
    t_valid, s1_valid = find_signal(frag, "t_valid"), find_signal(frag, "s1_valid")
    d_valid = find_signal(frag, f"d{dut.compare_stages - 1 + dut.tree_levels + dut.scan_rows}"
                                "_valid")
    q_count, q_any = find_signal(frag, "dq_count"), find_signal(frag, "dq_any")
    q_wptr, q_rptr = find_signal(frag, "dq_wptr"), find_signal(frag, "dq_rptr")
    b_in_beat = find_signal(frag, "in_beat")
    s_ready = find_signal(frag, "s_ready")
    level = fifo.level
    ov, olast = dut.m_axis.valid, dut.m_axis.p.last

    # The beats and frames the block discards: beats leaving the beat FIFO under a drop.
    gone = Signal(name="h_beat_discarded")
    m.d.comb += gone.eq(move & head.drop)
    dropped_beats = Signal(8, name="h_beats_discarded")
    dropped_frames = Signal(8, name="h_frames_discarded")
    with m.If(gone):
        m.d.sync += dropped_beats.eq(dropped_beats + 1)
        with m.If(beat_layout(fifo.r_data).last):
            m.d.sync += dropped_frames.eq(dropped_frames + 1)
    capacity = depth + 1
    beats_inside = Signal(8, name="h_beats_inside")
    frames_inside = Signal(8, name="h_frames_inside")
    m.d.comb += [beats_inside.eq(i.taken - o.taken - dropped_beats),
                 frames_inside.eq(i_frames - o_frames - dropped_frames)]
    drops = Signal(8, name="h_drop_decisions")
    m.d.comb += drops.eq(decisions - fwd)
    # The exact properties (they imply the bounded forms for traces shorter than 128 drops).
    m.d.comb += [
        Assert(beats_inside <= capacity, "beats out never ahead of beats in (exact)"),
        Assert(frames_inside <= capacity, "frames out never ahead of frames in (exact)"),
        Assert(~(o.fire & olast) | (frames_inside != 0),
               "a frame's last beat out only after its last beat in (exact)"),
        Assert((drops - dropped_frames)[:8] <= capacity,
               "frames discarded never ahead of drop decisions"),
    ]

    # -- the ghost tags --
    # A beat is tagged with its frame's number, i_frames when it comes in.
    m.d.comb += fifo.ghost_w.eq(i_frames)
    # A decision with the forward and drop decisions before it (fwd, drops in its cycle).
    m.d.comb += queue.ghost_w.eq(Cat(fwd, drops))
    # The head's tags, loaded as the block loads the head (from the queue's oldest entry or
    # straight from the decision stage).
    gh_f = Signal(8, name="inv_head_fwd_before")
    gh_d = Signal(8, name="inv_head_drop_before")
    oldest_ghost = Array(queue.ghosts)[q_rptr]
    with m.If(head_free):
        m.d.sync += [gh_f.eq(Mux(q_any, oldest_ghost[:8], fwd)),
                     gh_d.eq(Mux(q_any, oldest_ghost[8:], drops))]

    out_last = Signal(name="inv_out_reg_last")
    m.d.comb += out_last.eq(ov & olast)
    # frames gone whole: forwarded and taken, discarded, or their tlast in the output register
    frames_gone = Signal(8, name="inv_frames_gone")
    m.d.comb += frames_gone.eq(o_frames + dropped_frames + out_last)
    slots = [beat_layout(x) for x in fifo.slots]
    f = fifo.ghosts
    lasts = Signal(8, name="inv_lasts_in_fifo")
    m.d.comb += lasts.eq(Mux(level != 0, i_frames - f[0], 0))
    inv = []
    for j in range(depth):
        held = level > j
        # consecutive beats: the same frame, or the next after a tlast
        if j:
            inv.append((~held | (f[j] == (f[j - 1] + slots[j - 1].last)[:8]),
                        f"inv: FIFO slot {j}'s frame follows slot {j - 1}'s"))
            inv.append((~held | ((f[j] - f[0])[:8] <= j), f"inv: FIFO slot {j}'s frame near"))
        # the newest beat: its frame is the one coming in, or the one before after a tlast
        inv.append((~(level == j + 1) | (i_frames == (f[j] + slots[j].last)[:8]),
                    f"inv: FIFO slot {j} newest: the frame coming in"))
    inv += [
        # the oldest beat's frame: every frame before it is gone whole
        (~(level != 0) | (f[0] == frames_gone), "inv: frames before the FIFO's oldest gone"),
        (~(level == 0) | (i_frames == frames_gone), "inv: FIFO empty: every frame in gone"),
        # The beat FIFO: never over its depth; s_ready (a register: level < depth - 2 in the
        # cycle before) leaves room for this cycle's beat, so no beat in is ever refused.
        (level <= depth, "inv: beat FIFO level within its depth"),
        (~s_ready | (level <= depth - 2), "inv: s_ready only with room"),
        # Beats in = beats out + beats discarded + beats inside (FIFO, output register).
        (beats_inside == level + ov, "inv: beats inside = FIFO level + output register"),
        # The harness's beat index is the block's (both saturate at H, clear on tlast).
        (in_beat == b_in_beat, "inv: beat index in frame is the block's"),
    ]
    pipe = Signal(3, name="inv_decisions_in_pipe")
    m.d.comb += pipe.eq(t_valid + s1_valid + d_valid)
    mid_frame = Signal(name="inv_input_mid_frame")
    untriggered = Signal(name="inv_input_header_open")
    m.d.comb += [mid_frame.eq(b_in_beat != 0),
                 untriggered.eq((b_in_beat != 0) & (b_in_beat < H))]
    inv += [
        # Every header completed is decided D cycles later, through t_valid, s1, d (one
        # register each per frame, in order).
        ((headers - decisions)[:8] == pipe, "inv: headers undecided = decisions in flight"),
        # The decision queue's ring: count = wptr - rptr (mod n), flag = count != 0, and an
        # entry queued only behind a head.
        ((q_wptr < n_dec) & (q_rptr < n_dec) & (q_count <= n_dec),
         "inv: queue pointers and count in range"),
        (q_count == Mux(q_wptr >= q_rptr, q_wptr - q_rptr, q_wptr + n_dec - q_rptr)
         + Mux((q_wptr == q_rptr) & (q_count == n_dec), n_dec, 0),
         "inv: queue count = wptr - rptr"),
        (q_any == (q_count != 0), "inv: queue flag"),
        (~q_any | head_valid, "inv: a queued decision waits behind the head"),
        # One decision per frame inside: each frame with its tlast in the FIFO, and the frame
        # coming in (mid-frame), has exactly one decision (head, queue, pipeline), but for the
        # frame coming in before its header completes (in_beat 1..H-1: not triggered yet).
        # So the queue never overflows (its n entries >= the FIFO's frames).
        (head_valid + q_count + pipe + untriggered == lasts + mid_frame,
         "inv: one decision per frame inside"),
        # A non-last beat in the output register: the rest of its frame is at the head (a
        # forward, the same port); likewise after a non-last beat was taken with the register
        # empty (the harness's frame at the output).
        (~(ov & ~olast) | (head_valid & ~head.drop & (head.port == dut.m_axis.p.dest)),
         "inv: a frame in the output register continues at the head"),
        (~(out_mid & ~ov) | (head_valid & ~head.drop & (head.port == dest)),
         "inv: a frame begun at the output continues at the head"),
        # The head's decision: the forward decisions before it are out (or their tlast in the
        # output register), the drop decisions before it discarded.
        (~head_valid | ((gh_f == (o_frames + out_last)[:8]) & (gh_d == dropped_frames)),
         "inv: decisions before the head done"),
        (head_valid | ((fwd == (o_frames + out_last)[:8]) & (drops == dropped_frames)),
         "inv: no head: every decision done"),
        (~(head_valid & ~q_any) | ((fwd == (gh_f + ~head.drop)[:8]) &
                                   (drops == (gh_d + head.drop)[:8])),
         "inv: the head is the newest decision"),
    ]
    words = [dec_layout(w) for w in queue.words]
    for j in range(n_dec):
        age = Signal(range(n_dec), name=f"inv_q_age{j}")
        m.d.comb += age.eq(Mux(j >= q_rptr, j - q_rptr, j + n_dec - q_rptr))
        inq = age < q_count
        g_f, g_d = queue.ghosts[j][:8], queue.ghosts[j][8:]
        nxt = (j + 1) % n_dec
        step = ((queue.ghosts[nxt][:8] == (g_f + ~words[j].drop)[:8]) &
                (queue.ghosts[nxt][8:] == (g_d + words[j].drop)[:8]))
        inv += [
            # the oldest entry follows the head, each entry the one before it
            (~(inq & (age == 0)) | ((g_f == (gh_f + ~head.drop)[:8]) &
                                    (g_d == (gh_d + head.drop)[:8])),
             f"inv: queue word {j} oldest: follows the head"),
            (~(inq & (age + 1 < q_count)) | step, f"inv: queue word {nxt} follows word {j}"),
            (~(inq & (age + 1 == q_count)) | ((fwd == (g_f + ~words[j].drop)[:8]) &
                                             (drops == (g_d + words[j].drop)[:8])),
             f"inv: queue word {j} newest: the last decision"),
            (~inq | (((g_f - gh_f)[:8] <= age + 1) & ((g_d - gh_d)[:8] <= age + 1)),
             f"inv: queue word {j}'s tags near the head's"),
        ]
    m.d.comb += [Assert(cond, name) for cond, name in inv]
