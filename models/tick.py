# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the shared tick generator (docs/protocol.md section 8).

Every microsecond quantity of the profile (SACK coalescing, timeouts, probe periods) counts ticks of
1.024 us. One tick lasts ``clk_hz * 128 / 125_000_000`` clock cycles, which is rarely a whole
number, so the generator keeps a fractional accumulator: every cycle it adds 125_000_000, and when
the sum reaches ``clk_hz * 128`` it subtracts that and emits a tick. Over ``n`` cycles it has
emitted exactly ``floor(n * 125_000_000 / (clk_hz * 128))`` ticks, so the average period is exact.
The hardware and this model both reduce the fraction by its greatest common divisor first (same
ticks, narrower accumulator): at 250 MHz it becomes 1/256, a plain counter.

Cycle numbering: cycle 0 is the first cycle after reset, in which every output still holds its
reset value. In cycle ``n`` the accumulator holds ``n * step mod threshold`` and ``tick_count``
holds the number of ticks so far, ``floor(n * step / threshold)`` modulo 2^32; ``tick`` is 1 in
exactly the cycles where that number has just grown. The first tick comes in cycle
``ceil(threshold / step)`` (256 at 250 MHz, 160 at 156.25 MHz).

Nothing here imports cocotb, Amaranth or scapy.
"""

from math import gcd

__all__ = ["TICKS_PER_SECOND_NUM", "TICKS_PER_SECOND_DEN", "TICK_NS", "MIN_CLK_HZ",
           "COUNT_WIDTH", "check_clk_hz", "tick_fraction", "ticks_by", "tick_cycle", "TickModel"]

# Ticks per second = 125_000_000 / 128 = 976_562.5 (one tick every 1.024 us).
TICKS_PER_SECOND_NUM = 125_000_000
TICKS_PER_SECOND_DEN = 128
TICK_NS = 1024                  # the tick period in ns (1.024 us)
COUNT_WIDTH = 32
# Below this rate a cycle would be longer than a tick (more than one tick per cycle).
MIN_CLK_HZ = -(-TICKS_PER_SECOND_NUM // TICKS_PER_SECOND_DEN)   # 976_563


def check_clk_hz(clk_hz):
    """Raise ValueError unless ``clk_hz`` is an integer number of Hz of at least MIN_CLK_HZ."""
    if isinstance(clk_hz, bool) or not isinstance(clk_hz, int):
        raise ValueError(f"clk_hz must be an integer number of Hz, not {clk_hz!r}")
    if clk_hz < MIN_CLK_HZ:
        raise ValueError(f"clk_hz must be at least {MIN_CLK_HZ} Hz (one tick per cycle at most), "
                         f"not {clk_hz}")


def tick_fraction(clk_hz):
    """``(step, threshold)``: the accumulator's increment per cycle and its wrap value, reduced.

    Ticks per cycle = step / threshold = 125_000_000 / (clk_hz * 128); step < threshold.
    """
    check_clk_hz(clk_hz)
    num, den = TICKS_PER_SECOND_NUM, clk_hz * TICKS_PER_SECOND_DEN
    g = gcd(num, den)
    return num // g, den // g


def ticks_by(clk_hz, cycle):
    """Ticks emitted from cycle 0 up to and including ``cycle`` (not wrapped to 32 bits)."""
    step, threshold = tick_fraction(clk_hz)
    return cycle * step // threshold


def tick_cycle(clk_hz, k):
    """The cycle in which tick number ``k`` (1 = the first) is emitted."""
    if k < 1:
        raise ValueError(f"tick numbers start at 1, not {k}")
    step, threshold = tick_fraction(clk_hz)
    return -(-k * threshold // step)


class TickModel:
    """Cycle-by-cycle model of the tick generator's registers.

    ``tick``, ``tick_count`` and ``acc`` are the values of the current cycle; :meth:`clock`
    advances one clock edge (with ``rst`` as sampled by that edge, synchronous reset).
    """

    def __init__(self, clk_hz):
        self.clk_hz = clk_hz
        self.step, self.threshold = tick_fraction(clk_hz)
        self.reset()

    def reset(self):
        """The state of cycle 0 (every register at its reset value)."""
        self.acc = 0
        self.tick = 0
        self.tick_count = 0

    def clock(self, rst=False):
        """One clock edge; returns ``(tick, tick_count)`` of the new cycle."""
        if rst:
            self.reset()
        elif self.acc >= self.threshold - self.step:
            self.acc -= self.threshold - self.step
            self.tick = 1
            self.tick_count = (self.tick_count + 1) % (1 << COUNT_WIDTH)
        else:
            self.acc += self.step
            self.tick = 0
        return self.tick, self.tick_count
