# SPDX-License-Identifier: BSD-2-Clause
"""The NIC receive plane merge: N plane ports, each with its receive frame buffer
(``rtl/rx_plane_buffer.py``), merged frame by frame, round-robin, into the core of C bits per cycle
(docs/protocol.md sections 5 and 8). Golden model: the order it reports is an input of
``models/rx_front.py`` (:meth:`RxFrontModel.merge`); bench: ``tb/test_rx_front.py``."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from models.records import FrameUser
from models.rx_front import MAX_PLANES, core_width, header_slots_needed

from .common.ports import axis_members, check_width
from .rx_plane_buffer import LENGTH_BITS, RxPlaneBuffer

__all__ = ["PlaneMerge", "plane_bits", "trace_layout"]


def plane_bits(n_planes):
    """Bits of a plane number (at least 1)."""
    return max(1, (n_planes - 1).bit_length())


def trace_layout(n_planes, free_bits):
    """The merge's trace (docs/protocol.md 8): what it decided on timing, sampled every cycle."""
    return data.StructLayout({
        "arrive": n_planes,                 # bit p: a frame ended on plane p
        "outcome": 2 * n_planes,            # its plane outcome (models.rx_front codes), 2 bits each
        "free": free_bits * n_planes,       # the free body words its room was judged on
        "grant": 1,                         # a frame of plane grant_plane enters the core
        "grant_plane": plane_bits(n_planes),
    })


