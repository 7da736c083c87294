# SPDX-License-Identifier: BSD-2-Clause
"""Property harnesses of the transmit side (the spray scheduler, the segmenter's PSN limit) and of
the switch's uN stage, for :func:`verif.formal.check`.

Each function returns ``(module, ports, depths)`` as in :mod:`verif.formal_blocks`: the harness,
its free inputs and the depths of the modes that pass. Every harness leaves the block's
configuration port free (any table or register write at any time, interleaved with the streams)
and ``rst`` free, assumes the stream rules (docs/protocol.md section 8) of the sources that drive
the block's inputs, asserts them of its outputs and covers the interesting case of each property.
"""

from amaranth.hdl import Array, Assert, Assume, Cat, Cover, Fragment, Module, Mux, Signal

from .formal import StreamPort, find_signal, free_const, past

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
                                small_payload=True):
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
    the R data at 0 (none steers a PSN decision) and lengths below 2 PMTU; bounded (the record
    and fetch FIFOs are memories of 8 entries that no induction invariant here names). Covers:
    a new PSN decided one below the limit (the last one it allows) and seen on ``m_pkt``; a QP
    held at its limit with packets unsent; a decision across the PSN wrap (0xFFFFFF); a
    payload beat out.
    """
    from types import SimpleNamespace

    from models.segmenter import QP_CONTEXT
    from rtl.segmenter import Segmenter

    block = block or Segmenter
    m = Module()
    dut = block(data_width, n_qps, wrs_per_qp, pmtu, max_outstanding)
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
    return m, ports, {"bmc": bmc, "cover": cover}


# -- uN stage (docs/protocol.md 3, 8) -------------------------------------------------------------

def un_stage_harness(data_width=64, table_depth=1, port_width=1, *, bmc=18, cover=18):
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

    Bounded: the first frame's header takes 7 beats at W = 64 and its first beat leaves
    ``H + 4`` = 11 cycles after it entered. Covers: a frame forwarded whole (its ``tlast`` out),
    a frame dropped, an output stall inside a frame.
    """
    from rtl.un_stage import UnStage

    m = Module()
    dut = UnStage(data_width, table_depth, port_width, decision_port=True)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    i = StreamPort(dut.s_axis, "in", "i").elaborate(m)
    o = StreamPort(dut.m_axis, "out", "o").elaborate(m)
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
    # A frame whose last beat is in, or one whose header (the first H beats) is in.
    in_beat = Signal(8, name="i_beat_in_frame")
    with m.If(i.fire):
        m.d.sync += in_beat.eq(Mux(dut.s_axis.p.last, 0, in_beat + 1))
    headers = Signal(8, name="headers_in")
    m.d.comb += headers.eq(i_frames + (in_beat >= dut.header_beats))
    out_mid = Signal(name="o_inside_frame")
    with m.If(o.fire):
        m.d.sync += out_mid.eq(~dut.m_axis.p.last)
    dest = Signal(port_width, name="o_frame_dest")
    with m.If(o.fire & ~out_mid):
        m.d.sync += dest.eq(dut.m_axis.p.dest)
    m.d.comb += [
        Assert((i.taken - o.taken)[:8] <= 128, "beats out never ahead of beats in"),
        Assert((i_frames - o_frames)[:8] <= 128, "frames out never ahead of frames in"),
        Assert((headers - decisions)[:8] <= 128, "a decision per frame header, no more"),
        Assert((fwd - o_frames)[:8] <= 128, "frames out never ahead of forwarded decisions"),
        Assert(~(o.fire & dut.m_axis.p.last) | (o_frames != i_frames),
               "a frame's last beat out only after its last beat in"),
        Assert(~(dut.m_axis.valid & out_mid) | (dut.m_axis.p.dest == dest),
               "tdest constant over a frame"),
    ]
    _covers(m, {
        "frame_forwarded_whole": o.fire & dut.m_axis.p.last,
        "frame_dropped": dut.dec_valid & (dut.dec_reason != 0),
        "output_stalled_inside_frame": dut.m_axis.valid & ~dut.m_axis.ready & out_mid,
    })
    ports = i.free_ports() + o.free_ports() + [dut.cfg_addr, dut.cfg_wdata, dut.cfg_we]
    return m, ports, {"bmc": bmc, "cover": cover}
