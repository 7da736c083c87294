# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.common.register_slice.RegisterSlice, the skid buffer every block boundary
uses (docs/protocol.md section 8).

Seeded random words go in through ``i`` with random idle cycles and come out of ``o`` under
random backpressure (phases of back-to-back beats and of heavy stalls); every word must come out
once, in order, and the sink must end empty. A second test, ``perf``, sends back to back into an
always-ready sink and asserts one beat per cycle after the one cycle of latency, and that
``i_tready`` never falls. Both run on Icarus and Verilator at two payload widths.
"""

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

WORDS = 3000
WIDTHS = (8, 72)


@cocotb.test()
async def random_valid_and_ready(dut):
    from verif.bench import RecordSink, RecordSource, frames, make_rng, params, phased_pause, \
        start, write_result

    width = params()["width"]
    rng = make_rng(dut)
    # The ends drive valid and ready from time 0, so reset ends with defined inputs.
    source = RecordSource(dut, "i", phased_pause(rng, (0.0, 0.3, 0.8), 100))
    sink = RecordSink(dut, "o", phased_pause(rng, (0.0, 0.5, 0.9), 100))
    await start(dut)
    words = [rng.getrandbits(width) for _ in range(frames(WORDS))]
    for w in words:
        source.send(w)
    for _ in range(40 * len(words)):
        await RisingEdge(dut.clk)
        if len(sink.queue) >= len(words) and source.empty():
            break
    else:
        raise AssertionError(f"only {len(sink.queue)} of {len(words)} words came out")
    await ClockCycles(dut.clk, 20)
    got = list(sink.queue)
    assert len(got) == len(words), f"{len(got)} words out for {len(words)} in"
    first = next((i for i, (a, b) in enumerate(zip(got, words)) if a != b), None)
    assert first is None, f"word {first}: {got[first]:#x} out, {words[first]:#x} sent"
    assert int(dut.o_tvalid.value) == 0, "a word left over after the last"
    write_result(dut, "register_slice", len(words))


@cocotb.test()
async def perf(dut):
    from verif.bench import RecordSink, RecordSource, make_rng, params, start, write_perf

    width = params()["width"]
    rng = make_rng(dut)
    source = RecordSource(dut, "i")
    sink = RecordSink(dut, "o")
    await start(dut)
    n = 500
    for _ in range(n):
        source.send(rng.getrandbits(width))
    cycles = ready_low = 0
    while len(sink.queue) < n:
        await RisingEdge(dut.clk)
        cycles += 1
        ready_low += int(dut.i_tready.value) == 0
        assert cycles < 4 * n, "the slice stalled with an always-ready sink"
    # RecordSource puts a word on the wire one edge after it is queued: one cycle of latency in
    # the slice, and one beat per cycle after it.
    assert cycles <= n + 3, f"{n} words took {cycles} cycles: not one per cycle"
    assert ready_low == 0, "i_tready fell although the output never stalled"
    write_perf(dut, "register_slice", width, [dict(payload=width // 8, frames=n,
                                                   cycles_per_frame=1.0,
                                                   bytes_per_cycle=width / 8, efficiency=1.0,
                                                   latency=1)])


def run(sim, width, testcase=None):
    from rtl.common.register_slice import RegisterSlice
    from verif.runner import run_bench

    run_bench(RegisterSlice(width), name=f"register_slice-{width}", toplevel="register_slice",
              test_module="tb.test_register_slice", sim=sim, params={"width": width},
              frames=WORDS, testcase=testcase)


@pytest.mark.sim
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_register_slice(sim, width):
    run(sim, width)
