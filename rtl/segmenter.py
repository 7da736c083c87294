# SPDX-License-Identifier: BSD-2-Clause
"""The segmenter with payload fetch (NIC transmit side); golden model ``models/segmenter.py``."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2, exact_log2

from models.layouts import Opcode
from models.records import FrameUser
from models.segmenter import (COUNTERS, INFO, MAX_LENGTH, MAX_PSN_SPAN, PMTUS, QP_CONTEXT,
                              QP_STATUS, QP_STATUS_WORDS)
from rtl.common import records
from rtl.common.axi import axi4_read
from rtl.common.config import ConfigMap
from rtl.common.logic import first_set, wire
from rtl.common.ports import axis_members, check_width, config_members, record_members

__all__ = ["Segmenter", "axi_read_members", "ADDR_WIDTH", "AXI_ADDR_WIDTH", "AXI_ID_WIDTH",
           "MAX_QPS", "MAX_WRS", "BURST_BYTES_MAX"]

ADDR_WIDTH = 16               # configuration port
AXI_ADDR_WIDTH = 64
AXI_ID_WIDTH = 1
MAX_QPS = 256
MAX_WRS = 64
BURST_BYTES_MAX = 4096        # a burst never crosses a 4 KB boundary (AXI4)
_PSN = 24
_RECORD_DEPTH = 8             # TX_PACKET records decided and not yet taken
_FETCH_DEPTH = 8              # packets decided, reads not yet issued
_PIPE = 3                     # decision stages S1..S3 between the choice and the FIFOs
_INCR = 1
_CACHE = 0b0011               # normal, non-cacheable, bufferable
_PROT = 0b010                 # unprivileged, non-secure, data

_WR_ENTRY = data.StructLayout({
    "local_addr": 64, "remote_va": 64, "rkey": 32, "length": 32, "has_imm": 1, "imm": 32,
    "req_id": 16, "msn": 16, "rqmsn": 16, "first_psn": _PSN,
})


def axi_read_members(prefix, data_width, addr_width=AXI_ADDR_WIDTH, id_width=AXI_ID_WIDTH):
    """``{prefix: Out(axi4_read(...))}``: an AXI4 read master (AR and R channels); at the
    Verilog top its signals are ``<prefix>_arid`` etc., as cocotbext-axi's
    ``AxiReadBus.from_prefix(dut, prefix)`` expects."""
    return {prefix: Out(axi4_read(data_width, addr_width, id_width))}


def _before(a, b):
    """``a`` comes before ``b`` in 24-bit serial arithmetic."""
    diff = (b - a)[:_PSN]
    return (diff != 0) & ~diff[_PSN - 1]


def _round_robin(m, vec, start, n, name):
    """``(any, index)`` of the first set bit of ``vec`` at or after ``start``, circularly."""
    vec = wire(m, vec, n, f"{name}_vec")
    upper = Cat(*(vec[i] & (start <= i) for i in range(n)))
    any_upper, idx_upper = first_set(m, upper, n, f"{name}_upper")
    any_all, idx_all = first_set(m, vec, n, f"{name}_all")
    return any_all, wire(m, Mux(any_upper, idx_upper, idx_all), max(1, ceil_log2(n)),
                         f"{name}_index")


class Segmenter(wiring.Component):
    """Cuts RDMA Write work requests into PMTU packets: one TX_PACKET record per packet, then its
    payload read from host memory through an AXI4 read master; holds every request until it is
    retired, so any PSN sent can be rebuilt and fetched again on a retransmit request.

    Record by record and byte by byte equal to :class:`models.segmenter.SegmenterModel`, whose
    docstring fixes every rule (packet fields, METH counters, round-robin service, retransmissions
    first, the PSN limit, and the defined answer to every bad input).

    Parameters
    ----------
    data_width : 64, 128, 256 or 512 (default 512)
        W, the NIC core width: the payload stream and the AXI read data bus.
    n_qps : 1..256 (default 16)
        QPs; QP q is ``qpn`` q.
    wrs_per_qp : 2, 4, .., 64 (default 8)
        Work requests held per QP until retired.
    pmtu : 256, 512, 1024, 2048 or 4096 (default 4096)
    max_outstanding : 2..256 (default 16)
        Packets whose payload reads are issued and not yet delivered (the depth of the queue
        that pairs R beats with packets); enough to cover the memory's read latency in packets.

    Ports
    -----
    ``s_wr_tdata/tvalid/tready``: work requests (:data:`rtl.common.records.WORK_REQUEST`).
    ``s_wr_tready`` drops while the request in the input register waits for room in its QP.
    ``s_retx_tdata/tvalid/tready``: retransmit requests (``RETX_REQUEST``).
    ``s_retire_tdata/tvalid/tready``: retires (``RETIRE``).
    ``s_limit_tdata/tvalid/tready``: PSN limits (``PSN_LIMIT``); always ready.
    ``m_pkt_tdata/tvalid/tready``: one ``TX_PACKET`` record per packet.
    ``m_axis_tdata/tkeep/tlast/tvalid/tready/tuser``: the payloads, in record order, payload bytes
    only: byte 0 in lane 0, ``tkeep`` all ones but on the last beat, ``tlast`` on a packet's last
    beat, ``tuser[0]`` = 1 on the last beat of a packet read with an error. A packet of length 0
    has no beats. The first beat of a packet leaves only after its record was taken on ``m_pkt``.
    ``m_axi_ar*``, ``m_axi_r*``: AXI4 read master (64-bit addresses, ID width 1, ID 0): INCR
    bursts of full-width beats (``arsize`` = log2(W/8)) from the W/8-aligned word holding a
    packet's first byte, cut so that none crosses a 4 KB boundary or exceeds 256 beats; ``rid``
    and ``rlast`` are not used (beats are counted), ``rresp`` != OKAY marks the packet bad.
    ``cfg_addr`` (16 bits) ``/cfg_wdata/cfg_we/cfg_rdata``: configuration port (read latency 1,
    unmapped words read 0, counters 32 bits, wrapping, cleared when written).
    ``clk``, ``rst``: the ``sync`` domain. Reset empties every QP and disables it.

    Configuration map (word addresses)
    ----------------------------------
    ===================  ====  ==============================================================
    0x000 .. 0x00d       cnt   wr_in, wr_drop_qp, wr_drop_shape, retx_in, retx_drop,
                               retire_in, retire_drop, limit_in, limit_drop, packets,
                               rtx_packets, payload_bytes, bad_packets, read_errors
                               (:data:`models.segmenter.COUNTERS`)
    0x010 .. 0x013       ro    data_width, n_qps, wrs_per_qp, pmtu
    0x100 + q            rw    QP q context: bit 31 enable, bits 23..0 start PSN. A write
                               resets the QP: its held requests and waiting retransmission
                               are dropped, next PSN = PSN limit = start PSN, MSN = RQMSN = 0.
                               Write it while the QP is quiet (no packet of it being built).
    0x400 + 4q           ro    QP q next PSN
    0x400 + 4q + 1       ro    QP q PSN limit
    0x400 + 4q + 2       ro    QP q oldest PSN held (first PSN of its oldest request; the next
                               PSN when none is held)
    0x400 + 4q + 3       ro    QP q counts: bits 7..0 requests held, 15..8 requests with
                               unsent packets, bit 16 a retransmission waiting
    ===================  ====  ==============================================================

    Structure
    ---------
    Per QP, in registers (searched per decision): enable, next PSN, the PSN limit, the first PSN
    of the next request (``alloc``) and of the oldest held one, the ring pointers of its request
    table (oldest held, the one being sent, the next free), MSN and RQMSN counters, the end PSN
    of every held request, and one waiting retransmission (slot, PSN, avoided EV, cause).
    In block RAM: the requests (one entry per QP and slot: addresses, R_Key, length, immediate,
    request id, MSN, RQMSN, first PSN) and a copy of the request ids read by retires.

    - Input registers take one record each; a work request is written into its QP's table in
      the cycle after its handshake (or waits, or is dropped), a PSN limit at its handshake.
    - Engine (one operation per cycle, retransmit requests and retires alternating when both
      wait): a retransmit request is checked and located in one cycle (the PSN lies between the
      oldest held PSN and the next PSN; its request is the held one whose end PSN first exceeds
      it: a count of held ends at or below the PSN added to the oldest slot) and becomes its QP's
      waiting retransmission (it waits while one is there); a retire is checked against the
      request id read from block RAM (one cycle) and frees the oldest request.
    - Decision (one per cycle): the QPs with a waiting retransmission, or with an unsent packet
      below the PSN limit, are served round-robin; the chosen QP's retransmission goes first.
      Then three pipeline stages: the request read from block RAM, the packet index, offset,
      length and opcode, then VA and local address; the record enters a record FIFO and, when
      its length is not 0, the packet enters a fetch FIFO (decisions wait while either has no
      room for the packets in flight).
    - Read issue: the fetch FIFO's head is cut into bursts (one AR per cycle) and the packet
      enters the read queue (``max_outstanding`` deep) that pairs R beats with packets.
    - Realignment: R beats are taken one per cycle; output beat j of a packet whose first byte
      sits in lane s is bytes s.. of input beat j followed by bytes ..s-1 of beat j+1 (a byte
      barrel shifter). The input beat of a packet that brings no output byte (the first, always)
      overlaps the last output beat of the packet before, so a packet costs exactly its input
      beats: ``ceil((s + length) / (W/8))`` cycles, one more than its output beats when the
      alignment makes it straddle one more word, none otherwise.

    Latency and throughput
    ----------------------
    One decision per cycle, any mix of QPs, new packets and retransmissions. Retransmit requests
    and retires take the engine one cycle each (a retire two when the one before freed the same
    QP's oldest request; a QP's next retransmit request waits until its previous one was
    decided). Payload: one beat per cycle while the AXI slave delivers one beat per cycle, with no
    bubble between packets, back-to-back work requests included, except the one extra input beat
    of a packet that straddles one more W/8-byte word than it fills (measured on Verilator by
    ``tb/test_segmenter.py`` ``perf``, W = 64 and 512: aligned packets of 64..4096 bytes take
    exactly their beats, packets misaligned by 5 bytes one cycle more, 0-byte packets one cycle
    each). Latency from a work request's handshake (engine idle): its first record valid on
    ``m_pkt`` 7 cycles later; its first payload beat 12 cycles later with cocotbext-axi's
    ``AxiRam`` as memory (a slower memory adds its own read latency).
    """

    def __init__(self, data_width=512, n_qps=16, wrs_per_qp=8, pmtu=4096, max_outstanding=16):
        def check(name, value, ok, what):
            if not isinstance(value, int) or isinstance(value, bool) or not ok(value):
                raise ValueError(f"Segmenter: {name} must be {what}, not {value!r}")

        check_width("Segmenter", data_width)
        check("n_qps", n_qps, lambda v: 1 <= v <= MAX_QPS, f"1..{MAX_QPS}")
        check("wrs_per_qp", wrs_per_qp, lambda v: 2 <= v <= MAX_WRS and not v & (v - 1),
              f"a power of two in 2..{MAX_WRS}")
        check("pmtu", pmtu, lambda v: v in PMTUS, f"one of {PMTUS}")
        check("max_outstanding", max_outstanding, lambda v: 2 <= v <= 256, "2..256")
        self.data_width = data_width
        self.n_qps = n_qps
        self.wrs_per_qp = wrs_per_qp
        self.pmtu = pmtu
        self.max_outstanding = max_outstanding
        super().__init__({
            **config_members(ADDR_WIDTH),
            **record_members("s_wr", records.WORK_REQUEST, sink=True),
            **record_members("s_retx", records.RETX_REQUEST, sink=True),
            **record_members("s_retire", records.RETIRE, sink=True),
            **record_members("s_limit", records.PSN_LIMIT, sink=True),
            **record_members("m_pkt", records.TX_PACKET, sink=False),
            **axis_members("m_axis", data_width, FrameUser.WIDTH, sink=False),
            **axi_read_members("m_axi", data_width),
        })

    def elaborate(self, platform):
        m = Module()
        W, B = self.data_width, self.data_width // 8
        lb = exact_log2(B)
        nq, nw = self.n_qps, self.wrs_per_qp
        qb = max(1, ceil_log2(nq))
        sb = exact_log2(nw)           # slot index
        rb = sb + 1                   # ring pointer (slot and wrap bit)
        lp = exact_log2(self.pmtu)
        len_bits = bits_for(self.pmtu)
        burst_bytes = min(BURST_BYTES_MAX, 256 * B)
        burst_beats = burst_bytes // B
        bbb = exact_log2(burst_beats)
        max_beats = (B - 1 + self.pmtu + B - 1) // B
        beat_bits = bits_for(max_beats)

        def qp_ok(qpn, enables):
            return (qpn < nq) & Array(enables)[qpn[:qb]]

        # ---------------------------------------------------------------- per-QP state
        def per_qp(name, width, **kw):
            return [Signal(width, name=f"{name}_{i}", **kw) for i in range(nq)]

        next_psn, alloc, limit, oldest = (per_qp(n, _PSN) for n in
                                          ("next_psn", "alloc_psn", "psn_limit", "oldest_psn"))
        head, cur, tail = (per_qp(n, rb) for n in ("head", "cur", "tail"))
        msn, rqmsn = per_qp("msn", 16), per_qp("rqmsn", 16)
        ends = [[Signal(_PSN, name=f"end_psn_{i}_{k}") for k in range(nw)] for i in range(nq)]
        pend = per_qp("retx_waiting", 1)
        pend_slot, pend_psn = per_qp("retx_slot", sb), per_qp("retx_psn", _PSN)
        pend_avoid, pend_cause = per_qp("retx_avoid_ev", 32), per_qp("retx_cause", 3)

        m.submodules.wr_mem = wr_mem = Memory(shape=_WR_ENTRY, depth=nq * nw, init=[])
        wr_write = wr_mem.write_port()
        wr_read = wr_mem.read_port()
        m.submodules.id_mem = id_mem = Memory(shape=16, depth=nq * nw, init=[])
        id_write = id_mem.write_port()
        id_read = id_mem.read_port()

        # ---------------------------------------------------------------- configuration
        cfg = ConfigMap(m, self, "seg")
        ctx = [cfg.reg(QP_CONTEXT + i, f"qp{i}_context", 32,
                       doc=f"QP {i}: bit 31 enable, bits 23..0 start PSN") for i in range(nq)]
        enable = [c[31] for c in ctx]
        restart = [cfg.write_strobe(QP_CONTEXT + i) for i in range(nq)]
        events = {name: Signal(32 if name == "payload_bytes" else 1, name=f"event_{name}")
                  for name in COUNTERS}
        for name, addr in COUNTERS.items():
            cfg.counter(addr, name, events[name])
        for name, value in (("data_width", W), ("n_qps", nq), ("wrs_per_qp", nw),
                            ("pmtu", self.pmtu)):
            cfg.ro(INFO[name], name, Const(value, 32))
        for i in range(nq):
            base = QP_STATUS + 4 * i
            held = (tail[i] - head[i])[:rb]
            unsent = (tail[i] - cur[i])[:rb]
            for word, value in (("next_psn", next_psn[i]), ("psn_limit", limit[i]),
                                ("oldest_psn", oldest[i]),
                                ("counts", Cat(held, Const(0, 8 - rb), unsent,
                                               Const(0, 8 - rb), pend[i]))):
                cfg.ro(base + QP_STATUS_WORDS[word], f"qp{i}_{word}", value)
        cfg.finish()

        # ---------------------------------------------------------------- work requests
        w_valid, w_done = Signal(), Signal()
        w = Signal(records.WORK_REQUEST)
        m.d.comb += self.s_wr.ready.eq(~w_valid | w_done)
        with m.If(self.s_wr.valid & self.s_wr.ready):
            m.d.sync += [w_valid.eq(1), w.eq(self.s_wr.p)]
        with m.Elif(w_done):
            m.d.sync += w_valid.eq(0)

        wq = w.qpn[:qb]
        w_qp_ok = wire(m, qp_ok(w.qpn, enable), 1, "wr_qp_ok")
        local_end = wire(m, w.local_addr + w.length, 65, "wr_local_end")
        remote_end = wire(m, w.remote_va + w.length, 65, "wr_remote_end")
        w_shape_ok = wire(m, (w.length <= MAX_LENGTH) &
                          ~(local_end[64] & (local_end[:64] != 0)) &
                          ~(remote_end[64] & (remote_end[:64] != 0)), 1, "wr_shape_ok")
        w_packets = wire(m, Mux(w.length == 0, 1, (w.length + self.pmtu - 1) >> lp), _PSN + 1,
                         "wr_packets")
        w_head, w_tail = Array(head)[wq], Array(tail)[wq]
        w_alloc, w_oldest = Array(alloc)[wq], Array(oldest)[wq]
        w_full = wire(m, (w_tail - w_head)[:rb] == nw, 1, "wr_full")
        w_span = wire(m, (w_alloc - w_oldest)[:_PSN] + w_packets, _PSN + 2, "wr_span")
        w_accept, w_drop_qp, w_drop_shape = Signal(), Signal(), Signal()
        m.d.comb += [
            w_drop_qp.eq(w_valid & ~w_qp_ok),
            w_drop_shape.eq(w_valid & w_qp_ok & ~w_shape_ok),
            w_accept.eq(w_valid & w_qp_ok & w_shape_ok & ~w_full & (w_span <= MAX_PSN_SPAN)),
            w_done.eq(w_accept | w_drop_qp | w_drop_shape),
        ]
        w_addr = Cat(w_tail[:sb], wq)
        w_msn, w_rqmsn = Array(msn)[wq], Array(rqmsn)[wq]
        m.d.comb += [
            wr_write.addr.eq(w_addr), wr_write.en.eq(w_accept),
            wr_write.data.local_addr.eq(w.local_addr), wr_write.data.remote_va.eq(w.remote_va),
            wr_write.data.rkey.eq(w.rkey), wr_write.data.length.eq(w.length),
            wr_write.data.has_imm.eq(w.has_imm), wr_write.data.imm.eq(w.imm),
            wr_write.data.req_id.eq(w.req_id), wr_write.data.msn.eq(w_msn),
            wr_write.data.rqmsn.eq(Mux(w.has_imm, w_rqmsn, 0)),
            wr_write.data.first_psn.eq(w_alloc),
            id_write.addr.eq(w_addr), id_write.en.eq(w_accept), id_write.data.eq(w.req_id),
        ]
        w_end = wire(m, w_alloc + w_packets, _PSN, "wr_end_psn")

        # ---------------------------------------------------------------- PSN limits
        m.d.comb += self.s_limit.ready.eq(1)
        lim = self.s_limit.p
        l_ok = wire(m, qp_ok(lim.qpn, enable), 1, "limit_qp_ok")
        l_take = self.s_limit.valid & l_ok

        # ---------------------------------------------------------------- engine
        x_valid, x_done = Signal(), Signal()
        x = Signal(records.RETX_REQUEST)
        m.d.comb += self.s_retx.ready.eq(~x_valid | x_done)
        with m.If(self.s_retx.valid & self.s_retx.ready):
            m.d.sync += [x_valid.eq(1), x.eq(self.s_retx.p)]
        with m.Elif(x_done):
            m.d.sync += x_valid.eq(0)
        t_valid, t_done = Signal(), Signal()
        t = Signal(records.RETIRE)
        m.d.comb += self.s_retire.ready.eq(~t_valid | t_done)
        with m.If(self.s_retire.valid & self.s_retire.ready):
            m.d.sync += [t_valid.eq(1), t.eq(self.s_retire.p)]
        with m.Elif(t_done):
            m.d.sync += t_valid.eq(0)

        # Retransmit request: checked and located from the QP's registers in one cycle.
        xq = x.qpn[:qb]
        x_oldest, x_head, x_tail = Array(oldest)[xq], Array(head)[xq], Array(tail)[xq]
        x_pos = wire(m, (x.psn - x_oldest)[:_PSN], _PSN, "retx_position")
        x_sent = wire(m, (Array(next_psn)[xq] - x_oldest)[:_PSN], _PSN, "retx_sent")
        x_held_count = wire(m, (x_tail - x_head)[:rb], rb, "retx_held")
        x_ends = wire(m, Array(Cat(*row) for row in ends)[xq], nw * _PSN, "retx_ends")
        passed = []          # held requests that end at or before the PSN
        for k in range(nw):
            held_k = (Const(k, sb) - x_head[:sb])[:sb] < x_held_count
            end_k = (x_ends.word_select(k, _PSN) - x_oldest)[:_PSN]
            passed.append(wire(m, held_k & (end_k <= x_pos), 1, f"retx_passed_{k}"))
        x_slot = wire(m, (x_head[:sb] + sum(passed))[:sb], sb, "retx_slot")
        x_ok = wire(m, qp_ok(x.qpn, enable) & (x_pos < x_sent), 1, "retx_ok")
        x_waiting = Array(pend)[xq]

        # Retire: the request id of the QP's oldest slot, read in the cycle before the check
        # (from the handshake on); checked once the address read is still the QP's oldest slot.
        tq = t.qpn[:qb]
        t_head, t_cur, t_tail = Array(head)[tq], Array(cur)[tq], Array(tail)[tq]
        t_addr = Cat(t_head[:sb], tq)
        t_in = self.s_retire.valid & self.s_retire.ready
        read_q = wire(m, Mux(t_in, self.s_retire.p.qpn[:qb], tq), qb, "retire_read_qp")
        t_addr_read = Signal(len(t_addr))
        m.d.comb += [id_read.addr.eq(Cat(Array(head)[read_q][:sb], read_q)), id_read.en.eq(1)]
        m.d.sync += t_addr_read.eq(id_read.addr)
        t_ready = t_valid & (t_addr_read == t_addr)
        t_ok = wire(m, qp_ok(t.qpn, enable) & (t_head != t_tail) & (t_head != t_cur) &
                    (id_read.data == t.req_id), 1, "retire_ok")
        t_waiting = Array(pend)[tq]

        turn = Signal()         # 1: the retire goes first when both wait
        x_go = wire(m, x_valid & (~t_ready | ~turn), 1, "engine_retx")
        t_go = wire(m, t_ready & (~x_valid | turn), 1, "engine_retire")
        with m.If(x_go):
            m.d.sync += turn.eq(1)
        with m.Elif(t_go):
            m.d.sync += turn.eq(0)
        x_set, t_free = Signal(), Signal()
        m.d.comb += [
            x_set.eq(x_go & x_ok & ~x_waiting),
            x_done.eq(x_go & (~x_ok | ~x_waiting)),
            t_free.eq(t_go & t_ok & ~t_waiting),
            t_done.eq(t_go & (~t_ok | ~t_waiting)),
        ]

        # ---------------------------------------------------------------- decision
        m.submodules.rec_fifo = rec_fifo = SyncFIFOBuffered(width=records.TX_PACKET.size,
                                                            depth=_RECORD_DEPTH)
        m.submodules.fetch_fifo = fetch_fifo = SyncFIFOBuffered(width=64 + len_bits,
                                                                depth=_FETCH_DEPTH)
        s1_valid, s2_valid, s3_valid = Signal(), Signal(), Signal()
        in_flight = s1_valid + s2_valid + s3_valid
        room = wire(m, (rec_fifo.level + in_flight < _RECORD_DEPTH) &
                    (fetch_fifo.level + in_flight < _FETCH_DEPTH), 1, "decide_room")
        ready = [pend[i] | (enable[i] & (next_psn[i] != alloc[i]) &
                            _before(next_psn[i], limit[i])) for i in range(nq)]
        pointer = Signal(qb)
        any_ready, dq = _round_robin(m, Cat(*ready), pointer, nq, "serve")
        d_fire = wire(m, any_ready & room, 1, "decide")
        d_rtx = wire(m, Array(pend)[dq], 1, "decide_rtx")
        d_next, d_cur = Array(next_psn)[dq], Array(cur)[dq]
        cur_end = [Array(ends[i])[cur[i][:sb]] for i in range(nq)]
        d_last = wire(m, (d_next + 1)[:_PSN] == Array(cur_end)[dq], 1, "decide_last")
        with m.If(d_fire):
            m.d.sync += pointer.eq(Mux(dq == nq - 1, 0, dq + 1))

        s1_q, s1_slot, s1_psn = Signal(qb), Signal(sb), Signal(_PSN)
        s1_rtx, s1_avoid, s1_cause = Signal(), Signal(32), Signal(3)
        m.d.sync += s1_valid.eq(d_fire)
        with m.If(d_fire):
            m.d.sync += [
                s1_q.eq(dq), s1_rtx.eq(d_rtx),
                s1_slot.eq(Mux(d_rtx, Array(pend_slot)[dq], d_cur[:sb])),
                s1_psn.eq(Mux(d_rtx, Array(pend_psn)[dq], d_next)),
                s1_avoid.eq(Mux(d_rtx, Array(pend_avoid)[dq], 0)),
                s1_cause.eq(Mux(d_rtx, Array(pend_cause)[dq], 0)),
            ]

        # ---------------------------------------------------------------- per-QP updates
        for i in range(nq):
            mine_d = d_fire & (dq == i)
            with m.If(mine_d & ~d_rtx):
                m.d.sync += next_psn[i].eq(next_psn[i] + 1)
                with m.If(d_last):
                    m.d.sync += cur[i].eq(cur[i] + 1)
            with m.If(w_accept & (wq == i)):
                m.d.sync += [
                    alloc[i].eq(w_end), tail[i].eq(tail[i] + 1), msn[i].eq(msn[i] + 1),
                    rqmsn[i].eq(rqmsn[i] + w.has_imm),
                    Array(ends[i])[tail[i][:sb]].eq(w_end),
                ]
            with m.If(l_take & (lim.qpn[:qb] == i)):
                m.d.sync += limit[i].eq(lim.psn_limit)
            with m.If(mine_d & d_rtx):
                m.d.sync += pend[i].eq(0)
            with m.If(x_set & (xq == i)):
                m.d.sync += [pend[i].eq(1), pend_slot[i].eq(x_slot), pend_psn[i].eq(x.psn),
                             pend_avoid[i].eq(x.avoid_ev), pend_cause[i].eq(x.cause)]
            with m.If(t_free & (tq == i)):
                m.d.sync += [head[i].eq(head[i] + 1),
                             oldest[i].eq(Array(ends[i])[head[i][:sb]])]
            with m.If(restart[i]):
                start = self.cfg_wdata[:_PSN]
                m.d.sync += [next_psn[i].eq(start), alloc[i].eq(start), limit[i].eq(start),
                             oldest[i].eq(start), head[i].eq(0), cur[i].eq(0), tail[i].eq(0),
                             msn[i].eq(0), rqmsn[i].eq(0), pend[i].eq(0)]

        # ---------------------------------------------------------------- build pipeline
        # S1: read the request.
        m.d.comb += [wr_read.addr.eq(Cat(s1_slot, s1_q)), wr_read.en.eq(1)]
        s2_q, s2_psn = Signal(qb), Signal(_PSN)
        s2_rtx, s2_avoid, s2_cause = Signal(), Signal(32), Signal(3)
        m.d.sync += [s2_valid.eq(s1_valid), s2_q.eq(s1_q), s2_psn.eq(s1_psn), s2_rtx.eq(s1_rtx),
                     s2_avoid.eq(s1_avoid), s2_cause.eq(s1_cause)]

        # S2: packet index, offset, length, opcode.
        e = wr_read.data
        index = wire(m, (s2_psn - e.first_psn)[:_PSN], _PSN, "packet_index")
        offset = wire(m, (index << lp)[:32], 32, "packet_offset")
        rest = wire(m, (e.length - offset)[:32], 32, "packet_rest")
        last = wire(m, rest <= self.pmtu, 1, "packet_last")
        first = index == 0
        opcode = Signal(8)
        with m.If(first & last):
            m.d.comb += opcode.eq(Mux(e.has_imm, Opcode.WRITE_ONLY_IMM, Opcode.WRITE_ONLY))
        with m.Elif(first):
            m.d.comb += opcode.eq(Opcode.WRITE_FIRST)
        with m.Elif(last):
            m.d.comb += opcode.eq(Mux(e.has_imm, Opcode.WRITE_LAST_IMM, Opcode.WRITE_LAST))
        with m.Else():
            m.d.comb += opcode.eq(Opcode.WRITE_MIDDLE)
        s3 = Signal(records.TX_PACKET)
        s3_local, s3_remote = Signal(64), Signal(64)
        m.d.sync += [
            s3_valid.eq(s2_valid),
            s3.qpn.eq(s2_q), s3.psn.eq(s2_psn), s3.opcode.eq(opcode), s3.ackreq.eq(last),
            s3.rtx.eq(s2_rtx), s3.rqmsn.eq(e.rqmsn), s3.msn.eq(e.msn), s3.rkey.eq(e.rkey),
            s3.dma_length.eq(e.length), s3.imm.eq(Mux(last & e.has_imm, e.imm, 0)),
            s3.req_id.eq(e.req_id), s3.offset.eq(offset),
            s3.length.eq(Mux(last, rest, self.pmtu)),
            s3.avoid_valid.eq(s2_rtx), s3.avoid_ev.eq(s2_avoid), s3.cause.eq(s2_cause),
            s3_local.eq(e.local_addr), s3_remote.eq(e.remote_va),
        ]

        # S3: addresses; into the record and fetch FIFOs.
        rec_out = Signal(records.TX_PACKET)
        local = wire(m, s3_local + s3.offset, 64, "packet_local_addr")
        m.d.comb += [
            rec_out.eq(s3), rec_out.va.eq(s3_remote + s3.offset),
            rec_fifo.w_data.eq(rec_out), rec_fifo.w_en.eq(s3_valid),
            fetch_fifo.w_data.eq(Cat(local, s3.length[:len_bits])),
            fetch_fifo.w_en.eq(s3_valid & (s3.length != 0)),
        ]

        # ---------------------------------------------------------------- records out
        pkt = Signal(records.TX_PACKET)
        m.d.comb += [
            pkt.eq(rec_fifo.r_data),
            self.m_pkt.p.eq(pkt), self.m_pkt.valid.eq(rec_fifo.r_rdy),
            rec_fifo.r_en.eq(self.m_pkt.ready),
        ]
        pkt_fire = self.m_pkt.valid & self.m_pkt.ready

        # ---------------------------------------------------------------- read issue
        entry_layout = data.StructLayout({"shift": lb, "beats_in": beat_bits,
                                          "beats_out": beat_bits, "last_bytes": lb + 1})
        m.submodules.read_queue = read_queue = SyncFIFOBuffered(width=entry_layout.size,
                                                                depth=self.max_outstanding)
        f_addr, f_len = fetch_fifo.r_data[:64], fetch_fifo.r_data[64:]
        f_shift = f_addr[:lb]
        entry = Signal(entry_layout)
        m.d.comb += [
            entry.shift.eq(f_shift),
            entry.beats_in.eq((f_shift + f_len + B - 1) >> lb),
            entry.beats_out.eq((f_len + B - 1) >> lb),
            entry.last_bytes.eq((f_len - 1)[:lb] + 1),
            read_queue.w_data.eq(entry),
        ]
        ar_busy = Signal()
        ar_word = Signal(64 - lb)
        ar_left = Signal(beat_bits)
        ar_room = wire(m, burst_beats - ar_word[:bbb], bbb + 1, "ar_room")
        ar_beats = wire(m, Mux(ar_left < ar_room, ar_left, ar_room), bbb + 1, "ar_beats")
        ar_fire = self.m_axi.arvalid & self.m_axi.arready
        ar_end = ar_fire & (ar_left == ar_beats)
        load = wire(m, fetch_fifo.r_rdy & read_queue.w_rdy & (~ar_busy | ar_end), 1, "ar_load")
        m.d.comb += [
            fetch_fifo.r_en.eq(load), read_queue.w_en.eq(load),
            self.m_axi.arvalid.eq(ar_busy),
            self.m_axi.araddr.eq(Cat(Const(0, lb), ar_word)),
            self.m_axi.arlen.eq(ar_beats - 1),
            self.m_axi.arsize.eq(lb), self.m_axi.arburst.eq(_INCR),
            self.m_axi.arid.eq(0), self.m_axi.arlock.eq(0),
            self.m_axi.arcache.eq(_CACHE), self.m_axi.arprot.eq(_PROT),
        ]
        with m.If(ar_fire):
            m.d.sync += [ar_word.eq(ar_word + ar_beats), ar_left.eq(ar_left - ar_beats)]
            with m.If(ar_end):
                m.d.sync += ar_busy.eq(0)
        with m.If(load):
            m.d.sync += [ar_busy.eq(1), ar_word.eq(f_addr[lb:]), ar_left.eq(entry.beats_in)]

        # ---------------------------------------------------------------- realignment
        head_entry = Signal(entry_layout)
        m.d.comb += head_entry.eq(read_queue.r_data)
        # Records taken on m_pkt whose (non-empty) payload has not started.
        ahead = Signal(range(_FETCH_DEPTH + self.max_outstanding + _RECORD_DEPTH + 2))
        active, flush, bad = Signal(), Signal(), Signal()
        shift = Signal(lb)
        in_left, out_left = Signal(beat_bits), Signal(beat_bits)
        last_bytes = Signal(lb + 1)
        hold = Signal(W)
        o_valid, o_last, o_user = Signal(), Signal(), Signal()
        o_data, o_keep = Signal(W), Signal(B)
        o_bytes = Signal(lb + 1)

        ce_out = ~o_valid | self.m_axis.ready
        can_start = wire(m, ~active & read_queue.r_rdy & (ahead != 0) & (~flush | ce_out), 1,
                         "can_start")
        take_mid = active & ce_out
        m.d.comb += self.m_axi.rready.eq(take_mid | can_start)
        r_valid = self.m_axi.rvalid
        start = wire(m, can_start & r_valid, 1, "packet_start")
        mid = wire(m, take_mid & r_valid, 1, "packet_beat")
        emit_flush = wire(m, flush & ce_out, 1, "packet_flush")
        error = self.m_axi.rresp != 0
        shifted = wire(m, Cat(hold, self.m_axi.rdata).bit_select(Cat(Const(0, 3), shift), W),
                       W, "realigned")
        last_keep = Cat(*(last_bytes > lane for lane in range(B)))
        m.d.comb += read_queue.r_en.eq(start)

        with m.If(ce_out):
            m.d.sync += o_valid.eq(mid | emit_flush)
        with m.If(mid):
            final = out_left == 1
            m.d.sync += [
                o_data.eq(shifted), o_last.eq(final),
                o_keep.eq(Mux(final, last_keep, (1 << B) - 1)),
                o_user.eq(final & (bad | error)), o_bytes.eq(Mux(final, last_bytes, B)),
                hold.eq(self.m_axi.rdata), in_left.eq(in_left - 1), out_left.eq(out_left - 1),
                bad.eq(bad | error),
            ]
            with m.If(in_left == 1):
                m.d.sync += [active.eq(0), flush.eq(~final)]
        with m.Elif(emit_flush):
            m.d.sync += [o_data.eq(shifted), o_last.eq(1), o_keep.eq(last_keep),
                         o_user.eq(bad), o_bytes.eq(last_bytes), flush.eq(0)]
        with m.If(start):
            m.d.sync += [
                hold.eq(self.m_axi.rdata), shift.eq(head_entry.shift),
                last_bytes.eq(head_entry.last_bytes), in_left.eq(head_entry.beats_in - 1),
                out_left.eq(head_entry.beats_out), bad.eq(error),
                active.eq(head_entry.beats_in != 1), flush.eq(head_entry.beats_in == 1),
            ]
        pkt_payload = pkt_fire & (pkt.length != 0)
        m.d.sync += ahead.eq(ahead + pkt_payload - start)

        m.d.comb += [
            self.m_axis.valid.eq(o_valid), self.m_axis.p.data.eq(o_data),
            self.m_axis.p.keep.eq(o_keep), self.m_axis.p.last.eq(o_last),
            self.m_axis.p.user.eq(o_user),
        ]
        out_fire = o_valid & self.m_axis.ready

        # ---------------------------------------------------------------- counters
        m.d.comb += [
            events["wr_in"].eq(w_accept), events["wr_drop_qp"].eq(w_drop_qp),
            events["wr_drop_shape"].eq(w_drop_shape),
            events["retx_in"].eq(x_set), events["retx_drop"].eq(x_go & ~x_ok),
            events["retire_in"].eq(t_free), events["retire_drop"].eq(t_go & ~t_ok),
            events["limit_in"].eq(l_take),
            events["limit_drop"].eq(self.s_limit.valid & ~l_ok),
            events["packets"].eq(pkt_fire), events["rtx_packets"].eq(pkt_fire & pkt.rtx),
            events["payload_bytes"].eq(Mux(out_fire, o_bytes, 0)),
            events["bad_packets"].eq(out_fire & o_last & o_user),
            events["read_errors"].eq(self.m_axi.rvalid & self.m_axi.rready & error),
        ]
        return m
