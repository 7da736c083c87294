# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.tick_generator.TickGenerator against models.tick.TickModel, cycle by cycle.

The pytest functions below build the Verilog for one clock rate and run :func:`tick_matches_model`
on it under Icarus or Verilator. The bench compares ``tick`` and ``tick_count`` with the model in
every cycle, pulses the synchronous reset at random moments (seeded; at least once in the first
half of the run, which at 25 MHz lasts only about 600 cycles), and passes once it has seen the
requested number of ticks (``frames``).
"""

import pytest

import cocotb
from cocotb.triggers import FallingEdge

from models.tick import TickModel, tick_cycle

# Nominal 250 MHz (a tick every 256 cycles), 156.25 MHz (every 160) and an awkward rate whose
# fraction does not reduce (a 28-bit accumulator).
RATES = (250_000_000, 156_250_000, 125_000_001)
# Wider sweep: 100 MHz (102.4 cycles per tick) and the FPGA boards' clocks.
FULL_RATES = (100_000_000, 48_000_000, 25_000_000, 12_000_000)
TICKS = 24
RESET_PROBABILITY = 1 / 1500


@cocotb.test()
async def tick_matches_model(dut):
    from verif.bench import frames, make_rng, params, start, write_result

    clk_hz = params()["clk_hz"]
    ticks_wanted = frames(TICKS)
    rng = make_rng(dut)
    assert len(dut.tick_count) == 32
    await start(dut)
    model = TickModel(clk_hz)
    # Own reset first, so that cycle numbering starts from a known edge.
    reset_cycles_left = 2
    ticks_seen = resets = 0
    max_cycles = 4 * ticks_wanted * tick_cycle(clk_hz, 1) + 1000
    # A short run may draw no reset at RESET_PROBABILITY: then one comes at this cycle.
    forced_reset = rng.randrange(4, max(5, ticks_wanted * tick_cycle(clk_hz, 1) // 2))
    for cycle in range(max_cycles):
        await FallingEdge(dut.clk)   # mid-cycle: registers settled, inputs sampled at the next edge
        if cycle >= 1:
            got = (int(dut.tick.value), int(dut.tick_count.value))
            assert got == (model.tick, model.tick_count), \
                f"cycle {cycle}: dut (tick, tick_count) = {got}, model {(model.tick, model.tick_count)}"
            ticks_seen += model.tick
        if ticks_seen >= ticks_wanted:
            break
        if not reset_cycles_left and (rng.random() < RESET_PROBABILITY or
                                      (not resets and cycle >= forced_reset)):
            reset_cycles_left = rng.randint(1, 3)
            resets += 1
        rst = reset_cycles_left > 0
        reset_cycles_left -= rst
        dut.rst.value = int(rst)
        model.clock(rst=rst)
    else:
        raise AssertionError(f"only {ticks_seen} of {ticks_wanted} ticks in {max_cycles} cycles")
    assert resets > 0, f"no random reset in {cycle} cycles: the reset claim was not tested"
    dut._log.info("clk_hz %d: %d ticks over %d cycles, %d random resets, all equal to the model",
                  clk_hz, ticks_seen, cycle, resets)
    write_result(dut, "tick_generator", ticks_seen)


def run(sim, clk_hz):
    from rtl.tick_generator import TickGenerator
    from verif.runner import run_bench

    run_bench(TickGenerator(clk_hz), name=f"tick_generator-{clk_hz}", toplevel="tick_generator",
              test_module="tb.test_tick_generator", sim=sim, params={"clk_hz": clk_hz},
              frames=TICKS)


@pytest.mark.sim
@pytest.mark.parametrize("sim, clk_hz", [
    # Every rate on Icarus; Verilator (a build of about 40 s each) on one, the others in
    # ``make test-full``.
    *(("icarus", rate) for rate in RATES), ("verilator", RATES[0]),
    *(pytest.param("verilator", rate, marks=pytest.mark.full) for rate in RATES[1:])])
def test_tick_generator(sim, clk_hz):
    run(sim, clk_hz)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("clk_hz", FULL_RATES)
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_tick_generator_full(sim, clk_hz):
    run(sim, clk_hz)
