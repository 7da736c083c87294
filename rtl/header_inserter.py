# SPDX-License-Identifier: BSD-2-Clause
"""The MRC header inserter (NIC transmit side): header record + payload stream -> complete frame."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.utils import bits_for, exact_log2

from models import layouts
from models.header_inserter import COUNTERS, INFO, MAX_PAYLOAD_LIMIT
from models.packets import ICRC_PREFIX
from models.records import FrameUser
from rtl.common import records
from rtl.common.config import ConfigMap
from rtl.common.crc_pipeline import Crc32Pipeline
from rtl.common.headers import lane_bit, pack
from rtl.common.logic import wire
from rtl.common.ports import axis_members, check_width, config_members, record_members

__all__ = ["HeaderInserter"]

_HDR_FANOUT = 64        # header register bits per copy of their enables
_HSEL_FANOUT = 8        # header word bits per copy of the word select


class HeaderInserter(wiring.Component):
    """Builds one frame of docs/protocol.md sections 1-2 per header record, at one beat per cycle.

    The output frame is exactly :func:`models.packets.build_frame` of the record and its payload:
    the headers (derived fields as there: EtherType, versions, next headers, the three length
    fields, inner Traffic Class and Flow Label copied from the outer ones, inner Hop Limit 64, UDP
    port 4791 and checksum 0, P_Key 0xFFFF, PadCnt), the payload realigned after them, zero pad to
    a multiple of 4 and the ICRC of docs/protocol.md 1.6. :class:`models.header_inserter.HeaderInserterModel`
    is the golden model, bad input included.

    Parameters
    ----------
    data_width : int
        W, the width of both AXI-Streams: 64, 128, 256 or 512 bits.
    max_payload : int
        The largest record ``length`` accepted: 1 to
        :data:`models.header_inserter.MAX_PAYLOAD_LIMIT` (65444, the most that keeps the IPv6
        Payload Length within 16 bits); default 4096, the profile's largest PMTU. Records with a
        larger ``length`` are dropped and counted.

    Ports
    -----
    s_hdr_tdata, s_hdr_tvalid, s_hdr_tready
        Header records (:data:`rtl.common.records.TX_HEADER`). ``length`` is the payload length
        without pad; a record with ``length`` 0 owns no payload beats, any other owns the next
        payload packet up to its ``tlast`` beat.
    s_axis_tdata/tkeep/tlast/tvalid/tready/tuser
        Payload bytes only, byte 0 in lane 0; ``tkeep`` all ones but on the last beat (it is
        ignored elsewhere; on the last beat the packet ends at the first lane whose keep is 0).
        ``tuser[0]`` on the ``tlast`` beat marks a payload that is bad upstream.
    m_axis_tdata/tkeep/tlast/tvalid/tready/tuser
        Frames (Ethernet without preamble and FCS). ``tuser[0]`` = 1 on the last beat of a frame
        flagged bad (0 on every other beat).
    cfg_addr, cfg_wdata, cfg_we, cfg_rdata
        Configuration port (:mod:`rtl.common.config`, read latency 1). Map, all 32-bit counters
        cleared when written, then read-only words:

        ====  ==============  ===================================================================
        0x00  frames_out      frames emitted (counted on their last beat)
        0x01  bad_frames_out  frames emitted with tuser[0] = 1
        0x02  bytes_out       frame bytes emitted, ICRC included
        0x03  records_in      header records accepted
        0x04  drop_opcode     records dropped: opcode not one of docs/protocol.md 1.4's nine
        0x05  drop_ctrl_len   records dropped: SACK, NACK or probe with length > 0
        0x06  drop_oversize   records dropped: length > max_payload
        0x07  short_payload   frames whose packet ended before ``length`` bytes (zero-filled)
        0x08  long_payload    frames whose packet went on after ``length`` bytes (excess dropped)
        0x09  payload_bad_in  packets whose tlast beat had tuser[0] = 1
        0x10  data_width      W (read-only)
        0x11  max_payload     max_payload (read-only)
        ====  ==============  ===================================================================

    clk, rst
        The ``sync`` domain (synchronous active-high reset).

    Bad input (defined answers, modelled exactly): a dropped record (the three ``drop_*`` cases)
    emits nothing and, if its ``length`` is not 0, its packet is consumed and discarded. A short
    packet gives a frame completed with zero bytes up to ``length``, headers unchanged, flagged bad;
    a long packet gives the frame of its first ``length`` bytes, flagged bad, and the rest of the
    packet is discarded up to ``tlast``; an upstream-bad packet (tuser) gives a frame flagged bad.

    out_depth : int or None
        Beats of the output buffer (distributed RAM); default the smallest power of two that
        keeps one beat per cycle (16 at every width). A smaller buffer is correct, only slower
        (the formal harness uses 2).

    After elaboration ``beat_layout``, ``cmd_layout`` and ``out_layout`` name the layouts of
    the beat registers, the command register and the buffer's entries (for harnesses).

    Latency and throughput: from a record's handshake (block idle) to its frame's first beat on
    ``m_axis``: ``7 + crc_latency`` cycles (13 at W = 64, 14 at 128, 16 at 256, 17 at 512; the record
    register, stage 1, its command register, stage 1b's header word, stage 1c's output
    register, the CRC's delay line, the output buffer and its output register). Then one beat per cycle, ``ceil(frame bytes / (W/8))``
    beats per frame, and the next frame's first beat follows the last one with no idle cycle:
    the next record is taken in the cycle its predecessor's last beat leaves stage 1 (records
    are registered on entry, at most one every two cycles: a frame is at least 3 beats). The
    payload is read at most one beat per cycle, from output beat ``header bytes // (W/8)`` on,
    so sources at full rate never stall the output. Only bad input costs cycles (a dropped
    record takes two cycles: registered, then taken; a packet's excess is discarded at one beat per cycle,
    while the next frame's header beats go on). Counters count one cycle after their event.

    Structure (docs/protocol.md section 8): every boundary registered (``s_hdr.ready`` is a
    register; ``m_axis`` leaves an output register; ``s_axis.ready`` depends on no input), and
    no stage past stage 1 ever stalls: stage 1 issues a beat only with a credit for it (the
    output buffer's room, returned as beats leave ``m_axis``). Stage 0 decodes the record into
    its header bytes (130/134/138/150 B, from the layout tables; their constant bits are the
    registers' initial values, so constants after synthesis) and frame lengths. Stage 1
    decides each beat from registered flags only (the next beat's flags computed from
    registers beside the decision, then chosen by it: the take, the advance, or unchanged; the
    beat's index + 1 is a register of its own, so no adder precedes the flags' comparisons; the
    take is one LUT after the advance, from a copy of ``active``) and
    registers a command (the beat's one-hot header word, the payload lanes taken, whether the
    beat's payload went wrong); stage 1b reads the header word by an AND-OR over the header
    register (the one-hot read from copies of the command's, one per 8 bits of the word) and
    makes the frame's bad flag; stage 1c makes the beat: the header word, then the payload
    shifted by ``header bytes mod W/8`` (one of four offsets, so a 4-way byte mux, not a barrel
    shifter), zero pad and 4 zero placeholder bytes for the ICRC. The enables of the header
    registers (the record's, loaded while ``s_hdr.ready``, and the frame's, loaded the cycle
    after a take) are registers replicated per 64 bits. The ICRC is
    :class:`rtl.common.crc_pipeline.Crc32Pipeline` (only its 32-bit state in its loop) over a
    copy of the beats with the fields of :data:`models.layouts.ICRC_MASKED_BITS` forced to
    ones, shifted by the frame's zero bytes after its last covered byte in that beat (up to
    W = 128: nz + 4 * nzq, a 2- or 4-way byte mux; above, the 2 bytes that every frame has
    there), so that the covered bytes end on a beat boundary of the copy and the CRC undoes
    no trailing zero bytes (above W = 128, 4 * nzq of them); the bytes before its start (54,
    plus the shift) are its ``lead``. The beats wait in a delay line of its latency; its value
    is written into the placeholders (the last beat, and the next one when it spills), then
    the beats enter the output buffer.
    """

    def __init__(self, data_width=64, max_payload=4096, out_depth=None):
        check_width("HeaderInserter", data_width)
        if not isinstance(max_payload, int) or not 1 <= max_payload <= MAX_PAYLOAD_LIMIT:
            raise ValueError(f"HeaderInserter: max_payload must be 1..{MAX_PAYLOAD_LIMIT}, "
                             f"not {max_payload!r}")
        self.data_width = data_width
        self.max_payload = max_payload
        self.lanes = data_width // 8
        # The CRC's data term in two register stages from W = 256 (its XOR trees are wide).
        self.crc_data_stages = 2 if data_width >= 256 else 1
        self.crc_latency = Crc32Pipeline.latency_of(data_width, self.crc_data_stages)
        # A beat issued at stage 1 leaves the output register 5 + crc_latency cycles later at
        # the earliest and its credit is seen a cycle after that: for one beat per cycle the
        # buffer and output register must hold crc_latency + 6 beats (the smallest power of two
        # that does).
        full_rate = 1 << bits_for(self.crc_latency + 5)
        if out_depth is None:
            out_depth = full_rate
        if not isinstance(out_depth, int) or out_depth < 1:
            raise ValueError(f"HeaderInserter: out_depth must be a positive integer, "
                             f"not {out_depth!r}")
        self.out_depth = out_depth
        self.header_lengths = {op: layouts.header_length(op) for op in layouts.KNOWN_OPCODES}
        residues = {h % 4 for h in self.header_lengths.values()}
        if len(residues) != 1:
            raise ValueError("HeaderInserter: header lengths must agree modulo 4, so that the "
                             "frame end's lane is known modulo 4")
        # A frame without its ICRC is (header + padded payload) bytes, the same residue mod 4;
        # the zero bytes after its last byte in that beat are nz_base + 4 * nzq.
        self.nz_base = -residues.pop() % 4
        super().__init__({
            **config_members(),
            **record_members("s_hdr", records.TX_HEADER, sink=True),
            **axis_members("s_axis", data_width, FrameUser.WIDTH, sink=True),
            **axis_members("m_axis", data_width, FrameUser.WIDTH, sink=False),
        })

    def elaborate(self, platform):
        m = Module()
        W, B = self.data_width, self.lanes
        log_b = exact_log2(B)
        full = (1 << B) - 1
        hlen = self.header_lengths
        offsets = sorted({h % B for h in hlen.values()})        # the payload's lane shifts
        q_max = max(h // B for h in hlen.values())              # beats before the first payload
        r_max = max(offsets)
        hdr_words = q_max + 1
        t_max = max(hlen.values()) + (-self.max_payload % 4 + self.max_payload) + \
            layouts.ICRC_BYTES
        beat_bits = bits_for((t_max - 1) // B)
        nzq_bits = log_b - 2
        # The CRC reads the beats shifted by crc_shifts[nzq] bytes (stage 2), see there.
        crc_shifts = self._crc_shifts()

        # ---------------------------------------------------- stage 0: the next record, decoded
        rec = self.s_hdr.p
        h_len = Signal(range(max(hlen.values()) + 1))
        h_q = Signal(range(q_max + 1))
        h_sel = Signal(range(len(offsets)))
        known = Signal()
        control = Signal()
        with m.Switch(rec.opcode):
            for op, h in hlen.items():
                with m.Case(op):
                    m.d.comb += [h_len.eq(h), h_q.eq(h // B), h_sel.eq(offsets.index(h % B)),
                                 known.eq(1), control.eq(op in layouts.CONTROL_OPCODES)]
        length = rec.length
        padded = Cat(Const(0, 2), (length + 3)[2:])
        n_len = Signal(18)          # frame bytes without the ICRC
        t_len = Signal(18)          # frame bytes
        t_end = Signal(18)          # index of the frame's last byte
        udp_len, outer_len, padcnt = Signal(16), Signal(16), Signal(2)
        m.d.comb += [
            n_len.eq(h_len + padded),
            t_len.eq(n_len + layouts.ICRC_BYTES),
            t_end.eq(t_len - 1),
            udp_len.eq(t_len - layouts.UDP_OFFSET),
            outer_len.eq(t_len - layouts.INNER_OFFSET),
            padcnt.eq(-length),
        ]
        drop_opcode = ~known
        drop_ctrl_len = known & control & (length != 0)
        drop_oversize = known & ~drop_ctrl_len & (length > self.max_payload)

        def build_header(rec, outer_len, udp_len, padcnt):
            return Cat(
                pack(layouts.ETH, dst=rec.eth_dst, src=rec.eth_src,
                     ethertype=layouts.ETHERTYPE_IPV6),
                pack(layouts.IPV6, version=6, dscp=rec.dscp, ecn=rec.ecn,
                     flow_label=rec.flow_label, payload_length=outer_len, next_header=layouts.NEXT_HEADER_IPV6,
                     hop_limit=rec.hop_limit, src=rec.outer_src, dst=rec.outer_dst),
                pack(layouts.IPV6, version=6, dscp=rec.dscp, ecn=rec.ecn,
                     flow_label=rec.flow_label, payload_length=udp_len, next_header=layouts.NEXT_HEADER_UDP,
                     hop_limit=layouts.HOP_LIMIT_DEFAULT, src=rec.inner_src, dst=rec.inner_dst),
                pack(layouts.UDP, sport=rec.udp_sport, dport=layouts.ROCE_UDP_PORT,
                     length=udp_len, checksum=0),
                pack(layouts.BTH, opcode=rec.opcode, padcnt=padcnt, pkey=layouts.PKEY_DEFAULT,
                     dest_qpn=rec.dest_qpn, ackreq=rec.ackreq, rtx=rec.rtx, psn=rec.psn),
                rec.ext,
            )

        header = build_header(rec, outer_len, udp_len, padcnt)
        # The header's constant bits (the derived fields' ones: EtherType, versions, ...) as
        # the registers' initial values, so that synthesis makes them constants.
        zero_rec = SimpleNamespace(**{name: Const(0, len(getattr(rec, name)))
                                      for name, _ in records.TX_HEADER})
        header_init = Const.cast(build_header(zero_rec, Const(0, 16), Const(0, 16),
                                              Const(0, 2))).value
        assert len(header) == 8 * (layouts.EXT_OFFSET + layouts.MAX_EXT_BYTES)

        # The next record's registers (s_hdr.ready is a register: ~n_full).
        n_full = Signal()
        n_hdr = Signal(hdr_words * W, init=header_init)
        n_good, n_payload = Signal(name="n_good"), Signal(name="n_payload")
        n_drop_opcode, n_drop_ctrl_len, n_drop_oversize = Signal(), Signal(), Signal()
        n_length = Signal(16)
        n_last_beat = Signal(beat_bits, name="n_last_beat")
        n_crc_end_beat = Signal(beat_bits, name="n_crc_end_beat")
        n_first_pay = Signal(range(q_max + 1))
        n_sel = Signal(range(len(offsets)))
        n_nzq = Signal(nzq_bits)
        n_last_nbytes = Signal(range(B + 1))
        n_last_keep = Signal(B)
        n_rem = Signal(data.StructLayout({"nz": 1, "more": 1, "expect": B}), name="n_rem")
        n_first = Signal(data.StructLayout({"before": 1, "at": 1, "last": 1, "crc_end": 1}),
                         name="n_first")
        # Copies of n_full: the header registers' enables (one per _HDR_FANOUT bits), the first
        # also in the take that loads stage 1's registers (see there).
        hdr_parts = [slice(base, min(base + _HDR_FANOUT, len(n_hdr)))
                     for base in range(0, len(n_hdr), _HDR_FANOUT)]
        full_copies = [Signal(name=f"n_full_copy{k}") for k in range(len(hdr_parts))]
        # Captured in every cycle while empty (the enable is a register, not the input valid).
        m.d.comb += self.s_hdr.ready.eq(~n_full)
        with m.If(~n_full):
            m.d.sync += [
                n_full.eq(self.s_hdr.valid),
                n_rem.nz.eq(length != 0),
                n_rem.more.eq(length > B),
                n_rem.expect.eq(self._lanes_below(length)),
                n_first.before.eq(h_q != 0),
                n_first.at.eq(h_q == 0),
                n_first.last.eq(t_end[log_b:] == 0),
                n_first.crc_end.eq((n_len - 1)[log_b:] == 0),
                n_good.eq(~(drop_opcode | drop_ctrl_len | drop_oversize)),
                n_payload.eq(length != 0),
                n_drop_opcode.eq(drop_opcode),
                n_drop_ctrl_len.eq(drop_ctrl_len),
                n_drop_oversize.eq(drop_oversize),
                n_length.eq(length),
                n_last_beat.eq(t_end[log_b:]),
                n_crc_end_beat.eq((n_len - 1)[log_b:]),
                n_first_pay.eq(h_q),
                n_sel.eq(h_sel),
                n_nzq.eq((Const(0, log_b) - n_len[:log_b])[2:log_b]),
                n_last_nbytes.eq(t_end[:log_b] + 1),
                n_last_keep.eq(Cat(*(t_end[:log_b] >= lane for lane in range(B)))),
            ]

        # ---------------------------------------------------- stage 1: the frame's beats
        active = Signal()
        beat = Signal(beat_bits)         # output beat index j
        last_beat = Signal(beat_bits)
        crc_end_beat = Signal(beat_bits)  # the beat holding the last covered byte
        first_pay = Signal(range(q_max + 1))   # q: the beat where the payload starts
        sel = Signal(range(len(offsets)))      # which of the offsets r = header bytes mod B
        hdr = Signal(hdr_words * W, init=header_init)   # the frame's header, a word per beat
        prev = Signal(8 * r_max)         # the last r_max payload bytes of the previous beat
        rem = Signal(16)                 # payload bytes still expected from the packet
        bad = Signal(name="frame_bad")      # stage 1b: a beat of this frame so far was bad
        nzq = Signal(nzq_bits)
        last_nbytes = Signal(range(B + 1))
        last_keep = Signal(B)
        discard = Signal(2)              # packets (or their rests) to discard before the next
        # Room: beats the pipeline and the output buffer can still take (a credit per beat
        # issued, returned when it leaves on m_axis), so nothing past stage 1 ever stalls.
        capacity = self.out_depth + 1    # the FIFO and the output register
        # room is registered: credit >= 2 in a cycle leaves at least one in the next, whatever
        # is issued meanwhile (one credit of slack, inside the default depth).
        credit = Signal(range(capacity + 1), init=capacity)
        room = Signal(init=1)
        m.d.sync += room.eq(credit >= 2)

        # Registered flags of the beat and of rem (no comparison on stage 1's paths).
        fl = Signal(data.StructLayout({"before": 1, "at": 1, "last": 1, "crc_end": 1}),
                    name="beat_flags")
        rf = Signal(data.StructLayout({"nz": 1, "more": 1, "expect": B}), name="rem_flags")
        # Registered: whether this beat takes payload (not before it, bytes still expected) and
        # whether a packet is being discarded, each the value its expression has.
        need_r = Signal(name="need_payload")
        disc_r = Signal(name="discarding")

        # Payload input: which lanes of the beat are payload bytes of this frame. rf.expect is
        # a thermometer (lane k set when rem > k), which keeps these tests two-level.
        tkeep, tlast, tvalid = self.s_axis.p.keep, self.s_axis.p.last, self.s_axis.valid
        expect, more = rf.expect, rf.more
        kept = Signal(B)        # lanes before the first keep = 0
        lane_ok = Signal(B)
        short, excess, long = Signal(), Signal(), Signal()
        # The packet ends at lane rem or beyond (rem < W/8): every keep up to lane rem is 1.
        reaches = Signal()
        m.d.comb += [
            kept.eq(Cat(*(tkeep[:lane + 1].all() for lane in range(B)))),
            lane_ok.eq(expect & Mux(tlast, kept, full)),
            reaches.eq(~expect[B - 1] & tkeep[0] & Cat(*(
                tkeep[lane] | ~expect[lane - 1] for lane in range(1, B))).all()),
            short.eq(tlast & (more | (expect & ~tkeep).any())),
            excess.eq(~tlast & ~more),
            long.eq(Mux(tlast, reaches, excess)),
        ]

        # Stage 1's decisions, from registers and the payload port's valid and last only.
        before_pay, at_pay, need_in, discarding = fl.before, fl.at, need_r, disc_r
        # adv and consume, each one LUT of tvalid and register-only terms: go_free, the beat
        # advances without payload; go_pay & room_valid, it advances taking payload.
        adv, consume, is_last = (Signal(name=n, attrs={"keep": 1})
                                 for n in ("adv", "consume", "is_last"))
        room_valid = wire(m, room & tvalid, 1, "room_valid")
        go_free = wire(m, active & room & ~need_in, 1, "go_free")
        go_pay = wire(m, need_in & ~discarding & active, 1, "go_pay")
        m.d.comb += [
            adv.eq(go_free | (go_pay & room_valid)),
            consume.eq(go_pay & room_valid),
            is_last.eq(fl.last),
        ]
        m.d.comb += self.s_axis.ready.eq(discarding | (active & room & need_in))

        cur = Signal(W)     # this beat's payload bytes, zero where there are none
        for lane in range(B):
            m.d.comb += cur[8 * lane:8 * lane + 8].eq(
                Mux(need_in & lane_ok[lane], self.s_axis.p.data[8 * lane:8 * lane + 8], 0))
        # The beat's one-hot (0 past the header), back to beat 0 at each frame's end (a frame
        # then starts there), so that the take does not load it.
        hsel = Signal(hdr_words, name="hdr_select", init=1)

        bad_beat = Signal(name="bad_beat")     # this beat takes payload bytes gone wrong
        # take: the next record enters stage 1 (or is dropped); each a LUT4 of kept LUT4s of
        # registers, beside adv.
        ready_any, ready_good, ready_load = (
            Signal(name=n, attrs={"keep": 1})
            for n in ("take_ready", "take_ready_good", "take_ready_load"))
        # A copy of active for take_good (its next value reads the copy itself, so that
        # synthesis keeps it apart), so that take_good shares no LUT with take and take_load.
        active_g = Signal(name="active_copy")
        take, take_good, take_load = (
            Signal(name=n, attrs={"keep": 1}) for n in ("take", "take_good", "take_load"))
        upstream_bad = tlast & self.s_axis.p.user[FrameUser.BAD]
        # stage 1 frees: ~active | (adv & is_last)
        frees = Signal(name="stage1_frees")
        m.d.comb += [
            bad_beat.eq(consume & (short | long | upstream_bad)),
            frees.eq(~active | (adv & is_last)),
            ready_any.eq(n_full & ~discard[1]),
            ready_good.eq(n_good & ~discard[1] & n_full),
            # each one LUT4 of kept ready_*, adv and registers
            take.eq(ready_any & frees),
            take_good.eq(ready_good & (~active_g | (adv & is_last))),
            # take_good again, from a copy of n_full: it loads the frame's registers, apart from
            # the flags' loop.
            ready_load.eq(full_copies[0] & n_good & ~discard[1]),
            take_load.eq(ready_load & frees),
        ]

        # Packets to discard: one more for a taken record that is dropped and owns a packet and
        # for a packet that goes on past its record's length; one fewer at a discarded tlast.
        in_fire = self.s_axis.valid & self.s_axis.ready
        inc_drop = Signal(name="discard_dropped")
        m.d.comb += inc_drop.eq(take & ~n_good & n_payload)
        discard_next = Signal(2, name="discard_next")
        m.d.comb += discard_next.eq(discard + (consume & excess) + inc_drop
                                    - (discarding & tvalid & tlast))
        # discarding: discard_next != 0, by cases (no adder before it): while discarding no
        # payload is consumed and discard only ends from 1 at a tlast with nothing added.
        m.d.sync += [
            discard.eq(discard_next),
            disc_r.eq(Mux(disc_r, ~((discard == 1) & ~inc_drop & tvalid & tlast),
                          (consume & excess) | inc_drop)),
        ]

        # The next beat's flags and rem's, computed from registers alone (beside the decisions
        # above), then chosen by them: a taken record's, the next beat's, or unchanged.
        # beat + 1, a register beside beat (its flags compare it, no adder before them).
        nb = Signal(beat_bits, name="beat_next", init=1)
        fl_adv = Signal.like(fl, name="beat_flags_adv")
        m.d.comb += [
            fl_adv.before.eq(nb < first_pay),
            fl_adv.at.eq(nb == first_pay),
            fl_adv.last.eq(nb == last_beat),
            fl_adv.crc_end.eq(nb == crc_end_beat),
        ]
        # rem - W/8 from rem's beats and low bits (no subtract before them); the packet goes on
        # past this beat only with rem > W/8, so rem - W/8 != 0 then.
        cont = Signal(name="rem_continues")
        rb, low = rem[log_b:], rem[:log_b]
        rf_use = Signal.like(rf, name="rem_flags_consumed")
        m.d.comb += [
            cont.eq(~tlast & more),
            rf_use.nz.eq(cont),
            rf_use.more.eq(cont & ((rb > 2) | ((rb == 2) & (low != 0)))),
            rf_use.expect.eq(Cat(*(cont & ((rb > 1) | (low > lane)) for lane in range(B)))),
        ]
        # Each next value is a LUT after take_good, from a candidate a LUT after adv or consume.
        fl_cand = Signal.like(fl, name="beat_flags_cand", attrs={"keep": 1})
        rf_cand = Signal.like(rf, name="rem_flags_cand", attrs={"keep": 1})
        need_cand = Signal(name="need_payload_cand", attrs={"keep": 1})
        m.d.comb += [
            fl_cand.eq(Mux(adv, fl_adv, fl)),
            rf_cand.eq(Mux(consume, rf_use, rf)),
            # ~before & nz of the flags chosen, by the same cases.
            need_cand.eq(Mux(adv, ~fl_adv.before & Mux(need_in, cont, rf.nz), need_r)),
        ]
        m.d.sync += [
            fl.eq(Mux(take_good, n_first, fl_cand)),
            rf.eq(Mux(take_good, n_rem, rf_cand)),
            need_r.eq(Mux(take_good, ~n_first.before & n_rem.nz, need_cand)),
        ]

        with m.If(adv):
            m.d.sync += [
                beat.eq(nb),
                nb.eq(nb + 1),
                hsel.eq(Mux(is_last, 1, hsel << 1)),
            ]
            with m.If(is_last):
                m.d.sync += [active.eq(0), active_g.eq(0)]
        with m.If(consume):
            m.d.sync += [
                rem.eq(Mux(cont, rem - B, 0)),
            ]
        with m.If(take):
            m.d.sync += n_full.eq(0)
        # The header registers' enables, replicated (a copy of n_full, and of fresh, per
        # _HDR_FANOUT bits; each copy's next value reads the copy itself, so that synthesis
        # keeps them apart).
        for k, (part, full_k) in enumerate(zip(hdr_parts, full_copies)):
            fresh_k = Signal(name=f"hdr_fresh_copy{k}")
            m.d.sync += [full_k.eq(Mux(full_k, ~take, self.s_hdr.valid)),
                         fresh_k.eq(full_k & ~discard[1] & n_good & frees)]
            with m.If(~full_k):
                m.d.sync += n_hdr[part].eq(header[part])
            with m.If(fresh_k):
                m.d.sync += hdr[part].eq(n_hdr[part])
        with m.If(take_good):
            m.d.sync += [
                active.eq(1),
                active_g.eq(1),
                beat.eq(0),
                nb.eq(1),
                last_beat.eq(n_last_beat),
                crc_end_beat.eq(n_crc_end_beat),
                first_pay.eq(n_first_pay),
                rem.eq(n_length),
                last_keep.eq(n_last_keep),
            ]
        # The data path's frame registers, from the copy (the control registers above, which
        # the formal harness relates to the record, from n_full itself).
        with m.If(take_load):
            m.d.sync += [
                sel.eq(n_sel),
                nzq.eq(n_nzq),
                last_nbytes.eq(n_last_nbytes),
            ]

        # The ICRC's masked fields, forced to ones in the copy of the beat the CRC reads.
        mask_beats = max((bit + width - 1) // 8 for bit, width in layouts.ICRC_MASKED_BITS) // B + 1
        assert mask_beats <= hdr_words

        # Stage 1's command register (no enable: the decision, then the data, a cycle apart):
        # the beat's header word is read in the next stage from registers only, once hdr holds
        # the frame's header (it is loaded in the cycle after the take, as the frame's first
        # command is made).
        beat_layout = data.StructLayout({
            "valid": 1, "data": W, "keep": B, "last": 1, "user": 1,
            "crc_end": 1, "nzq": nzq_bits, "nbytes": range(B + 1)})
        cmd_layout = data.StructLayout({
            "valid": 1, "last": 1, "keep": B, "user": 1, "crc_end": 1,
            "nzq": nzq_bits, "nbytes": range(B + 1), "hsel": hdr_words, "before": 1, "at": 1,
            "sel": range(len(offsets)), "cur": W})
        self.beat_layout, self.cmd_layout = beat_layout, cmd_layout
        cmd = Signal(cmd_layout, name="cmd")
        m.d.sync += [
            cmd.valid.eq(adv),
            cmd.keep.eq(Mux(is_last, last_keep, full)),
            cmd.last.eq(is_last),
            cmd.user.eq(bad_beat),     # the frame's flag is made in stage 1b
            cmd.crc_end.eq(fl.crc_end),
            cmd.nzq.eq(nzq),
            cmd.nbytes.eq(Mux(is_last, last_nbytes, B)),
            cmd.hsel.eq(hsel),
            cmd.before.eq(before_pay),
            cmd.at.eq(at_pay),
            cmd.sel.eq(sel),
            cmd.cur.eq(cur),
        ]

        # Stage 1b: the beat's header word, an AND-OR over the header words by the one-hot
        # hsel (no binary mux), registered beside the command.
        # hsel reaches every bit of a word: it is read from copies of cmd.hsel, each for
        # _HSEL_FANOUT bits of the word. Synthesis merges registers of the same inputs, so the
        # copies differ in their reset and enable (loaded with each beat issued, or in every
        # cycle): each holds cmd.hsel whenever cmd holds a beat.
        copies = [cmd.hsel]
        # (A beat issued in a cycle had room and a credit then.)
        some_credit = Signal(name="some_credit")
        m.d.comb += some_credit.eq(credit != 0)
        variants = [(reset_less, init, enable)
                    for enable in (None, room, some_credit)
                    for reset_less, init in ((False, 0), (True, 0), (False, -1))][1:]
        for reset_less, init, enable in variants[:-(-W // _HSEL_FANOUT) - 1]:
            copy = Signal(hdr_words, name=f"hdr_select_copy{len(copies)}",
                          reset_less=reset_less, init=init % (1 << hdr_words))
            with m.If(1 if enable is None else enable):
                m.d.sync += copy.eq(hsel)
            copies.append(copy)
        word = Signal(W, name="hdr_word")
        cmd2 = Signal(cmd_layout, name="cmd2")
        bad_before = Signal(name="bad_before")     # a beat before this one of its frame was bad
        m.d.comb += bad_before.eq(bad & ~cmd.hsel[0])
        m.d.sync += [
            word.eq(Cat(*(
                Cat(*(copies[b * len(copies) // W][k] & hdr.word_select(k, W)[b]
                      for k in range(hdr_words))).any()
                for b in range(W)))),
            cmd2.eq(cmd),
            # The frame is flagged bad on its last beat when one of its beats was.
            cmd2.user.eq(cmd.last & (bad_before | cmd.user)),
        ]
        with m.If(cmd.valid):
            m.d.sync += bad.eq(bad_before | cmd.user)
        # Stage 1c: the beat's bytes: the header word, then the payload shifted by the record's
        # offset.
        with m.If(cmd2.valid):
            m.d.sync += prev.eq(cmd2.cur[W - 8 * r_max:])
        out = Signal(W)
        with m.Switch(cmd2.sel):
            for index, r in enumerate(offsets):
                with m.Case(index):
                    left = Mux(cmd2.at, word[:8 * r], prev[8 * (r_max - r):])
                    m.d.comb += out.eq(Mux(cmd2.before, word,
                                           Cat(left, cmd2.cur[:8 * (B - r)])))
        ones = Signal(W, name="crc_ones")
        m.d.comb += ones.eq(Cat(*(
            Cat(*(cmd2.hsel[k] for k in range(mask_beats)
                  if (self._crc_ones(k).value >> b) & 1)).any()
            for b in range(W))))

        r1 = Signal(beat_layout, name="r1")
        r1_crc_data = Signal(W, name="r1_crc_data")
        r1_crc_first = Signal(name="r1_crc_first")
        m.d.sync += [
            r1.valid.eq(cmd2.valid),
            r1.data.eq(out),
            r1.keep.eq(cmd2.keep),
            r1.last.eq(cmd2.last),
            r1.user.eq(cmd2.user),
            r1.crc_end.eq(cmd2.crc_end),
            r1.nzq.eq(cmd2.nzq),
            r1.nbytes.eq(cmd2.nbytes),
            r1_crc_data.eq(out | ones),
            # The CRC's first beat of the frame: beat (ICRC start + shift) // (W/8).
            r1_crc_first.eq(Cat(*(
                ((cmd2.nzq == v) if len(crc_shifts) > 1 else 1)
                & cmd2.hsel[(layouts.ICRC_START + t) // B]
                for v, t in enumerate(crc_shifts))).any()),
        ]

        # ---------------------------------------------------- stage 2: the ICRC
        # The CRC reads the beats shifted t = crc_shifts[nzq] bytes later (the last t bytes of
        # a beat lead the next one in the CRC's copy): with t the frame's zero bytes after its
        # last covered byte in that beat (nz_base + 4 * nzq), its covered bytes end on a beat
        # boundary of the copy, so the CRC has no trailing bytes to undo (its trail is 0) and
        # the shifted start is its lead (a constant seed per lead). Past W = 128 the shift is
        # nz_base alone (a 2**(W/32)-way byte mux costs more than the CRC's undo stages) and
        # the trail 4 * nzq.
        m.submodules.crc = crc = Crc32Pipeline(W, ICRC_PREFIX, self.crc_data_stages)
        max_shift = max(crc_shifts)
        options = [r1_crc_data] * len(crc_shifts)
        if max_shift:
            crc_carry = Signal(8 * max_shift, name="crc_carry")
            with m.If(r1.valid):
                m.d.sync += crc_carry.eq(r1_crc_data[W - 8 * max_shift:])
            options = [Cat(crc_carry[8 * (max_shift - t):], r1_crc_data[:W - 8 * t])
                       for t in crc_shifts]
        crc_data, crc_lead = options[0], Const((layouts.ICRC_START + crc_shifts[0]) % B)
        for v in range(1, len(crc_shifts)):
            crc_data = Mux(r1.nzq == v, options[v], crc_data)
            crc_lead = Mux(r1.nzq == v, (layouts.ICRC_START + crc_shifts[v]) % B, crc_lead)
        m.d.comb += [
            crc.i.valid.eq(r1.valid),
            crc.i.p.data.eq(crc_data),
            crc.i.p.lead.eq(crc_lead),
            crc.i.p.trail.eq(0 if len(crc_shifts) > 1 else 4 * r1.nzq),
            crc.i.p.first.eq(r1_crc_first),
            crc.i.p.last.eq(r1.crc_end),
        ]
        # The beats wait beside the CRC: its value is valid when the beat holding the last
        # covered byte leaves the delay line.
        delayed = r1
        for k in range(crc.latency):
            nxt = Signal(beat_layout, name=f"d{k}")
            m.d.sync += nxt.eq(delayed)
            delayed = nxt
        d = delayed

        icrc = crc.o.payload    # zlib's value, stored least-significant byte first
        icrc_hold = Signal(32)
        spill = Signal()        # the next beat takes the ICRC bytes the last one had no room for
        slots = [[] for _ in range(B)]      # (nzq, ICRC byte) that land in each lane
        for v in range(1 << nzq_bits):
            for k in range(layouts.ICRC_BYTES):
                lane = B - self.nz_base - 4 * v + k
                if 0 <= lane < B:
                    slots[lane].append((v, k))
        spill_bytes = layouts.ICRC_BYTES - self.nz_base   # when nzq = 0
        framed = []
        for lane in range(B):
            byte = d.data[8 * lane:8 * lane + 8]
            for v, k in slots[lane]:
                byte = Mux(d.crc_end & (d.nzq == v), icrc[8 * k:8 * k + 8], byte)
            if lane < spill_bytes:
                k = lane + self.nz_base
                byte = Mux(spill, icrc_hold[8 * k:8 * k + 8], byte)
            framed.append(byte)
        with m.If(d.valid):
            m.d.sync += spill.eq(d.crc_end & (d.nzq == 0))
            with m.If(d.crc_end):
                m.d.sync += icrc_hold.eq(icrc)

        # ---------------------------------------------------- the output buffer
        out_layout = data.StructLayout({"data": W, "keep": B, "last": 1, "user": 1,
                                        "nbytes": range(B + 1)})
        self.out_layout = out_layout
        m.submodules.out_fifo = fifo = SyncFIFO(width=out_layout.size, depth=self.out_depth)
        w_beat = Signal(out_layout)
        m.d.comb += [
            w_beat.data.eq(Cat(*framed)), w_beat.keep.eq(d.keep), w_beat.last.eq(d.last),
            w_beat.user.eq(d.user), w_beat.nbytes.eq(d.nbytes),
            fifo.w_data.eq(w_beat), fifo.w_en.eq(d.valid),
        ]
        o_beat = Signal(out_layout)
        o_nbytes = Signal(range(B + 1))
        ce_out = ~self.m_axis.valid | self.m_axis.ready
        m.d.comb += [o_beat.eq(fifo.r_data), fifo.r_en.eq(ce_out)]
        with m.If(ce_out):
            m.d.sync += [
                self.m_axis.valid.eq(fifo.r_rdy),
                self.m_axis.p.data.eq(o_beat.data),
                self.m_axis.p.keep.eq(o_beat.keep),
                self.m_axis.p.last.eq(o_beat.last),
                self.m_axis.p.user.eq(o_beat.user),
                o_nbytes.eq(o_beat.nbytes),
            ]
        out_fire = self.m_axis.valid & self.m_axis.ready
        m.d.sync += credit.eq(credit - adv + out_fire)

        # ---------------------------------------------------------------- configuration
        # Events are registered before they are counted (a counter's adder is not on the
        # stage-1 paths); a count shows one cycle after its event.
        events = {
            "frames_out": out_fire & self.m_axis.p.last,
            "bad_frames_out": out_fire & self.m_axis.p.last & self.m_axis.p.user[FrameUser.BAD],
            "bytes_out": Mux(out_fire, o_nbytes, 0),
            "records_in": take,
            "drop_opcode": take & n_drop_opcode,
            "drop_ctrl_len": take & n_drop_ctrl_len,
            "drop_oversize": take & n_drop_oversize,
            "short_payload": consume & short,
            "long_payload": consume & long,
            "payload_bad_in": in_fire & upstream_bad,
        }
        cfg = ConfigMap(m, self)
        for name, addr in COUNTERS.items():
            cfg.counter(addr, name, events[name], registered=True)
        cfg.ro(INFO["data_width"], "data_width", Const(W, 32))
        cfg.ro(INFO["max_payload"], "max_payload", Const(self.max_payload, 32))
        cfg.finish(decoded=True)
        return m

    def _crc_shifts(self):
        """The bytes the CRC's copy of a frame is shifted by, for each value of nzq: the zero
        bytes after its last covered byte up to W = 128, nz_base alone above."""
        nzq_values = 1 << (exact_log2(self.lanes) - 2)
        if nzq_values <= 4:
            return [self.nz_base + 4 * v for v in range(nzq_values)]
        return [self.nz_base]

    def _lanes_below(self, count):
        """Lane k set when ``count > k`` (k < W/8): the high bits tested once, not a comparator
        per lane."""
        log_b = exact_log2(self.lanes)
        high = count[log_b:] != 0
        return Cat(*(high | (count[:log_b] > lane) for lane in range(self.lanes)))

    def _crc_ones(self, index):
        """The bits of beat ``index`` that the ICRC reads as ones (the fields of
        :data:`models.layouts.ICRC_MASKED_BITS`); the bytes before the ICRC's start are left out
        by the CRC's ``lead``."""
        W, B = self.data_width, self.lanes
        ones = 0
        for bit, width in layouts.ICRC_MASKED_BITS:
            for wire_bit in range(bit - 8 * index * B, bit + width - 8 * index * B):
                if 0 <= wire_bit < W:
                    ones |= 1 << lane_bit(wire_bit)
        return Const(ones, W)
