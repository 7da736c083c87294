# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""rtl.common.crc_pipeline.Crc32Pipeline in Amaranth's simulator against zlib: random messages
(one beat to many, back to back or with gaps), random leading and trailing excluded bytes, every
width class, both data-stage settings; the stated latency."""

import random
import zlib

import pytest
from amaranth.sim import Simulator

from rtl.common.crc_pipeline import Crc32Pipeline

PREFIX = b"\xff" * 8


def messages(rng, lanes, count):
    """(beats of bytes, lead, trail, expected) per message."""
    out = []
    for _ in range(count):
        n = rng.choice((1, 1, 2, 3, rng.randrange(1, 12)))
        beats = [bytes(rng.getrandbits(8) for _ in range(lanes)) for _ in range(n)]
        lead = rng.randrange(lanes)
        trail = rng.randrange(lanes)
        if n == 1 and lead + trail >= lanes:
            trail = max(0, lanes - lead - 1)
        flat = b"".join(beats)
        covered = flat[lead:len(flat) - trail]
        out.append((beats, lead, trail, zlib.crc32(PREFIX + covered)))
    return out


def run(width, data_stages, seed, count=60, gaps=True):
    dut = Crc32Pipeline(width, PREFIX, data_stages)
    rng = random.Random(seed)
    lanes = width // 8
    msgs = messages(rng, lanes, count)
    got, offered_last, seen_at = [], [], []

    async def drive(ctx):
        cycle = 0
        for beats, lead, trail, _ in msgs:
            for k, beat in enumerate(beats):
                while gaps and rng.random() < 0.3:
                    ctx.set(dut.i.valid, 0)
                    await ctx.tick()
                    cycle += 1
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload.data, int.from_bytes(beat, "little"))
                ctx.set(dut.i.payload.first, k == 0)
                ctx.set(dut.i.payload.last, k == len(beats) - 1)
                ctx.set(dut.i.payload.lead, lead)
                ctx.set(dut.i.payload.trail, trail)
                if k == len(beats) - 1:
                    offered_last.append(cycle)
                await ctx.tick()
                cycle += 1
        ctx.set(dut.i.valid, 0)

    async def collect(ctx):
        cycle = 0
        while len(got) < len(msgs) and cycle < 40 * count * 12 + 100:
            if ctx.get(dut.o.valid):
                got.append(ctx.get(dut.o.payload))
                seen_at.append(cycle)
            await ctx.tick()
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(drive, background=True)
    sim.add_testbench(collect)
    sim.run()
    assert got == [expected for *_, expected in msgs]
    assert [b - a for a, b in zip(offered_last, seen_at)] == [dut.latency] * len(msgs)
    return dut


@pytest.mark.parametrize("width,data_stages", [(8, 1), (64, 1), (64, 2), (128, 1), (512, 2)])
def test_crc_of_random_messages_equals_zlib(width, data_stages):
    run(width, data_stages, seed=width + data_stages)


def test_back_to_back_one_beat_messages():
    run(64, 1, seed=5, count=40, gaps=False)


def test_latency_as_documented():
    assert Crc32Pipeline(64).latency == 6
    assert Crc32Pipeline(512, data_stages=2).latency == 10


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="data_width must be a multiple of 8"):
        Crc32Pipeline(60)
    with pytest.raises(ValueError, match="data_stages must be 1 or 2"):
        Crc32Pipeline(64, data_stages=3)
