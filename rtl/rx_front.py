# SPDX-License-Identifier: BSD-2-Clause
"""The NIC receive front: N plane ports, their receive frame buffers (store and forward with the
ICRC), the plane merge into the core, the parser and the receive checks of docs/protocol.md section 5, and
one configuration port (docs/protocol.md sections 1, 2, 5 and 8).

Golden model: ``models/rx_front.py``; bench: ``tb/test_rx_front.py``.
"""

from amaranth.hdl import Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out, connect, flipped

from models.layouts import Opcode
from models.packets import frame_length
from models.records import FrameUser
from models.rx_front import (BAD, MAX_REGIONS, NO_BUFFER, NO_ROOM, PARSER_COUNTERS,
                             PLANE_COUNTERS, core_width, header_slots_needed)

from .common import records
from .common.config import ConfigMap
from .common.ports import axis_members, check_width, config_members, record_members
from .plane_merge import PlaneMerge, trace_layout
from .rx_parser import RxParser
from .rx_plane_buffer import RxPlaneBuffer

__all__ = ["RxFront", "ADDR_WIDTH", "INFO", "ADDR_INFO", "ADDR_QP_ENABLE", "ADDR_INNER_DST",
           "ADDR_COUNTERS", "REGION_BASE", "REGION_STRIDE", "REGION_REGS", "PLANE_BASE",
           "PLANE_STRIDE", "PLANE_REGS", "region_reg", "plane_reg"]

ADDR_WIDTH = 12
INFO = ("n_planes", "data_width", "core_width", "n_qps", "n_regions", "body_words",
        "header_slots", "slot_words")
ADDR_INFO = {name: i for i, name in enumerate(INFO)}
ADDR_QP_ENABLE = 0x010          # two words (QPs 0-31, 32-63)
ADDR_INNER_DST = 0x014          # four words, bits 31..0 first
ADDR_COUNTERS = {name: 0x040 + i for i, name in enumerate(PARSER_COUNTERS)}
REGION_BASE, REGION_STRIDE = 0x100, 8
REGION_REGS = ("rkey", "base_lo", "base_hi", "length_lo", "length_hi", "valid")
PLANE_BASE, PLANE_STRIDE = 0x200, 8
PLANE_REGS = PLANE_COUNTERS + ("body_free", "slots_used")


def region_reg(region, name):
    """Word address of register ``name`` (:data:`REGION_REGS`) of memory region ``region``."""
    return REGION_BASE + REGION_STRIDE * region + REGION_REGS.index(name)


def plane_reg(plane, name):
    """Word address of counter or status word ``name`` (:data:`PLANE_REGS`) of ``plane``."""
    return PLANE_BASE + PLANE_STRIDE * plane + PLANE_REGS.index(name)


