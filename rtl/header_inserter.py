# SPDX-License-Identifier: BSD-2-Clause
"""The MRC header inserter (NIC transmit side): header record + payload stream -> complete frame."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.utils import bits_for, exact_log2

from models import layouts
from models.header_inserter import COUNTERS, INFO, MAX_PAYLOAD_LIMIT
from models.packets import ICRC_PREFIX
from models.records import FrameUser
from rtl.common import records
from rtl.common.config import ConfigMap
from rtl.common.crc import crc_update, seed_state, undo_zeros
from rtl.common.headers import lane_bit, pack
from rtl.common.ports import axis_members, check_width, config_members, record_members

__all__ = ["HeaderInserter"]


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

    Latency and throughput: 5 cycles from a record's handshake (block idle) to its frame's first
    beat on ``m_axis`` (handshake at clock edge t, beat valid for edge t + 5: the record's
    registers, then four pipeline registers). Then one beat per cycle, ``ceil(frame bytes /
    (W/8))`` beats per frame, and the next frame's first beat follows the last one with no idle
    cycle: the next record is taken in the cycle its predecessor's last beat leaves stage 1. The
    payload is read at most one beat per cycle, from output beat ``header bytes // (W/8)`` on,
    so sources at full rate never stall the output. Only bad input costs cycles (a dropped
    record takes one cycle to accept; a packet's excess is discarded at one beat per cycle,
    while the next frame's header beats go on).

    Structure: stage 1 loads the record's header bytes (150 B, from the layout tables) into a
    shift register and emits header beats, then the payload shifted by ``header bytes mod W/8``
    (one of four offsets: 130/134/138/150 B headers, so a 4-way byte mux, not a barrel shifter),
    zero pad and 4 zero placeholder bytes for the ICRC. Stage 2 runs the CRC-32 over each beat
    (frame bytes before 54 zeroed and folded into the seed, the fields of
    :data:`models.layouts.ICRC_MASKED_BITS` forced to ones at their fixed positions), undoes the
    zero bytes after the last covered byte with powers of the inverse zero-byte matrix, and
    writes the ICRC into the placeholders (the last beat, and the next one when it spills).
    Every stage is a register with a bubble-collapsing enable.
    """

    def __init__(self, data_width=64, max_payload=4096):
        check_width("HeaderInserter", data_width)
        if not isinstance(max_payload, int) or not 1 <= max_payload <= MAX_PAYLOAD_LIMIT:
            raise ValueError(f"HeaderInserter: max_payload must be 1..{MAX_PAYLOAD_LIMIT}, "
                             f"not {max_payload!r}")
        self.data_width = data_width
        self.max_payload = max_payload
        self.lanes = data_width // 8
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
        hlen = self.header_lengths
        offsets = sorted({h % B for h in hlen.values()})        # the payload's lane shifts
        q_max = max(h // B for h in hlen.values())              # beats before the first payload
        r_max = max(offsets)
        hdr_bytes = (q_max + 1) * B
        t_max = max(hlen.values()) + (-self.max_payload % 4 + self.max_payload) + \
            layouts.ICRC_BYTES
        beat_bits = bits_for((t_max - 1) // B)
        nzq_bits = log_b - 2

        # ---------------------------------------------------------------- stage 1: frame bytes
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
        good = ~(drop_opcode | drop_ctrl_len | drop_oversize)

        header = Cat(
            pack(layouts.ETH, dst=rec.eth_dst, src=rec.eth_src, ethertype=layouts.ETHERTYPE_IPV6),
            pack(layouts.IPV6, version=6, dscp=rec.dscp, ecn=rec.ecn, flow_label=rec.flow_label,
                 payload_length=outer_len, next_header=layouts.NEXT_HEADER_IPV6,
                 hop_limit=rec.hop_limit, src=rec.outer_src, dst=rec.outer_dst),
            pack(layouts.IPV6, version=6, dscp=rec.dscp, ecn=rec.ecn, flow_label=rec.flow_label,
                 payload_length=udp_len, next_header=layouts.NEXT_HEADER_UDP,
                 hop_limit=layouts.HOP_LIMIT_DEFAULT, src=rec.inner_src, dst=rec.inner_dst),
            pack(layouts.UDP, sport=rec.udp_sport, dport=layouts.ROCE_UDP_PORT, length=udp_len,
                 checksum=0),
            pack(layouts.BTH, opcode=rec.opcode, padcnt=padcnt, pkey=layouts.PKEY_DEFAULT,
                 dest_qpn=rec.dest_qpn, ackreq=rec.ackreq, rtx=rec.rtx, psn=rec.psn),
            rec.ext,
        )
        assert len(header) == 8 * (layouts.EXT_OFFSET + layouts.MAX_EXT_BYTES)

        # State of the frame being emitted.
        active = Signal()
        beat = Signal(beat_bits)         # output beat index j
        last_beat = Signal(beat_bits)
        crc_end_beat = Signal(beat_bits)  # the beat holding the last covered byte
        first_pay = Signal(range(q_max + 1))   # q: the beat where the payload starts
        sel = Signal(range(len(offsets)))      # which of the offsets r = header bytes mod B
        hdr_sr = Signal(8 * hdr_bytes)   # header bytes of this beat onwards
        prev = Signal(8 * r_max)         # the last r_max payload bytes of the previous beat
        rem = Signal(16)                 # payload bytes still expected from the packet
        bad = Signal()
        nzq = Signal(nzq_bits)
        last_nbytes = Signal(range(B + 1))
        last_keep = Signal(B)
        discard = Signal(2)              # packets (or their rests) to discard before the next

        # Stage-1 output register.
        r1_valid = Signal()
        r1_data = Signal(W)
        r1_keep = Signal(B)
        r1_last = Signal()
        r1_user = Signal()
        r1_crc_end = Signal()
        r1_nzq = Signal(nzq_bits)
        r1_nbytes = Signal(range(B + 1))
        mask_beats = max(layouts.ICRC_START - 1,
                         *((bit + width - 1) // 8 for bit, width in layouts.ICRC_MASKED_BITS)
                         ) // B + 1
        r1_hbeat = Signal(range(mask_beats + 1))   # beat index, saturated past the masked bytes

        # Stage-2 registers (P1: CRC after the beat, P2: CRC with trailing zeros undone, then
        # the output registers).
        p1_valid, p2_valid = Signal(), Signal()
        p1_data, p2_data = Signal(W), Signal(W)
        p1_keep, p2_keep = Signal(B), Signal(B)
        p1_last, p2_last = Signal(), Signal()
        p1_user, p2_user = Signal(), Signal()
        p1_crc_end, p2_crc_end = Signal(), Signal()
        p1_nzq, p2_nzq = Signal(nzq_bits), Signal(nzq_bits)
        p1_nbytes, p2_nbytes = Signal(range(B + 1)), Signal(range(B + 1))
        p1_crc, p2_crc = Signal(32), Signal(32)
        o_nbytes = Signal(range(B + 1))
        icrc_hold = Signal(32)
        spill = Signal()

        ce_out = ~self.m_axis.valid | self.m_axis.ready
        ce_p2 = ~p2_valid | ce_out
        ce_p1 = ~p1_valid | ce_p2
        ce_r1 = ~r1_valid | ce_p1

        # Payload input: which lanes of the beat are payload bytes of this frame.
        tkeep, tlast = self.s_axis.p.keep, self.s_axis.p.last
        expect = Signal(B)      # lanes the record still expects
        kept = Signal(B)        # lanes before the first keep = 0
        lane_ok = Signal(B)
        more, short, excess, long = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [
            expect.eq(Cat(*(rem > lane for lane in range(B)))),
            kept.eq(Cat(*(tkeep[:lane + 1].all() for lane in range(B)))),
            lane_ok.eq(expect & Mux(tlast, kept, (1 << B) - 1)),
            more.eq(rem > B),
            short.eq(tlast & (more | (expect & ~kept).any())),
            excess.eq(~tlast & ~more),
            long.eq(Mux(tlast, (kept & ~expect).any(), excess)),
        ]

        before_pay, at_pay, need_in, discarding = Signal(), Signal(), Signal(), Signal()
        adv, consume, is_last = Signal(), Signal(), Signal()
        m.d.comb += [
            before_pay.eq(beat < first_pay),
            at_pay.eq(beat == first_pay),
            need_in.eq(~before_pay & (rem != 0)),
            discarding.eq(discard != 0),
            adv.eq(active & ce_r1 & (~need_in | (~discarding & self.s_axis.valid))),
            consume.eq(adv & need_in),
            is_last.eq(beat == last_beat),
        ]
        m.d.comb += self.s_axis.ready.eq(discarding | (active & ce_r1 & need_in))

        cur = Signal(W)     # this beat's payload bytes, zero where there are none
        for lane in range(B):
            m.d.comb += cur[8 * lane:8 * lane + 8].eq(
                Mux(need_in & lane_ok[lane], self.s_axis.p.data[8 * lane:8 * lane + 8], 0))
        out = Signal(W)
        with m.Switch(sel):
            for index, r in enumerate(offsets):
                with m.Case(index):
                    left = Mux(at_pay, hdr_sr[:8 * r], prev[8 * (r_max - r):])
                    m.d.comb += out.eq(Mux(before_pay, hdr_sr[:W], Cat(left, cur[:8 * (B - r)])))

        bad_now, take = Signal(), Signal()
        upstream_bad = tlast & self.s_axis.p.user[FrameUser.BAD]
        m.d.comb += [
            bad_now.eq(bad | (consume & (short | long | upstream_bad))),
            self.s_hdr.ready.eq((~active | (adv & is_last)) & ~discard[1]),
            take.eq(self.s_hdr.valid & self.s_hdr.ready),
        ]

        in_fire = self.s_axis.valid & self.s_axis.ready
        discard_done = discarding & self.s_axis.valid & tlast
        m.d.sync += discard.eq(discard + (consume & excess)
                               + (take & ~good & (length != 0)) - discard_done)

        with m.If(adv):
            m.d.sync += [
                beat.eq(beat + 1),
                hdr_sr.eq(hdr_sr >> W),
                prev.eq(cur[W - 8 * r_max:]),
            ]
            with m.If(is_last):
                m.d.sync += active.eq(0)
        with m.If(consume):
            m.d.sync += [
                rem.eq(Mux(tlast | ~more, 0, rem - B)),
                bad.eq(bad_now),
            ]
        with m.If(take & good):
            m.d.sync += [
                active.eq(1),
                beat.eq(0),
                last_beat.eq(t_end[log_b:]),
                crc_end_beat.eq((n_len - 1)[log_b:]),
                first_pay.eq(h_q),
                sel.eq(h_sel),
                hdr_sr.eq(header),
                rem.eq(length),
                bad.eq(0),
                nzq.eq((Const(0, log_b) - n_len[:log_b])[2:log_b]),
                last_nbytes.eq(t_end[:log_b] + 1),
                last_keep.eq(Cat(*(t_end[:log_b] >= lane for lane in range(B)))),
            ]

        with m.If(ce_r1):
            m.d.sync += r1_valid.eq(adv)
        with m.If(adv):
            m.d.sync += [
                r1_data.eq(out),
                r1_keep.eq(Mux(is_last, last_keep, (1 << B) - 1)),
                r1_last.eq(is_last),
                r1_user.eq(is_last & bad_now),
                r1_crc_end.eq(beat == crc_end_beat),
                r1_nzq.eq(nzq),
                r1_nbytes.eq(Mux(is_last, last_nbytes, B)),
                r1_hbeat.eq(Mux(beat < mask_beats, beat, mask_beats)),
            ]

        # ---------------------------------------------------------------- stage 2: the ICRC
        seed = seed_state(ICRC_PREFIX, layouts.ICRC_START)
        crc_in = Signal(W)
        masked = r1_data
        for index in reversed(range(mask_beats)):
            keep_bits, ones = self._crc_masks(index)
            masked = Mux(r1_hbeat == index, (r1_data & keep_bits) | ones, masked)
        m.d.comb += crc_in.eq(masked)
        crc_next = crc_update(m, Mux(r1_hbeat == 0, seed, p1_crc), crc_in, name="crc_next")
        crc_undone = undo_zeros(m, p1_crc, p1_nzq, base=self.nz_base, step=4, name="crc_undo")

        with m.If(ce_p1):
            m.d.sync += p1_valid.eq(r1_valid)
            with m.If(r1_valid):
                m.d.sync += [
                    p1_data.eq(r1_data), p1_keep.eq(r1_keep), p1_last.eq(r1_last),
                    p1_user.eq(r1_user), p1_crc_end.eq(r1_crc_end), p1_nzq.eq(r1_nzq),
                    p1_nbytes.eq(r1_nbytes), p1_crc.eq(crc_next),
                ]
        with m.If(ce_p2):
            m.d.sync += p2_valid.eq(p1_valid)
            with m.If(p1_valid):
                m.d.sync += [
                    p2_data.eq(p1_data), p2_keep.eq(p1_keep), p2_last.eq(p1_last),
                    p2_user.eq(p1_user), p2_crc_end.eq(p1_crc_end), p2_nzq.eq(p1_nzq),
                    p2_nbytes.eq(p1_nbytes),
                    p2_crc.eq(crc_undone),
                ]

        icrc = Signal(32)   # zlib's value, stored least-significant byte first
        m.d.comb += icrc.eq(~p2_crc)
        slots = [[] for _ in range(B)]      # (nzq, ICRC byte) that land in each lane
        for v in range(1 << nzq_bits):
            for k in range(layouts.ICRC_BYTES):
                lane = B - self.nz_base - 4 * v + k
                if 0 <= lane < B:
                    slots[lane].append((v, k))
        spill_bytes = layouts.ICRC_BYTES - self.nz_base   # when nzq = 0
        framed = []
        for lane in range(B):
            byte = p2_data[8 * lane:8 * lane + 8]
            for v, k in slots[lane]:
                byte = Mux(p2_crc_end & (p2_nzq == v), icrc[8 * k:8 * k + 8], byte)
            if lane < spill_bytes:
                k = lane + self.nz_base
                byte = Mux(spill, icrc_hold[8 * k:8 * k + 8], byte)
            framed.append(byte)

        with m.If(ce_out):
            m.d.sync += self.m_axis.valid.eq(p2_valid)
            with m.If(p2_valid):
                m.d.sync += [
                    self.m_axis.p.data.eq(Cat(*framed)),
                    self.m_axis.p.keep.eq(p2_keep),
                    self.m_axis.p.last.eq(p2_last),
                    self.m_axis.p.user.eq(p2_user),
                    o_nbytes.eq(p2_nbytes),
                    spill.eq(p2_crc_end & (p2_nzq == 0)),
                ]
                with m.If(p2_crc_end):
                    m.d.sync += icrc_hold.eq(icrc)

        # ---------------------------------------------------------------- configuration
        out_fire = self.m_axis.valid & self.m_axis.ready
        events = {
            "frames_out": out_fire & self.m_axis.p.last,
            "bad_frames_out": out_fire & self.m_axis.p.last & self.m_axis.p.user[FrameUser.BAD],
            "bytes_out": Mux(out_fire, o_nbytes, 0),
            "records_in": take,
            "drop_opcode": take & drop_opcode,
            "drop_ctrl_len": take & drop_ctrl_len,
            "drop_oversize": take & drop_oversize,
            "short_payload": consume & short,
            "long_payload": consume & long,
            "payload_bad_in": in_fire & upstream_bad,
        }
        cfg = ConfigMap(m, self)
        for name, addr in COUNTERS.items():
            cfg.counter(addr, name, events[name])
        cfg.ro(INFO["data_width"], "data_width", Const(W, 32))
        cfg.ro(INFO["max_payload"], "max_payload", Const(self.max_payload, 32))
        cfg.finish()
        return m

    def _crc_masks(self, index):
        """(keep, ones) bit masks of beat ``index`` for the ICRC: bytes before the ICRC's start
        are cleared (the seed accounts for them), the masked fields are set to ones."""
        W, B = self.data_width, self.lanes
        keep_bits = 0
        for lane in range(B):
            if index * B + lane >= layouts.ICRC_START:
                keep_bits |= 0xFF << (8 * lane)
        ones = 0
        for bit, width in layouts.ICRC_MASKED_BITS:
            for wire_bit in range(bit - 8 * index * B, bit + width - 8 * index * B):
                if 0 <= wire_bit < W:
                    ones |= 1 << lane_bit(wire_bit)
        return Const(keep_bits, W), Const(ones, W)
