# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""rtl.common.stream, rtl.common.register_slice and rtl.common.flat_top in Amaranth's simulator:
the slice passes every beat in order with random valid and ready, one beat per cycle when the
output is always ready, and its ready is a register; FlatTop gives the AXI-Stream names."""

import random

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from models.records import FrameUser, TX_HEADER
from rtl.common.flat_top import FlatTop, has_streams
from rtl.common.register_slice import RegisterSlice
from rtl.common.stream import Beat, axis, check_data_width, record_stream


def run_slice(beats, p_valid, p_ready, seed, width=16):
    """Push ``beats`` through a slice with random valid/ready; returns (received, cycles,
    ready_followed_o_ready) where the last says whether i.ready ever changed in the same cycle
    as o.ready without a clock edge between (a combinational path)."""
    dut = RegisterSlice(width)
    rng = random.Random(seed)
    got = []
    state = {"cycles": 0}

    async def bench(ctx):
        pending = list(beats)
        while pending or len(got) < len(beats):
            offer = bool(pending) and rng.random() < p_valid
            take = rng.random() < p_ready
            ctx.set(dut.i.valid, offer)
            if offer:
                ctx.set(dut.i.payload, pending[0])
            ctx.set(dut.o.ready, take)
            # i.ready must not depend on o.ready in this cycle.
            ready_now = ctx.get(dut.i.ready)
            ctx.set(dut.o.ready, not take)
            assert ctx.get(dut.i.ready) == ready_now, "i.ready follows o.ready combinationally"
            ctx.set(dut.o.ready, take)
            accepted = offer and ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid) and take:
                got.append(ctx.get(dut.o.payload))
            await ctx.tick()
            if accepted:
                pending.pop(0)
            state["cycles"] += 1
            assert state["cycles"] < 20 * len(beats) + 100, "the slice stopped moving"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got, state["cycles"]


@pytest.mark.parametrize("seed", range(6))
def test_slice_keeps_every_beat_in_order_under_random_valid_and_ready(seed):
    beats = [random.Random(seed).getrandbits(16) for _ in range(400)]
    got, _ = run_slice(beats, p_valid=random.Random(seed).choice((0.3, 0.7, 1.0)),
                       p_ready=random.Random(seed + 1).choice((0.3, 0.7, 1.0)), seed=seed)
    assert got == beats


def test_slice_moves_one_beat_per_cycle():
    beats = list(range(300))
    got, cycles = run_slice(beats, p_valid=1.0, p_ready=1.0, seed=0)
    assert got == beats
    assert cycles <= len(beats) + 2       # one cycle of latency, no bubble


def test_slice_rejects_a_non_shape():
    with pytest.raises(TypeError, match="RegisterSlice: shape must be shape-like"):
        RegisterSlice("wide")


def test_beat_layout_and_checks():
    beat = Beat(64, 1)
    assert dict(beat.members) == {"data": 64, "keep": 8, "last": 1, "user": 1}
    assert beat == data.StructLayout({"data": 64, "keep": 8, "last": 1, "user": 1})
    assert "dest" in Beat(64, 0, 3).members and "user" not in Beat(64, 0, 3).members
    with pytest.raises(ValueError, match="multiple of 8"):
        Beat(60)
    with pytest.raises(ValueError, match="user_width must be an integer"):
        Beat(64, -1)
    with pytest.raises(ValueError, match="Blk: data_width must be one of"):
        check_data_width("Blk", 96)


class Pair(wiring.Component):
    """A component with a frame stream in, a record stream out and a plain port."""

    def __init__(self):
        super().__init__({"s_axis": In(axis(64, FrameUser.WIDTH)),
                          "m_hdr": Out(record_stream(TX_HEADER)), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.s_axis.ready.eq(self.m_hdr.ready), self.m_hdr.valid.eq(self.s_axis.valid),
                     self.busy.eq(self.s_axis.p.last)]
        return m


def test_flat_top_names():
    top = FlatTop(Pair())
    names = {name: (m.flow, m.shape) for name, m in top.signature.members.items()}
    assert set(names) == {"s_axis_tdata", "s_axis_tkeep", "s_axis_tlast", "s_axis_tuser",
                          "s_axis_tvalid", "s_axis_tready", "m_hdr_tdata", "m_hdr_tvalid",
                          "m_hdr_tready", "busy"}
    assert names["s_axis_tready"][0] == Out and names["m_hdr_tready"][0] == In
    assert names["s_axis_tdata"] == (In, 64)
    assert has_streams(Pair()) and not has_streams(top)
    text = rtlil.convert(top, name="pair")
    assert "s_axis_tdata" in text and "m_hdr_tdata" in text


def test_flat_top_refuses_a_clash():
    class Clash(wiring.Component):
        def __init__(self):
            super().__init__({"m": Out(stream.Signature(8)), "m_tvalid": Out(1)})

        def elaborate(self, platform):
            return Module()

    with pytest.raises(ValueError, match="two members named 'm_tvalid'"):
        FlatTop(Clash())