class PlaneMerge(wiring.Component):
    """N plane ports into one core stream of whole frames, round-robin, C bits per cycle.

    Each plane port feeds an :class:`rtl.rx_plane_buffer.RxPlaneBuffer` (never backpressured;
    frames offered whole with their ICRC verdict). When the core stream needs a new frame, the
    merge grants the first plane holding one, in round-robin order starting after the last one
    granted, and reads its words, one per cycle. The grant is reported on ``decision_trace`` in
    its cycle (with each plane's frame ends and outcomes): the golden model takes the order from
    it.

    Parameters
    ----------
    n_planes : 1..8
        N, plane ports.
    data_width : 64, 128, 256 or 512
        W, bits per beat of a plane port.
    body_words, header_slots : powers of two
        Size of each plane's buffer (:class:`RxPlaneBuffer`); ``header_slots`` None (the
        default): :func:`models.rx_front.header_slots_needed` at pmtu 4096 with every output
        ready.

    The core width is ``C = W x N`` with N rounded up to a power of two
    (:func:`models.rx_front.core_width`), at most 4096.

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset.
    ``s<p>_axis_tdata/tkeep/tlast/tvalid/tuser``, p < N: plane port p (no ``tready``).
    ``m_data``, ``m_last``, ``m_valid``, ``m_ready``: the core stream, one frame after another,
    each starting at a new word; ``m_length`` (frame bytes), ``m_no_buffer``, ``m_truncated``,
    ``m_icrc_ok`` and ``m_plane`` describe the frame and hold through its words.
    ``decision_trace``: :func:`trace_layout` (no handshake: sample it every cycle).
    ``plane_end``, ``plane_outcome``, ``plane_body_free``, ``plane_slots_used``: each plane's
    frame ends with their outcomes (for counters), free body words and header slots in use.

    Latency and throughput: a frame's first word leaves one cycle after its grant; one word per
    cycle, and the next frame's first word right after a frame's last whenever a plane offers
    one, as long as ``m_ready`` is high.
    """

    def __init__(self, n_planes=8, data_width=64, body_words=256, header_slots=None):
        check_width("PlaneMerge", data_width)
        if not isinstance(n_planes, int) or not 1 <= n_planes <= MAX_PLANES:
            raise ValueError(f"PlaneMerge: n_planes must be 1..{MAX_PLANES}, not {n_planes!r}")
        if header_slots is None:
            header_slots = header_slots_needed(n_planes, data_width)
        self.n_planes = n_planes
        self.data_width = data_width
        self.core_width = core_width(n_planes, data_width)
        self.body_words = body_words
        self.header_slots = header_slots
        sizes = RxPlaneBuffer.sizes(data_width, self.core_width, body_words, header_slots)
        self.slot_words = sizes["slot_words"]
        self.free_bits = sizes["free_bits"]
        self.words_bits = sizes["words_bits"]
        members = {}
        for p in range(n_planes):
            link = axis_members(f"s{p}_axis", data_width, FrameUser.WIDTH, sink=True,
                                always_ready=True)
            members.update(link)
        members.update({
            "m_data": Out(self.core_width), "m_last": Out(1), "m_valid": Out(1), "m_ready": In(1),
            "m_length": Out(LENGTH_BITS), "m_no_buffer": Out(1), "m_truncated": Out(1),
            "m_icrc_ok": Out(1), "m_plane": Out(plane_bits(n_planes)),
            "decision_trace": Out(trace_layout(n_planes, self.free_bits)),
            "plane_end": Out(n_planes), "plane_outcome": Out(data.ArrayLayout(2, n_planes)),
            "plane_body_free": Out(data.ArrayLayout(self.free_bits, n_planes)),
            "plane_slots_used": Out(data.ArrayLayout(sizes["slots_bits"], n_planes)),
        })
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        N = self.n_planes
        bufs = [RxPlaneBuffer(self.data_width, self.core_width, self.body_words,
                              self.header_slots) for _ in range(N)]
        for p, buf in enumerate(bufs):
            m.submodules[f"plane{p}"] = buf
            wiring.connect(m, wiring.flipped(getattr(self, f"s{p}_axis")), buf.s_axis)
            m.d.comb += [
                self.plane_end[p].eq(buf.ev_end),
                self.plane_outcome[p].eq(buf.ev_outcome),
                self.plane_body_free[p].eq(buf.body_free),
                self.plane_slots_used[p].eq(buf.slots_used),
            ]

        # --- round-robin choice among the planes offering a frame ----------------------------
        valid = Cat(b.f_valid for b in bufs)
        first = Signal(range(N))            # highest priority: the plane after the last grant
        chosen = Signal(range(N))
        with m.Switch(first):
            for start in range(N):
                with m.Case(start):
                    order = [(start + k) % N for k in range(N)]
                    for k, plane in enumerate(order):
                        with (m.If if k == 0 else m.Elif)(valid[plane]):
                            m.d.comb += chosen.eq(plane)

        def pick(attr):
            value = getattr(bufs[0], attr)
            for p in range(1, N):
                value = Mux(chosen == p, getattr(bufs[p], attr), value)
            return value

        words = pick("f_words")
        remaining = Signal(self.words_bits)     # words of the current frame still to read
        current = Signal(range(N))
        out_plane = Signal(range(N))
        free_out = ~self.m_valid | self.m_ready
        grant = Signal()
        with m.If(free_out):
            with m.If(remaining == 0):
                m.d.comb += grant.eq(valid.any())
                m.d.sync += self.m_valid.eq(valid.any())
                with m.If(valid.any()):
                    m.d.sync += [
                        current.eq(chosen),
                        first.eq(Mux(chosen == N - 1, 0, chosen + 1)),
                        remaining.eq(words - 1),
                        out_plane.eq(chosen),
                        self.m_last.eq(words == 1),
                        self.m_length.eq(pick("f_length")),
                        self.m_no_buffer.eq(pick("f_no_buffer")),
                        self.m_truncated.eq(pick("f_truncated")),
                        self.m_icrc_ok.eq(pick("f_icrc_ok")),
                        self.m_plane.eq(chosen),
                    ]
            with m.Else():
                m.d.sync += [
                    self.m_valid.eq(1),
                    remaining.eq(remaining - 1),
                    self.m_last.eq(remaining == 1),
                ]
        for p, buf in enumerate(bufs):
            m.d.comb += [
                buf.f_take.eq(grant & (chosen == p)),
                buf.rd_en.eq(free_out & Mux(remaining == 0, grant & (chosen == p),
                                            current == p)),
            ]
        data_out = bufs[0].rd_data
        for p in range(1, N):
            data_out = Mux(out_plane == p, bufs[p].rd_data, data_out)
        m.d.comb += self.m_data.eq(data_out)

        m.d.comb += [
            self.decision_trace.arrive.eq(Cat(b.ev_end for b in bufs)),
            self.decision_trace.outcome.eq(Cat(b.ev_outcome for b in bufs)),
            self.decision_trace.free.eq(Cat(b.seen_free for b in bufs)),
            self.decision_trace.grant.eq(grant),
            self.decision_trace.grant_plane.eq(chosen),
        ]
        return m
