# SPDX-License-Identifier: BSD-2-Clause
"""Path building and the control-frame path (NIC transmit; docs/protocol.md 1-4.5, 8); golden model
``models/tx_path.py``."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In
from amaranth.utils import ceil_log2

from models import layouts
from models.layouts import (CONTROL_OPCODES, DATA_OPCODES, IMM_OPCODES, IMMDT, METH, RETH, Dscp,
                            Ecn, Opcode)
from models.packets import PMTU_MAX, frame_length
from models.records import TX_HEADER as _TX_HEADER_LAYOUT
from models.tx_path import COUNTERS, MAX_PLANES, MAX_QPS, NIC_PREFIX, PLANE_PREFIX
from models.usid import DEFAULT_BLOCK, Role
from rtl.common import records
from rtl.common.config import ConfigMap
from rtl.common.headers import pack
from rtl.common.logic import wire
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
_FANOUT = 48                      # bits per copy of a wide register's enable and select
_PATH_FANOUT = 16                 # ... and per copy of the plane, for the path fields


def port_addr(plane, word):
    """The word address of ``word`` (0..3) of plane port ``plane``'s MACs."""
    return PORT_BASE + PORT_STRIDE * plane + word


def qp_addr(qp, offset):
    """The word address of ``offset`` in QP ``qp``'s context."""
    return QP_BASE + QP_STRIDE * qp + offset


