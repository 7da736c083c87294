# SPDX-License-Identifier: BSD-2-Clause
"""The plane splitter (NIC transmit; docs/protocol.md 4.6, 8): core frames to N plane ports through a FIFO
per plane, with the plane-down flush; golden model ``models/plane_splitter.py``."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2, exact_log2

from models.packets import PMTU_MAX
from models.plane_splitter import (COUNTERS, MAX_PLANES, PLANE_COUNTER_BASE, PLANE_COUNTER_STRIDE,
                                   PLANE_COUNTERS, WIDTHS, default_core_width, default_fifo_depth,
                                   frame_words, max_frame_bytes, route_depth)
from models.records import SEND_RECORD, FrameUser
from rtl.common import records
from rtl.common.config import ConfigMap
from rtl.common.logic import first_set
from rtl.common.ports import axis_members, config_members, record_members

__all__ = ["PlaneSplitter", "ADDR_WIDTH", "ADDR_PLANE_UP", "ADDR_STATUS", "ADDR_INFO",
           "plane_counter_addr", "ROUTE_QUEUE", "ROUTE_LATENCY", "LATENCY"]

ADDR_WIDTH = 8
ADDR_PLANE_UP = 0x00
ADDR_STATUS = 0x01
ADDR_INFO = {"n_planes": 0x02, "data_width": 0x03, "core_width": 0x04, "fifo_depth": 0x05,
             "route_depth": 0x06, "max_words": 0x07}
ROUTE_QUEUE = 8               # PLANE_FRAME records taken whose frames have not come in yet
ROUTE_LATENCY = 2             # a record taken in cycle t lets its frame in from cycle t + 2
LATENCY = 2                   # a frame's last core beat in cycle t -> its first port beat in t+2

_FLUSHED_BIT = SEND_RECORD.offsets["flushed"]


def plane_counter_addr(plane, name):
    """The word address of per-plane counter ``name`` of plane ``plane``."""
    return PLANE_COUNTER_BASE + PLANE_COUNTER_STRIDE * plane + PLANE_COUNTERS[name]


class PlaneSplitter(wiring.Component):
    """Sends each core frame out of its plane's port (docs/protocol.md 8: the core is N x W bits, a port W
    bits), through a FIFO per plane in block RAM, and flushes a plane that goes down (docs/protocol.md 4.6).
    Equal to :class:`models.plane_splitter.PlaneSplitterModel`, whose docstring fixes which frames
    are sent and which flushed, and the answer to bad input.

    Parameters
    ----------
    n_planes : 1..8 (default 8)
        Planes N.
    data_width : 64, 128, 256 or 512 (default 64)
        W, the width of a plane port.
    core_width : 64..512, a multiple of W (default N x W rounded up to a power of two)
        C, the width of the core frame stream.
    max_payload : 1..4096 (default 4096)
        The longest payload: a plane is ok when a frame of that payload still fits.
    fifo_depth : power of two, at least two largest frames (default: the smallest such)
        Core words (C bits) per plane FIFO; a frame takes whole words.
    route_queue : 2..64 (default :data:`ROUTE_QUEUE`)
        PLANE_FRAME records taken whose frames have not come in yet (the route queue's depth;
        a smaller one is for the inductive proof, ``verif/formal_tx_streams.py``).

    Ports
    -----
    ``s_frame_tdata/tvalid/tready``: one ``PLANE_FRAME`` record per frame, before or while its
    frame comes in. Taking it reserves the frame's room in its plane's FIFO, so it is taken only
    when the frame fits (``s_frame_tready`` depends on ``s_frame_tdata``); a record whose plane is
    not below N is taken at once.
    ``s_axis_tdata/tkeep/tlast/tvalid/tready/tuser``: the core frames (C bits), in record order;
    ``tkeep`` all ones but on the last beat, where the frame ends at the first lane whose keep is
    0. ``s_axis_tready`` is 1 while a record taken at least :data:`ROUTE_LATENCY` cycles before
    waits for its frame: the input never stalls a frame whose record was taken in time (the header
    inserter's frame follows its header by more than that).
    ``m_axis<p>_tdata/tkeep/tlast/tvalid/tready/tuser`` for p < N: plane port p (W bits).
    ``tuser[0]`` on the last beat of a frame flagged bad upstream.
    ``m_flush_tdata/tvalid/tready``: the send record of each data frame flushed, ``flushed`` = 1.
    ``plane_down`` (N bits, in): planes whose link is down (a plane is up when its configuration
    bit is set and this bit is not).
    ``plane_up`` (N bits, out): the planes up.
    ``plane_ok`` (N bits, out): planes up with room for a largest frame beside everything queued
    or reserved, this cycle's ``s_frame`` handshake included (combinational from it).
    ``cfg_addr`` (8 bits) ``/cfg_wdata/cfg_we/cfg_rdata``: configuration port (read latency 1,
    unmapped words read 0, counters 32 bits, wrapping, cleared when written).
    ``clk``, ``rst``: the ``sync`` domain.

    Configuration map (word addresses)
    ----------------------------------
    ===============  ====  =========================================================================
    0x00             rw    plane up mask, bit p = plane p (reset: all up)
    0x01             ro    planes up (the mask and not ``plane_down``)
    0x02 .. 0x07     ro    n_planes, data_width, core_width, fifo_depth, route_depth (frames a plane
                           holds), max_words (core words of a largest frame)
    0x10 .. 0x12     cnt   frames_in, bad_plane, bad_length (:data:`models.plane_splitter.COUNTERS`)
    0x20 + 4p + k    cnt   plane p: frames_out (k = 0), flushed_data (1), flushed_control (2)
    ===============  ====  =========================================================================

    Structure and timing
    --------------------
    A record taken goes into a queue of ``route_queue`` and adds the frame's words and one
    frame to its plane's reservation. The frame's beats are written, one per cycle, into its
    plane's data memory (C bits and the beat's byte count, last and user bits per word) after the
    plane's last frame; on its last beat the frame is committed: its entry (word count, data bit,
    send record) goes into the plane's record memory. A frame whose length is not its record's,
    or whose last beat is empty (``tkeep[0]`` = 0, outside the stream convention), or whose
    record's plane is not below N, is not committed; its reservation is given back.

    A plane port starts the oldest committed frame when the plane is up and nothing waits to be
    flushed, and sends it at one W beat per cycle (C/W beats per word, fewer on a frame's last
    word), never idle inside a frame; the next frame's first beat follows the last one of the
    previous without a gap. A word's room is given back when its last beat leaves. Each cycle a
    plane is down, every frame committed so far (this cycle's included) and not started is marked
    to be flushed; a walker drops them one per cycle, in order (a data frame when the flush output
    register is free: one send record per cycle for all planes, lowest plane first), giving their
    room back. Memories are read with the address of the next cycle, so a frame can start in the
    second cycle after its commit: its first port beat is valid 2 cycles after the cycle of its last
    core beat (:data:`LATENCY`).
    """

    def __init__(self, n_planes=8, data_width=64, core_width=None, max_payload=PMTU_MAX,
                 fifo_depth=None, route_queue=ROUTE_QUEUE):
        if not isinstance(n_planes, int) or not 1 <= n_planes <= MAX_PLANES:
            raise ValueError(f"PlaneSplitter: n_planes must be 1..{MAX_PLANES}, not {n_planes!r}")
        if data_width not in WIDTHS:
            raise ValueError(f"PlaneSplitter: data_width must be one of {WIDTHS}, "
                             f"not {data_width!r}")
        if core_width is None:
            core_width = default_core_width(n_planes, data_width)
        if core_width not in WIDTHS or core_width % data_width:
            raise ValueError(f"PlaneSplitter: core_width must be one of {WIDTHS} and a multiple "
                             f"of data_width {data_width}, not {core_width!r}")
        if not isinstance(max_payload, int) or not 1 <= max_payload <= PMTU_MAX:
            raise ValueError(f"PlaneSplitter: max_payload must be 1..{PMTU_MAX}, "
                             f"not {max_payload!r}")
        max_words = frame_words(max_frame_bytes(max_payload), core_width)
        if fifo_depth is None:
            fifo_depth = default_fifo_depth(core_width, max_payload)
        if (not isinstance(fifo_depth, int) or fifo_depth < 2 * max_words
                or fifo_depth & (fifo_depth - 1) or fifo_depth > 1 << 16):
            raise ValueError(f"PlaneSplitter: fifo_depth must be a power of two from "
                             f"{2 * max_words} (two largest frames) to 65536, "
                             f"not {fifo_depth!r}")
        if not isinstance(route_queue, int) or not 2 <= route_queue <= 64:
            raise ValueError(f"PlaneSplitter: route_queue must be 2..64, not {route_queue!r}")
        self.route_queue = route_queue
        self.n_planes = n_planes
        self.data_width = data_width
        self.core_width = core_width
        self.max_payload = max_payload
        self.fifo_depth = fifo_depth
        self.max_words = max_words
        self.route_depth = route_depth(fifo_depth, core_width)
        members = {
            **config_members(ADDR_WIDTH),
            **record_members("s_frame", records.PLANE_FRAME, sink=True),
            **axis_members("s_axis", core_width, FrameUser.WIDTH, sink=True),
            **record_members("m_flush", records.SEND_RECORD, sink=False),
            "plane_down": In(n_planes),
            "plane_up": Out(n_planes),
            "plane_ok": Out(n_planes),
        }
        for p in range(n_planes):
            members.update(axis_members(f"m_axis{p}", data_width, FrameUser.WIDTH, sink=False))
        super().__init__(members)

    def port(self, plane):
        """The stream ``m_axis<plane>``."""
        return getattr(self, f"m_axis{plane}")

    def elaborate(self, platform):
        m = Module()
        npl, W, C = self.n_planes, self.data_width, self.core_width
        D, M = self.fifo_depth, self.route_depth
        lanes, port_lanes = C // 8, W // 8
        ratio = C // W
        db, mb = exact_log2(D), exact_log2(M)
        log_lanes = exact_log2(lanes)
        sub_bits = max(1, exact_log2(ratio))
        nbytes_bits = bits_for(lanes)
        word_bits = bits_for(D)
        used_bits = bits_for(D)
        frames_bits = bits_for(M)

        # --- configuration -----------------------------------------------------------------------
        cfg = ConfigMap(m, self, "plane_splitter")
        up_mask = cfg.reg(ADDR_PLANE_UP, "plane_up", npl, init=(1 << npl) - 1,
                          doc="plane up mask")
        up = Signal(npl)
        m.d.comb += [up.eq(up_mask & ~self.plane_down), self.plane_up.eq(up)]
        cfg.ro(ADDR_STATUS, "status", up, doc="planes up")
        for name, addr in ADDR_INFO.items():
            cfg.ro(addr, name, Const(getattr(self, name), 32))
        count = {name: Signal(name=f"count_{name}") for name in COUNTERS}
        for name, addr in COUNTERS.items():
            cfg.counter(addr, name, count[name])
        plane_count = [{name: Signal(name=f"count_{name}_{p}") for name in PLANE_COUNTERS}
                       for p in range(npl)]
        for p in range(npl):
            for name in PLANE_COUNTERS:
                cfg.counter(plane_counter_addr(p, name), f"{name}_{p}", plane_count[p][name])

        def words_of(nbytes):
            return (nbytes + lanes - 1) >> log_lanes

        # --- records in: reservations and the route queue ----------------------------------------
        used_words = [Signal(used_bits, name=f"used_words_{p}") for p in range(npl)]
        used_frames = [Signal(frames_bits, name=f"used_frames_{p}") for p in range(npl)]
        rec = self.s_frame.p
        rec_words = Signal(word_bits)
        m.d.comb += rec_words.eq(words_of(rec.frame_bytes))
        m.submodules.routes = routes = SyncFIFOBuffered(width=records.PLANE_FRAME.size,
                                                        depth=self.route_queue)
        rec_bad_plane = rec.plane >= npl
        fits = Cat(*((used_words[p] + rec_words <= D) & (used_frames[p] < M)
                     for p in range(npl)))
        rec_fits = Mux(rec_bad_plane, 1, fits.bit_select(rec.plane[:max(1, ceil_log2(npl))], 1))
        m.d.comb += [
            self.s_frame.ready.eq(routes.w_rdy & rec_fits),
            routes.w_data.eq(rec.as_value()),
            routes.w_en.eq(self.s_frame.valid & self.s_frame.ready),
        ]
        rec_fire = self.s_frame.valid & self.s_frame.ready
        acc = [rec_fire & (rec.plane == p) for p in range(npl)]
        m.d.comb += self.plane_ok.eq(Cat(*(
            up[p] & (used_words[p] + Mux(acc[p], rec_words, 0) + self.max_words <= D) &
            (used_frames[p] + acc[p] < M) for p in range(npl))))

        # --- frames in ---------------------------------------------------------------------------
        head = Signal(records.PLANE_FRAME)
        m.d.comb += head.eq(routes.r_data)
        head_words = Signal(word_bits)
        m.d.comb += head_words.eq(words_of(head.frame_bytes))
        beat = Signal(word_bits)            # beat index in the frame (saturates at its words)
        in_fire = self.s_axis.valid & self.s_axis.ready
        in_last = in_fire & self.s_axis.p.last
        m.d.comb += [self.s_axis.ready.eq(routes.r_rdy), routes.r_en.eq(in_last)]
        _, first_zero = first_set(m, Cat(~self.s_axis.p.keep, Const(1, 1)), lanes + 1, "keep_end")
        nbytes = Signal(nbytes_bits)
        m.d.comb += nbytes.eq(Mux(self.s_axis.p.last, first_zero, lanes))
        got_bytes = Cat(Const(0, log_lanes), beat) + nbytes
        head_plane_ok = head.plane < npl
        # An empty last beat (tkeep[0] = 0, outside the stream convention) makes the frame bad
        # whatever its byte count: its beats then outnumber its words (the model's rule).
        length_ok = (got_bytes == head.frame_bytes) & (nbytes != 0)
        commit = in_last & head_plane_ok & length_ok
        bad_length = in_last & head_plane_ok & ~length_ok
        with m.If(in_fire):
            m.d.sync += beat.eq(Mux(self.s_axis.p.last, 0, Mux(beat < head_words, beat + 1, beat)))
        m.d.comb += [
            count["frames_in"].eq(commit),
            count["bad_plane"].eq(in_last & ~head_plane_ok),
            count["bad_length"].eq(bad_length),
        ]
        word_in = Cat(self.s_axis.p.data, nbytes, self.s_axis.p.last,
                      self.s_axis.p.last & self.s_axis.p.user[FrameUser.BAD])
        entry_in = Cat(head_words, head.data, head.send)

        # --- the flush output register (one send record per cycle for all planes) ---------------
        flush_valid = Signal()
        m.d.comb += self.m_flush.valid.eq(flush_valid)
        flush_free = ~flush_valid | self.m_flush.ready
        flush_req = []
        flush_grant = []
        flush_send = []

        # --- per plane ---------------------------------------------------------------------------
        for p in range(npl):
            mem = Memory(shape=len(word_in), depth=D, init=[])
            meta = Memory(shape=len(entry_in), depth=M, init=[])
            m.submodules[f"words_{p}"] = mem
            m.submodules[f"entries_{p}"] = meta
            wp, rp = mem.write_port(), mem.read_port()
            mwp, mrp = meta.write_port(), meta.read_port()
            wr_ptr = Signal(db, name=f"wr_ptr_{p}")
            rd_ptr = Signal(db, name=f"rd_ptr_{p}")
            meta_wr = Signal(mb + 1, name=f"entry_wr_{p}")
            meta_vis = Signal(mb + 1, name=f"entry_visible_{p}")
            meta_rd = Signal(mb + 1, name=f"entry_rd_{p}")
            flush_end = Signal(mb + 1, name=f"flush_end_{p}")
            in_frame = Signal(name=f"in_frame_{p}")
            sub = Signal(sub_bits, name=f"sub_{p}")
            mine = head.plane == p
            commit_p = commit & mine
            m.d.comb += [
                wp.addr.eq(wr_ptr + beat), wp.data.eq(word_in),
                wp.en.eq(in_fire & mine & (beat < head_words)),
                mwp.addr.eq(meta_wr[:mb]), mwp.data.eq(entry_in), mwp.en.eq(commit_p),
            ]
            with m.If(commit_p):
                m.d.sync += [wr_ptr.eq(wr_ptr + head_words), meta_wr.eq(meta_wr + 1)]
            m.d.sync += meta_vis.eq(meta_wr)
            # flush_end: every entry before it is to be flushed. While the plane is down it is
            # the commit pointer (this cycle's commit included); while nothing waits to be
            # flushed it follows the read pointer.
            flush_next = Signal(mb + 1, name=f"flush_end_next_{p}")

            # The head entry and the word at rd_ptr (read with the next cycle's addresses).
            e_words = mrp.data[:word_bits]
            e_data = mrp.data[word_bits]
            e_send = mrp.data[word_bits + 1:]
            w_data = rp.data[:C]
            w_nbytes = rp.data[C:C + nbytes_bits]
            w_last = rp.data[C + nbytes_bits]
            w_user = rp.data[C + nbytes_bits + 1]
            last_sub = Signal(sub_bits, name=f"last_sub_{p}")
            m.d.comb += last_sub.eq((w_nbytes - 1) >> exact_log2(port_lanes))
            avail = meta_rd != meta_vis
            pending = meta_rd != flush_end
            start = ~in_frame & avail & ~pending & up[p]
            walk_ready = ~in_frame & avail & pending
            flush_req.append(walk_ready & e_data)
            flush_send.append(e_send)
            grant = Signal(name=f"flush_grant_{p}")
            flush_grant.append(grant)
            walk = walk_ready & (~e_data | grant)

            tvalid = in_frame | start
            end_sub = sub == last_sub
            tlast = w_last & end_sub
            rest = w_nbytes - Cat(Const(0, exact_log2(port_lanes)), sub)
            keep = Cat(*(rest > lane for lane in range(port_lanes)))
            m.d.comb += [
                self.port(p).valid.eq(tvalid),
                self.port(p).p.data.eq(Array(w_data[k * W:(k + 1) * W]
                                               for k in range(ratio))[sub[:exact_log2(ratio)]]
                                         if ratio > 1 else w_data),
                self.port(p).p.keep.eq(Mux(tlast, keep, (1 << port_lanes) - 1)),
                self.port(p).p.last.eq(tlast),
                self.port(p).p.user.eq(tlast & w_user),
            ]
            fire = tvalid & self.port(p).ready
            pop_word = fire & end_sub
            pop_frame = fire & tlast
            with m.If(fire):
                m.d.sync += sub.eq(Mux(end_sub, 0, sub + 1))
            m.d.sync += in_frame.eq((in_frame | start) & ~pop_frame)
            rd_next = Signal(db, name=f"rd_next_{p}")
            meta_rd_next = Signal(mb + 1, name=f"entry_rd_next_{p}")
            m.d.comb += [
                rd_next.eq(rd_ptr + Mux(walk, e_words, pop_word)),
                meta_rd_next.eq(meta_rd + (pop_frame | walk)),
                rp.addr.eq(rd_next), rp.en.eq(1),
                mrp.addr.eq(meta_rd_next[:mb]), mrp.en.eq(1),
            ]
            m.d.sync += [rd_ptr.eq(rd_next), meta_rd.eq(meta_rd_next)]
            m.d.comb += flush_next.eq(Mux(~up[p], meta_wr + commit_p,
                                          Mux(pending, flush_end, meta_rd_next)))
            m.d.sync += flush_end.eq(flush_next)

            # Room: reserved when a record is taken, given back as words leave or are dropped.
            release_words = Mux(walk, e_words, pop_word) + \
                Mux(bad_length & mine, head_words, 0)
            release_frames = (pop_frame | walk) + (bad_length & mine)
            m.d.sync += [
                used_words[p].eq(used_words[p] + Mux(acc[p], rec_words, 0) - release_words),
                used_frames[p].eq(used_frames[p] + acc[p] - release_frames),
            ]
            m.d.comb += [
                plane_count[p]["frames_out"].eq(pop_frame),
                plane_count[p]["flushed_data"].eq(walk & e_data),
                plane_count[p]["flushed_control"].eq(walk & ~e_data),
            ]

        # The flush output: the lowest plane with a data frame to flush, when the register frees.
        any_req, first_req = first_set(m, Cat(*flush_req), npl, "flush_req")
        for p in range(npl):
            m.d.comb += flush_grant[p].eq(flush_free & any_req & (first_req == p))
        with m.If(flush_free & any_req):
            m.d.sync += [flush_valid.eq(1),
                         self.m_flush.p.eq(Array(flush_send)[first_req] |
                                               (1 << _FLUSHED_BIT))]
        with m.Elif(self.m_flush.ready):
            m.d.sync += flush_valid.eq(0)

        cfg.finish()
        return m
