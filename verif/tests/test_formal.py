# SPDX-License-Identifier: BSD-2-Clause
"""Formal checks of the shared stream parts (docs/protocol.md section 8) and of the formal
helper itself: a proof passes, its covers are reached, and a deliberately broken block or
property fails with a counterexample waveform."""

from pathlib import Path

import pytest
from amaranth.hdl import Cover, Module, Signal

from rtl.common.register_slice import RegisterSlice
from verif import formal_blocks
from verif.formal import FormalFailure, StreamPort, check, pipe_properties, sby_available

pytestmark = pytest.mark.skipif(not sby_available(), reason="yowasp-sby or yices not installed")


class LossySlice(RegisterSlice):
    """A register slice that forgets the skid entry: a beat offered while the output stalls is
    taken (ready is high) and lost."""

    def elaborate(self, platform):
        m = Module()
        skid = Signal(self.shape, name="skid")
        skid_valid = Signal()
        m.d.comb += self.i.ready.eq(~skid_valid)
        with m.If(~self.o.valid | self.o.ready):
            m.d.sync += self.o.valid.eq(self.i.valid)
            with m.If(self.i.valid):
                m.d.sync += self.o.payload.eq(self.i.payload)
        m.d.comb += skid.eq(0)
        return m


class StutterSlice(RegisterSlice):
    """A register slice whose output payload changes while it waits for ready."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.o.valid & ~self.o.ready & self.i.valid):
            m.d.sync += self.o.payload.eq(self.i.payload)
        return m


def test_register_slice_inductive():
    m, ports, depths = formal_blocks.register_slice_harness()
    result = check("register_slice", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", 12)}


def test_stream_merge_inductive():
    m, ports, depths = formal_blocks.stream_merge_harness()
    result = check("stream_merge", m, ports, **depths)
    assert result.modes["prove"][0] == "PASS" and result.modes["cover"][0] == "PASS"


def test_stream_fifo_bounded():
    m, ports, depths = formal_blocks.stream_fifo_harness()
    result = check("stream_fifo", m, ports, **depths)
    assert result.modes["bmc"] == ("PASS", 24)


@pytest.mark.full
def test_stream_fifo_bounded_deep():
    # Latency (2) plus two 17-beat frames (docs/protocol.md section 8, W = 64).
    m, ports, depths = formal_blocks.stream_fifo_harness(depth=4, bmc=37, cover=20)
    check("stream_fifo_deep", m, ports, **depths)


def test_placement_writes_only_its_packets_bytes():
    # docs/protocol.md section 5: no AXI write outside [va, va + length) of its packet.
    m, ports, depths = formal_blocks.placement_harness()
    result = check("placement", m, ports, **depths)
    assert result.modes["bmc"][0] == "PASS" and result.modes["cover"][0] == "PASS"


@pytest.mark.parametrize("block", [LossySlice, StutterSlice])
def test_broken_slice_fails_with_waveform(block):
    # The slice with its skid entry written back (LossySlice) or its output payload unstable
    # (StutterSlice) must fail the same harness, with a waveform of the counterexample.
    m, ports, _ = formal_blocks.register_slice_harness(block=block)
    with pytest.raises(FormalFailure) as info:
        check(f"broken_{block.__name__}", m, ports, bmc=8)
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()


def test_wrong_property_fails_and_unreachable_cover_fails():
    # A property that does not hold of the right block (capacity 1) fails ...
    m = Module()
    m.submodules.dut = dut = RegisterSlice(4)
    i = StreamPort(dut.i, "in", "i").elaborate(m)
    o = StreamPort(dut.o, "out", "o").elaborate(m)
    ports, _ = pipe_properties(m, i, o, capacity=1)
    with pytest.raises(FormalFailure) as info:
        check("broken_property", m, i.free_ports() + o.free_ports() + ports, bmc=6)
    assert Path(info.value.vcd).exists()
    # ... and a cover that cannot be reached (three beats held in a two-entry slice) fails the
    # cover run, so a vacuous harness cannot pass.
    m = Module()
    m.submodules.dut = dut = RegisterSlice(4)
    i = StreamPort(dut.i, "in", "i").elaborate(m)
    o = StreamPort(dut.o, "out", "o").elaborate(m)
    m.d.comb += Cover((i.taken - o.taken) == 3, "three held")
    with pytest.raises(FormalFailure) as info:
        check("unreachable_cover", m, i.free_ports() + o.free_ports(), cover=8)
    assert info.value.mode == "cover"
