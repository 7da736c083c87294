# SPDX-License-Identifier: BSD-2-Clause
"""A UART transmitter (8 data bits, no parity, 1 stop bit) for the self-test's text report."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["UartTx"]


class UartTx(wiring.Component):
    """Sends one byte per handshake on ``tx``: a start bit (0), the 8 data bits LSB first, a
    stop bit (1), each ``divisor = round(clk_hz / baud)`` cycles long; ``tx`` idles at 1.

    Parameters
    ----------
    clk_hz : int
        The clock frequency.
    baud : int
        The bit rate; ``clk_hz / baud`` must be at least 2.

    Ports
    -----
    ``data`` (8), ``valid`` in, ``ready`` out: a byte stream (amaranth.lib.stream rules); ``ready``
    is high while nothing is being sent, so a byte is taken in the cycle after the previous stop
    bit ends. ``tx`` out: the serial line (registered). ``clk``, ``rst``: the sync domain.

    Latency and throughput: the start bit begins on ``tx`` one cycle after the handshake; a byte
    takes ``10 x divisor`` cycles, and the next handshake can follow at once.
    """

    def __init__(self, clk_hz, baud):
        if not isinstance(clk_hz, int) or not isinstance(baud, int) or baud <= 0 or \
                clk_hz < 2 * baud:
            raise ValueError(f"UartTx: need integers with clk_hz >= 2 x baud, not "
                             f"clk_hz={clk_hz!r}, baud={baud!r}")
        self.divisor = (clk_hz + baud // 2) // baud
        super().__init__({"data": In(8), "valid": In(1), "ready": Out(1), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        shift = Signal(10, init=0x3FF)      # the bits still to send, LSB first
        bits = Signal(range(11))            # how many
        timer = Signal(range(self.divisor))
        m.d.comb += self.ready.eq(bits == 0)
        with m.If(self.valid & self.ready):
            m.d.sync += [shift.eq(Cat(Const(0, 1), self.data, Const(1, 1))), bits.eq(10),
                         timer.eq(self.divisor - 1), self.tx.eq(0)]
        with m.Elif(bits != 0):
            with m.If(timer == 0):
                m.d.sync += [timer.eq(self.divisor - 1), bits.eq(bits - 1),
                             shift.eq(Cat(shift[1:], Const(1, 1))),
                             self.tx.eq(shift[1])]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m
