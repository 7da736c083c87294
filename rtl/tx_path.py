# SPDX-License-Identifier: BSD-2-Clause
"""Path building and the control-frame path (NIC transmit; docs/protocol.md 1-4.5, 8); golden model
``models/tx_path.py``."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In
from amaranth.utils import ceil_log2

from models import layouts
from models.layouts import (CONTROL_OPCODES, DATA_OPCODES, IMM_OPCODES, IMMDT, METH, RETH, Dscp,
                            Ecn, Opcode)
from models.packets import PMTU_MAX, frame_length
from models.tx_path import COUNTERS, MAX_PLANES, MAX_QPS, NIC_PREFIX, PLANE_PREFIX
from models.usid import DEFAULT_BLOCK, Role
from rtl.common import records
from rtl.common.config import ConfigMap
from rtl.common.headers import pack
from rtl.common.ports import config_members, record_members

__all__ = ["TxPath", "ADDR_WIDTH", "ADDR_OWN_HOST", "ADDR_OWN_T0", "ADDR_BLOCK", "ADDR_QP_ENABLE",
           "ADDR_INFO", "PORT_BASE", "PORT_STRIDE", "QP_BASE", "QP_STRIDE", "OFF_PEER_QPN",
           "OFF_PEER_HOST", "OFF_PEER_PATH", "port_addr", "qp_addr"]

# --- Configuration map (word addresses); see the TxPath docstring --------------------------------

ADDR_WIDTH = 16
ADDR_OWN_HOST = 0x000
ADDR_OWN_T0 = 0x001
ADDR_BLOCK = 0x002
ADDR_QP_ENABLE = 0x008            # 8 words: QPs 32k .. 32k+31 in word k
ADDR_INFO = {"n_qps": 0x0F0, "n_planes": 0x0F1, "max_payload": 0x0F2}
PORT_BASE = 0x040                 # + 4 p: source MAC bits 31..0, 47..32, next hop MAC 31..0, 47..32
PORT_STRIDE = 4
QP_BASE = 0x1000                  # + 4 q: the QP context
QP_STRIDE = 4
OFF_PEER_QPN = 0                  # bits 23..0
OFF_PEER_HOST = 1                 # bits 31..0
OFF_PEER_PATH = 2                 # bits 9..0 peer T0 index, bits 25..16 peer host port
_QP_WORDS = 3


def port_addr(plane, word):
    """The word address of ``word`` (0..3) of plane port ``plane``'s MACs."""
    return PORT_BASE + PORT_STRIDE * plane + word


def qp_addr(qp, offset):
    """The word address of ``offset`` in QP ``qp``'s context."""
    return QP_BASE + QP_STRIDE * qp + offset


_ACKREQ_OPCODES = (Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY,
                   Opcode.WRITE_ONLY_IMM)


class _InnerPort:
    """The configuration port as :class:`ConfigMap` sees it: the block's inputs and a private
    registered read word, merged with the QP context memory's read word into ``cfg_rdata``."""

    def __init__(self, component):
        self.cfg_addr = component.cfg_addr
        self.cfg_wdata = component.cfg_wdata
        self.cfg_we = component.cfg_we
        self.cfg_rdata = Signal(32, name="cfg_rdata_regs")


def _usid(plane, role, index):
    """A 16-bit uSID (docs/protocol.md 3): plane in bits 15..12, role 11..10, index 9..0."""
    return Cat(index, Const(0, 10 - len(index)), Const(role, 2), plane[:4])


