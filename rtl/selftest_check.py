# SPDX-License-Identifier: BSD-2-Clause
"""The self-test's checker: compares every received frame with the expected one, beat by beat."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from rtl.common.ports import axis_members, check_width

__all__ = ["FrameChecker"]


class FrameChecker(wiring.Component):
    """Pairs the expected frames (``exp``) with the received ones (``rx``), in order, and says
    for each expected frame whether it came back equal (``res_ok``), different (``res_bad``) or
    not at all (``res_lost``), and flags received frames that match no expected one
    (``res_extra``).

    Frames carry a 16-bit sequence number in their first two bytes (big-endian;
    :mod:`models.selftest`). At the first beat of a pair, with ``d`` = received sequence minus
    expected sequence (mod 2^16): ``d`` = 0 compares the two frames; 0 < ``d`` < ``window``
    means the expected frame never came (it is consumed and counted lost, the received frame
    waits for the next expected one); any other ``d`` means the received frame is not one the
    checker waits for (it is consumed and counted extra). When an expected beat waits
    ``timeout`` cycles with no received beat, the expected frame is consumed and counted lost.

    Two beats match when their ``tkeep`` and ``tlast`` are equal and their bytes are equal in
    every lane ``tkeep`` keeps. A frame is ``ok`` when all its beats match. When one frame ends
    before the other, the rest of the other is consumed and the frame is ``bad``.

    Parameters
    ----------
    data_width : 64, 128, 256 or 512
        W of both streams.
    window : int
        Frames in flight at most (1..2^15): how far ahead a received frame may be.
    timeout : int
        Cycles an expected beat waits for a received one before its frame counts as lost
        (at least 2).

    Ports
    -----
    ``exp_tdata/tkeep/tlast/tvalid/tready``, ``rx_tdata/tkeep/tlast/tvalid/tready``: the two
    frame streams in (``tready`` out).
    ``res_ok``, ``res_bad``, ``res_lost``: one-cycle pulses, one per expected frame, in order.
    ``res_extra``: a one-cycle pulse per received frame consumed without an expected one.
    ``clk``, ``rst``: the sync domain.

    Latency and throughput: both streams advance together at one beat per cycle; a result
    pulses one cycle after the handshake of the frame's last beat.
    """

    def __init__(self, data_width=64, window=4, timeout=1 << 16):
        check_width("FrameChecker", data_width)
        if not isinstance(window, int) or not 1 <= window <= 1 << 15:
            raise ValueError(f"FrameChecker: window must be 1..32768, not {window!r}")
        if not isinstance(timeout, int) or timeout < 2:
            raise ValueError(f"FrameChecker: timeout must be an integer >= 2, not {timeout!r}")
        self.data_width = data_width
        self.window = window
        self.timeout = timeout
        members = {}
        for prefix in ("exp", "rx"):
            members.update(axis_members(prefix, data_width, 0, sink=True))
        members.update({"res_ok": Out(1), "res_bad": Out(1), "res_lost": Out(1),
                        "res_extra": Out(1)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        lanes = self.data_width // 8
        err = Signal()              # a difference seen in the current frame
        lost = Signal()             # the current expected frame is given up
        fresh = Signal(init=1)      # no beat of the current pair consumed yet
        wait = Signal(range(self.timeout))
        both = Signal()
        differ = Signal()
        ahead = Signal(16)
        m.d.comb += both.eq(self.exp.valid & self.rx.valid)

        def seq(data):
            return Cat(data[8:16], data[:8])

        m.d.comb += ahead.eq(seq(self.rx.p.data) - seq(self.exp.p.data))
        diff_lanes = [(self.exp.p.data[8 * k:8 * k + 8] != self.rx.p.data[8 * k:8 * k + 8]) &
                      self.exp.p.keep[k] for k in range(lanes)]
        m.d.comb += differ.eq((self.exp.p.keep != self.rx.p.keep) |
                              (self.exp.p.last != self.rx.p.last) | Cat(*diff_lanes).any())
        m.d.sync += [self.res_ok.eq(0), self.res_bad.eq(0), self.res_lost.eq(0),
                     self.res_extra.eq(0)]

        def result(bad, is_lost):
            m.d.sync += [self.res_ok.eq(~bad & ~is_lost), self.res_bad.eq(bad & ~is_lost),
                         self.res_lost.eq(is_lost), err.eq(0), lost.eq(0), fresh.eq(1),
                         wait.eq(0)]

        with m.FSM():
            with m.State("compare"):
                pair = both & (~fresh | (ahead == 0))
                m.d.comb += [self.exp.ready.eq(pair), self.rx.ready.eq(pair)]
                with m.If(both & fresh & (ahead != 0)):
                    with m.If(ahead < self.window):
                        m.d.sync += lost.eq(1)
                        m.next = "drain_exp"
                    with m.Else():
                        m.next = "drain_extra"
                with m.Elif(pair):
                    m.d.sync += [wait.eq(0), fresh.eq(0)]
                    with m.If(self.exp.p.last & self.rx.p.last):
                        result(err | differ, 0)
                    with m.Elif(self.exp.p.last):
                        m.d.sync += err.eq(1)
                        m.next = "drain_rx"
                    with m.Elif(self.rx.p.last):
                        m.d.sync += err.eq(1)
                        m.next = "drain_exp"
                    with m.Else():
                        m.d.sync += err.eq(err | differ)
                with m.Elif(self.exp.valid & ~self.rx.valid):
                    with m.If(wait == self.timeout - 1):
                        m.d.sync += [wait.eq(0), lost.eq(1)]
                        m.next = "drain_exp"
                    with m.Else():
                        m.d.sync += wait.eq(wait + 1)
            with m.State("drain_rx"):
                m.d.comb += self.rx.ready.eq(1)
                with m.If(self.rx.valid & self.rx.p.last):
                    result(1, 0)
                    m.next = "compare"
            with m.State("drain_exp"):
                m.d.comb += self.exp.ready.eq(1)
                with m.If(self.exp.valid & self.exp.p.last):
                    result(1, lost)
                    m.next = "compare"
            with m.State("drain_extra"):
                m.d.comb += self.rx.ready.eq(1)
                with m.If(self.rx.valid & self.rx.p.last):
                    m.d.sync += self.res_extra.eq(1)
                    m.next = "compare"
        return m
