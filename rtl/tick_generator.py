# SPDX-License-Identifier: BSD-2-Clause
"""The shared 1.024 us tick generator (docs/protocol.md section 8)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from models.tick import COUNT_WIDTH, tick_fraction

__all__ = ["TickGenerator"]


class TickGenerator(wiring.Component):
    """A one-cycle ``tick`` every 1.024 us on average, exact in the long run, and a tick counter.

    Every microsecond quantity of the NIC and the switch (SACK coalescing, timeouts, probe
    periods) counts these ticks, so one instance serves the whole design. A fractional accumulator
    adds 125_000_000 per cycle and wraps at ``clk_hz * 128`` (both divided by their greatest common
    divisor, :func:`models.tick.tick_fraction`); each wrap is a tick. At 250 MHz that is a tick
    every 256 cycles, at 156.25 MHz every 160; at other rates the gaps alternate between the floor
    and the ceiling of ``clk_hz * 1.024e-6`` cycles without drift. :class:`models.tick.TickModel`
    gives the exact cycles.

    Parameters
    ----------
    clk_hz : int
        Clock frequency in Hz, an integer of at least 976_563 (so at most one tick per cycle);
        anything else raises ValueError.

    Ports
    -----
    tick : Out(1)
        High for exactly one cycle per tick. Registered.
    tick_count : Out(32)
        Ticks since reset, modulo 2^32; it steps in the cycle where ``tick`` is high. Registered.
    clk, rst
        The ``sync`` domain (synchronous active-high reset).

    Latency and throughput: cycle 0 after reset shows ``tick`` = 0 and ``tick_count`` = 0; the
    first tick comes in cycle ``ceil(threshold / step)`` (256 at 250 MHz). Logic per cycle: one
    comparison of the accumulator against a constant, an add and a subtract (accumulator of
    ``ceil(log2(threshold))`` bits: 8 at 250 MHz, 28 at 125_000_001 Hz), and a 32-bit increment.
    """

    def __init__(self, clk_hz):
        self.step, self.threshold = tick_fraction(clk_hz)   # validates clk_hz
        self.clk_hz = clk_hz
        super().__init__({
            "tick": Out(1),
            "tick_count": Out(COUNT_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        acc = Signal(range(self.threshold), name="acc")
        # acc + step >= threshold, with the sum kept out of the comparison.
        wrap_at = self.threshold - self.step
        with m.If(acc >= wrap_at):
            m.d.sync += [
                acc.eq(acc - wrap_at),
                self.tick.eq(1),
                self.tick_count.eq(self.tick_count + 1),
            ]
        with m.Else():
            m.d.sync += [
                acc.eq(acc + self.step),
                self.tick.eq(0),
            ]
        return m
