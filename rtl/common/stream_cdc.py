# SPDX-License-Identifier: BSD-2-Clause
"""A stream crossing from one clock domain to another (issue [nic-fit] item 2), on
``amaranth.lib.fifo.AsyncFIFO``."""

from amaranth.hdl import Module, ResetSignal, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import AsyncFIFO
from amaranth.lib.wiring import In, Out

from .stream import Beat

__all__ = ["StreamCdc", "MIN_DEPTH"]

MIN_DEPTH = 4


class StreamCdc(wiring.Component):
    """Stream ``i`` in clock domain ``w_domain`` to stream ``o`` in clock domain ``r_domain``
    through an ``amaranth.lib.fifo.AsyncFIFO`` of ``depth`` payloads (Gray-coded pointers, two
    synchronizer stages each way; block RAM or distributed RAM as the tools choose).

    Parameters
    ----------
    shape : shape-like
        The payload: a :class:`rtl.common.stream.Beat` (an AXI-Stream beat: ``tdata``,
        ``tkeep``, ``tlast``, ``tuser`` at a Verilog top), a record layout, a width.
    depth : power of two, at least 4 (default 16)
    w_domain, r_domain : str, different
        The domains of ``i`` (write side) and ``o`` (read side).
    always_ready : bool (default False)
        ``i`` has no ``ready`` (an input facing a link, docs/protocol.md 8: never
        backpressured). ``shape`` must then be a :class:`Beat` with a ``user`` field. A beat that
        meets a full FIFO is dropped with the rest of its frame, and the frame is closed by the
        next beat that finds room, written with ``last`` = 1 and ``user`` bit 0 = 1 (a bad
        frame, docs/protocol.md 8), after which the input frame of that beat is dropped up to
        its last; a frame none of whose beats was written is dropped whole. So the sink sees
        whole frames or frames marked bad, never a frame cut silently or two frames joined;
        ``dropped`` pulses (write domain) for each beat dropped.
        The FIFO never fills while the read side takes a beat per cycle and its clock is at
        least as fast as the write clock.

    Ports
    -----
    i : In(stream.Signature(shape, always_ready=always_ready)), in ``w_domain``; ``i.ready`` is
        low while the FIFO is full and while ``w_domain`` is in reset.
    o : Out(stream.Signature(shape)), in ``r_domain``; ``o.payload`` is the RAM's read register;
        ``o.valid`` is low while ``r_domain`` is in reset.
    dropped : Out(1), ``w_domain`` (with ``always_ready`` only).
    Clocks and resets: those of ``w_domain`` and ``r_domain`` (at a Verilog top,
    ``<domain>_clk`` and ``<domain>_rst``, ``clk`` and ``rst`` for ``sync``).

    Reset (AsyncFIFO's rule: the write side owns it)
    ------------------------------------------------
    The write domain's reset empties the FIFO: the read side is told through an
    asynchronous-assert, synchronous-release synchronizer and sees it empty from the first
    read-clock edge of the reset until 2 read cycles after it ends. Hold it for at least 4
    cycles of the slower clock (the pointers then agree on both sides when it is released).
    The read domain's reset alone keeps the FIFO's contents: ``o.valid`` is low while it is
    asserted and the beats held leave after it, none lost or duplicated. Resetting both (a
    system reset) empties it.

    Latency and throughput
    ----------------------
    A beat written into an empty FIFO at a write-clock edge is on ``o`` 2 to 3 read-clock cycles
    later (two synchronizer stages, plus up to one cycle of phase; measured 2.2 at W = 64);
    room freed by a read reaches ``i.ready`` 2 to 3 write-clock cycles later. Throughput: one
    beat per cycle of the slower clock when ``depth`` covers that round trip, which is about
    3 + 3 x r beats in a FIFO (r the ratio of the faster clock's frequency to the slower's, at
    least 1): depth 8 up to r of about 1.5, depth 16 (the default) up to r of about 4.
    ``tb/test_cdc.py`` measures 1.000 beat per slower-clock cycle with depth 16 at
    4 ns / 7 ns and 7 ns / 3 ns. A smaller depth keeps order and data but loses rate.
    """

    def __init__(self, shape, depth=16, *, w_domain, r_domain, always_ready=False):
        try:
            Shape.cast(shape)
        except TypeError as exc:
            raise TypeError(f"StreamCdc: shape must be shape-like, not {shape!r}") from exc
        if (not isinstance(depth, int) or isinstance(depth, bool) or depth < MIN_DEPTH
                or depth & (depth - 1)):
            raise ValueError(f"StreamCdc: depth must be a power of two of at least {MIN_DEPTH} "
                             f"(AsyncFIFO's pointers are Gray-coded), not {depth!r}")
        for name, value in (("w_domain", w_domain), ("r_domain", r_domain)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"StreamCdc: {name} must be a domain name, not {value!r}")
        if w_domain == r_domain:
            raise ValueError(f"StreamCdc: w_domain and r_domain are both {w_domain!r}; a crossing "
                             f"within one domain is rtl.common.stream_fifo.StreamFifo")
        if always_ready and not (isinstance(shape, Beat) and shape.user_width >= 1):
            raise ValueError(f"StreamCdc: always_ready needs a Beat payload with a user field "
                             f"(to mark a frame cut by a full FIFO as bad), not {shape!r}")
        self.shape, self.depth = shape, depth
        self.w_domain, self.r_domain = w_domain, r_domain
        self.always_ready = bool(always_ready)
        members = {"i": In(stream.Signature(shape, always_ready=self.always_ready)),
                   "o": Out(stream.Signature(shape))}
        if self.always_ready:
            members["dropped"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        width = Shape.cast(self.shape).width
        m.submodules.fifo = fifo = AsyncFIFO(width=width, depth=self.depth,
                                             w_domain=self.w_domain, r_domain=self.r_domain,
                                             exact_depth=True)
        w_rst = ResetSignal(self.w_domain, allow_reset_less=True)
        r_rst = ResetSignal(self.r_domain, allow_reset_less=True)
        room = Signal()
        m.d.comb += room.eq(fifo.w_rdy & ~w_rst)

        if not self.always_ready:
            m.d.comb += [fifo.w_data.eq(self.i.payload), fifo.w_en.eq(self.i.valid & room),
                         self.i.ready.eq(room)]
        else:
            # ``mid``: a frame is open in the FIFO (beats written, not its last). A beat that
            # finds no room is dropped; if its frame is open in the FIFO, ``cutting``: the next
            # beat that finds room closes it, written with last = 1 and user bit 0 = 1, and the
            # input frame that beat belongs to is dropped up to its last (``skipping``). A frame
            # none of whose beats were written is dropped whole.
            beat = Signal(self.shape)
            mid, cutting, skipping = Signal(), Signal(), Signal()
            last = self.i.payload.last
            m.d.comb += beat.eq(self.i.payload)
            with m.If(self.i.valid):
                with m.If(skipping):
                    m.d.comb += self.dropped.eq(1)
                    m.d[self.w_domain] += skipping.eq(~last)
                with m.Elif(~room):
                    m.d.comb += self.dropped.eq(1)
                    with m.If(mid | cutting):
                        m.d[self.w_domain] += cutting.eq(1)
                    with m.Else():
                        m.d[self.w_domain] += skipping.eq(~last)
                with m.Elif(cutting):
                    m.d.comb += [beat.last.eq(1), beat.user[0].eq(1), fifo.w_en.eq(1)]
                    m.d[self.w_domain] += [cutting.eq(0), mid.eq(0), skipping.eq(~last)]
                with m.Else():
                    m.d.comb += fifo.w_en.eq(1)
                    m.d[self.w_domain] += mid.eq(~last)
            m.d.comb += fifo.w_data.eq(beat)

        m.d.comb += [self.o.payload.eq(fifo.r_data), self.o.valid.eq(fifo.r_rdy & ~r_rst),
                     fifo.r_en.eq(self.o.ready & ~r_rst)]
        return m
