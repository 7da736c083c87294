# SPDX-License-Identifier: BSD-2-Clause
"""The tick model against exact arithmetic: cycle-by-cycle state, long-run period, validation."""

from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st

from models.tick import (MIN_CLK_HZ, TICK_NS, TickModel, check_clk_hz, tick_cycle, tick_fraction,
                         ticks_by)

clock_rates = st.integers(MIN_CLK_HZ, 1_000_000_000)


def cycles_per_tick(clk_hz):
    return Fraction(clk_hz * TICK_NS, 10**9)


@pytest.mark.parametrize("clk_hz, fraction", [
    (250_000_000, (1, 256)),
    (156_250_000, (1, 160)),
    (100_000_000, (5, 512)),
    (125_000_001, (1_953_125, 250_000_002)),
])
def test_reduced_fraction(clk_hz, fraction):
    assert tick_fraction(clk_hz) == fraction


@pytest.mark.parametrize("bad", [0, -1, MIN_CLK_HZ - 1, 250e6, 1.5, True, "250000000", None])
def test_bad_clock_rate_raises(bad):
    with pytest.raises(ValueError, match="clk_hz"):
        check_clk_hz(bad)
    with pytest.raises(ValueError, match="clk_hz"):
        TickModel(bad)


def test_first_ticks_at_nominal_rates():
    assert [tick_cycle(250_000_000, k) for k in (1, 2, 3)] == [256, 512, 768]
    assert [tick_cycle(156_250_000, k) for k in (1, 2, 3)] == [160, 320, 480]
    # 102.4 cycles per tick: gaps of 102 and 103 cycles.
    assert [tick_cycle(100_000_000, k) for k in range(1, 6)] == [103, 205, 308, 410, 512]
    with pytest.raises(ValueError):
        tick_cycle(250_000_000, 0)


@settings(max_examples=30, deadline=None)
@given(clk_hz=clock_rates, cycles=st.integers(1, 3000))
def test_model_matches_closed_form(clk_hz, cycles):
    """Cycle by cycle: tick_count = ticks so far, tick = 1 exactly in the cycles of tick_cycle."""
    model = TickModel(clk_hz)
    assert (model.tick, model.tick_count) == (0, 0)
    expected_cycles = set()
    k = 1
    while tick_cycle(clk_hz, k) <= cycles:
        expected_cycles.add(tick_cycle(clk_hz, k))
        k += 1
    for n in range(1, cycles + 1):
        tick, count = model.clock()
        assert count == ticks_by(clk_hz, n)
        assert tick == (n in expected_cycles)
        assert model.acc == n * model.step % model.threshold


@settings(max_examples=200, deadline=None)
@given(clk_hz=clock_rates, k=st.integers(1, 10**12))
def test_long_run_exact(clk_hz, k):
    """Tick k comes less than one cycle after k ideal tick periods: no drift, ever."""
    ideal = k * cycles_per_tick(clk_hz)
    assert 0 <= tick_cycle(clk_hz, k) - ideal < 1
    assert ticks_by(clk_hz, tick_cycle(clk_hz, k)) == k
    assert ticks_by(clk_hz, tick_cycle(clk_hz, k) - 1) == k - 1


@settings(max_examples=50, deadline=None)
@given(clk_hz=clock_rates, k=st.integers(1, 10**6))
def test_gaps_are_floor_or_ceil_of_the_period(clk_hz, k):
    period = cycles_per_tick(clk_hz)
    gap = tick_cycle(clk_hz, k + 1) - tick_cycle(clk_hz, k)
    assert period - 1 < gap < period + 1


def test_at_most_one_tick_per_cycle_at_the_slowest_clock():
    model = TickModel(MIN_CLK_HZ)
    counts = [model.clock()[1] for _ in range(1000)]
    assert all(b - a in (0, 1) for a, b in zip([0] + counts, counts))
    assert counts[-1] == ticks_by(MIN_CLK_HZ, 1000) >= 999


def test_reset_returns_to_cycle_zero():
    model = TickModel(100_000_000)
    for _ in range(300):
        model.clock()
    assert model.clock(rst=True) == (0, 0)
    assert model.acc == 0
    ticks = [n for n in range(1, 300) if model.clock()[0]]
    assert ticks == [tick_cycle(100_000_000, k) for k in (1, 2)]


def test_tick_count_wraps_at_32_bits():
    model = TickModel(250_000_000)
    model.tick_count = 2**32 - 1
    for _ in range(255):
        assert model.clock() == (0, 2**32 - 1)
    assert model.clock() == (1, 0)
