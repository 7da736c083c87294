# SPDX-License-Identifier: BSD-2-Clause
"""The NIC engine top (issue 5, docs/protocol.md 2, 4, 5 and 8): the transmit engine, the receive engine,
the sender reliability block and the tick generator joined into one component with the host-side
interfaces of docs/protocol.md section 8."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from models.plane_splitter import default_core_width
from models.records import (COMPLETION, CONTROL_RECORD, EV_EVENT, EV_MARKED, RETIRE,
                            RETX_REQUEST, FrameUser)
from models.rx_front import core_width as rx_core_width
from rtl import reliability, rx_engine, tx_engine
from rtl.common import records
from rtl.common.axi import axi4, connect_halves
from rtl.common.config import ConfigMap
from rtl.common.ports import axis_members, config_members, record_members
from rtl.common.records import layout as records_layout
from rtl.common.stream_fifo import StreamFifo
from rtl.common.stream_merge import StreamMerge
from rtl.reliability import Reliability
from rtl.rx_engine import RxEngine
from rtl.tick_generator import TickGenerator
from rtl.tx_engine import TxEngine

__all__ = ["NicEngine", "ADDR_WIDTH", "BLOCK_SHIFT", "BLOCKS", "nic_addr", "ENGINE_INFO",
           "ENGINE_STATUS", "ENGINE_TICKS", "ENGINE_COUNTERS", "RELIABILITY_TAPS"]

BLOCK_SHIFT = tx_engine.ADDR_WIDTH            # cfg_addr[24:23] selects the block
ADDR_WIDTH = BLOCK_SHIFT + 2
# block -> (index in cfg_addr[24:23], its configuration address width)
BLOCKS = {
    "tx": (0, tx_engine.ADDR_WIDTH),
    "rx": (1, rx_engine.ADDR_WIDTH),
    "reliability": (2, reliability.ADDR_WIDTH),
    "engine": (3, 4),
}
ENGINE_INFO = 0x0          # ro: n_planes (3..0), data_width / 8 (15..8), n_qps (31..16)
ENGINE_STATUS = 0x1        # ro: busy bits, see the docstring
ENGINE_TICKS = 0x2         # ro: the tick count
ENGINE_COUNTERS = {"wr": 0x4, "cpl_send": 0x5, "cpl_recv": 0x6, "ev_host": 0x7}

# Streams of the reliability block shown on valid-strobed ``tap_<name>_tdata/tvalid`` outputs
# (a record in the cycle of its handshake): its inputs, then its outputs.
RELIABILITY_TAPS = {
    "send": ("s_send", records.SEND_RECORD), "fb": ("s_fb", records.FEEDBACK_RECORD),
    "marked": ("s_marked", records.EV_MARKED), "wr": ("s_wr", records.WORK_REQUEST),
    "retx": ("m_retx", records.RETX_REQUEST), "limit": ("m_limit", records.PSN_LIMIT),
    "retire": ("m_retire", records.RETIRE), "cpl": ("m_cpl", records.COMPLETION),
    "ev": ("m_ev", records.EV_EVENT), "ctrl": ("m_ctrl", records.CONTROL_RECORD),
}


def nic_addr(block, addr):
    """The NIC's configuration address of word ``addr`` of ``block`` (a key of BLOCKS)."""
    index, width = BLOCKS[block]
    if not 0 <= addr < 1 << width:
        raise ValueError(f"address {addr:#x} does not fit block {block} ({width} bits)")
    return index << BLOCK_SHIFT | addr


