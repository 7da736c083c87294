# SPDX-License-Identifier: BSD-2-Clause
"""Round-robin merge of several streams of one payload shape into one, through a register."""

from amaranth.hdl import Module, Mux, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamMerge"]


class StreamMerge(wiring.Component):
    """``n`` input streams ``i[0..n-1]`` merged into ``o``, one payload per cycle, round-robin:
    after input k is taken, the inputs after k (circularly) come first. ``o`` is a register
    (valid and payload), so nothing combinational runs from an input to ``o``; an input's ready
    depends on ``o.ready`` and the other inputs' valid.

    Parameters
    ----------
    shape : shape-like
    n : int, 2..16 (default 2)

    Ports
    -----
    i : In(stream.Signature(shape)).array(n)
    o : Out(stream.Signature(shape))
    busy : Out(1), ``o`` holds a payload (for status words).

    Latency and throughput
    ----------------------
    One cycle; one payload per cycle while ``o.ready`` is high.
    """

    def __init__(self, shape, n=2):
        Shape.cast(shape)
        if not isinstance(n, int) or not 2 <= n <= 16:
            raise ValueError(f"StreamMerge: n must be an integer from 2 to 16, not {n!r}")
        self.shape, self.n = shape, n
        super().__init__({"i": In(stream.Signature(shape)).array(n),
                          "o": Out(stream.Signature(shape)), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        n = self.n
        first = Signal(range(n))          # the input with priority this cycle
        free = ~self.o.valid | self.o.ready
        take = [Signal(name=f"take{k}") for k in range(n)]
        # Input k wins when it is valid and no input before it (in priority order) is.
        for k in range(n):
            wins = []
            for start in range(n):
                order = [(start + j) % n for j in range(n)]
                ahead = order[:order.index(k)]
                cond = self.i[k].valid
                for other in ahead:
                    cond = cond & ~self.i[other].valid
                wins.append((start, cond))
            expr = 0
            for start, cond in wins:
                expr = Mux(first == start, cond, expr)
            m.d.comb += [take[k].eq(expr), self.i[k].ready.eq(free & take[k])]
        chosen = self.i[0].payload
        for k in range(1, n):
            chosen = Mux(take[k], self.i[k].payload, chosen)
        with m.If(free):
            m.d.sync += self.o.valid.eq(0)
            for k in range(n):
                with m.If(take[k]):
                    m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(chosen),
                                 first.eq((k + 1) % n)]
        m.d.comb += self.busy.eq(self.o.valid)
        return m
