# SPDX-License-Identifier: BSD-2-Clause
"""A register slice: the one way a stream's ``ready`` crosses a block boundary
(docs/protocol.md section 8, "every block boundary is registered")."""

from amaranth.hdl import Module, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RegisterSlice"]


class RegisterSlice(wiring.Component):
    """A two-entry skid buffer between stream ``i`` and stream ``o``.

    The output payload and ``o.valid`` come from registers, and ``i.ready`` is a register too
    (it is low exactly when the skid entry is full), so no combinational path runs from
    ``o.ready`` to ``i.ready`` or from ``i`` to ``o``: a chain of blocks joined by slices has no
    path longer than one block.

    Parameters
    ----------
    shape : shape-like
        The payload shape (a :class:`rtl.common.stream.Beat`, a record layout, a width).

    Ports
    -----
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))
    ``clk``, ``rst``: the ``sync`` domain; reset empties both entries.

    Latency and throughput
    ----------------------
    One cycle from ``i`` to ``o``; one beat per cycle while ``o.ready`` stays high (full
    throughput, no bubble). When ``o`` stalls, one more beat is taken into the skid entry and
    ``i.ready`` falls the cycle after; the skid entry drains first when ``o`` moves again. Beats
    leave in order, none lost or duplicated.
    """

    def __init__(self, shape):
        try:
            Shape.cast(shape)
        except TypeError as exc:
            raise TypeError(f"RegisterSlice: shape must be shape-like, not {shape!r}") from exc
        self.shape = shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        skid = Signal(self.shape, name="skid")
        skid_valid = Signal()
        m.d.comb += self.i.ready.eq(~skid_valid)
        with m.If(~self.o.valid | self.o.ready):
            # The output register is free (empty, or its beat is taken this cycle).
            with m.If(skid_valid):
                m.d.sync += [self.o.payload.eq(skid), self.o.valid.eq(1), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += self.o.valid.eq(self.i.valid)
                with m.If(self.i.valid):
                    m.d.sync += self.o.payload.eq(self.i.payload)
        with m.Elif(self.i.valid & self.i.ready):
            # The output is held: the beat offered now waits in the skid entry.
            m.d.sync += [skid.eq(self.i.payload), skid_valid.eq(1)]
        return m
