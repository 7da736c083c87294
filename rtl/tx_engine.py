# SPDX-License-Identifier: BSD-2-Clause
"""The NIC transmit engine (docs/protocol.md 1-5, 8): segmenter -> path building with the EV table and spray
scheduler -> header inserter -> plane splitter; golden model ``models/tx_engine.py``."""

from amaranth.hdl import Array, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from models.plane_splitter import default_core_width
from models.records import FrameUser
from rtl import header_inserter, plane_splitter, segmenter, spray_scheduler, tx_path
from rtl.common import records
from rtl.common.ports import axis_members, config_members, record_members

__all__ = ["TxEngine", "ADDR_WIDTH", "BLOCK_SHIFT", "BLOCKS", "engine_addr"]

ADDR_WIDTH = 23
BLOCK_SHIFT = 20
# block -> (index in cfg_addr[22:20], its configuration address width)
BLOCKS = {
    "spray": (0, spray_scheduler.ADDR_WIDTH),
    "segmenter": (1, segmenter.ADDR_WIDTH),
    "tx_path": (2, tx_path.ADDR_WIDTH),
    "header_inserter": (3, 16),
    "plane_splitter": (4, plane_splitter.ADDR_WIDTH),
}


def engine_addr(block, addr):
    """The engine's configuration address of word ``addr`` of ``block`` (a key of BLOCKS)."""
    index, width = BLOCKS[block]
    if not 0 <= addr < 1 << width:
        raise ValueError(f"address {addr:#x} does not fit block {block} ({width} bits)")
    return index << BLOCK_SHIFT | addr