class RxFront(wiring.Component):
    """The receive front of the NIC engine: plane merge, parse, checks and store-and-forward ICRC.

    Each plane port p (W bits, never backpressured) has a receive frame buffer
    (:class:`rtl.rx_plane_buffer.RxPlaneBuffer`: header slots and a body ring in block RAM, the
    ICRC checked on the fly, a frame offered only once whole with its verdict; a frame without
    room for its body keeps its header slot only, to be NACKed NO_PKT_BUFFER if it is a data
    frame; a frame finding no free slot or flagged bad is dropped and counted). The merge
    (:class:`rtl.plane_merge.PlaneMerge`) takes whole frames round-robin into the core of
    ``C = W x N`` bits (N rounded up to a power of two), and the parser
    (:class:`rtl.rx_parser.RxParser`) judges each one in the order of docs/protocol.md section 5
    and emits the records. Golden model: :class:`models.rx_front.RxFrontModel`, which takes the
    plane outcomes and the merge order from ``decision_trace``.

    Parameters
    ----------
    n_planes : 1..8
        N (default 8).
    data_width : 64, 128, 256 or 512
        W, bits per beat of a plane port (C = W x N rounded up to a power of two, at most 4096).
    n_qps : power of two, 1..64
        Local QPs (default 4).
    n_regions : 1..16
        Memory regions (default 4).
    buffer_bytes : int
        Bytes of each plane's body ring, rounded up to a power of two of core words (default
        16384); at least the largest frame at ``pmtu``. A plane at full rate with back-to-back
        frames of the largest size needs room for two of them and the store-and-forward delay
        (about 10 words) to never answer NO_PKT_BUFFER while the outputs keep up.
    header_slots : power of two, 2..256, or None
        Frames a plane buffer holds at once. None (the default):
        :func:`models.rx_front.header_slots_needed` ``(N, W, pmtu)``, the number with which
        valid frames never find every slot of a plane in use while the outputs are ready and the
        core keeps up (32 at N = 2..8, W = 64, pmtu 4096; 8 at N = 2, pmtu 1024). A smaller
        number is accepted (the benches exhaust the slots on purpose); a frame starting while
        every slot of its plane is in use is dropped and counted ``dropped_no_room``, a data
        frame without NACK (docs/protocol.md section 5, "v1 today").
    pmtu : int
        The largest payload (default 4096); sizes the check on ``buffer_bytes`` and the default
        ``header_slots``.

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset.
    ``s<p>_axis_tdata/tkeep/tlast/tvalid/tuser``, p < N: plane port p. No ``tready``; ``tkeep``
    contiguous from lane 0 on the last beat; ``tuser[0]`` on the last beat flags the frame bad.
    ``m_meta_tdata/tvalid/tready``: one :data:`models.records.RX_META` per data frame (trimmed
    ones too) or probe that passed the checks.
    ``m_axis_tdata/tkeep/tlast/tvalid/tready``: the payload of each untrimmed data frame with one
    (pad removed, byte 0 in lane 0, C bits), in the order of the ``m_meta`` records with
    ``payload_length`` > 0.
    ``m_fb_tdata/tvalid/tready``: one :data:`models.records.FEEDBACK_RECORD` per SACK or NACK
    received.
    ``m_ctrl_tdata/tvalid/tready``: one :data:`models.records.CONTROL_RECORD` NACK NO_PKT_BUFFER
    (NETH with the frame's EV and PSN, ``qpn`` the local QP) per data frame without buffer room.
    ``decision_trace``: :func:`rtl.plane_merge.trace_layout`: per cycle, the frames ending on
    each plane with their outcome and the free body words their room was judged on, and the
    merge's grant.
    ``cfg_addr`` (12 bits) ``/cfg_wdata/cfg_we/cfg_rdata``: configuration port
    (``rtl/common/config.py``: read latency 1, unmapped words read 0, counters 32 bits,
    wrapping, cleared when written).

    Configuration map (word addresses; r = region, p = plane)
    -----------------------------------------------------------
    ================  ====  =============================================================
    0x000 - 0x007     ro    N, W, C, n_qps, n_regions, body words and header slots of a
                            plane buffer, words of a header slot
    0x010, 0x011      rw    QP enable: bit q of the 64-bit mask enables local QP q (reset 0)
    0x014 - 0x017     rw    the NIC's inner IPv6 address (destination of every frame it
                            accepts), bits 31..0 first (reset 0)
    0x040 - 0x053     cnt   frames judged by the parser, one counter per
                            ``models.rx_front.PARSER_COUNTERS``: short, ethertype,
                            next_header, length, inner_dst, udp_port, tver, pkey, opcode,
                            trimmed_short, qp_unknown, no_buffer_data (NACKed),
                            no_buffer_control, icrc; passed: data, trimmed, probe, sack,
                            nack; access_denied (data passed with access_ok = 0)
    0x100 + 8 r       rw    region r: +0 R_Key, +1/+2 base (low, high word), +3/+4 length
                            (low, high word), +5 bit 0 valid (reset 0)
    0x200 + 8 p       cnt   plane p: +0 frames ended, +1 dropped_bad (tuser), +2
                            dropped_no_room (no free header slot), +3 no_buffer (header kept)
                      ro    +4 free body words, +5 header slots in use
    ================  ====  =============================================================

    Latency and throughput: every plane port takes one beat per cycle, always. The core moves
    one word of C bits per cycle with no bubble between frames; a frame of b beats takes
    ``ceil(b / (C / W))`` words (frames start at a word). N ports at full rate with frames of b
    beats need ``N x ceil(b / (C / W))`` core cycles per b cycles: always enough when N is not
    a power of two (C / W > N); when C = N x W, short of up to N - 1 cycles a frame unless the
    frames fill their last word (0.75 % for 4096-byte Writes at N = 4, W = 64, less than a
    MAC's inter-frame gap brings at N = 2). The buffers absorb such bursts; a sustained excess
    fills the body ring, answered with NACK NO_PKT_BUFFER, or, with frames short enough to fit
    their header slot (138-byte Writes at C = 512), the header slots, answered by dropping and
    counting ``dropped_no_room`` (no NACK: docs/protocol.md section 5). On an idle front a frame's
    ``m_meta`` record leaves ``ICRC_LATENCY`` (3) + its core words + about 7 cycles after its
    last beat (15 cycles for a 138-byte frame at C = 256), and its payload's first word about 2
    cycles later; ``make bench`` reports both latencies.
    """

    def __init__(self, n_planes=8, data_width=64, n_qps=4, n_regions=4, buffer_bytes=16384,
                 header_slots=None, pmtu=4096):
        check_width("RxFront", data_width)
        if not isinstance(n_planes, int) or not 1 <= n_planes <= 8:
            raise ValueError(f"RxFront: n_planes must be 1..8, not {n_planes!r}")
        C = core_width(n_planes, data_width)
        if C > 4096:
            raise ValueError(f"RxFront: the core (W x N rounded up) is {C} bits, at most 4096")
        if not isinstance(pmtu, int) or not 1 <= pmtu <= 4096:
            raise ValueError(f"RxFront: pmtu must be 1..4096, not {pmtu!r}")
        largest = frame_length(Opcode.WRITE_ONLY_IMM, pmtu)
        if not isinstance(buffer_bytes, int) or buffer_bytes < largest:
            raise ValueError(f"RxFront: buffer_bytes must be at least the largest frame "
                             f"({largest} B at pmtu {pmtu}), not {buffer_bytes!r}")
        if header_slots is None:
            header_slots = header_slots_needed(n_planes, data_width, pmtu)
        if not isinstance(n_regions, int) or not 1 <= n_regions <= MAX_REGIONS:
            raise ValueError(f"RxFront: n_regions must be 1..{MAX_REGIONS}, not {n_regions!r}")
        word_bytes = C // 8
        self.n_planes = n_planes
        self.data_width = data_width
        self.core_width = C
        self.n_qps = n_qps
        self.n_regions = n_regions
        self.header_slots = header_slots
        self.body_words = 1 << max(1, (-(-buffer_bytes // word_bytes) - 1).bit_length())
        sizes = RxPlaneBuffer.sizes(data_width, C, self.body_words, header_slots)
        self.slot_words = sizes["slot_words"]
        self.words_bits = sizes["words_bits"]
        RxParser.check(C, n_qps, n_regions)
        members = dict(config_members(ADDR_WIDTH))
        for p in range(n_planes):
            link = axis_members(f"s{p}_axis", data_width, FrameUser.WIDTH, sink=True,
                                always_ready=True)
            members.update(link)
        members.update({
            **record_members("m_meta", records.RX_META, sink=False),
            **axis_members("m_axis", C, 0, sink=False),
            **record_members("m_fb", records.FEEDBACK_RECORD, sink=False),
            **record_members("m_ctrl", records.CONTROL_RECORD, sink=False),
            "decision_trace": Out(trace_layout(n_planes, sizes["free_bits"])),
        })
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.merge = merge = PlaneMerge(self.n_planes, self.data_width, self.body_words,
                                                self.header_slots)
        m.submodules.parser = parser = RxParser(self.core_width, self.n_qps, self.n_regions,
                                                self.words_bits)
        for p in range(self.n_planes):
            connect(m, flipped(getattr(self, f"s{p}_axis")), getattr(merge, f"s{p}_axis"))
        m.d.comb += [
            parser.s_data.eq(merge.m_data),
            parser.s_last.eq(merge.m_last),
            parser.s_valid.eq(merge.m_valid),
            merge.m_ready.eq(parser.s_ready),
            parser.s_length.eq(merge.m_length),
            parser.s_no_buffer.eq(merge.m_no_buffer),
            parser.s_truncated.eq(merge.m_truncated),
            parser.s_icrc_ok.eq(merge.m_icrc_ok),
            self.decision_trace.eq(merge.decision_trace),
        ]
        for prefix in ("m_meta", "m_fb", "m_ctrl", "m_axis"):
            connect(m, getattr(parser, prefix), flipped(getattr(self, prefix)))

        # --- configuration ---------------------------------------------------------------------
        cfg = ConfigMap(m, self)
        info = {"n_planes": self.n_planes, "data_width": self.data_width,
                "core_width": self.core_width, "n_qps": self.n_qps, "n_regions": self.n_regions,
                "body_words": self.body_words, "header_slots": self.header_slots,
                "slot_words": self.slot_words}
        for name, addr in ADDR_INFO.items():
            cfg.ro(addr, name, Const(info[name], 32), doc=name.replace("_", " "))
        qp_enable = cfg.wide_reg(ADDR_QP_ENABLE, "qp_enable", 64, doc="QP enable mask")
        inner_dst = cfg.wide_reg(ADDR_INNER_DST, "inner_dst", 128, doc="own inner address")
        m.d.comb += [parser.qp_enable.eq(qp_enable[:self.n_qps]),
                     parser.inner_dst.eq(inner_dst)]
        for r in range(self.n_regions):
            region = parser.regions[r]
            m.d.comb += [
                region.rkey.eq(cfg.reg(region_reg(r, "rkey"), f"r{r}_rkey",
                                       doc=f"region {r}: R_Key")),
                region.base.eq(cfg.wide_reg(region_reg(r, "base_lo"), f"r{r}_base", 64,
                                            doc=f"region {r}: base")),
                region.length.eq(cfg.wide_reg(region_reg(r, "length_lo"), f"r{r}_length", 64,
                                              doc=f"region {r}: length")),
                region.valid.eq(cfg.reg(region_reg(r, "valid"), f"r{r}_valid", 1,
                                        doc=f"region {r}: valid")),
            ]
        for i, name in enumerate(PARSER_COUNTERS):
            event = parser.ev_access_denied if name == "access_denied" else \
                parser.ev_valid & (parser.ev_code == i)
            cfg.counter(ADDR_COUNTERS[name], name, event, doc=f"parser: {name}")
        for p in range(self.n_planes):
            end, outcome = merge.plane_end[p], merge.plane_outcome[p]
            events = {"frames": end, "dropped_bad": end & (outcome == BAD),
                      "dropped_no_room": end & (outcome == NO_ROOM),
                      "no_buffer": end & (outcome == NO_BUFFER)}
            for name in PLANE_COUNTERS:
                cfg.counter(plane_reg(p, name), f"p{p}_{name}", events[name],
                            doc=f"plane {p}: {name}")
            cfg.ro(plane_reg(p, "body_free"), f"p{p}_body_free", merge.plane_body_free[p],
                   doc=f"plane {p}: free body words")
            cfg.ro(plane_reg(p, "slots_used"), f"p{p}_slots_used", merge.plane_slots_used[p],
                   doc=f"plane {p}: header slots in use")
        cfg.finish()
        return m
