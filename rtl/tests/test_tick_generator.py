# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""TickGenerator in the Amaranth simulator against models.tick, cycle by cycle, with random resets."""

import random

import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from models.tick import MIN_CLK_HZ, TickModel, tick_cycle
from rtl.tick_generator import TickGenerator

# 250 MHz (256 cycles per tick), 156.25 MHz (160), 125_000_001 Hz (a 28-bit accumulator), the
# FPGA boards' clocks (ULX3S 25 MHz, iCEBreaker 12 MHz, OrangeCrab 48 MHz), 100 MHz (102.4
# cycles) and the slowest clock allowed (a tick nearly every cycle).
RATES = [250_000_000, 156_250_000, 125_000_001, 100_000_000, 48_000_000, 25_000_000, 12_000_000,
         MIN_CLK_HZ]


def simulate(clk_hz, cycles, *, seed, reset_probability=0.0, preset_count=None):
    """Run the generator ``cycles`` cycles beside the model; returns the cycles that ticked.

    The first cycle holds reset; afterwards reset is pulsed at random. ``preset_count`` forces
    ``tick_count`` to a value right after the initial reset (to reach the 32-bit wrap).
    """
    rng = random.Random(seed)
    resets = []
    m = Module()
    m.domains.sync = sync = ClockDomain("sync")
    m.submodules.dut = dut = TickGenerator(clk_hz)
    model = TickModel(clk_hz)
    ticked = []

    async def bench(ctx):
        ctx.set(sync.rst, 1)
        await ctx.tick()
        model.clock(rst=True)
        ctx.set(sync.rst, 0)
        if preset_count is not None:
            ctx.set(dut.tick_count, preset_count)
            model.tick_count = preset_count
        for n in range(cycles):
            assert (ctx.get(dut.tick), ctx.get(dut.tick_count)) == (model.tick, model.tick_count), \
                f"clk_hz={clk_hz} cycle {n}"
            if model.tick:
                ticked.append(n)
            rst = rng.random() < reset_probability
            if rst:
                resets.append(n)
            ctx.set(sync.rst, rst)
            await ctx.tick()
            model.clock(rst=rst)

    sim = Simulator(m)
    sim.add_clock(1 / clk_hz)
    sim.add_testbench(bench)
    sim.run()
    if reset_probability:
        assert resets, f"clk_hz={clk_hz}: no random reset happened in {cycles} cycles"
    return ticked


@pytest.mark.parametrize("clk_hz", RATES)
def test_matches_model(clk_hz):
    """Every cycle's outputs equal the model's; without resets, ticks fall where tick_cycle says."""
    cycles = max(8 * tick_cycle(clk_hz, 1), 1000)
    ticked = simulate(clk_hz, cycles, seed=clk_hz)
    expected = []
    k = 1
    while tick_cycle(clk_hz, k) < cycles:
        expected.append(tick_cycle(clk_hz, k))
        k += 1
    assert ticked == expected


@pytest.mark.parametrize("clk_hz", [250_000_000, 100_000_000, 125_000_001])
def test_random_resets(clk_hz):
    """Synchronous reset at random moments restarts the phase and the count, as the model does."""
    simulate(clk_hz, 4000, seed=clk_hz + 1, reset_probability=1 / 700)


def test_tick_count_wraps():
    ticked = simulate(250_000_000, 600, seed=3, preset_count=2**32 - 2)
    assert ticked == [256, 512]


@pytest.mark.parametrize("bad", [0, 976_562, -250_000_000, 250e6, "250000000", True])
def test_bad_clk_hz_raises(bad):
    with pytest.raises(ValueError, match="clk_hz"):
        TickGenerator(bad)


def test_narrow_accumulator_at_250_mhz():
    """At 250 MHz the fraction reduces to 1/256: an 8-bit counter."""
    dut = TickGenerator(250_000_000)
    assert (dut.step, dut.threshold) == (1, 256)
    assert len(dut.tick_count) == 32