class TxEngine(wiring.Component):
    """The transmit engine of one NIC: work requests in, frames out on N plane ports, one send
    record per data packet (and per data frame flushed from a plane that went down) out to the
    reliability block. Frame by frame and choice by choice equal to
    :class:`models.tx_engine.TxEngineModel` given the inputs it reports (the send records and the
    spray trace).

    Blocks (each documented in its own file, compared with its own model by its own bench):
    ``rtl.segmenter.Segmenter`` (work requests, retransmit requests, retires, PSN limits; payload
    read over AXI4), ``rtl.tx_path.TxPath`` (path building and control frames),
    ``rtl.spray_scheduler.SprayScheduler`` (EV table and choice), ``rtl.header_inserter.
    HeaderInserter`` (frames and ICRC) and ``rtl.plane_splitter.PlaneSplitter`` (a FIFO per plane,
    width conversion, plane-down flush). The core between them is C bits wide: N x W rounded up to
    64, 128, 256 or 512 (:func:`models.plane_splitter.default_core_width`).

    Parameters
    ----------
    n_qps : 1..256 (default 16)
    n_planes : 1..8 (default 8), with ``n_planes`` x ``data_width`` at most 512
    data_width : 64, 128, 256 or 512 (default 64)
        W, the width of a plane port.
    pmtu : 256, 512, 1024, 2048 or 4096 (default 4096)
    wrs_per_qp : 2, 4, .., 64 (default 8)
        Work requests held per QP until retired.
    slots, backups, ev_min_active : (default 16, 8, 4)
        A, B and the floor of the EV table (``rtl.spray_scheduler``).
    max_outstanding : 2..256 (default 16)
        Payload reads in flight (``rtl.segmenter``).

    Ports
    -----
    ``s_wr_*``, ``s_retx_*``, ``s_retire_*``, ``s_limit_*``: WORK_REQUEST, RETX_REQUEST, RETIRE,
    PSN_LIMIT record streams (the segmenter's).
    ``m_axi_ar*``, ``m_axi_r*``: the AXI4 read master of the payload (C bits of data).
    ``s_ctrl_*``: CONTROL_RECORD stream (SACK, NACK, probe answers, probes), ahead of data.
    ``s_ev_*``: EV_EVENT stream; ``m_marked_*``: EV_MARKED answers (the scheduler's).
    ``m_send_*``: SEND_RECORD stream: one per data packet at its choice (``flushed`` = 0), and one
    per data frame flushed from a plane that went down (``flushed`` = 1), always after the first.
    ``m_axis<p>_tdata/tkeep/tlast/tvalid/tready/tuser``, p < N: the plane ports (W bits).
    ``plane_down`` (N, in): links down; ``plane_up`` (N, out): planes up (configuration mask and
    not ``plane_down``).
    ``tick_count`` (32, in): the NIC's tick counter (``rtl.tick_generator``), into send records.
    ``trace_req_tdata/tvalid``, ``trace_ans_tdata/tvalid``: every SPRAY_REQUEST and SPRAY_ANSWER
    handshake between path building and the scheduler (``tvalid`` = 1 in the cycle of the
    handshake): the inputs each choice was made from (docs/protocol.md 8), for the bench and for debug.
    ``cfg_addr`` (23 bits) ``/cfg_wdata/cfg_we/cfg_rdata``: configuration port, read latency 1.
    ``clk``, ``rst``: the ``sync`` domain.

    Configuration map
    -----------------
    ``cfg_addr[22:20]`` selects a block, the low bits are that block's word address
    (:func:`engine_addr`; words above a block's address width are unmapped and read 0):

    ====  =================  ==============================================================
    0     spray scheduler    ``rtl/spray_scheduler.py`` (20-bit map)
    1     segmenter          ``rtl/segmenter.py`` (16-bit map)
    2     path building      ``rtl/tx_path.py`` (16-bit map)
    3     header inserter    ``rtl/header_inserter.py`` (16-bit map)
    4     plane splitter     ``rtl/plane_splitter.py`` (8-bit map)
    ====  =================  ==============================================================

    A QP is set up in the segmenter (start PSN and enable), in path building (peer context and
    enable) and in the scheduler (slots, pools, seeds and enable).

    Throughput and latency
    ----------------------
    One spray decision per 3 cycles at most (``rtl/tx_path.py``), which fits the shortest data
    frame (138 B: 3 beats on a 512-bit core); the header inserter and the splitter's core input
    run at one C-bit beat per cycle with no gap between frames, and the splitter never stalls a
    frame whose room was reserved at its choice; a plane port sends at one W beat per cycle. So
    the engine carries the core's full width while the planes chosen have room.

    Measured (``tb/test_tx_engine.py``, ``perf``; ``make bench``: N = 8, W = 64, C = 512, PMTU
    4096, every port ready, one-packet Writes back to back): one choice and one frame every
    max(3, frame beats) cycles, asserted: 3 cycles for 0-byte Writes (138 B frames), 4 for 64 B,
    7 for 256 B, 26 for 1500 B and 67 for 4096 B payloads, i.e. 61.1 payload bytes per cycle at
    4096 B (95.5% of the core's 64; the rest is headers and the ICRC). From a work request's
    handshake to its frame's first beat on a plane port: 20 cycles for a 0-byte Write, 84 for a
    4096-byte one (the splitter stores a whole frame before sending it).
    """

    def __init__(self, n_qps=16, n_planes=8, data_width=64, pmtu=4096, wrs_per_qp=8, slots=16,
                 backups=8, ev_min_active=4, max_outstanding=16):
        try:
            core = default_core_width(n_planes, data_width)
        except ValueError as exc:
            raise ValueError(f"TxEngine: {exc}") from None
        self.n_qps = n_qps
        self.n_planes = n_planes
        self.data_width = data_width
        self.core_width = core
        self.pmtu = pmtu
        self.segmenter = segmenter.Segmenter(core, n_qps, wrs_per_qp, pmtu, max_outstanding)
        self.path = tx_path.TxPath(n_qps, n_planes, pmtu)
        self.spray = spray_scheduler.SprayScheduler(n_qps, n_planes, slots, backups,
                                                    ev_min_active)
        self.inserter = header_inserter.HeaderInserter(core, pmtu)
        self.splitter = plane_splitter.PlaneSplitter(n_planes, data_width, core, pmtu)
        members = {
            **config_members(ADDR_WIDTH),
            **record_members("s_wr", records.WORK_REQUEST, sink=True),
            **record_members("s_retx", records.RETX_REQUEST, sink=True),
            **record_members("s_retire", records.RETIRE, sink=True),
            **record_members("s_limit", records.PSN_LIMIT, sink=True),
            **segmenter.axi_read_members("m_axi", core),
            **record_members("s_ctrl", records.CONTROL_RECORD, sink=True),
            **record_members("s_ev", records.EV_EVENT, sink=True),
            **record_members("m_marked", records.EV_MARKED, sink=False),
            **record_members("m_send", records.SEND_RECORD, sink=False),
            "plane_down": In(n_planes),
            "plane_up": Out(n_planes),
            "tick_count": In(32),
            "trace_req_tdata": Out(records.SPRAY_REQUEST), "trace_req_tvalid": Out(1),
            "trace_ans_tdata": Out(records.SPRAY_ANSWER), "trace_ans_tvalid": Out(1),
        }
        for p in range(n_planes):
            members.update(axis_members(f"m_axis{p}", data_width, FrameUser.WIDTH, sink=False))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        seg, path, spray = self.segmenter, self.path, self.spray
        hi, split = self.inserter, self.splitter
        m.submodules.segmenter = seg
        m.submodules.tx_path = path
        m.submodules.spray = spray
        m.submodules.header_inserter = hi
        m.submodules.plane_splitter = split

        # Host side and reliability inputs.
        for name in ("s_wr", "s_retx", "s_retire", "s_limit"):
            connect(m, flipped(getattr(self, name)), getattr(seg, name))
        connect(m, flipped(self.m_axi), seg.m_axi)
        connect(m, flipped(self.s_ctrl), path.s_ctrl)
        connect(m, flipped(self.s_ev), spray.s_ev)
        connect(m, spray.m_marked, flipped(self.m_marked))

        # Segmenter -> path building (records) and header inserter (payload).
        connect(m, seg.m_pkt, path.s_pkt)
        connect(m, seg.m_axis, hi.s_axis)
        # Path building <-> scheduler, and the trace of their handshakes.
        connect(m, path.m_req, spray.s_req)
        connect(m, spray.m_ans, path.s_ans)
        m.d.comb += [
            self.trace_req_tdata.eq(path.m_req.p),
            self.trace_req_tvalid.eq(path.m_req.valid & spray.s_req.ready),
            self.trace_ans_tdata.eq(spray.m_ans.p),
            self.trace_ans_tvalid.eq(spray.m_ans.valid & path.s_ans.ready),
        ]
        # Path building -> header inserter and splitter; splitter room back.
        connect(m, path.m_hdr, hi.s_hdr)
        connect(m, path.m_frame, split.s_frame)
        connect(m, hi.m_axis, split.s_axis)
        m.d.comb += [
            path.plane_ok.eq(split.plane_ok), path.plane_up.eq(split.plane_up),
            path.tick_count.eq(self.tick_count),
            split.plane_down.eq(self.plane_down), self.plane_up.eq(split.plane_up),
        ]
        for p in range(self.n_planes):
            connect(m, getattr(split, f"m_axis{p}"), flipped(getattr(self, f"m_axis{p}")))

        # Send records: path building's first, a flushed record when none waits (held once
        # presented, so that the output stays stable until taken).
        hold_flush = Signal()
        use_flush = hold_flush | ~path.m_send.valid
        m.d.comb += [
            self.m_send.valid.eq(path.m_send.valid | split.m_flush.valid),
            self.m_send.p.eq(Mux(use_flush, split.m_flush.p.as_value(), path.m_send.p.as_value())),
            path.m_send.ready.eq(self.m_send.ready & ~use_flush),
            split.m_flush.ready.eq(self.m_send.ready & use_flush),
        ]
        m.d.sync += hold_flush.eq(use_flush & split.m_flush.valid & ~self.m_send.ready)

        # Configuration: one port, a block per cfg_addr[22:20].
        block = self.cfg_addr[BLOCK_SHIFT:]
        units = {"spray": spray, "segmenter": seg, "tx_path": path, "header_inserter": hi,
                 "plane_splitter": split}
        reads = [Const(0, 32)] * (1 << (ADDR_WIDTH - BLOCK_SHIFT))
        read_sel = Signal(ADDR_WIDTH - BLOCK_SHIFT)
        read_ok = Signal()
        in_range = Signal()
        for name, (index, width) in BLOCKS.items():
            unit = units[name]
            mapped = (block == index) & (self.cfg_addr[width:BLOCK_SHIFT] == 0 if width <
                                         BLOCK_SHIFT else 1)
            m.d.comb += [unit.cfg_addr.eq(self.cfg_addr[:width]), unit.cfg_wdata.eq(self.cfg_wdata),
                         unit.cfg_we.eq(self.cfg_we & mapped)]
            with m.If(mapped):
                m.d.comb += in_range.eq(1)
            reads[index] = unit.cfg_rdata
        m.d.sync += [read_sel.eq(block), read_ok.eq(in_range)]
        m.d.comb += self.cfg_rdata.eq(Mux(read_ok, Array(reads)[read_sel], 0))
        return m