class TxPath(wiring.Component):
    """Path building and the control-frame path: each data packet of the segmenter takes a spray
    choice and leaves as a TX_HEADER for the header inserter, a SEND_RECORD for the reliability
    block and a PLANE_FRAME record for the plane splitter; each control record leaves as a
    TX_HEADER and a PLANE_FRAME record on the plane and T1 of its own EV (docs/protocol.md 4.5), ahead of
    data. Record by record equal to :class:`models.tx_path.TxPathModel`, whose docstring fixes the
    header fields and the defined answer to every bad input.

    Parameters
    ----------
    n_qps : 1..256 (default 16)
        QPs with a context; QP q is ``qpn`` q.
    n_planes : 1..8 (default 8)
        Planes N.
    max_payload : 1..4096 (default 4096)
        The header inserter's ``max_payload``: a longer packet is bad input.

    Ports
    -----
    ``s_pkt_tdata/tvalid/tready``: data packets (``TX_PACKET``), their payload going separately
    to the header inserter.
    ``s_ctrl_tdata/tvalid/tready``: control records (``CONTROL_RECORD``).
    ``m_req_tdata/tvalid/tready``, ``s_ans_tdata/tvalid/tready``: spray requests and answers
    (``SPRAY_REQUEST``, ``SPRAY_ANSWER``) to and from ``rtl.spray_scheduler.SprayScheduler``.
    ``plane_ok`` (N bits, in): the planes up with room for a largest frame, given this cycle's
    ``m_frame`` handshake (the plane splitter's ``plane_ok``).
    ``plane_up`` (N bits, in): the planes up (the plane splitter's ``plane_up``).
    ``tick_count`` (32 bits, in): the tick counter, copied into each send record (its value in
    the cycle the packet's records are first presented on ``m_frame``).
    ``m_hdr_tdata/tvalid/tready``: header records (``TX_HEADER``), to the header inserter.
    ``m_send_tdata/tvalid/tready``: one ``SEND_RECORD`` per data packet (``flushed`` = 0).
    ``m_frame_tdata/tvalid/tready``: one ``PLANE_FRAME`` record per frame, to the plane splitter,
    presented in the cycle its header is decided (not registered: the splitter reserves the
    frame's room when it takes it, and ``plane_ok`` follows in the same cycle).
    ``cfg_addr`` (16 bits) ``/cfg_wdata/cfg_we/cfg_rdata``: configuration port (read latency 1,
    unmapped words read 0, counters 32 bits, wrapping, cleared when written).
    ``clk``, ``rst``: the ``sync`` domain.

    Configuration map (word addresses)
    ----------------------------------
    ==================  ====  =================================================================
    0x000               rw    own host id (32 bits): fd00:0:<plane>::<host>, fd00:ffff::<host>
    0x001               rw    own T0 index, bits 9..0
    0x002               rw    locator block (reset 0xfd000200: fd00:0200::/32)
    0x008 + k           rw    QP enable bits 32k+31..32k (reset 0)
    0x010 .. 0x019      cnt   packets_in, data_sent, retries, drop_packet, drop_packet_qp,
                              controls_in, controls_sent, drop_control, drop_control_qp,
                              drop_control_plane (:data:`models.tx_path.COUNTERS`)
    0x040 + 4p + 0..3   rw    plane port p: source MAC bits 31..0, 47..32; next hop MAC bits
                              31..0, 47..32
    0x0f0 .. 0x0f2      ro    n_qps, n_planes, max_payload
    0x1000 + 4q + 0     rw    QP q peer QPN, bits 23..0
    0x1000 + 4q + 1     rw    QP q peer host id
    0x1000 + 4q + 2     rw    QP q peer T0 index bits 9..0, peer host port bits 25..16
    ==================  ====  =================================================================

    The QP contexts live in a memory (not reset); load a QP's context, then set its enable bit.
    A context is read when a packet or control record of the QP is taken: change it only while
    the QP is quiet. A QP must also be enabled in the spray scheduler: a data packet of a QP
    enabled here only is answered ``found`` = 0 again and again (it waits).

    Order and priority
    ------------------
    Data packets keep their order (the payload stream pairs with the headers in the header
    inserter). One spray request is in flight at a time. A packet's request is presented when some
    plane is ok, with ``plane_ok`` as it is in that cycle, less the plane of a control record
    waiting (held until the request is taken: that is the ``room_mask`` of its send record); an
    answer with ``found`` = 0 sends the request again (when some plane is ok). A control record
    waiting goes first: no new request is presented while one waits whose plane is ok (the
    registered ``plane_ok`` of the previous cycle) or down (the splitter flushes it); it leaves
    once no request is presented or in flight and the header register is free. A control record
    of a plane neither ok nor down waits without blocking data to the other planes, and keeps its
    own plane out of the data requests, so the room a frame leaves there is its own: on a plane
    kept busy by data, SACKs and NACKs leave as soon as the frames queued ahead of them let them
    (else data takes every room first, they starve, and the peer's timers fire on healthy paths).

    Latency and throughput
    ----------------------
    A control record: taken in cycle t (context read), its header decided in t+1 at the earliest,
    valid on ``m_hdr`` in t+2. A data packet: its request is presented in the cycle it arrives
    (some plane ok, no control waiting), the answer comes 3 cycles after the request is taken, and
    the header is decided in that cycle (outputs free, ``m_frame`` taken) and valid on ``m_hdr``
    one cycle later. The next packet's request is presented in the answer's cycle, so decisions
    come every 3 cycles back to back: one per shortest frame (138 B) on a core up to 512 bits.
    """

    def __init__(self, n_qps=16, n_planes=8, max_payload=PMTU_MAX):
        def check(name, value, low, high):
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise ValueError(f"TxPath: {name} must be {low}..{high}, not {value!r}")

        check("n_qps", n_qps, 1, MAX_QPS)
        check("n_planes", n_planes, 1, MAX_PLANES)
        check("max_payload", max_payload, 1, PMTU_MAX)
        self.n_qps = n_qps
        self.n_planes = n_planes
        self.max_payload = max_payload
        super().__init__({
            **config_members(ADDR_WIDTH),
            **record_members("s_pkt", records.TX_PACKET, sink=True),
            **record_members("s_ctrl", records.CONTROL_RECORD, sink=True),
            **record_members("m_req", records.SPRAY_REQUEST, sink=False),
            **record_members("s_ans", records.SPRAY_ANSWER, sink=True),
            "plane_ok": In(n_planes),
            "plane_up": In(n_planes),
            "tick_count": In(32),
            **record_members("m_hdr", records.TX_HEADER, sink=False),
            **record_members("m_send", records.SEND_RECORD, sink=False),
            **record_members("m_frame", records.PLANE_FRAME, sink=False),
        })

    def elaborate(self, platform):
        m = Module()
        nq, npl = self.n_qps, self.n_planes
        qb = max(1, ceil_log2(nq))
        plw = max(1, ceil_log2(npl))

        # --- configuration -----------------------------------------------------------------------
        inner = _InnerPort(self)
        cfg = ConfigMap(m, inner, "tx_path")
        own_host = cfg.reg(ADDR_OWN_HOST, "own_host", 32, doc="own host id")
        own_t0 = cfg.reg(ADDR_OWN_T0, "own_t0", 10, doc="own T0 index")
        block = cfg.reg(ADDR_BLOCK, "block", 32, init=DEFAULT_BLOCK, doc="locator block")
        qp_enable = cfg.wide_reg(ADDR_QP_ENABLE, "qp_enable", nq, doc="QP enable bits")
        src_mac, dst_mac = [], []
        for p in range(npl):
            words = [cfg.reg(port_addr(p, w), f"port{p}_word{w}", 32 if w % 2 == 0 else 16)
                     for w in range(4)]
            src_mac.append(Cat(words[0], words[1]))
            dst_mac.append(Cat(words[2], words[3]))
        for name, addr in ADDR_INFO.items():
            cfg.ro(addr, name, Const(getattr(self, name), 32))
        count = {name: Signal(name=f"count_{name}") for name in COUNTERS}
        for name, addr in COUNTERS.items():
            cfg.counter(addr, name, count[name])

        # The QP contexts: three 32-bit words per QP in one memory with 32-bit write lanes.
        m.submodules.ctx_mem = ctx_mem = Memory(shape=32 * _QP_WORDS, depth=nq, init=[])
        ctx_wp = ctx_mem.write_port(granularity=32)
        rp_data = ctx_mem.read_port()          # the context of the packet taken
        rp_ctrl = ctx_mem.read_port()          # the context of the control record taken
        rp_cfg = ctx_mem.read_port()           # configuration read-back
        addr, wdata = self.cfg_addr, self.cfg_wdata
        in_qps = (addr >= QP_BASE) & (addr < QP_BASE + QP_STRIDE * nq)
        c_qp, c_off = (addr - QP_BASE)[2:2 + qb], addr[:2]
        m.d.comb += [
            ctx_wp.addr.eq(c_qp), ctx_wp.data.eq(Cat(wdata, wdata, wdata)),
            ctx_wp.en.eq(Cat(*(self.cfg_we & in_qps & (c_off == w) for w in range(_QP_WORDS)))),
            rp_cfg.addr.eq(c_qp), rp_cfg.en.eq(1),
        ]
        rd_ctx, rd_off = Signal(), Signal(2)
        m.d.sync += [rd_ctx.eq(in_qps & (c_off < _QP_WORDS)), rd_off.eq(c_off)]
        ctx_word = Array(rp_cfg.data.word_select(w, 32) for w in range(_QP_WORDS))[rd_off]
        ctx_cfg_read = Mux(rd_off == OFF_PEER_PATH,
                           ctx_word & (0x3FF | 0x3FF << 16),
                           Mux(rd_off == OFF_PEER_QPN, ctx_word[:24], ctx_word))
        m.d.comb += self.cfg_rdata.eq(Mux(rd_ctx, ctx_cfg_read, inner.cfg_rdata))

        def context(port):
            word = port.data
            return dict(peer_qpn=word[0:24], peer_host=word[32:64], peer_t0=word[64:74],
                        peer_port=word[80:90])

        def enabled(qpn):
            return (qpn < nq) & qp_enable.bit_select(qpn[:qb], 1)

        # --- output registers --------------------------------------------------------------------
        hdr_valid, send_valid = Signal(), Signal()
        m.d.comb += [self.m_hdr.valid.eq(hdr_valid), self.m_send.valid.eq(send_valid)]
        hdr_free = ~hdr_valid | self.m_hdr.ready
        send_free = ~send_valid | self.m_send.ready

        # --- data packets: the request channel ---------------------------------------------------
        pkt, ans = self.s_pkt.p, self.s_ans.p
        held = Signal()                     # a good packet is held (its request taken once)
        d = Signal(records.TX_PACKET)       # the packet held
        d_room = Signal(npl)                # the plane_ok its last request carried
        inflight = Signal()                 # a request is taken, its answer not yet
        need_req = Signal()                 # the held packet needs another request
        presenting = Signal()               # a request is presented, not yet taken
        pres_new = Signal()                 # ... for the packet at s_pkt (else the held one)
        pres_ok = Signal(npl)

        is_data_op = Signal()
        with m.Switch(pkt.opcode):
            with m.Case(*DATA_OPCODES):
                m.d.comb += is_data_op.eq(1)
        pkt_shape_ok = is_data_op & (pkt.length <= self.max_payload)
        pkt_good = pkt_shape_ok & enabled(pkt.qpn)

        ans_found = ans.found
        data_cand = Signal()                # the answer found a slot and the outputs are free
        data_done = Signal()                # ... and its records go out this cycle
        m.d.comb += [
            data_cand.eq(inflight & self.s_ans.valid & ans_found & hdr_free & send_free),
            data_done.eq(data_cand & self.m_frame.ready),
            self.s_ans.ready.eq(inflight & (~ans_found | (data_cand & self.m_frame.ready))),
        ]
        retry_now = inflight & self.s_ans.valid & ~ans_found

        # --- control records ---------------------------------------------------------------------
        ctrl = self.s_ctrl.p
        c_valid = Signal()
        c = Signal(records.CONTROL_RECORD)
        c_plane = c.ev[:4]
        plane_ok_q = Signal(npl)
        m.d.sync += plane_ok_q.eq(self.plane_ok)
        c_op_ok = Signal()
        with m.Switch(c.opcode):
            with m.Case(*CONTROL_OPCODES):
                m.d.comb += c_op_ok.eq(1)
        c_qp_ok = enabled(c.qpn)
        c_plane_ok = c_plane < npl
        c_good = c_op_ok & c_qp_ok & c_plane_ok
        c_room = (plane_ok_q | ~self.plane_up).bit_select(c_plane[:plw], 1)
        ctrl_hold = Signal()                # its plane frame record is presented, not yet taken
        ctrl_wants = c_valid & c_good & (c_room | ctrl_hold)
        ctrl_cand = ctrl_wants & ~presenting & ~inflight & hdr_free
        ctrl_fire = ctrl_cand & self.m_frame.ready
        c_drop = c_valid & ~c_good
        c_done = ctrl_fire | c_drop
        m.d.comb += self.s_ctrl.ready.eq(~c_valid | c_done)
        ctrl_take = self.s_ctrl.valid & self.s_ctrl.ready
        m.d.comb += [rp_ctrl.addr.eq(ctrl.qpn[:qb]), rp_ctrl.en.eq(ctrl_take)]
        with m.If(ctrl_take):
            m.d.sync += [c_valid.eq(1), c.eq(ctrl)]
        with m.Elif(c_done):
            m.d.sync += c_valid.eq(0)
        with m.If(ctrl_cand & ~self.m_frame.ready):
            m.d.sync += ctrl_hold.eq(1)
        with m.Elif(ctrl_fire):
            m.d.sync += ctrl_hold.eq(0)

        # --- requests ----------------------------------------------------------------------------
        # A control record waiting keeps its plane out of the data requests: the room a frame
        # leaves there goes to it, not to the next data packet (else a busy plane starves it).
        ctrl_plane = Signal(npl)
        with m.If(c_valid & c_good):
            m.d.comb += ctrl_plane.eq((Const(1, npl) << c_plane[:plw])[:npl])
        ok_now = Signal(npl)
        m.d.comb += ok_now.eq(self.plane_ok & ~ctrl_plane)
        block_req = ctrl_wants
        free_after = ~held | data_done
        start_new = Signal()
        start_retry = Signal()
        m.d.comb += [
            start_new.eq(~presenting & free_after & self.s_pkt.valid & pkt_good &
                         (ok_now != 0) & ~block_req),
            start_retry.eq(~presenting & held & (need_req | retry_now) & (ok_now != 0) &
                           ~block_req),
        ]
        from_new = Mux(presenting, pres_new, start_new)
        req_ok = Mux(presenting, pres_ok, ok_now)
        req = self.m_req.p
        m.d.comb += [
            self.m_req.valid.eq(presenting | start_new | start_retry),
            req.qpn.eq(Mux(from_new, pkt.qpn, d.qpn)),
            req.plane_ok.eq(req_ok),
            req.avoid_valid.eq(Mux(from_new, pkt.avoid_valid, d.avoid_valid)),
            req.avoid_ev.eq(Mux(from_new, pkt.avoid_ev, d.avoid_ev)),
        ]
        req_fire = self.m_req.valid & self.m_req.ready
        take_new = req_fire & from_new
        m.d.comb += [rp_data.addr.eq(pkt.qpn[:qb]), rp_data.en.eq(take_new)]
        with m.If(req_fire):
            m.d.sync += [presenting.eq(0), inflight.eq(1), need_req.eq(0), d_room.eq(req_ok)]
        with m.Elif(self.m_req.valid):
            m.d.sync += [presenting.eq(1), pres_new.eq(from_new), pres_ok.eq(req_ok)]
        with m.If(self.s_ans.ready & self.s_ans.valid & ~req_fire):
            m.d.sync += inflight.eq(0)
        with m.If(retry_now & ~req_fire):
            m.d.sync += need_req.eq(1)
        with m.If(take_new):
            m.d.sync += [held.eq(1), d.eq(pkt)]
        with m.Elif(data_done):
            m.d.sync += held.eq(0)

        # Bad packets: a drop header (opcode 0, the packet's length) when nothing is held.
        drop_go = ~held & ~presenting & self.s_pkt.valid & ~pkt_good & hdr_free & ~ctrl_fire
        m.d.comb += self.s_pkt.ready.eq(take_new | drop_go)

        # --- path building -----------------------------------------------------------------------
        data_sel = data_cand                 # else the control record
        ev = Mux(data_sel, ans.ev, c.ev)
        plane = ev[:4]
        ctx_d, ctx_c = context(rp_data), context(rp_ctrl)
        ctx = {k: Mux(data_sel, ctx_d[k], ctx_c[k]) for k in ctx_d}
        opcode = Mux(data_sel, d.opcode, c.opcode)
        is_imm = Signal()
        is_last = Signal()
        with m.Switch(d.opcode):
            with m.Case(*IMM_OPCODES):
                m.d.comb += is_imm.eq(1)
        with m.Switch(d.opcode):
            with m.Case(*_ACKREQ_OPCODES):
                m.d.comb += is_last.eq(1)
        probe = c.opcode == Opcode.PROBE
        j = ev[4:12]
        one_t0 = own_t0 == ctx["peer_t0"]
        u_t0_own = _usid(plane, Role.T0, own_t0)
        u_t1 = _usid(plane, Role.T1, j)
        u_t0_peer = _usid(plane, Role.T0, ctx["peer_t0"])
        u_host = _usid(plane, Role.HOST, ctx["peer_port"])
        carrier = Mux(one_t0, Cat(Const(0, 64), u_host, u_t0_own, block),
                      Cat(Const(0, 32), u_host, u_t0_peer, u_t1, u_t0_own, block))
        data_ext = Cat(pack(METH, rqmsn=d.rqmsn, msn=d.msn),
                       pack(RETH, va=d.va, rkey=d.rkey, dma_length=d.dma_length),
                       Mux(is_imm, pack(IMMDT, imm=d.imm), 0))
        # The tick of a data packet: the counter in the cycle its records are first presented
        # (held while m_frame waits, so that the record stays stable).
        frame_hold = Signal()
        tick_held = Signal(32)
        tick = Mux(frame_hold, tick_held, self.tick_count)
        m.d.sync += [frame_hold.eq(data_cand & ~self.m_frame.ready), tick_held.eq(tick)]
        header = Signal(records.TX_HEADER)
        m.d.comb += [
            header.eth_dst.eq(Array(dst_mac)[plane[:plw]]),
            header.eth_src.eq(Array(src_mac)[plane[:plw]]),
            header.dscp.eq(Mux(data_sel, Mux(d.rtx, Dscp.TRIMMABLE_RETX, Dscp.TRIMMABLE),
                               Mux(probe, Dscp.TRIMMABLE, Dscp.CONTROL))),
            header.ecn.eq(Mux(data_sel | probe, Ecn.ECT0, Ecn.NOT_ECT)),
            header.flow_label.eq(ev[:16]),
            header.hop_limit.eq(layouts.HOP_LIMIT_DEFAULT),
            header.outer_src.eq(Cat(own_host, Const(0, 48), plane, Const(0, 28),
                                    Const(PLANE_PREFIX >> 112, 16))),
            header.outer_dst.eq(carrier),
            header.inner_src.eq(Cat(own_host, Const(0, 64), Const(NIC_PREFIX >> 96, 32))),
            header.inner_dst.eq(Cat(ctx["peer_host"], Const(0, 64), Const(NIC_PREFIX >> 96, 32))),
            header.udp_sport.eq(ev[16:]),
            header.opcode.eq(opcode),
            header.dest_qpn.eq(ctx["peer_qpn"]),
            header.ackreq.eq(data_sel & is_last),
            header.rtx.eq(data_sel & d.rtx),
            header.psn.eq(Mux(data_sel, d.psn, 0)),
            header.ext.eq(Mux(data_sel, data_ext, c.ext)),
            header.length.eq(Mux(data_sel, d.length, 0)),
        ]
        send = Signal(records.SEND_RECORD)
        m.d.comb += [
            send.qpn.eq(Mux(data_sel, d.qpn, c.qpn)), send.psn.eq(Mux(data_sel, d.psn, 0)),
            send.ev.eq(ev), send.plane.eq(plane),
            send.slot.eq(Mux(data_sel, ans.slot, 0)),
            send.req_id.eq(Mux(data_sel, d.req_id, 0)),
            send.offset.eq(Mux(data_sel, d.offset, 0)),
            send.length.eq(Mux(data_sel, d.length, 0)),
            send.tick.eq(Mux(data_sel, tick, 0)),
            send.room_mask.eq(Mux(data_sel, d_room, 0)),
            send.rtx.eq(data_sel & d.rtx), send.last.eq(data_sel & is_last),
        ]
        data_bytes = Mux(is_imm, frame_length(Opcode.WRITE_ONLY_IMM, 0),
                         frame_length(Opcode.WRITE_ONLY, 0)) + (((d.length + 3) >> 2) << 2)
        ctrl_bytes = Signal(16)
        with m.Switch(c.opcode):
            for op in CONTROL_OPCODES:
                with m.Case(op):
                    m.d.comb += ctrl_bytes.eq(frame_length(op, 0))
        frame = self.m_frame.p
        m.d.comb += [
            self.m_frame.valid.eq(data_cand | ctrl_cand),
            frame.plane.eq(plane), frame.frame_bytes.eq(Mux(data_sel, data_bytes, ctrl_bytes)),
            frame.data.eq(data_sel), frame.send.eq(send.as_value()),
        ]

        drop_header = Signal(records.TX_HEADER)
        m.d.comb += drop_header.length.eq(pkt.length)
        with m.If(data_done | ctrl_fire):
            m.d.sync += [hdr_valid.eq(1), self.m_hdr.p.eq(header)]
        with m.Elif(drop_go):
            m.d.sync += [hdr_valid.eq(1), self.m_hdr.p.eq(drop_header)]
        with m.Elif(self.m_hdr.ready):
            m.d.sync += hdr_valid.eq(0)
        with m.If(data_done):
            m.d.sync += [send_valid.eq(1), self.m_send.p.eq(send)]
        with m.Elif(self.m_send.ready):
            m.d.sync += send_valid.eq(0)

        # --- counters ----------------------------------------------------------------------------
        m.d.comb += [
            count["packets_in"].eq(take_new | drop_go),
            count["data_sent"].eq(data_done),
            count["retries"].eq(retry_now),
            count["drop_packet"].eq(drop_go & ~pkt_shape_ok),
            count["drop_packet_qp"].eq(drop_go & pkt_shape_ok),
            count["controls_in"].eq(ctrl_take),
            count["controls_sent"].eq(ctrl_fire),
            count["drop_control"].eq(c_drop & ~c_op_ok),
            count["drop_control_qp"].eq(c_drop & c_op_ok & ~c_qp_ok),
            count["drop_control_plane"].eq(c_drop & c_op_ok & c_qp_ok & ~c_plane_ok),
        ]
        cfg.finish()
        return m
