# SPDX-License-Identifier: BSD-2-Clause
"""One plane of the NIC receive front: the receive frame buffer of a plane port, never
backpressured, store and forward with the ICRC computed on the fly (docs/protocol.md sections 1.6, 5 and 8).

Golden model: ``models/rx_front.py`` (:meth:`RxFrontModel.arrive`); bench: ``tb/test_rx_front.py``
(through ``rtl/rx_front.py``).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, exact_log2

from models import layouts
from models.packets import ICRC_PREFIX
from models.records import FrameUser
from models.rx_front import BAD, NO_BUFFER, NO_ROOM, OFFER_DELAY, STORED, header_words

from .common.crc import (CRC_INIT, crc32_bitwise, mat_apply, seed_state, update_matrix,
                         zero_matrix)
from .common.headers import lane_bit
from .common.ports import axis_members, check_width

__all__ = ["RxPlaneBuffer", "LENGTH_BITS", "ICRC_RESIDUE", "ICRC_LATENCY"]

LENGTH_BITS = 17                 # frame byte counts saturate at 2^17 - 1 (mismatches stay)
ICRC_LATENCY = 3                 # cycles from a frame's last beat to its ICRC verdict
assert ICRC_LATENCY + 1 == OFFER_DELAY, "models.rx_front.OFFER_DELAY: the offer's delay"
_PL_BYTE = layouts.OUTER_OFFSET + layouts.IPV6["payload_length"].offset // 8      # 18
# The raw CRC register after a message followed by its own CRC (least-significant byte first):
# a constant, so the check needs no knowledge of where the ICRC starts.
ICRC_RESIDUE = crc32_bitwise(CRC_INIT, b"\0" + (crc32_bitwise(CRC_INIT, b"\0") ^ 0xFFFFFFFF)
                             .to_bytes(4, "little"))


def _mat_vec(m, rows, vector, name):
    """A 32-bit Signal (comb) holding ``rows`` (32 row masks, as in ``rtl/common/crc.py``) times
    ``vector`` over GF(2): each group of 4 input bits selects its contribution in a case
    statement, and the contributions are XORed. Synthesis gives the same 4-input functions as
    :func:`rtl.common.crc.mat_vec`'s table lookups; Icarus runs the cases about twice as fast as
    the shifts of the tables (this block runs one per plane, every beat)."""
    vector = Value.cast(vector)
    held = Signal(len(vector), name=f"{name}_in")
    m.d.comb += held.eq(vector)
    parts = []
    for base in range(0, len(vector), 4):
        width = min(4, len(vector) - base)
        part = Signal(32, name=f"{name}_p{base // 4}")
        with m.Switch(held[base:base + width]):
            for value in range(1, 1 << width):
                with m.Case(value):
                    m.d.comb += part.eq(mat_apply(rows, value << base))
        parts.append(part)
    while len(parts) > 1:
        parts = [parts[i] ^ parts[i + 1] if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    out = Signal(32, name=name)
    m.d.comb += out.eq(parts[0])
    return out


def _crc_update(m, state, data, name):
    """The raw CRC state after the beat ``data`` (lane order) from raw ``state``."""
    rows = update_matrix(len(data) // 8)
    from_state = _mat_vec(m, [row & 0xFFFFFFFF for row in rows], state, f"{name}_state")
    from_data = _mat_vec(m, [row >> 32 for row in rows], data, f"{name}_data")
    return from_state ^ from_data


def _undo_zeros(m, state, count, name):
    """The raw CRC state before ``count`` zero bytes led to ``state`` (log-depth stages)."""
    current = Value.cast(state)
    for i in range(len(count)):
        undone = _mat_vec(m, zero_matrix(-(1 << i)), current, f"{name}_{i}")
        stage = Signal(32, name=f"{name}_{i}_out")
        m.d.comb += stage.eq(Mux(count[i], undone, current))
        current = stage
    return current


class RxPlaneBuffer(wiring.Component):
    """The receive frame buffer of one plane port: W-bit beats in, whole frames out as words of
    C bits, each frame only once its last beat is in and its ICRC verdict is known.

    Storage: one block RAM of ``header_slots x Hw + body_words`` words of C bits (beats packed
    ``C / W`` to a word, a frame starting at a new word). The first ``Hw`` words of a frame
    (``Hw = ceil(138 / (C/8))``: every header through ImmDt) go into a header slot, the rest into
    the body ring. When a frame starts, a free header slot is taken; with none free the frame is
    dropped (``NO_ROOM``). When its outer Payload Length arrives (bytes 18-19), the body words it
    needs (``models.rx_front.body_words_needed``) are compared with the free body words: with room
    the frame is stored whole (``STORED``; at most that many body words are written, so a frame
    longer than its Payload Length says is cut, and flagged ``truncated``), without room only its
    header slot is kept (``NO_BUFFER``, for the parser to NACK). A frame flagged bad
    (``tuser[0]`` on its last beat) is dropped (``BAD``): its body words are given back and its
    slot is not used. Nothing is ever written over a word not yet read.

    ICRC: the CRC-32 of docs/protocol.md 1.6 runs at W bits per beat over every byte from 54 to the end
    (the ICRC included; bytes before 54 zeroed and folded into the seed, the masked fields forced
    to ones, the lanes after the last byte zeroed and undone), and the frame's ICRC is good when
    the register then holds :data:`ICRC_RESIDUE`. The verdict is known ``ICRC_LATENCY`` cycles
    after the last beat; the frame's descriptor is offered then.

    Parameters
    ----------
    data_width : 64, 128, 256 or 512
        W, bits per beat of the plane port.
    core_width : power of two, a multiple of W, at most 4096
        C, bits per word (the NIC core's width).
    body_words : power of two, at least 2
        Words of the body ring.
    header_slots : power of two, 2..256
        Header slots: at most this many frames are held at once (every frame kept, STORED or
        NO_BUFFER, holds one from its first beat until its header words are read).
        :func:`models.rx_front.header_slots_needed` gives the number with which valid frames
        never find every slot in use while the reader keeps up (the defaults of
        ``rtl/rx_front.py`` and the engines follow it). A frame starting while every slot is in
        use cannot be kept, not even its header: it is dropped and counted ``NO_ROOM``, a data
        frame without the NACK NO_PKT_BUFFER of profile 2 section 5 (docs/protocol.md section 5
        says so).

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset.
    ``s_axis_tdata/tkeep/tlast/tvalid/tuser``: the plane port. No ``tready``: the port never
    backpressures its link (docs/protocol.md 8). ``tkeep`` matters on the last beat only (contiguous from
    lane 0); ``tuser[0]`` on the last beat flags the frame bad.
    ``f_valid``, ``f_length``, ``f_words``, ``f_no_buffer``, ``f_truncated``, ``f_icrc_ok``,
    ``f_take``: the oldest frame held: its length in bytes (saturating at 2^17 - 1), its words
    stored, whether only its header slot was kept, whether it was cut, and its ICRC verdict;
    ``f_take`` removes it (its words are then read).
    ``rd_en``, ``rd_data``: ``rd_en`` reads the next word of the frames taken (it may come in the
    cycle of ``f_take``); ``rd_data`` holds it from the next cycle until the next ``rd_en``.
    ``ev_end``, ``ev_outcome``: a frame ended on the port, and what became of it
    (``models.rx_front``: STORED 0, NO_BUFFER 1, NO_ROOM 2, BAD 3).
    ``seen_free``: the free body words the current (or last) frame's room was judged on
    (sample it with ``ev_end``).
    ``body_free``, ``slots_used``: free body words and header slots in use, now.

    Latency and throughput: one beat per cycle in, always. A frame is offered (``f_valid``)
    ``ICRC_LATENCY + 1`` cycles after its last beat; one word per cycle out.
    """

    def __init__(self, data_width=64, core_width=512, body_words=256, header_slots=16):
        sizes = self.sizes(data_width, core_width, body_words, header_slots)
        self.data_width = data_width
        self.core_width = core_width
        self.body_words = body_words
        self.header_slots = header_slots
        self.slot_words = sizes["slot_words"]
        self.free_bits = sizes["free_bits"]
        self.words_bits = sizes["words_bits"]
        link = axis_members("s_axis", data_width, FrameUser.WIDTH, sink=True, always_ready=True)
        super().__init__({
            **link,
            "f_valid": Out(1), "f_length": Out(LENGTH_BITS), "f_words": Out(self.words_bits),
            "f_no_buffer": Out(1), "f_truncated": Out(1), "f_icrc_ok": Out(1), "f_take": In(1),
            "rd_en": In(1), "rd_data": Out(core_width),
            "ev_end": Out(1), "ev_outcome": Out(2),
            "seen_free": Out(self.free_bits), "body_free": Out(self.free_bits),
            "slots_used": Out(sizes["slots_bits"]),
        })

    @staticmethod
    def sizes(data_width, core_width, body_words, header_slots):
        """Check the parameters (ValueError) and give the widths they imply: ``slot_words``,
        ``free_bits`` (a count of body words), ``words_bits`` (a count of a frame's words) and
        ``slots_bits`` (a count of header slots)."""
        check_width("RxPlaneBuffer", data_width)
        if not isinstance(core_width, int) or core_width % data_width or \
                core_width & (core_width - 1) or core_width > 4096:
            raise ValueError(f"RxPlaneBuffer: core_width must be a power of two, a multiple of "
                             f"data_width {data_width} and at most 4096, not {core_width!r}")
        if not isinstance(body_words, int) or body_words < 2 or body_words & (body_words - 1):
            raise ValueError(f"RxPlaneBuffer: body_words must be a power of two >= 2, "
                             f"not {body_words!r}")
        if not isinstance(header_slots, int) or not 2 <= header_slots <= 256 or \
                header_slots & (header_slots - 1):
            raise ValueError(f"RxPlaneBuffer: header_slots must be a power of two 2..256, "
                             f"not {header_slots!r}")
        max_words = -(-((1 << LENGTH_BITS) - 1) // (core_width // 8))
        return {"slot_words": header_words(core_width), "free_bits": exact_log2(body_words) + 1,
                "words_bits": bits_for(max_words), "slots_bits": bits_for(header_slots)}

    def elaborate(self, platform):
        m = Module()
        W, C = self.data_width, self.core_width
        lanes, word_bytes = W // 8, C // 8
        per_word = C // W
        hw = self.slot_words
        slots, depth = self.header_slots, self.body_words
        slot_bits, body_bits = exact_log2(slots), exact_log2(depth)
        head_region = slots * hw

        m.submodules.mem = mem = Memory(shape=C, depth=head_region + depth, init=[])
        wr = mem.write_port()
        rd = mem.read_port(domain="sync")

        # --- slots and the body ring: pointers with a wrap bit ------------------------------
        slot_w = Signal(slot_bits + 1)      # slots committed (the frame being written uses it)
        slot_r = Signal(slot_bits + 1)      # slots freed
        slot_wbase = Signal(range(head_region))
        slot_rbase = Signal(range(head_region))
        used = Signal(slot_bits + 1)
        m.d.comb += [used.eq(slot_w - slot_r), self.slots_used.eq(used)]
        body_wp = Signal(body_bits + 1)     # next body word to write (current frame included)
        body_cwp = Signal(body_bits + 1)    # end of the last frame kept
        body_rp = Signal(body_bits + 1)
        free = Signal(self.free_bits)
        m.d.comb += [free.eq(depth - (body_wp - body_rp)[:body_bits + 1]),
                     self.body_free.eq(free)]

        # --- beats into words -------------------------------------------------------------------
        fire, last = self.s_axis.valid, self.s_axis.p.last
        slot_i = Signal(range(per_word))
        held = [Signal(W, name=f"held{i}") for i in range(per_word - 1)]
        word = Cat(*[Mux(slot_i == i, self.s_axis.p.data, held[i]) for i in range(per_word - 1)],
                   self.s_axis.p.data)
        word_done = fire & (last | (slot_i == per_word - 1))
        with m.If(fire):
            for i in range(per_word - 1):
                with m.If(slot_i == i):
                    m.d.sync += held[i].eq(self.s_axis.p.data)
            m.d.sync += slot_i.eq(Mux(word_done, 0, slot_i + 1))

        # --- per-frame state ----------------------------------------------------------------------
        max_len = (1 << LENGTH_BITS) - 1
        count = Signal(LENGTH_BITS)             # bytes before this beat (saturating)
        nbytes = Signal(range(lanes + 1))
        m.d.comb += nbytes.eq(Mux(last, sum(self.s_axis.p.keep[i] for i in range(lanes)), lanes))
        total_wide = count + nbytes
        total = Signal(LENGTH_BITS)
        m.d.comb += total.eq(Mux(total_wide > max_len, max_len, total_wide))

        in_frame = Signal()                     # a beat of the current frame was seen
        first = ~in_frame
        has_slot = Signal()
        slot_ok = Signal()                      # the frame has a header slot (this beat on)
        m.d.comb += slot_ok.eq(Mux(first, used != slots, has_slot))

        pl_beat, pl_lane = divmod(_PL_BYTE, lanes)
        beat = Signal(range(pl_beat + 2))       # beat index, saturating past the Payload Length
        lane_byte = lambda j: self.s_axis.p.data[8 * j:8 * j + 8]
        payload_length = Cat(lane_byte(pl_lane + 1), lane_byte(pl_lane))
        declared = Signal(LENGTH_BITS)
        m.d.comb += declared.eq(payload_length + layouts.INNER_OFFSET)
        declared_words = (declared + word_bytes - 1) >> exact_log2(word_bytes)
        need_now = Signal(range(max(2, 1 << LENGTH_BITS)))
        m.d.comb += need_now.eq(Mux(declared_words > hw, declared_words - hw, 0))

        decided = Signal()
        room = Signal()
        needed = Signal(self.free_bits)         # body words the frame may write (<= free)
        decide_now = Signal()
        room_now = Signal()
        at_pl = beat == pl_beat
        m.d.comb += [
            decide_now.eq(fire & ~decided & (at_pl | last)),
            # a frame ending before its Payload Length needs no body
            room_now.eq(Mux(decided, room, ~at_pl | (need_now <= free))),
        ]
        seen_free = Signal(self.free_bits)
        m.d.comb += self.seen_free.eq(Mux(decide_now, free, seen_free))
        with m.If(decide_now):
            m.d.sync += [
                decided.eq(1),
                room.eq(room_now),
                needed.eq(Mux(at_pl & (need_now <= free), need_now, 0)),
                seen_free.eq(free),
            ]

        wj = Signal(range(hw + depth + 2))      # word index in the frame, saturating
        body_written = Signal(self.free_bits)
        stored = Signal(self.words_bits)        # words of the frame written
        truncated = Signal()
        in_head = wj < hw
        write_body = Signal()
        cut_now = Signal()
        write = Signal()
        m.d.comb += [
            write_body.eq(~in_head & room & (body_written < needed)),
            cut_now.eq(word_done & slot_ok & ~in_head & room & (body_written >= needed)),
            write.eq(word_done & slot_ok & (in_head | write_body)),
            wr.en.eq(write),
            wr.data.eq(word),
            wr.addr.eq(Mux(in_head, slot_wbase + wj, head_region + body_wp[:body_bits])),
        ]
        body_wp_next = Mux(write & ~in_head, body_wp + 1, body_wp)
        stored_next = Signal(self.words_bits)
        m.d.comb += stored_next.eq(Mux(write, stored + 1, stored))

        outcome = Signal(2)
        with m.If(~slot_ok):
            m.d.comb += outcome.eq(NO_ROOM)
        with m.Elif(self.s_axis.p.user[FrameUser.BAD]):
            m.d.comb += outcome.eq(BAD)
        with m.Elif(room_now):
            m.d.comb += outcome.eq(STORED)
        with m.Else():
            m.d.comb += outcome.eq(NO_BUFFER)
        end = fire & last
        keep = end & ((outcome == STORED) | (outcome == NO_BUFFER))
        m.d.comb += [self.ev_end.eq(end), self.ev_outcome.eq(outcome)]

        with m.If(fire):
            with m.If(last):
                m.d.sync += [count.eq(0), beat.eq(0), in_frame.eq(0), decided.eq(0),
                             wj.eq(0), body_written.eq(0), stored.eq(0), truncated.eq(0)]
                with m.If(keep):
                    m.d.sync += [
                        slot_w.eq(slot_w + 1),
                        slot_wbase.eq(Mux(slot_wbase == head_region - hw, 0, slot_wbase + hw)),
                        body_wp.eq(body_wp_next),
                        body_cwp.eq(body_wp_next),
                    ]
                with m.Else():
                    m.d.sync += body_wp.eq(body_cwp)
            with m.Else():
                m.d.sync += [
                    count.eq(total),
                    beat.eq(Mux(beat == pl_beat + 1, beat, beat + 1)),
                    in_frame.eq(1),
                    has_slot.eq(slot_ok),
                    body_wp.eq(body_wp_next),
                    stored.eq(stored_next),
                    truncated.eq(truncated | cut_now),
                ]
                with m.If(word_done):
                    m.d.sync += wj.eq(Mux(wj == hw + depth + 1, wj, wj + 1))
                with m.If(write & ~in_head):
                    m.d.sync += body_written.eq(body_written + 1)

        # --- ICRC on the fly (docs/protocol.md 1.6): check against the CRC residue ---------------------
        mask_last = max(layouts.ICRC_START - 1,
                        *((bit + width - 1) // 8 for bit, width in layouts.ICRC_MASKED_BITS))
        mask_beats = mask_last // lanes + 1
        crc_beat = Signal(range(mask_beats + 1))       # beat index, saturating
        masked = self.s_axis.p.data
        for index in reversed(range(mask_beats)):
            keep_bits, ones = self._crc_masks(index)
            masked = Mux(crc_beat == index, (self.s_axis.p.data & keep_bits) | ones, masked)
        lane_keep = Mux(last, Cat(*(self.s_axis.p.keep[i].replicate(8) for i in range(lanes))),
                        (1 << W) - 1)
        with m.If(fire):
            m.d.sync += crc_beat.eq(Mux(last, 0, Mux(crc_beat == mask_beats, crc_beat,
                                                     crc_beat + 1)))

        r_valid, r_first, r_last = Signal(), Signal(), Signal()
        r_data = Signal(W)
        r_zeros = Signal(range(lanes + 1))
        m.d.sync += [
            r_valid.eq(fire),
            r_first.eq(crc_beat == 0),
            r_last.eq(last),
            r_data.eq(masked & lane_keep),
            r_zeros.eq(lanes - nbytes),
        ]
        seed = seed_state(ICRC_PREFIX, layouts.ICRC_START)
        crc = Signal(32)
        crc_next = _crc_update(m, Mux(r_first, seed, crc), r_data, "crc_next")
        crc_final = Signal(32)          # a frame's last state: the undo runs once per frame
        p_zeros = Signal(range(lanes + 1))
        with m.If(r_valid):
            m.d.sync += crc.eq(crc_next)
            with m.If(r_last):
                m.d.sync += [crc_final.eq(crc_next), p_zeros.eq(r_zeros)]
        unzeroed = _undo_zeros(m, crc_final, p_zeros, "crc_undo")
        icrc_ok = Signal()
        m.d.sync += icrc_ok.eq(unzeroed == ICRC_RESIDUE)

        # --- descriptors: offered once the ICRC verdict is known ------------------------------
        fields = [("length", LENGTH_BITS), ("words", self.words_bits), ("no_buffer", 1),
                  ("truncated", 1)]
        desc_bits = sum(w for _, w in fields)
        delay_valid = [Signal(name=f"desc{i}_valid") for i in range(ICRC_LATENCY)]
        delay_data = [Signal(desc_bits, name=f"desc{i}_data") for i in range(ICRC_LATENCY)]
        m.d.sync += [
            delay_valid[0].eq(keep),
            delay_data[0].eq(Cat(total, stored_next, outcome == NO_BUFFER,
                                 truncated | cut_now)),
        ]
        for i in range(1, ICRC_LATENCY):
            m.d.sync += [delay_valid[i].eq(delay_valid[i - 1]), delay_data[i].eq(delay_data[i - 1])]
        # At least 3 entries: SyncFIFOBuffered(depth=2) is not writable in the cycle after a
        # write into it empty (its inner one-entry FIFO is still full), and a descriptor written
        # then was lost (found by verif/formal_rx_streams.py); from 3 on it takes one per cycle.
        m.submodules.frames = frames = SyncFIFOBuffered(width=desc_bits + 1,
                                                        depth=max(3, slots))
        m.d.comb += [
            frames.w_en.eq(delay_valid[-1]),
            frames.w_data.eq(Cat(delay_data[-1], icrc_ok)),
            frames.r_en.eq(self.f_take),
            self.f_valid.eq(frames.r_rdy),
        ]
        offset = 0
        for name, width in fields + [("icrc_ok", 1)]:
            m.d.comb += getattr(self, f"f_{name}").eq(frames.r_data[offset:offset + width])
            offset += width

        # --- reading the frames taken ------------------------------------------------------------
        head_left = Signal(range(hw + 1))        # header words of the frame still to read
        body_left = Signal(self.words_bits)
        head_index = Signal(range(hw))
        take_head = Signal(range(hw + 1))
        m.d.comb += take_head.eq(Mux(self.f_words > hw, hw, self.f_words))
        eff_head_left = Mux(self.f_take, take_head, head_left)
        eff_body_left = Mux(self.f_take, self.f_words - take_head, body_left)
        eff_index = Mux(self.f_take, 0, head_index)
        from_head = eff_head_left != 0
        m.d.comb += [
            rd.en.eq(self.rd_en),
            rd.addr.eq(Mux(from_head, slot_rbase + eff_index, head_region + body_rp[:body_bits])),
            self.rd_data.eq(rd.data),
        ]
        with m.If(self.f_take):
            m.d.sync += [head_left.eq(take_head), body_left.eq(self.f_words - take_head),
                         head_index.eq(0)]
        with m.If(self.rd_en):
            with m.If(from_head):
                m.d.sync += [head_left.eq(eff_head_left - 1), head_index.eq(eff_index + 1),
                             body_left.eq(eff_body_left)]
                with m.If(eff_head_left == 1):       # the slot is read: free it
                    m.d.sync += [
                        slot_r.eq(slot_r + 1),
                        slot_rbase.eq(Mux(slot_rbase == head_region - hw, 0, slot_rbase + hw)),
                    ]
            with m.Else():
                m.d.sync += [body_rp.eq(body_rp + 1), body_left.eq(eff_body_left - 1)]
        return m

    def _crc_masks(self, index):
        """(keep, ones) bit masks of beat ``index`` for the ICRC: bytes before the ICRC's start
        cleared (the seed accounts for them), the masked fields set to ones."""
        W, lanes = self.data_width, self.data_width // 8
        keep_bits = 0
        for lane in range(lanes):
            if index * lanes + lane >= layouts.ICRC_START:
                keep_bits |= 0xFF << (8 * lane)
        ones = 0
        for bit, width in layouts.ICRC_MASKED_BITS:
            for wire_bit in range(bit - 8 * index * lanes, bit + width - 8 * index * lanes):
                if 0 <= wire_bit < W:
                    ones |= 1 << lane_bit(wire_bit)
        return Const(keep_bits, W), Const(ones, W)
