# SPDX-License-Identifier: BSD-2-Clause
"""The self-test's frame source: header records and payloads made from a xorshift64 sequence."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from models.layouts import Dscp
from models.records import EXT_WIDTH
from models.selftest import EXIT_USID, LANE_SALT, OPCODE_TABLE, OWN_USID, SelfTestConfig
from models.selftest import xorshift64 as xorshift64_int
from models.usid import DEFAULT_BLOCK
from rtl.common import records
from rtl.common.ports import axis_members, record_members

__all__ = ["FrameSource", "xorshift64"]


def xorshift64(x):
    """The xorshift64 (13, 7, 17) step of a 64-bit Value (an XOR network)."""
    x = x ^ Cat(Const(0, 13), x[:51])
    x = x ^ x[7:]
    return x ^ Cat(Const(0, 17), x[:47])


def _rot32(r):
    return Cat(r[32:], r[:32])


class FrameSource(wiring.Component):
    """Makes the frames of :mod:`models.selftest` for the header inserter: one ``tx_header``
    record per request, then its payload.

    Two sequences share the logic: the *send* one (the frames sent into the loop) and the
    *check* one (the same frames with the outer destination and Hop Limit they have after
    ``passes`` crossings of the switch, :func:`models.selftest.expected_record`: the checker's
    expected frames). Each keeps its own state ``R`` (starting at ``xs(seed)``) and sequence
    number, stepped once per request of its kind, so frame i of both is made from the same R_i.

    Parameters
    ----------
    config : :class:`models.selftest.SelfTestConfig`
        Width, switch (ports and passes), largest payload, seed.

    Ports
    -----
    ``req_valid``, ``req_check`` in, ``req_ready`` out: a request for the next frame of the
    check (``req_check`` = 1) or send sequence; ``req_ready`` is high when the previous frame's
    record and payload are all out.
    ``m_hdr_tdata/tvalid/tready``: the record (:data:`rtl.common.records.TX_HEADER`).
    ``m_axis_tdata/tkeep/tlast/tvalid/tready``: its payload (none when ``length`` is 0), byte 0
    in lane 0, ``tkeep`` all ones but on the last beat; ``m_axis_tuser`` is 0.
    ``clk``, ``rst``: the sync domain.

    Latency and throughput: the record is valid the cycle after the request; the payload's
    first beat the cycle after the record's handshake, then one beat per cycle; a new request is
    taken the cycle after the last beat (or the record of a frame without payload). Every output
    is a register or plain wiring of registers (the record's computed fields, ``tkeep`` and
    ``tlast`` are registered), so nothing of this block adds to the header inserter's paths.
    """

    def __init__(self, config):
        if not isinstance(config, SelfTestConfig):
            raise ValueError(f"FrameSource: config must be a SelfTestConfig, not {config!r}")
        self.config = config
        w = config.data_width
        super().__init__({
            "req_valid": In(1), "req_check": In(1), "req_ready": Out(1),
            **record_members("m_hdr", records.TX_HEADER, sink=False),
            **axis_members("m_axis", w, 1, sink=False),
        })

    def _length(self, m, r):
        p = self.config.max_payload
        log_p = exact_log2(p)
        folded = Signal(log_p + 1)
        raw = r[:log_p + 1]
        m.d.comb += folded.eq(Mux(raw > p, raw - p, raw))
        mode = r[24:27]
        return Mux(mode == 0, 0, Mux(mode == 1, p, folded))

    def _outer_dst(self, r, check):
        cfg = self.config
        if not cfg.ports:
            return Cat(r[32:], r, Const(DEFAULT_BLOCK, 32))
        n = cfg.passes
        tail_bits = 96 - 16 * (n + 1)
        tail = _rot32(r)[:tail_bits]
        prefix = DEFAULT_BLOCK
        for usid in [OWN_USID] * n + [EXIT_USID]:
            prefix = prefix << 16 | usid
        sent = Cat(tail, Const(prefix, 128 - tail_bits))
        shifted = Cat(Const(0, 16 * n), tail, Const(EXIT_USID, 16), Const(DEFAULT_BLOCK, 32))
        return Mux(check, shifted, sent)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        lanes_n, lanes_b = cfg.lanes, cfg.data_width // 8
        r_send = Signal(64, init=xorshift64_int(cfg.seed))
        r_check = Signal(64, init=xorshift64_int(cfg.seed))
        seq_send = Signal(32)
        seq_check = Signal(32)
        r = Signal(64)              # the state of the frame being made
        seq = Signal(32)
        check = Signal()
        hdr_valid = Signal()
        pay_valid = Signal()
        lanes = [Signal(64, name=f"lane{j}") for j in range(lanes_n)]
        # Record fields that take logic beyond wiring are registered with the state, so the
        # header inserter sees registers on its record input.
        length = Signal(16)
        hop = Signal(8)
        opcode = Signal(8)
        outer_dst = Signal(128)
        # The payload's byte count, last-beat flag and keep, registered a beat ahead.
        remaining = Signal(range(cfg.max_payload + 1))
        last = Signal()
        keep = Signal(lanes_b)

        def keep_of(count):
            return Cat(*[count > lane for lane in range(lanes_b)])

        m.d.comb += self.req_ready.eq(~hdr_valid & ~pay_valid)
        with m.If(self.req_valid & self.req_ready):
            chosen = Mux(self.req_check, r_check, r_send)
            m.d.sync += [r.eq(chosen), seq.eq(Mux(self.req_check, seq_check, seq_send)),
                         check.eq(self.req_check), hdr_valid.eq(1),
                         length.eq(self._length(m, chosen)),
                         hop.eq(Cat(chosen[50:56], Const(1, 1)) -
                                Mux(self.req_check, cfg.passes, 0)),
                         outer_dst.eq(self._outer_dst(chosen, self.req_check))]
            m.d.sync += [lane.eq(chosen ^ LANE_SALT[j]) for j, lane in enumerate(lanes)]
            with m.Switch(chosen[28:31]):
                for index, op in enumerate(OPCODE_TABLE):
                    with m.Case(index):
                        m.d.sync += opcode.eq(op)
            with m.If(self.req_check):
                m.d.sync += [r_check.eq(xorshift64(r_check)), seq_check.eq(seq_check + 1)]
            with m.Else():
                m.d.sync += [r_send.eq(xorshift64(r_send)), seq_send.eq(seq_send + 1)]

        # --- the record ----------------------------------------------------------------------
        nr = Signal(64)
        m.d.comb += nr.eq(~r)
        rec = self.m_hdr.p
        m.d.comb += [
            rec.eth_dst.eq(Cat(r[:32], seq[:16])), rec.eth_src.eq(r[16:]),
            rec.dscp.eq(Dscp.TRIMMABLE), rec.ecn.eq(r[40:42]), rec.flow_label.eq(r[20:40]),
            rec.hop_limit.eq(hop),
            rec.outer_src.eq(Cat(nr, r)), rec.outer_dst.eq(outer_dst),
            rec.inner_src.eq(Cat(r, nr)), rec.inner_dst.eq(Cat(seq, r, ~seq)),
            rec.udp_sport.eq(r[48:]), rec.opcode.eq(opcode), rec.dest_qpn.eq(r[:24]),
            rec.ackreq.eq(r[63]), rec.rtx.eq(r[62]), rec.psn.eq(seq[:24]),
            rec.ext.eq(Cat(r, nr, _rot32(r), r, seq)),
            rec.length.eq(length),
            self.m_hdr.valid.eq(hdr_valid),
        ]
        assert len(Cat(r, nr, _rot32(r), r, seq)) == EXT_WIDTH
        with m.If(self.m_hdr.valid & self.m_hdr.ready):
            m.d.sync += [hdr_valid.eq(0), pay_valid.eq(length != 0), remaining.eq(length),
                         last.eq(length <= lanes_b), keep.eq(keep_of(length))]

        # --- the payload ---------------------------------------------------------------------
        m.d.comb += [
            self.m_axis.p.data.eq(Cat(*lanes)),
            self.m_axis.p.keep.eq(keep),
            self.m_axis.p.last.eq(last),
            self.m_axis.valid.eq(pay_valid),
            self.m_axis.p.user.eq(0),
        ]
        rest = Signal.like(remaining)
        m.d.comb += rest.eq(remaining - lanes_b)
        with m.If(self.m_axis.valid & self.m_axis.ready):
            m.d.sync += [remaining.eq(rest), last.eq(rest <= lanes_b), keep.eq(keep_of(rest)),
                         *[lane.eq(xorshift64(lane)) for lane in lanes]]
            with m.If(last):
                m.d.sync += pay_valid.eq(0)
        return m
