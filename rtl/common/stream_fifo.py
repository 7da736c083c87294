# SPDX-License-Identifier: BSD-2-Clause
"""A FIFO between two streams of any payload shape (records, beats)."""

from amaranth.hdl import Module, Shape
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

__all__ = ["StreamFifo"]


class StreamFifo(wiring.Component):
    """``depth`` payloads of ``shape`` between stream ``i`` and stream ``o``, in block RAM when
    large (``amaranth.lib.fifo.SyncFIFOBuffered``, whose read port is registered).

    Parameters
    ----------
    shape : shape-like
        The payload (a record layout, a :class:`rtl.common.stream.Beat`, a width).
    depth : int, at least 1

    Ports
    -----
    i : In(stream.Signature(shape)); ``i.ready`` is high while the FIFO has room.
    o : Out(stream.Signature(shape)); ``o.valid`` and ``o.payload`` come from registers.
    level : Out(range(depth + 1)), the payloads held.

    Latency and throughput
    ----------------------
    One payload per cycle in and out; a payload written into an empty FIFO is readable one cycle
    later (two with block RAM, as ``SyncFIFOBuffered`` gives).
    """

    def __init__(self, shape, depth):
        Shape.cast(shape)
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"StreamFifo: depth must be a positive integer, not {depth!r}")
        self.shape, self.depth = shape, depth
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape)),
                          "level": Out(range(depth + 1))})

    def elaborate(self, platform):
        m = Module()
        width = Shape.cast(self.shape).width
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=width, depth=self.depth)
        m.d.comb += [
            fifo.w_data.eq(self.i.payload), fifo.w_en.eq(self.i.valid),
            self.i.ready.eq(fifo.w_rdy),
            self.o.payload.eq(fifo.r_data), self.o.valid.eq(fifo.r_rdy),
            fifo.r_en.eq(self.o.ready),
            self.level.eq(fifo.level),
        ]
        return m
