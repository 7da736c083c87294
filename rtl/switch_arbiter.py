# SPDX-License-Identifier: BSD-2-Clause
"""The trimming switch's input arbiter: whole frames from K ingress FIFOs, round-robin, into one
core stream of C bits per cycle (docs/protocol.md section 7). Golden model: the order it reports is an
input of ``models/switch.py`` (:meth:`SwitchModel.grant`); bench: ``tb/test_switch.py``."""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from models.switch import MAX_PORTS, port_width

from .common.ports import axis_members

__all__ = ["SwitchArbiter"]


class SwitchArbiter(wiring.Component):
    """Round-robin input arbiter of the switch core.

    Each ingress offers its oldest whole frame (``f_valid[i]``, ``f_bytes[i]``). When the core
    stream needs a new frame, the arbiter grants the first ingress holding one, in round-robin
    order starting after the last one granted, takes its frame (``f_take[i]``) and reads its
    ``ceil(bytes / (C/8))`` words one per cycle (``rd_en[i]``; the word is on ``rd_data[i]`` the
    next cycle). The grant (``grant``, ``grant_port``) is reported in its cycle: the trace that
    tells the golden model the order of frames into the core (docs/protocol.md 8).

    Parameters
    ----------
    ports : 2..8
        K, the number of ingress ports.
    core_width : 256 or 512
        C, bits per word of the core stream.
    bytes_width : int
        Bits of a frame length (``f_bytes``).

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset.
    ``f_valid``, ``f_bytes`` (array), ``f_take``: one element per ingress, see above.
    ``rd_en``, ``rd_data`` (array): the ingress FIFOs' read ports.
    ``m_axis_tdata/tkeep/tlast/tvalid/tready``: the core stream, whole frames, each starting at
    lane 0 of a word, ``tkeep`` contiguous on the last word.
    ``grant``, ``grant_port``: a frame of ingress ``grant_port`` is granted this cycle.

    Latency and throughput: a frame's first word leaves one cycle after its grant; one word per
    cycle, and the next frame's first word right after a frame's last (no bubble) whenever an
    ingress offers one, as long as ``m_axis_tready`` is high.
    """

    def __init__(self, ports=4, core_width=256, bytes_width=13):
        if not isinstance(ports, int) or not 2 <= ports <= MAX_PORTS:
            raise ValueError(f"SwitchArbiter: ports must be 2..{MAX_PORTS}, not {ports!r}")
        if core_width not in (256, 512):
            raise ValueError(f"SwitchArbiter: core_width must be 256 or 512, not {core_width!r}")
        if not isinstance(bytes_width, int) or not 7 <= bytes_width <= 17:
            raise ValueError(f"SwitchArbiter: bytes_width must be 7..17, not {bytes_width!r}")
        self.ports = ports
        self.core_width = core_width
        self.bytes_width = bytes_width
        word_bytes = core_width // 8
        super().__init__({
            "f_valid": In(ports),
            "f_bytes": In(data.ArrayLayout(bytes_width, ports)),
            "f_take": Out(ports),
            "rd_en": Out(ports),
            "rd_data": In(data.ArrayLayout(core_width, ports)),
            **axis_members("m_axis", core_width, 0, sink=False),
            "grant": Out(1),
            "grant_port": Out(port_width(ports)),
        })

    def elaborate(self, platform):
        m = Module()
        ports = self.ports
        word_bytes = self.core_width // 8
        shift = exact_log2(word_bytes)
        max_words = -(-((1 << self.bytes_width) - 1) // word_bytes)

        # --- round-robin choice among the ingress ports offering a frame ---------------------
        first = Signal(range(ports))        # highest priority: the port after the last grant
        chosen = Signal(range(ports))
        any_valid = self.f_valid.any()
        with m.Switch(first):
            for start in range(ports):
                with m.Case(start):
                    order = [(start + k) % ports for k in range(ports)]
                    for k, port in enumerate(order):
                        cond = self.f_valid[port]
                        if k == 0:
                            with m.If(cond):
                                m.d.comb += chosen.eq(port)
                        else:
                            with m.Elif(cond):
                                m.d.comb += chosen.eq(port)

        size = Signal(self.bytes_width)
        m.d.comb += size.eq(self.f_bytes[chosen])
        words = Signal(range(max_words + 1))
        m.d.comb += words.eq((size + word_bytes - 1) >> shift)
        last_bytes = Signal(range(word_bytes + 1))
        m.d.comb += last_bytes.eq(((size - 1) & (word_bytes - 1)) + 1)
        last_keep = Signal(word_bytes)
        m.d.comb += last_keep.eq(((Const(1, word_bytes + 1) << last_bytes) - 1)[:word_bytes])

        # --- word issue; the read port's data register is the output register ------------------
        current = Signal(range(ports))
        remaining = Signal(range(max_words + 1))        # words still to issue
        keep_held = Signal(word_bytes)
        out_port = Signal(range(ports))
        free = ~self.m_axis.valid | self.m_axis.ready
        all_ones = (1 << word_bytes) - 1

        with m.If(free):
            with m.If(remaining == 0):
                m.d.sync += self.m_axis.valid.eq(any_valid)
                with m.If(any_valid):
                    m.d.comb += [
                        self.grant.eq(1),
                        self.f_take.bit_select(chosen, 1).eq(1),
                        self.rd_en.bit_select(chosen, 1).eq(1),
                    ]
                    m.d.sync += [
                        current.eq(chosen),
                        first.eq(Mux(chosen == ports - 1, 0, chosen + 1)),
                        remaining.eq(words - 1),
                        keep_held.eq(last_keep),
                        out_port.eq(chosen),
                        self.m_axis.p.last.eq(words == 1),
                        self.m_axis.p.keep.eq(Mux(words == 1, last_keep, all_ones)),
                    ]
            with m.Else():
                m.d.comb += self.rd_en.bit_select(current, 1).eq(1)
                m.d.sync += [
                    self.m_axis.valid.eq(1),
                    remaining.eq(remaining - 1),
                    out_port.eq(current),
                    self.m_axis.p.last.eq(remaining == 1),
                    self.m_axis.p.keep.eq(Mux(remaining == 1, keep_held, all_ones)),
                ]
        m.d.comb += [
            self.grant_port.eq(chosen),
            self.m_axis.p.data.eq(self.rd_data[out_port]),
        ]
        return m