class NicEngine(wiring.Component):
    """One MRC NIC: :class:`rtl.tx_engine.TxEngine`, :class:`rtl.rx_engine.RxEngine`,
    :class:`rtl.reliability.Reliability` and :class:`rtl.tick_generator.TickGenerator`, joined
    as issue 5 asks. Every block is the one its own bench compares with its model; this file only
    wires them:

    - host work requests (``s_wr``) fork to the transmit engine's ``s_wr`` and to the reliability
      block's work-request tap through a register: a request is taken when the register is free
      (or empties in that cycle) and leaves it once both took it;
    - transmit send records (``m_send``) and EV_MARKED answers go to the reliability block; its
      retransmit requests, PSN limits and retires go to the transmit engine;
    - EV events to the transmit engine's EV table: the reliability block's (SKIP, BAD,
      RECOVERED) and the host's ``s_ev`` (DENY, ALLOW, ...), merged round-robin;
    - control records to the transmit engine: the receive engine's (SACKs, NACKs, probe answers)
      and the reliability block's probes, merged round-robin;
    - the receive engine's feedback records (SACKs and NACKs received) to the reliability block;
    - completions out on ``m_cpl``: the reliability block's (sender side, ``is_recv`` = 0) and the
      receive engine's (Write with Immediate, ``is_recv`` = 1), merged round-robin;
    - one tick generator: ``tick`` to the receive engine, ``tick_count`` to the others.

    Each merge is a register stage (one record per cycle, round-robin when both wait).

    Deadlock freedom. The reliability block holds all its outputs while one is not taken, and
    the transmit engine stops taking retransmit requests, retires, EV events and control
    records while its send records or EV_MARKED answers wait for the block: a cycle. FIFOs (block
    RAM) on the block's outputs break it, each deep enough for what the block can have
    outstanding: retransmit requests and EV events ``n_qps`` x ``ring`` (at most one request per
    outstanding PSN until its send record; a BAD event per timeout), retires ``n_qps`` x
    ``wr_depth``, probes ``probe_entries``; and the EV_MARKED answers ``n_planes`` x ``slots``
    + 2 (the answer to any BAD event). PSN limits are always taken.

    Parameters
    ----------
    n_qps : power of two, 1..32 (default 4)
        QPs (QP q is local QPN q on both sides).
    n_planes : 1..8 (default 2); data_width : 64, 128, 256 or 512 (default 64)
        N plane ports of W bits; the core width C = N x W rounded up to 64..512 is also the
        AXI data width.
    pmtu : 256 .. 4096 (default 4096)
    clk_hz : int (default 250_000_000)
        The clock frequency for the tick generator (at least 976_563; a bench may give a low
        value to make ticks, and so timeouts, short).
    wrs_per_qp, slots, backups, ev_min_active, max_outstanding
        The transmit engine's (:class:`rtl.tx_engine.TxEngine`).
    n_regions, buffer_bytes, header_slots, mpr, wimm_max
        The receive engine's (:class:`rtl.rx_engine.RxEngine`); ``header_slots`` None (the
        default): :func:`models.rx_front.engine_header_slots` (64 at the defaults).
    ring, probe_entries, wr_depth, timer_bits
        The reliability block's; ``wr_depth`` must be at least ``wrs_per_qp`` (every request the
        transmit engine holds has its place in the block's work-request FIFO).

    Ports
    -----
    ``clk``, ``rst``: the ``sync`` domain.
    ``s_wr_tdata/tvalid/tready``: :data:`models.records.WORK_REQUEST` from the host.
    ``s_ev_tdata/tvalid/tready``: :data:`models.records.EV_EVENT` from the host or controller.
    ``m_cpl_tdata/tvalid/tready``: :data:`models.records.COMPLETION` to the host.
    ``m_axi_*``: one AXI4 master to host memory, C data bits: AR/R read payload to send (the
    transmit engine), AW/W/B write received payload (the receive engine); cocotbext-axi's
    ``AxiRam`` attaches with ``AxiBus.from_prefix(dut, "m_axi")``.
    ``m_axis<p>_tdata/tkeep/tlast/tvalid/tready/tuser``: plane port p out (W bits).
    ``s<p>_axis_tdata/tkeep/tlast/tvalid/tuser``: plane port p in (W bits, no ``tready``: a link
    is never backpressured).
    ``plane_down`` (N, in): links down (docs/protocol.md 4.6); ``plane_up`` (N, out).
    ``tick_count`` (32, out): the shared tick count.
    Traces (docs/protocol.md 8; each ``tvalid`` = 1 in the cycle of the event, never waiting):
    ``trace_rel_tdata/tvalid``: every :data:`models.reliability.TRACE` record of the reliability
    block (the order in which it took inputs and applied ticks); ``tap_<name>_tdata/tvalid``
    for each stream of :data:`RELIABILITY_TAPS` (its inputs and outputs at their handshakes), so
    that :class:`models.reliability.Reliability` can be replayed on the same inputs and compared
    with every output; ``trace_req_*``, ``trace_ans_*``: the transmit engine's spray trace.
    ``cfg_addr`` (25 bits) ``/cfg_wdata/cfg_we/cfg_rdata``: one configuration port, read
    latency 1.

    Configuration map
    -----------------
    ``cfg_addr[24:23]`` selects a block; the low bits are that block's own map, unchanged
    (:func:`nic_addr`; words above a block's address width are unmapped and read 0):

    ====  =============  ==================================================================
    0     transmit       ``rtl/tx_engine.py`` (23-bit map: scheduler, segmenter, path
                         building, header inserter, plane splitter)
    1     receive        ``rtl/rx_engine.py`` (16-bit map: front, tracker, placement)
    2     reliability    ``rtl/reliability.py`` (12-bit map)
    3     engine         0x0 ro info: n_planes (3..0), W / 8 (15..8), n_qps (31..16);
                         0x1 ro status: bit 0 a work request waits in the fork, bit 1 the
                         EV-event merge holds a record, bit 2 the control merge, bit 3 the
                         completion merge; 0x2 ro the tick count;
                         0x4..0x7 counters: work requests taken, send-side and receive-side
                         completions out, host EV events taken
    ====  =============  ==================================================================

    A QP is set up in the transmit engine (segmenter start PSN and enable, path building peer
    context, scheduler EV sets and enable), the receive engine (front QP enable and memory
    regions, tracker start PSN) and the reliability block (window, timeout, retry limit, probe
    period, start PSN and enable).

    Latency and throughput
    ----------------------
    The blocks' own (see their docstrings): the transmit engine carries one core word per cycle
    and one spray decision per 3 cycles; the receive engine places at the front's rate; the
    reliability block takes a record per 2 cycles. The joins add one register stage on the work
    requests (one request per cycle at most), the EV events, control records and completions,
    and the FIFOs above one more cycle (first-word fall-through registered); send records,
    feedback and PSN limits pass without a register.
    ``make bench`` (``tb/test_nic_engine.py``) measures two NICs through the fabric model.
    """

    def __init__(self, n_qps=4, n_planes=2, data_width=64, pmtu=4096, clk_hz=250_000_000,
                 wrs_per_qp=8, slots=16, backups=8, ev_min_active=4, max_outstanding=16,
                 n_regions=4, buffer_bytes=16384, header_slots=None, mpr=1024, wimm_max=16,
                 ring=64, probe_entries=8, wr_depth=16, timer_bits=10):
        def check(condition, text):
            if not condition:
                raise ValueError(f"NicEngine: {text}")

        for name, value in (("n_planes", n_planes), ("data_width", data_width),
                            ("wrs_per_qp", wrs_per_qp), ("wr_depth", wr_depth)):
            check(isinstance(value, int) and not isinstance(value, bool) and value > 0,
                  f"{name} must be a positive integer, not {value!r}")
        check(wr_depth >= wrs_per_qp, f"wr_depth ({wr_depth}) must be at least wrs_per_qp "
              f"({wrs_per_qp}): every request held for transmission needs its place in the "
              f"reliability block")
        try:
            core = default_core_width(n_planes, data_width)
        except ValueError as exc:
            raise ValueError(f"NicEngine: {exc}") from None
        check(rx_core_width(n_planes, data_width) == core,
              f"{n_planes} planes of {data_width} bits give a transmit core of {core} bits and a "
              f"receive core of {rx_core_width(n_planes, data_width)}: one AXI bus needs both "
              f"equal (W a power of two)")
        try:
            self.tx = TxEngine(n_qps=n_qps, n_planes=n_planes, data_width=data_width, pmtu=pmtu,
                               wrs_per_qp=wrs_per_qp, slots=slots, backups=backups,
                               ev_min_active=ev_min_active, max_outstanding=max_outstanding)
            self.rx = RxEngine(n_planes=n_planes, data_width=data_width, n_qps=n_qps,
                               n_regions=n_regions, buffer_bytes=buffer_bytes,
                               header_slots=header_slots, pmtu=pmtu, mpr=mpr, wimm_max=wimm_max)
            self.rel = Reliability(n_qps=n_qps, ring=ring, probe_entries=probe_entries,
                                   wr_depth=wr_depth, timer_bits=timer_bits)
            self.ticker = TickGenerator(clk_hz)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"NicEngine: {exc}") from None
        self.n_qps, self.n_planes, self.data_width = n_qps, n_planes, data_width
        self.core_width, self.pmtu, self.clk_hz = core, pmtu, clk_hz
        self.marked_depth = n_planes * slots + 2     # the answer to one BAD, and then some
        members = {
            **config_members(ADDR_WIDTH),
            **record_members("s_wr", records.WORK_REQUEST, sink=True),
            **record_members("s_ev", records.EV_EVENT, sink=True),
            **record_members("m_cpl", records.COMPLETION, sink=False),
            "m_axi": Out(axi4(core, 64)),
            "plane_down": In(n_planes), "plane_up": Out(n_planes),
            "tick_count": Out(32),
            "trace_rel_tdata": Out(reliability.TRACE_LAYOUT), "trace_rel_tvalid": Out(1),
            "trace_req_tdata": Out(records.SPRAY_REQUEST), "trace_req_tvalid": Out(1),
            "trace_ans_tdata": Out(records.SPRAY_ANSWER), "trace_ans_tvalid": Out(1),
        }
        for name, (_, layout) in RELIABILITY_TAPS.items():
            members[f"tap_{name}_tdata"] = Out(layout)
            members[f"tap_{name}_tvalid"] = Out(1)
        for p in range(n_planes):
            members.update(axis_members(f"m_axis{p}", data_width, FrameUser.WIDTH, sink=False))
            members.update(axis_members(f"s{p}_axis", data_width, FrameUser.WIDTH, sink=True,
                                        always_ready=True))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        tx, rx, rel, ticker = self.tx, self.rx, self.rel, self.ticker
        m.submodules.tx = tx
        m.submodules.rx = rx
        m.submodules.reliability = rel
        m.submodules.tick = ticker

        # --- tick --------------------------------------------------------------------------------
        m.d.comb += [rx.tick.eq(ticker.tick), tx.tick_count.eq(ticker.tick_count),
                     rel.tick_count.eq(ticker.tick_count), self.tick_count.eq(ticker.tick_count)]

        # --- host work requests: fork to the transmit engine and the reliability tap -------------
        wr = Signal(records.WORK_REQUEST)
        wr_valid, tx_took, rel_took = Signal(), Signal(), Signal()
        tx_fire = tx.s_wr.valid & tx.s_wr.ready
        rel_fire = rel.s_wr.valid & rel.s_wr.ready
        done = wr_valid & (tx_took | tx_fire) & (rel_took | rel_fire)
        m.d.comb += [
            tx.s_wr.p.eq(wr), tx.s_wr.valid.eq(wr_valid & ~tx_took),
            rel.s_wr.p.eq(wr), rel.s_wr.valid.eq(wr_valid & ~rel_took),
            self.s_wr.ready.eq(~wr_valid | done),
        ]
        # A work request of a QP in the error state goes to the reliability block only, which
        # completes it with QP_ERROR at once: the transmit engine never holds it, so a host
        # posting to a failed QP cannot fill its work-request table and stall the other QPs.
        in_error = Signal()
        qpn_in = self.s_wr.p.qpn
        m.d.comb += in_error.eq((qpn_in < self.n_qps) & rel.qp_error.bit_select(
            qpn_in[:max(1, (self.n_qps - 1).bit_length())], 1))
        with m.If(self.s_wr.valid & self.s_wr.ready):
            m.d.sync += [wr.eq(self.s_wr.p), wr_valid.eq(1), tx_took.eq(in_error),
                         rel_took.eq(0)]
        with m.Elif(done):
            m.d.sync += wr_valid.eq(0)
        with m.Else():
            m.d.sync += [tx_took.eq(tx_took | tx_fire), rel_took.eq(rel_took | rel_fire)]

        # --- transmit <-> reliability ------------------------------------------------------------
        # The transmit engine's send records and EV_MARKED answers need the reliability block to
        # take them, and the block holds every output while one is not taken: FIFOs deep enough
        # for everything the block can have outstanding break that cycle (see the docstring).
        ring_depth = self.n_qps * self.rel.ring

        def fifo(name, record, depth):
            m.submodules[name] = part = StreamFifo(records_layout(record), depth)
            return part

        def merge(name, record):
            m.submodules[name] = part = StreamMerge(records_layout(record), 2)
            return part

        connect(m, tx.m_send, rel.s_send)
        marked = fifo("marked_fifo", EV_MARKED, self.marked_depth)
        connect(m, tx.m_marked, marked.i)
        connect(m, marked.o, rel.s_marked)
        retx = fifo("retx_fifo", RETX_REQUEST, ring_depth)
        connect(m, rel.m_retx, retx.i)
        connect(m, retx.o, tx.s_retx)
        connect(m, rel.m_limit, tx.s_limit)
        retire = fifo("retire_fifo", RETIRE, self.n_qps * self.rel.wr_depth)
        connect(m, rel.m_retire, retire.i)
        connect(m, retire.o, tx.s_retire)
        connect(m, rx.m_fb, rel.s_fb)
        rel_ev = fifo("ev_fifo", EV_EVENT, ring_depth)
        connect(m, rel.m_ev, rel_ev.i)
        rel_ctrl = fifo("probe_fifo", CONTROL_RECORD, self.rel.probe_entries)
        connect(m, rel.m_ctrl, rel_ctrl.i)
        ev_merge = merge("ev_merge", EV_EVENT)
        connect(m, rel_ev.o, ev_merge.i[0])
        connect(m, flipped(self.s_ev), ev_merge.i[1])
        connect(m, ev_merge.o, tx.s_ev)
        ctrl_merge = merge("ctrl_merge", CONTROL_RECORD)
        connect(m, rx.m_ctrl, ctrl_merge.i[0])
        connect(m, rel_ctrl.o, ctrl_merge.i[1])
        connect(m, ctrl_merge.o, tx.s_ctrl)
        cpl_merge = merge("cpl_merge", COMPLETION)
        connect(m, rel.m_cpl, cpl_merge.i[0])
        connect(m, rx.m_cpl, cpl_merge.i[1])
        connect(m, cpl_merge.o, flipped(self.m_cpl))
        ev_busy, ctrl_busy, cpl_busy = ev_merge.busy, ctrl_merge.busy, cpl_merge.busy

        # --- host memory: one AXI4 master --------------------------------------------------------
        connect_halves(m, self.m_axi, read=tx.m_axi, write=rx.m_axi)

        # --- planes ------------------------------------------------------------------------------
        for p in range(self.n_planes):
            connect(m, getattr(tx, f"m_axis{p}"), flipped(getattr(self, f"m_axis{p}")))
            connect(m, flipped(getattr(self, f"s{p}_axis")), getattr(rx, f"s{p}_axis"))
        m.d.comb += [tx.plane_down.eq(self.plane_down), self.plane_up.eq(tx.plane_up)]

        # --- traces ------------------------------------------------------------------------------
        m.d.comb += [
            rel.m_trace.ready.eq(1),
            self.trace_rel_tdata.eq(rel.m_trace.p),
            self.trace_rel_tvalid.eq(rel.m_trace.valid),
            self.trace_req_tdata.eq(tx.trace_req_tdata),
            self.trace_req_tvalid.eq(tx.trace_req_tvalid),
            self.trace_ans_tdata.eq(tx.trace_ans_tdata),
            self.trace_ans_tvalid.eq(tx.trace_ans_tvalid),
        ]
        for name, (prefix, _) in RELIABILITY_TAPS.items():
            port = getattr(rel, prefix)
            m.d.comb += [
                getattr(self, f"tap_{name}_tdata").eq(port.p),
                getattr(self, f"tap_{name}_tvalid").eq(port.valid & port.ready),
            ]

        # --- configuration: cfg_addr[24:23] selects the block ------------------------------------
        block = self.cfg_addr[BLOCK_SHIFT:]
        own = SimpleNamespace(cfg_addr=Signal(4, name="own_cfg_addr"), cfg_wdata=self.cfg_wdata,
                              cfg_we=Signal(name="own_cfg_we"),
                              cfg_rdata=Signal(32, name="own_cfg_rdata"))
        units = {"tx": tx, "rx": rx, "reliability": rel, "engine": own}
        rdata = Const(0, 32)
        for name, (index, width) in BLOCKS.items():
            unit = units[name]
            selected = (block == index) & (self.cfg_addr[width:BLOCK_SHIFT] == 0
                                           if width < BLOCK_SHIFT else 1)
            chosen = Signal(name=f"cfg_sel_{name}")
            m.d.sync += chosen.eq(selected)
            m.d.comb += [unit.cfg_addr.eq(self.cfg_addr[:width]),
                         unit.cfg_we.eq(self.cfg_we & selected)]
            if unit is not own:
                m.d.comb += unit.cfg_wdata.eq(self.cfg_wdata)
            rdata = Mux(chosen, unit.cfg_rdata, rdata)
        m.d.comb += self.cfg_rdata.eq(rdata)
        cfg = ConfigMap(m, own, name="nic")
        cfg.ro(ENGINE_INFO, "info",
               Const(self.n_planes | (self.data_width // 8) << 8 | self.n_qps << 16, 32),
               doc="n_planes, W / 8, n_qps")
        cfg.ro(ENGINE_STATUS, "status", Cat(wr_valid, ev_busy, ctrl_busy, cpl_busy),
               doc="fork, EV merge, control merge, completion merge hold a record")
        cfg.ro(ENGINE_TICKS, "ticks", ticker.tick_count, doc="the tick count")
        cpl = self.m_cpl.p
        cpl_fire = self.m_cpl.valid & self.m_cpl.ready
        for name, event in (("wr", self.s_wr.valid & self.s_wr.ready),
                            ("cpl_send", cpl_fire & ~cpl.is_recv),
                            ("cpl_recv", cpl_fire & cpl.is_recv),
                            ("ev_host", self.s_ev.valid & self.s_ev.ready)):
            cfg.counter(ENGINE_COUNTERS[name], name, event, doc=f"{name} counter")
        cfg.finish()
        return m
