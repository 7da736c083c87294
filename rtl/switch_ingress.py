# SPDX-License-Identifier: BSD-2-Clause
"""One ingress port of the trimming switch: never backpressured, store and forward, length checks
(docs/protocol.md section 7). Golden model: ``models/switch.py`` (:meth:`SwitchModel.arrive`); bench:
``tb/test_switch.py`` (through the switch top)."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, exact_log2

from models.records import FrameUser
from models.switch import MIN_FRAME

from .common.ports import axis_members, check_width

__all__ = ["SwitchIngress", "PAYLOAD_LENGTH_BYTE"]

PAYLOAD_LENGTH_BYTE = 18            # outer IPv6 Payload Length, frame bytes 18-19


class SwitchIngress(wiring.Component):
    """One switch ingress: a W-bit AXI-Stream link in, whole frames out at the core width C.

    Beats are packed ``R = C / W`` to a core word (a frame starts at a new word, wire byte 0 in
    lane 0) and written into a frame FIFO in block RAM (``depth_words`` words of C bits). A frame
    becomes visible to the arbiter only once its last beat is in and it passed the checks, in
    this order (``models.switch``): it did not overflow the FIFO (a word that finds the FIFO full
    drops the frame: ``ev_overflow``), ``tuser[0]`` was 0 on its last beat, it holds at least 54
    bytes and at most ``max_frame``, and 54 + its outer Payload Length is its length (else
    ``ev_malformed``). A dropped frame is removed by rolling the write pointer back to the end of
    the last good frame; writing stops as soon as a frame is known to be dropped (overflow,
    more than ``max_frame`` bytes), so a dropped frame never overwrites a kept one.

    Parameters
    ----------
    data_width : 64, 128, 256 or 512
        W, bits per beat of the link.
    core_width : 256 or 512, a multiple of ``data_width``
        C, bits per word towards the arbiter.
    depth_words : power of two
        Words of the frame FIFO; must hold ``max_frame`` bytes.
    max_frame : int
        The longest frame kept, in bytes.

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset.
    ``s_axis_tdata/tkeep/tlast/tvalid/tuser``: the link. No ``tready``: the port never
    backpressures (docs/protocol.md 7). ``tkeep`` matters on the last beat only (its set lanes are
    counted; an empty last beat, outside the stream convention, adds no byte and no word),
    ``tuser[0]`` on the last beat flags the frame bad.
    ``f_valid``, ``f_bytes``, ``f_take``: the oldest whole frame's length in bytes, valid while
    ``f_valid``; ``f_take`` removes it (the arbiter then reads its words).
    ``rd_en``, ``rd_data``: ``rd_en`` reads the next word of the frames taken; ``rd_data`` holds
    it from the next cycle on, until the next ``rd_en`` (block RAM read port as the register).
    ``ev_end``, ``ev_overflow``, ``ev_malformed``: one-cycle pulses at a frame's last beat: a frame
    ended; it was dropped for overflow; it was dropped as malformed.

    Latency and throughput: one beat per cycle in, always. A frame is offered (``f_valid``) two
    cycles after its last beat; one word per cycle out.
    """

    def __init__(self, data_width=64, core_width=256, depth_words=512, max_frame=4352):
        check_width("SwitchIngress", data_width)
        if core_width not in (256, 512) or core_width % data_width:
            raise ValueError(f"SwitchIngress: core_width must be 256 or 512 and a multiple of "
                             f"data_width {data_width}, not {core_width!r}")
        if not isinstance(max_frame, int) or not MIN_FRAME <= max_frame <= 65535 + MIN_FRAME:
            raise ValueError(f"SwitchIngress: max_frame must be {MIN_FRAME}..{65535 + MIN_FRAME}, "
                             f"not {max_frame!r}")
        word_bytes = core_width // 8
        if not isinstance(depth_words, int) or depth_words < 2 or \
                depth_words & (depth_words - 1) or depth_words * word_bytes < max_frame:
            raise ValueError(f"SwitchIngress: depth_words must be a power of two that holds "
                             f"max_frame ({max_frame} B) in words of {word_bytes} B, "
                             f"not {depth_words!r}")
        self.data_width = data_width
        self.core_width = core_width
        self.depth_words = depth_words
        self.max_frame = max_frame
        self.bytes_width = bits_for(max_frame)
        link = axis_members("s_axis", data_width, FrameUser.WIDTH, sink=True, always_ready=True)
        super().__init__({
            **link,
            "f_valid": Out(1), "f_bytes": Out(self.bytes_width), "f_take": In(1),
            "rd_en": In(1), "rd_data": Out(core_width),
            "ev_end": Out(1), "ev_overflow": Out(1), "ev_malformed": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.data_width // 8
        beats_per_word = self.core_width // self.data_width
        depth = self.depth_words
        addr_bits = exact_log2(depth)
        word_bytes = self.core_width // 8

        # --- frame FIFO: words, pointers with a wrap bit -------------------------------------
        m.submodules.words = words = Memory(shape=self.core_width, depth=depth, init=[])
        wr = words.write_port()
        rd = words.read_port(domain="sync")
        wp = Signal(addr_bits + 1)        # next word to write (current frame included)
        cwp = Signal(addr_bits + 1)       # end of the last good frame
        rp = Signal(addr_bits + 1)        # next word to read
        full = Signal()
        m.d.comb += full.eq((wp - rp)[:addr_bits + 1] == depth)

        m.d.comb += [rd.addr.eq(rp[:addr_bits]), rd.en.eq(self.rd_en),
                     self.rd_data.eq(rd.data)]
        with m.If(self.rd_en):
            m.d.sync += rp.eq(rp + 1)

        # A frame occupies at least ceil(54 / word bytes) words: the descriptor FIFO never fills.
        min_words = -(-MIN_FRAME // word_bytes)
        m.submodules.frames = frames = SyncFIFOBuffered(width=self.bytes_width,
                                                        depth=depth // min_words + 1)
        m.d.comb += [self.f_valid.eq(frames.r_rdy), self.f_bytes.eq(frames.r_data),
                     frames.r_en.eq(self.f_take)]

        # --- beats into words -------------------------------------------------------------------
        fire = self.s_axis.valid
        last = self.s_axis.p.last
        slot = Signal(range(beats_per_word))
        held = [Signal(self.data_width, name=f"held{i}") for i in range(beats_per_word - 1)]
        word = Cat(*[Mux(slot == i, self.s_axis.p.data, held[i]) for i in range(beats_per_word - 1)],
                   self.s_axis.p.data)
        word_done = fire & (last | (slot == beats_per_word - 1))
        with m.If(fire):
            for i in range(beats_per_word - 1):
                with m.If(slot == i):
                    m.d.sync += held[i].eq(self.s_axis.p.data)
            m.d.sync += slot.eq(Mux(word_done, 0, slot + 1))

        # --- per-frame state: byte count, Payload Length, drop flags ---------------------------
        count = Signal(range(self.max_frame + lanes + 1))     # bytes before this beat
        this_beat = Signal(range(lanes + 1))
        m.d.comb += this_beat.eq(Mux(last, sum(self.s_axis.p.keep[i] for i in range(lanes)),
                                     lanes))
        total = Signal(range(self.max_frame + 2 * lanes + 1))
        m.d.comb += total.eq(count + this_beat)
        oversize = Signal()                # the frame is longer than max_frame: stop writing
        overflow = Signal()                # a word of the frame found the FIFO full
        oversize_now = oversize | (total > self.max_frame)

        pl_beat, pl_lane = divmod(PAYLOAD_LENGTH_BYTE, lanes)
        beat = Signal(range(pl_beat + 2))                     # beat index, saturating
        pl_held = Signal(16)
        lane_byte = lambda j: self.s_axis.p.data[8 * j:8 * j + 8]
        pl_here = Cat(lane_byte(pl_lane + 1), lane_byte(pl_lane))      # big-endian on the wire
        payload_length = Mux(beat == pl_beat, pl_here, pl_held)
        with m.If(fire & (beat == pl_beat)):
            m.d.sync += pl_held.eq(pl_here)

        # A last beat with no byte (tkeep 0, outside the stream convention) that would start a
        # word adds no word: the frame's words are ceil(bytes / word bytes), as its reader takes.
        word_counts = Signal()
        m.d.comb += word_counts.eq(word_done & ~(last & (slot == 0) & (this_beat == 0)))
        write = Signal()
        overflow_now = Signal()
        m.d.comb += [
            overflow_now.eq(word_counts & ~overflow & ~oversize_now & full),
            write.eq(word_counts & ~overflow & ~oversize_now & ~full),
            wr.addr.eq(wp[:addr_bits]),
            wr.data.eq(word),
            wr.en.eq(write),
        ]
        wp_next = Mux(write, wp + 1, wp)

        dropped_overflow = overflow | overflow_now
        malformed = (self.s_axis.p.user[FrameUser.BAD] | (total < MIN_FRAME) | oversize_now |
                     (total != MIN_FRAME + payload_length))
        end = fire & last
        m.d.comb += [
            self.ev_end.eq(end),
            self.ev_overflow.eq(end & dropped_overflow),
            self.ev_malformed.eq(end & ~dropped_overflow & malformed),
            frames.w_en.eq(end & ~dropped_overflow & ~malformed),
            frames.w_data.eq(total),
        ]

        with m.If(fire):
            with m.If(last):
                m.d.sync += [count.eq(0), beat.eq(0), oversize.eq(0), overflow.eq(0)]
                with m.If(dropped_overflow | malformed):
                    m.d.sync += wp.eq(cwp)
                with m.Else():
                    m.d.sync += [wp.eq(wp_next), cwp.eq(wp_next)]
            with m.Else():
                m.d.sync += [
                    count.eq(Mux(oversize_now, count, total)),
                    beat.eq(Mux(beat == pl_beat + 1, beat, beat + 1)),
                    oversize.eq(oversize_now),
                    overflow.eq(dropped_overflow),
                    wp.eq(wp_next),
                ]
        return m