TX_HEADER_NAMES = _TX_HEADER_LAYOUT.names

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
    to the header inserter. ``s_pkt_tready`` is the inverse of a register (high while the input
    register is empty).
    ``s_ctrl_tdata/tvalid/tready``: control records (``CONTROL_RECORD``). ``s_ctrl_tready`` is the
    inverse of a register (high while the control register is empty).
    ``m_req_tdata/tvalid/tready``, ``s_ans_tdata/tvalid/tready``: spray requests and answers
    (``SPRAY_REQUEST``, ``SPRAY_ANSWER``) to and from ``rtl.spray_scheduler.SprayScheduler``.
    ``s_ans_tready`` depends on registers and ``s_ans_tdata.found`` only. ``m_req`` is the one
    output not taken straight from registers: a request is presented in the cycle it is decided
    (from registers, ``plane_ok`` and, for the next packet's request in an answer's cycle,
    ``s_ans_tvalid`` and ``found``), and held, valid and payload, until taken. No ready
    depends on another port's ready.
    ``plane_ok`` (N bits, in): the planes up with room for a largest frame (the plane splitter's
    ``plane_ok``).
    ``plane_up`` (N bits, in): the planes up (the plane splitter's ``plane_up``).
    ``tick_count`` (32 bits, in): the tick counter, copied into each send record (its value in
    the cycle the packet's answer is taken, the decision).
    ``m_hdr_tdata/tvalid/tready``: header records (``TX_HEADER``), to the header inserter.
    ``m_send_tdata/tvalid/tready``: one ``SEND_RECORD`` per data packet (``flushed`` = 0).
    ``m_frame_tdata/tvalid/tready``: one ``PLANE_FRAME`` record per frame, to the plane splitter
    (which reserves the frame's room when it takes it). Valid and payload are registers, held
    until taken; a frame's header (and, for a data frame, its send record) becomes valid on
    ``m_hdr`` (``m_send``) in the cycle after its plane frame record is taken, so the header
    inserter never starts a frame whose room is not reserved.
    ``cfg_addr`` (16 bits) ``/cfg_wdata/cfg_we/cfg_rdata``: configuration port (read latency 1,
    unmapped words read 0, counters 32 bits, wrapping, cleared when written; a count shows one
    cycle after its event).
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
    A packet's or control record's enable bit is read when it is taken into the block, its
    context when its request is first taken (a packet) or when it is taken (a control record):
    change them only while the QP is quiet. A QP must also be enabled in the spray scheduler: a
    data packet of a QP enabled here only is answered ``found`` = 0 again and again (it waits).

    Order and priority
    ------------------
    Data packets keep their order (the payload stream pairs with the headers in the header
    inserter). One spray request is in flight at a time. A packet's request is presented when some
    plane is ok, with ``plane_ok`` as it is in that cycle, less the plane of a control record
    waiting (held until the request is taken: that is the ``room_mask`` of its send record); an
    answer with ``found`` = 0 sends the request again (when some plane is ok). A control record
    waiting goes first: no new request is presented while one waits whose plane is ok or down
    (``plane_ok`` and ``plane_up`` registered, of the previous cycle: the splitter flushes a
    record of a plane down); it leaves once no request is presented or in flight and the output
    registers are empty, and none was presented or in flight in the cycle before either (but
    when it was taken with no packet in the input register or held). A control record of a
    plane neither ok nor down waits without blocking data to the other planes, and keeps its
    own plane out of the data requests, so the room a frame leaves there is its own: on a plane
    kept busy by data, SACKs and NACKs leave as soon as the frames queued ahead of them let them
    (else data takes every room first, they starve, and the peer's timers fire on healthy
    paths).

    Latency and throughput
    ----------------------
    Every output but ``m_req`` comes from registers, and every ready from registers (and
    ``s_ans_tready`` from ``found``). A packet is taken into the input register in cycle t (when
    it is empty); its request is presented in t+1 at the earliest (some plane ok, no control
    waiting), the answer comes 3 cycles after the
    request is taken, and the frame is decided in that cycle when the output registers are empty
    (``m_frame``, ``m_hdr``, ``m_send``): its plane frame record is valid on ``m_frame`` one cycle
    later, its header and send record one cycle after the record is taken. The next packet's
    request is presented in the answer's cycle, so decisions come every 3 cycles back to back
    with every output ready: one per shortest frame (138 B) on a core up to 512 bits. A control
    record: taken in cycle t (context read), decided in t+1 at the earliest, its plane frame
    record valid in t+2 and its header in t+3 (when ``m_frame`` takes it at once). A control
    record that waits for the request channel (a request presented or in flight, or a packet in
    the input register or held when it was taken) or for its plane is decided one cycle after
    the cycle it could go in: the decision is the register ``ctrl_armed`` (set when the record
    wanted to go with the request channel idle, see above), one cycle later than before
    [tx-speed] in those cases; data packets' latency is unchanged. A bad packet's
    drop header is written when nothing is held, no frame or header is in the registers and
    no control record wants to go, and is valid two cycles after that; one drop every 3 cycles
    at most.
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
            cfg.counter(addr, name, count[name], registered=True)

        # The QP contexts: three 32-bit words per QP in one memory with 32-bit write lanes.
        m.submodules.ctx_mem = ctx_mem = Memory(shape=32 * _QP_WORDS, depth=nq, init=[])
        ctx_wp = ctx_mem.write_port(granularity=32)
        rp_data = ctx_mem.read_port()          # the context of the packet held
        rp_ctrl = ctx_mem.read_port()          # the context of the control record held
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
        # m_frame: valid and record in registers, held until taken. A frame is decided (the
        # record loaded, the header and send record written into their registers beside it) only
        # while all three registers are empty, so that nothing but the record's own handshake
        # can follow: its header and send record become valid when it is taken, and nothing is
        # ever withdrawn. Every condition below is a register: no ready passes through.
        frame_valid, hdr_valid, send_valid = Signal(), Signal(), Signal()
        frame = self.m_frame.p
        frame_take = frame_valid & self.m_frame.ready
        m.d.comb += [
            self.m_frame.valid.eq(frame_valid),
            self.m_hdr.valid.eq(hdr_valid),
            self.m_send.valid.eq(send_valid),
            # The send record is the plane frame record's: m_frame is not loaded again before
            # the send record is taken.
            self.m_send.p.eq(frame.send),
        ]
        outputs_empty = Signal()
        m.d.comb += outputs_empty.eq(~frame_valid & ~hdr_valid & ~send_valid)

        # --- data packets: the input register ----------------------------------------------------
        pkt, ans = self.s_pkt.p, self.s_ans.p
        p_valid = Signal()                  # a packet waits in the input register
        p = Signal(records.TX_PACKET)
        p_shape_ok = Signal()               # judged when it was taken
        p_good = Signal()
        p_bytes = Signal(16)                # its frame length
        is_data_op = Signal()
        with m.Switch(pkt.opcode):
            with m.Case(*DATA_OPCODES):
                m.d.comb += is_data_op.eq(1)
        in_imm = Signal()
        with m.Switch(pkt.opcode):
            with m.Case(*IMM_OPCODES):
                m.d.comb += in_imm.eq(1)
        pkt_shape_ok = is_data_op & (pkt.length <= self.max_payload)
        pkt_take = self.s_pkt.valid & ~p_valid
        m.d.comb += self.s_pkt.ready.eq(~p_valid)
        p_leave = Signal()
        with m.If(pkt_take):
            m.d.sync += [
                p_valid.eq(1), p.eq(pkt), p_shape_ok.eq(pkt_shape_ok),
                p_good.eq(pkt_shape_ok & enabled(pkt.qpn)),
                p_bytes.eq(Mux(in_imm, frame_length(Opcode.WRITE_ONLY_IMM, 0),
                               frame_length(Opcode.WRITE_ONLY, 0)) +
                           (((pkt.length + 3) >> 2) << 2)),
            ]
        with m.Elif(p_leave):
            m.d.sync += p_valid.eq(0)

        # --- data packets: the request channel ---------------------------------------------------
        held = Signal()                     # a good packet is held (its request taken once)
        d = Signal(records.TX_PACKET)       # the packet held
        d_bytes = Signal(16)
        d_room = Signal(npl)                # the plane_ok its last request carried
        inflight = Signal()                 # a request is taken, its answer not yet
        need_req = Signal()                 # the held packet needs another request
        presenting = Signal()               # a request is presented, not yet taken
        pres_new = Signal()                 # ... for the packet in the input register
        pres_ok = Signal(npl)

        data_go = Signal()                  # the answer found a slot: the data frame is decided
        m.d.comb += [
            data_go.eq(inflight & self.s_ans.valid & ans.found & outputs_empty),
            self.s_ans.ready.eq(inflight & (~ans.found | outputs_empty)),
        ]
        retry_now = inflight & self.s_ans.valid & ~ans.found

        # --- control records ---------------------------------------------------------------------
        ctrl = self.s_ctrl.p
        c_valid = Signal()
        c = Signal(records.CONTROL_RECORD)
        in_op_ok = Signal()
        with m.Switch(ctrl.opcode):
            with m.Case(*CONTROL_OPCODES):
                m.d.comb += in_op_ok.eq(1)
        c_op_ok, c_qp_ok, c_plane_ok = Signal(), Signal(), Signal()   # judged when taken
        c_good = Signal()
        ctrl_take = self.s_ctrl.valid & ~c_valid
        m.d.comb += self.s_ctrl.ready.eq(~c_valid)
        m.d.comb += [rp_ctrl.addr.eq(ctrl.qpn[:qb]), rp_ctrl.en.eq(ctrl_take)]
        in_good = wire(m, in_op_ok & enabled(ctrl.qpn) & (ctrl.ev[:4] < npl), 1, "ctrl_in_good",
                       keep=True)
        # ``ctrl_wants`` (a register): a good control record is held and its plane was ok or
        # down in the cycle before (``plane_ok`` and ``plane_up`` registered).
        ctrl_wants = Signal()
        # ``ctrl_armed``: a control record wanted to go in the cycle before with no request
        # presented or in flight (or was taken then with no packet anywhere), and did not go.
        # Nothing can have moved since (it kept every new request and the drop step back), so
        # it goes now if it still wants to and the outputs are empty. One cycle later than it
        # could when it had to wait for the request channel, but the decision is three
        # registers, not the request channel's logic (it fans out to every copy of the header
        # and record registers' enables below).
        ctrl_armed = Signal()
        ctrl_go = Signal()
        drop_go = Signal()                  # a bad packet's drop header is written
        m.d.comb += ctrl_go.eq(ctrl_armed & ctrl_wants & outputs_empty)
        c_drop = c_valid & ~c_good
        room = self.plane_ok | ~self.plane_up
        room_in = wire(m, room.bit_select(ctrl.ev[:plw], 1), 1, "ctrl_room_in", keep=True)
        room_c = wire(m, room.bit_select(c.ev[:plw], 1), 1, "ctrl_room_held", keep=True)
        m.d.sync += ctrl_wants.eq(Mux(ctrl_take, in_good & room_in,
                                      c_valid & c_good & ~ctrl_go & room_c))

        def armed_next(armed):
            """The next value of ``ctrl_armed`` (or a copy of it, ``armed``, selecting its
            branch): given it, a record is held and no request is presented or in flight."""
            # (no packet held nor waiting: none presented or in flight either)
            return Mux(armed, ctrl_wants & ~outputs_empty, arm_idle | arm_fresh)

        # one LUT each from flip-flops (not through ``ctrl_take``, which fans out widely)
        arm_idle = wire(m, ~presenting & ~inflight & ctrl_wants, 1, "arm_idle", keep=True)
        arm_fresh = wire(m, self.s_ctrl.valid & ~c_valid & ~held & ~p_valid, 1, "arm_fresh",
                         keep=True)
        m.d.sync += ctrl_armed.eq(armed_next(ctrl_armed))
        with m.If(ctrl_take):
            m.d.sync += [
                c_valid.eq(1), c.eq(ctrl), c_op_ok.eq(in_op_ok), c_qp_ok.eq(enabled(ctrl.qpn)),
                c_plane_ok.eq(ctrl.ev[:4] < npl), c_good.eq(in_good),
            ]
        with m.Elif(ctrl_go | c_drop):
            m.d.sync += c_valid.eq(0)

        # --- requests ----------------------------------------------------------------------------
        # A control record waiting keeps its plane out of the data requests: the room a frame
        # leaves there goes to it, not to the next data packet (else a busy plane starves it).
        # ``ctrl_plane`` is a register: the plane decoded while a good record is held.
        ctrl_plane = Signal(npl)
        with m.If(ctrl_take):
            m.d.sync += ctrl_plane.eq(Mux(in_good, (Const(1, npl) << ctrl.ev[:plw])[:npl], 0))
        with m.Elif(ctrl_go):
            m.d.sync += ctrl_plane.eq(0)
        ok_now = Signal(npl)
        m.d.comb += ok_now.eq(self.plane_ok & ~ctrl_plane)
        ok_any = wire(m, ok_now != 0, 1, "ok_any", keep=True)
        free_after = Signal()               # no packet held after this cycle but a new one
        m.d.comb += free_after.eq(~held | data_go)
        # A request starts (some plane ok, none presented, no control record wanting to go) for
        # the packet in the input register when none is held or the held one is decided now
        # (an answer found), or again for the held one (owed, or an answer found nothing). The
        # terms of registers only first, then the answer and ``ok_any``.
        idle = ~presenting & ~ctrl_wants
        new_now = wire(m, idle & p_valid & p_good & ~held, 1, "start_new_now", keep=True)
        new_found = wire(m, idle & p_valid & p_good & inflight & outputs_empty, 1,
                         "start_new_found", keep=True)
        retry_owed = wire(m, idle & held & need_req, 1, "start_retry_owed", keep=True)
        retry_lost = wire(m, idle & held & inflight, 1, "start_retry_lost", keep=True)
        av, found = self.s_ans.valid, ans.found
        start_new = Signal()
        start_retry = Signal()
        m.d.comb += [
            start_new.eq(ok_any & (new_now | new_found & av & found)),
            start_retry.eq(ok_any & (retry_owed | retry_lost & av & ~found)),
        ]
        from_new = Mux(presenting, pres_new, start_new)
        req_ok = Mux(presenting, pres_ok, ok_now)
        req = self.m_req.p
        m.d.comb += [
            self.m_req.valid.eq(presenting | start_new | start_retry),
            req.qpn.eq(Mux(from_new, p.qpn, d.qpn)),
            req.plane_ok.eq(req_ok),
            req.avoid_valid.eq(Mux(from_new, p.avoid_valid, d.avoid_valid)),
            req.avoid_ev.eq(Mux(from_new, p.avoid_ev, d.avoid_ev)),
        ]
        req_fire = self.m_req.valid & self.m_req.ready
        take_new = req_fire & from_new
        with m.If(req_fire):
            m.d.sync += [presenting.eq(0), inflight.eq(1), need_req.eq(0), d_room.eq(req_ok)]
        with m.Elif(self.m_req.valid):
            m.d.sync += [presenting.eq(1), pres_new.eq(from_new), pres_ok.eq(req_ok)]
        with m.If(self.s_ans.ready & self.s_ans.valid & ~req_fire):
            m.d.sync += inflight.eq(0)
        with m.If(retry_now & ~req_fire):
            m.d.sync += need_req.eq(1)
        with m.If(take_new):
            m.d.sync += held.eq(1)
        with m.Elif(data_go):
            m.d.sync += held.eq(0)

        # Bad packets: a drop header (opcode 0, the packet's length) when nothing is held, in two
        # steps: armed in cycle t (no frame and no header in the registers, no control record
        # wanting to go), written in t+1 (``drop_go`` is that register; nothing else can have
        # moved: a bad packet takes no request, and control records wait for it).
        drop_arm = (p_valid & ~p_good & ~held & ~presenting & ~frame_valid & ~hdr_valid &
                    ~ctrl_wants & ~drop_go)
        m.d.sync += drop_go.eq(drop_arm)
        m.d.comb += p_leave.eq(take_new | drop_go)

        # --- path building -----------------------------------------------------------------------
        # A data frame is decided only with an answer in flight, a control frame only without:
        # the selection is the register ``inflight`` (or a copy of it, see below).
        is_imm = Signal()
        is_last = Signal()
        with m.Switch(d.opcode):
            with m.Case(*IMM_OPCODES):
                m.d.comb += is_imm.eq(1)
        with m.Switch(d.opcode):
            with m.Case(*_ACKREQ_OPCODES):
                m.d.comb += is_last.eq(1)
        probe = c.opcode == Opcode.PROBE
        data_ext = Cat(pack(METH, rqmsn=d.rqmsn, msn=d.msn),
                       pack(RETH, va=d.va, rkey=d.rkey, dma_length=d.dma_length),
                       Mux(is_imm, pack(IMMDT, imm=d.imm), 0))
        ctx_d, ctx_c = context(rp_data), context(rp_ctrl)
        ctrl_bytes = Signal(16)
        with m.Switch(c.opcode):
            for op in CONTROL_OPCODES:
                with m.Case(op):
                    m.d.comb += ctrl_bytes.eq(frame_length(op, 0))

        # The header in two steps. Step 1, in the decision cycle: every field but those of the
        # path, and the EV and the peer's T0 and port (``path_*``). Step 2, one cycle later (the
        # header is valid two cycles after the decision at the earliest): the path fields (MACs,
        # outer addresses, flow label, UDP source port) from those registers.
        path_ev = Signal(32)
        path_t0 = Signal(10)
        path_port = Signal(10)
        j = path_ev[4:12]

        def path_values(plane2, onehot, one_t0):
            """The path fields from the path registers, ``plane2`` a copy of ``path_ev[:4]``,
            ``onehot`` its plane decoded (the MACs' AND-OR multiplexers) and ``one_t0`` a copy
            of "the peer's T0 is the own" (compared in step 1)."""
            def mac(table):
                value = 0
                for q in range(npl):
                    value = value | Mux(onehot[q], table[q], 0)
                return value

            u_t0_own = _usid(plane2, Role.T0, own_t0)
            u_t1 = _usid(plane2, Role.T1, j)
            u_t0_peer = _usid(plane2, Role.T0, path_t0)
            u_host = _usid(plane2, Role.HOST, path_port)
            carrier = Mux(one_t0, Cat(Const(0, 64), u_host, u_t0_own, block),
                          Cat(Const(0, 32), u_host, u_t0_peer, u_t1, u_t0_own, block))
            return {
                "eth_dst": mac(dst_mac),
                "eth_src": mac(src_mac),
                "flow_label": path_ev[:16],
                "outer_src": Cat(own_host, Const(0, 48), plane2, Const(0, 28),
                                 Const(PLANE_PREFIX >> 112, 16)),
                "outer_dst": carrier,
                "udp_sport": path_ev[16:],
            }

        PATH_FIELDS = ("eth_dst", "eth_src", "flow_label", "outer_src", "outer_dst", "udp_sport")

        def step1(sel):
            """The step-1 fields of the header, the path registers' inputs and the plane frame
            record, with ``sel`` (a copy of ``inflight``) selecting data or control."""
            ev = Mux(sel, ans.ev, c.ev)
            plane = ev[:4]
            ctx = {k: Mux(sel, ctx_d[k], ctx_c[k]) for k in ctx_d}
            fields = {
                "dscp": Mux(sel, Mux(d.rtx, Dscp.TRIMMABLE_RETX, Dscp.TRIMMABLE),
                            Mux(probe, Dscp.TRIMMABLE, Dscp.CONTROL)),
                "ecn": Mux(sel | probe, Ecn.ECT0, Ecn.NOT_ECT),
                "hop_limit": Const(layouts.HOP_LIMIT_DEFAULT, 8),
                "inner_src": Cat(own_host, Const(0, 64), Const(NIC_PREFIX >> 96, 32)),
                "inner_dst": Cat(ctx["peer_host"], Const(0, 64), Const(NIC_PREFIX >> 96, 32)),
                "opcode": Mux(sel, d.opcode, c.opcode),
                "dest_qpn": ctx["peer_qpn"],
                "ackreq": sel & is_last,
                "rtx": sel & d.rtx,
                "psn": Mux(sel, d.psn, 0),
                "ext": Mux(sel, data_ext, c.ext),
                "length": Mux(sel, d.length, 0),
            }
            send = Signal(records.SEND_RECORD)
            m.d.comb += [
                send.qpn.eq(Mux(sel, d.qpn, c.qpn)), send.psn.eq(Mux(sel, d.psn, 0)),
                send.ev.eq(ev), send.plane.eq(plane),
                send.slot.eq(Mux(sel, ans.slot, 0)),
                send.req_id.eq(Mux(sel, d.req_id, 0)),
                send.offset.eq(Mux(sel, d.offset, 0)),
                send.length.eq(Mux(sel, d.length, 0)),
                send.tick.eq(Mux(sel, self.tick_count, 0)),
                send.room_mask.eq(Mux(sel, d_room, 0)),
                send.rtx.eq(sel & d.rtx), send.last.eq(sel & is_last),
            ]
            record = Signal(records.PLANE_FRAME)
            m.d.comb += [
                record.plane.eq(plane), record.frame_bytes.eq(Mux(sel, d_bytes, ctrl_bytes)),
                record.data.eq(sel), record.send.eq(send.as_value()),
            ]
            path_in = Cat(ev, ctx["peer_t0"], ctx["peer_port"])
            return fields, path_in, record.as_value()

        # The payload registers follow the decision logic while they are free ("open"):
        # m_hdr's while neither the plane frame record nor a header is valid, m_frame's (and so
        # m_send's) while neither the record nor a send record is valid. In the cycle a frame is
        # decided every output is empty, so they take its records then and hold them until
        # taken; a drop header is written likewise (selected by the register ``drop_go``).
        frame_load = data_go | ctrl_go
        frame_valid_next = frame_load | (frame_valid & ~self.m_frame.ready)
        hdr_valid_next = frame_take | drop_go | (hdr_valid & ~self.m_hdr.ready)
        send_valid_next = (frame_take & frame.data) | (send_valid & ~self.m_send.ready)
        m.d.sync += [frame_valid.eq(frame_valid_next), hdr_valid.eq(hdr_valid_next),
                     send_valid.eq(send_valid_next)]
        ans_take = self.s_ans.ready & self.s_ans.valid
        hdr = self.m_hdr.p

        # The enables and selects of these wide registers fan out from flip-flops, one set per
        # group of about _FANOUT bits: each copy's next value is selected by the copy itself (so
        # that synthesis keeps them apart: no enable to extract and share), and equals the
        # single register it stands for:
        #   armed_k     ctrl_armed; its inverse is the select: data while a request is in
        #               flight (a data frame is decided only then, and never while armed), else
        #               control (a control frame is decided only while armed);
        #   hdr_open_k  ~frame_valid & ~hdr_valid (step 1 writes);
        #   path_open_k hdr_open of the cycle before & ~hdr_valid (step 2 writes);
        #   frame_open_k ~frame_valid & ~send_valid (m_frame's payload writes);
        #   drop_k      drop_go;
        #   plane_k     path_ev[:4], and decoded (for the path fields, per _PATH_FANOUT bits).
        def bits(value):
            return value.as_value() if hasattr(value, "as_value") else Value.cast(value)

        drop_header = Signal(records.TX_HEADER)
        m.d.comb += drop_header.length.eq(p.length)

        pieces = []                         # (kind, field, bits lo, hi)
        for name in TX_HEADER_NAMES:
            width = len(bits(getattr(hdr, name)))
            step = _PATH_FANOUT if name in PATH_FIELDS else _FANOUT
            for lo in range(0, width, step):
                hi = min(lo + step, width)
                pieces.append(("path" if name in PATH_FIELDS else "step1", name, lo, hi))
        for lo in range(0, len(frame.as_value()), _FANOUT):
            pieces.append(("frame", None, lo, min(lo + _FANOUT, len(frame.as_value()))))
        pieces.append(("path_in", None, 0, 52))
        path_regs = Cat(path_ev, path_t0, path_port)

        # A register shut reopens from registers and readies only: while the header register
        # is shut (the record or a header valid) no frame is loaded and no drop header written
        # (both need it open), so the record moves to the header or stays and the header leaves
        # or stays; likewise for m_frame's record register (the record and the send record) and
        # "every output empty" (a drop header may be written beside a send record).
        hdr_reopen = ~frame_valid & (~hdr_valid | self.m_hdr.ready)
        frame_reopen = ((~frame_valid | (self.m_frame.ready & ~frame.data)) &
                        (~send_valid | self.m_send.ready))
        empty_reopen = (~frame_valid & ~drop_go & (~hdr_valid | self.m_hdr.ready) &
                        (~send_valid | self.m_send.ready))

        for k, (kind, name, lo, hi) in enumerate(pieces):
            armed_k = Signal(name=f"ctrl_armed_copy{k}")
            sel_k = ~armed_k
            drop_k = Signal(name=f"drop_copy{k}")
            open_k = Signal(init=1, name=f"open_copy{k}")
            m.d.sync += [
                armed_k.eq(armed_next(armed_k)),
                drop_k.eq(Mux(drop_k, 0, drop_arm)),
            ]
            # frame_load, given the copy's register open (two of the three outputs empty)
            load_k = self.s_ans.valid & ans.found & inflight | armed_k & ctrl_wants
            if kind == "frame":
                m.d.sync += open_k.eq(Mux(open_k, ~(load_k & ~hdr_valid), frame_reopen))
            else:
                hopen_k = Signal(init=1, name=f"hdr_open_copy{k}")
                m.d.sync += hopen_k.eq(Mux(hopen_k, ~drop_k & ~(load_k & ~send_valid),
                                           hdr_reopen))
                if kind == "path":
                    # open, hdr_valid_next is drop_go (nothing else moves into the header)
                    m.d.sync += open_k.eq(hopen_k & ~drop_go)
                else:
                    m.d.comb += open_k.eq(hopen_k)
            fields, path_in, record = step1(sel_k)
            if kind == "step1":
                target = bits(getattr(hdr, name))[lo:hi]
                value = Mux(drop_k, bits(getattr(drop_header, name))[lo:hi],
                            bits(fields[name])[lo:hi])
            elif kind == "path":
                target = bits(getattr(hdr, name))[lo:hi]
                # its own copy of the plane (the MAC multiplexers' select fans out widely)
                plane_k = Signal(4, name=f"plane_copy{k}")
                onehot_k = Signal(npl, name=f"plane_onehot_copy{k}")
                one_t0_k = Signal(name=f"one_t0_copy{k}")
                with m.If(hopen_k):
                    m.d.sync += [plane_k.eq(path_in[:4]),
                                 onehot_k.eq((Const(1, npl) << path_in[:plw])[:npl]),
                                 one_t0_k.eq(own_t0 == path_in[32:42])]
                value = Mux(drop_k, 0,
                            bits(path_values(plane_k, onehot_k, one_t0_k)[name])[lo:hi])
            elif kind == "frame":
                target, value = frame.as_value()[lo:hi], record[lo:hi]
            else:
                target, value = path_regs, path_in
            with m.If(open_k):
                m.d.sync += target.eq(value)

        # The held packet (and its context) follow the input register but while one is locked:
        # held in the cycle before and not decided then (``d_lock``), and not decided now. A
        # packet whose request is taken in cycle t (``held`` from t+1) is copied in t (no packet
        # is held then, or the held one is decided) and again in t+1 (it is still in the input
        # register, which takes the next packet in t+1 at the earliest, so the copy is the same):
        # the lock is ``held`` one cycle late, free of the request channel's logic. The enable is
        # built per group of _FANOUT bits from copies of ``d_lock`` and "every output empty"
        # (self-reading, as above; a copy of ``d_lock`` set implies ``held``).
        m.d.comb += rp_data.addr.eq(p.qpn[:qb])
        d_bits = Cat(d.as_value(), d_bytes)
        p_bits = Cat(p.as_value(), p_bytes)
        groups = [(d_bits[lo:min(lo + _FANOUT, len(d_bits))], p_bits[lo:min(lo + _FANOUT,
                                                                             len(p_bits))])
                  for lo in range(0, len(d_bits), _FANOUT)]
        groups.append((None, None))        # the context read port's enable
        for k, (target, value) in enumerate(groups):
            lock_k = Signal(name=f"d_lock_copy{k}")
            empty_k = Signal(init=1, name=f"empty_copy{k}")
            decided_k = inflight & self.s_ans.valid & ans.found & empty_k      # data_go
            m.d.sync += [
                lock_k.eq(Mux(lock_k, ~decided_k, held & ~decided_k)),
                empty_k.eq(Mux(empty_k, ~frame_load & ~drop_go, empty_reopen)),
            ]
            free_k = ~lock_k | decided_k
            if target is None:
                m.d.comb += rp_data.en.eq(free_k)
            else:
                with m.If(free_k):
                    m.d.sync += target.eq(value)

        # --- counters (registered: a count shows one cycle after its event) ----------------------
        m.d.comb += [
            count["packets_in"].eq(take_new | drop_go),
            count["data_sent"].eq(data_go),
            count["retries"].eq(retry_now),
            count["drop_packet"].eq(drop_go & ~p_shape_ok),
            count["drop_packet_qp"].eq(drop_go & p_shape_ok),
            count["controls_in"].eq(ctrl_take),
            count["controls_sent"].eq(ctrl_go),
            count["drop_control"].eq(c_drop & ~c_op_ok),
            count["drop_control_qp"].eq(c_drop & c_op_ok & ~c_qp_ok),
            count["drop_control_plane"].eq(c_drop & c_op_ok & c_qp_ok & ~c_plane_ok),
        ]
        cfg.finish(decoded=True)
        return m
