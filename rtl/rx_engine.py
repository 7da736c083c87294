# SPDX-License-Identifier: BSD-2-Clause
"""The NIC receive engine: receive front -> receive tracker -> direct placement, with one
configuration port and an AXI4 write master to host memory; golden model
``models/rx_engine.py``."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out, connect, flipped

from models.records import FrameUser
from models.rx_front import core_width, engine_header_slots
from models.rx_tracker import MPR_DEFAULT, WIMM_MAX_DEFAULT

from .common import records
from .common.config import ConfigMap
from .common.ports import axis_members, config_members, record_members
from .placement import Placement, axi_write_members
from .placement import ADDR_WIDTH as PLACEMENT_ADDR_WIDTH
from .rx_front import ADDR_WIDTH as FRONT_ADDR_WIDTH
from .rx_front import RxFront
from .rx_tracker import ADDR_WIDTH as TRACKER_ADDR_WIDTH
from .rx_tracker import RxTracker

__all__ = ["RxEngine", "ADDR_WIDTH", "FRONT_BASE", "TRACKER_BASE", "PLACEMENT_BASE",
           "ENGINE_BASE", "ENGINE_INFO", "ENGINE_STATUS", "PENDING_DEPTH", "MAX_CORE_WIDTH"]

ADDR_WIDTH = 16
_BLOCK_SHIFT = 12                   # cfg_addr[15:12] selects the block
FRONT_BASE = 0x0000
TRACKER_BASE = 0x1000
PLACEMENT_BASE = 0x2000
ENGINE_BASE = 0x3000
ENGINE_INFO = ENGINE_BASE + 0       # ro: the core width C
ENGINE_STATUS = ENGINE_BASE + 1     # ro: bit 0 frames wait for a verdict, bit 1 m_ctrl valid
PENDING_DEPTH = 8                   # frames between the tracker's input and its verdict
MAX_CORE_WIDTH = 512                # the placement's AXI data bus is the core width

_EVENT_FIELDS = ("qpn", "opcode", "psn", "ev", "dscp", "ecn", "ackreq", "rtx", "msn", "imm",
                 "payload_length", "access_ok", "probe_id")


class RxEngine(wiring.Component):
    """The receive engine of the NIC: :class:`rtl.rx_front.RxFront` (plane buffers with the
    ICRC, plane merge, parser and the checks of docs/protocol.md section 5), :class:`rtl.rx_tracker.
    RxTracker` (per-QP receive state, SACK/NACK/probe answers, Write-with-Immediate completions)
    and :class:`rtl.placement.Placement` (AXI4 write master), joined as
    :class:`models.rx_engine.RxEngineModel` composes their models.

    Joins:

    - every ``RX_META`` record of the front becomes an ``RX_EVENT`` of the tracker (fields of the
      same names) while its VA and payload length wait in a FIFO (``PENDING_DEPTH`` frames);
    - every ``RX_VERDICT`` of the tracker (in event order) becomes a ``PLACE_COMMAND`` for the
      placement: that VA and payload length (0 for trimmed frames and probes, which own no
      payload beats), ``place`` = the verdict's ``placed``; the front's payload stream feeds the
      placement directly, so only a placed frame is written, after its ICRC was found good;
    - the tracker's control records and the front's NACK NO_PKT_BUFFER records are merged
      round-robin onto ``m_ctrl`` (a register stage, one record per cycle).

    Parameters
    ----------
    n_planes, data_width, n_qps, n_regions, buffer_bytes, header_slots, pmtu
        The front's (:class:`rtl.rx_front.RxFront`); the core width ``C`` (W x N rounded up to
        a power of two) is also the AXI data width and must be 64..512.
        ``header_slots`` None (the default): :func:`models.rx_front.engine_header_slots`, the
        front's bound (:func:`models.rx_front.header_slots_needed`) allowing the placement to
        stop the front for one largest frame's words (64 at N = 2 or 8, W = 64, pmtu 4096;
        16 at N = 1 or 2, pmtu 1024).
    mpr, wimm_max
        The tracker's (:class:`rtl.rx_tracker.RxTracker`).
    addr_width, place_queue
        The placement's ``addr_width`` and ``queue_depth``.

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset.
    ``s<p>_axis_tdata/tkeep/tlast/tvalid/tuser``, p < N: plane port p (W bits, no ``tready``:
    never backpressured).
    ``tick``: the shared 1.024 us tick (a one-cycle pulse, ``rtl/tick_generator.py``).
    ``m_ctrl_tdata/tvalid/tready``: :data:`models.records.CONTROL_RECORD`: SACKs, NACKs and
    probe answers of the tracker, NACK NO_PKT_BUFFER of the front (for the transmit engine).
    ``m_cpl_tdata/tvalid/tready``: :data:`models.records.COMPLETION` (Write with Immediate).
    ``m_fb_tdata/tvalid/tready``: :data:`models.records.FEEDBACK_RECORD` (SACKs and NACKs
    received, for the reliability block).
    ``m_axi_aw*/w*/b*``: AXI4 write master to host memory (:class:`rtl.placement.Placement`).
    ``decision_trace``: the front's trace (frame ends with their plane outcomes, merge grants).
    ``trace_verdict``, ``trace_verdict_valid``: each verdict (:data:`models.records.RX_VERDICT`,
    with the ticks the tracker applied before it) in the cycle it is taken (docs/protocol.md 8: a model
    fed the front's trace and these ticks decides the same).
    ``cfg_addr`` (16 bits) ``/cfg_wdata/cfg_we/cfg_rdata``: one configuration port reaching every
    block (read latency 1): ``cfg_addr[15:12]`` selects the block and the low bits are its own
    map, unchanged.

    ================  =====================================================================
    0x0000 - 0x0fff   the front's map (:class:`rtl.rx_front.RxFront`): QP enable mask, inner
                      address, memory regions, parser and plane counters
    0x1000 - 0x1fff   the tracker's map (:class:`rtl.rx_tracker.RxTracker`): QP set-up
                      (start PSN, enable), per-QP state, verdict and record counters
    0x2000 - 0x201f   the placement's map (:class:`rtl.placement.Placement`): counters,
                      outstanding bursts, busy (0x2020 - 0x2fff unmapped)
    0x3000            ro  the core width C
    0x3001            ro  bit 0: frames wait for their verdict; bit 1: ``m_ctrl`` holds a record
    ================  =====================================================================

    A QP is set up in two places: its bit of the front's QP enable mask (frames of a QP not
    enabled there are dropped, counted ``qp_unknown``) and its page of the tracker (start PSN,
    enable); a frame of a QP enabled in the front only gets the verdict DROPPED and places
    nothing.

    Latency and throughput: the front moves one core word per cycle; its payloads wait for their
    verdict in its payload FIFO (16 words), so the tracker's decision (2 cycles per event, 3
    from event to verdict) and the placement (one C-bit beat per cycle) overlap the next frames:
    back-to-back data frames are placed at the front's rate, the payload's share of the frame
    words (measured at the default sizes, N = 8, W = 64, C = 512, every plane at full rate:
    61.2 payload bytes per cycle of 64 for 4096-byte Writes, 57.7 for 1500-byte ones). A
    frame's SACK (AckReq) leaves ``m_ctrl`` 17 cycles after its last beat on an idle engine at
    C = 512 (24 at C = 128), its first write 2 cycles later; ``make bench`` measures both.
    """

    def __init__(self, n_planes=8, data_width=64, n_qps=4, n_regions=4, buffer_bytes=16384,
                 header_slots=None, pmtu=4096, mpr=MPR_DEFAULT, wimm_max=WIMM_MAX_DEFAULT,
                 addr_width=64, place_queue=4):
        if isinstance(n_planes, int) and isinstance(data_width, int) and \
                core_width(n_planes, data_width) > MAX_CORE_WIDTH:
            raise ValueError(f"RxEngine: the core width (W x N rounded up) is "
                             f"{core_width(n_planes, data_width)} bits; the placement's AXI bus "
                             f"takes at most {MAX_CORE_WIDTH}")
        if header_slots is None and isinstance(n_planes, int) and isinstance(data_width, int):
            header_slots = engine_header_slots(n_planes, data_width, pmtu)
        self.front = RxFront(n_planes=n_planes, data_width=data_width, n_qps=n_qps,
                             n_regions=n_regions, buffer_bytes=buffer_bytes,
                             header_slots=header_slots, pmtu=pmtu)
        self.tracker = RxTracker(n_qps=n_qps, mpr=mpr, wimm_max=wimm_max)
        self.core_width = self.front.core_width
        self.placement = Placement(self.core_width, addr_width=addr_width,
                                   queue_depth=place_queue)
        self.n_planes = n_planes
        self.data_width = data_width
        self.n_qps = n_qps
        members = dict(config_members(ADDR_WIDTH))
        for p in range(n_planes):
            link = axis_members(f"s{p}_axis", data_width, FrameUser.WIDTH, sink=True,
                                always_ready=True)
            members.update(link)
        members.update({
            "tick": In(1),
            **record_members("m_ctrl", records.CONTROL_RECORD, sink=False),
            **record_members("m_cpl", records.COMPLETION, sink=False),
            **record_members("m_fb", records.FEEDBACK_RECORD, sink=False),
            **axi_write_members("m_axi", self.core_width, addr_width),
            "decision_trace": Out(self.front.decision_trace.shape()),
            "trace_verdict": Out(records.RX_VERDICT),
            "trace_verdict_valid": Out(1),
        })
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        front, tracker, place = self.front, self.tracker, self.placement
        m.submodules.front = front
        m.submodules.tracker = tracker
        m.submodules.placement = place

        # --- planes into the front; its trace, feedback and payload out ---------------------
        for p in range(self.n_planes):
            connect(m, flipped(getattr(self, f"s{p}_axis")), getattr(front, f"s{p}_axis"))
        m.d.comb += self.decision_trace.eq(front.decision_trace)
        connect(m, front.m_fb, flipped(self.m_fb))
        connect(m, front.m_axis, place.s_axis)

        # --- RX_META -> RX_EVENT; VA and length wait for the verdict ------------------------
        meta = front.m_meta.p
        pending = m.submodules.pending = SyncFIFO(width=64 + 16, depth=PENDING_DEPTH)
        for name in _EVENT_FIELDS:
            m.d.comb += getattr(tracker.s_ev.p, name).eq(getattr(meta, name))
        meta_fire = front.m_meta.valid & front.m_meta.ready
        m.d.comb += [
            tracker.s_ev.valid.eq(front.m_meta.valid & pending.w_rdy),
            front.m_meta.ready.eq(tracker.s_ev.ready & pending.w_rdy),
            pending.w_data.eq(Cat(meta.va, meta.payload_length)),
            pending.w_en.eq(meta_fire),
            tracker.tick.eq(self.tick),
        ]

        # --- RX_VERDICT -> PLACE_COMMAND ----------------------------------------------------
        verdict = tracker.m_verdict.p
        cmd = place.s_cmd.p
        verdict_fire = tracker.m_verdict.valid & tracker.m_verdict.ready
        m.d.comb += [
            cmd.va.eq(pending.r_data[:64]), cmd.length.eq(pending.r_data[64:]),
            cmd.place.eq(verdict.placed),
            place.s_cmd.valid.eq(tracker.m_verdict.valid & pending.r_rdy),
            tracker.m_verdict.ready.eq(place.s_cmd.ready & pending.r_rdy),
            pending.r_en.eq(verdict_fire),
            self.trace_verdict.eq(verdict),
            self.trace_verdict_valid.eq(verdict_fire),
        ]

        # --- completions out; AXI out -------------------------------------------------------
        connect(m, tracker.m_cpl, flipped(self.m_cpl))
        connect(m, place.m_axi, flipped(self.m_axi))

        # --- control records: the tracker's and the front's, round-robin --------------------
        out_free = ~self.m_ctrl.valid | self.m_ctrl.ready
        prefer_front = Signal()
        take_front = front.m_ctrl.valid & (prefer_front | ~tracker.m_ctrl.valid)
        take_tracker = tracker.m_ctrl.valid & ~take_front
        m.d.comb += [front.m_ctrl.ready.eq(out_free & take_front),
                     tracker.m_ctrl.ready.eq(out_free & take_tracker)]
        with m.If(out_free & (take_front | take_tracker)):
            m.d.sync += [
                self.m_ctrl.valid.eq(1),
                self.m_ctrl.p.eq(Mux(take_front, front.m_ctrl.p, tracker.m_ctrl.p)),
                prefer_front.eq(~take_front),
            ]
        with m.Elif(self.m_ctrl.ready):
            m.d.sync += self.m_ctrl.valid.eq(0)

        # --- one configuration port: cfg_addr[15:12] selects the block ----------------------
        block = self.cfg_addr[_BLOCK_SHIFT:]
        low = self.cfg_addr[:_BLOCK_SHIFT]
        in_placement = (block == PLACEMENT_BASE >> _BLOCK_SHIFT) & \
            (low[PLACEMENT_ADDR_WIDTH:] == 0)
        own = SimpleNamespace(cfg_addr=Signal(4, name="own_cfg_addr"), cfg_wdata=self.cfg_wdata,
                              cfg_we=Signal(name="own_cfg_we"),
                              cfg_rdata=Signal(32, name="own_cfg_rdata"))
        selects = (
            (front, block == FRONT_BASE >> _BLOCK_SHIFT, FRONT_ADDR_WIDTH),
            (tracker, block == TRACKER_BASE >> _BLOCK_SHIFT, TRACKER_ADDR_WIDTH),
            (place, in_placement, PLACEMENT_ADDR_WIDTH),
            (own, (block == ENGINE_BASE >> _BLOCK_SHIFT) & (low[4:] == 0), 4),
        )
        rdata = Const(0, 32)
        for index, (sub, selected, width) in enumerate(selects):
            chosen = Signal(name=f"cfg_sel{index}")
            m.d.sync += chosen.eq(selected)
            m.d.comb += [sub.cfg_addr.eq(low[:width]), sub.cfg_we.eq(self.cfg_we & selected)]
            if sub is not own:
                m.d.comb += sub.cfg_wdata.eq(self.cfg_wdata)
            rdata = Mux(chosen, sub.cfg_rdata, rdata)
        m.d.comb += self.cfg_rdata.eq(rdata)
        cfg = ConfigMap(m, own, name="engine")
        cfg.ro(ENGINE_INFO - ENGINE_BASE, "core_width", Const(self.core_width, 32),
               doc="the core width C")
        cfg.ro(ENGINE_STATUS - ENGINE_BASE, "status", Cat(pending.r_rdy, self.m_ctrl.valid),
               doc="frames waiting for a verdict, m_ctrl holds a record")
        cfg.finish()
        return m
