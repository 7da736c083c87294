# SPDX-License-Identifier: BSD-2-Clause
"""Formal checks of the control blocks (verif/formal_ctrl.py): the tick generator's period
(k-induction), the AXI4-Lite configuration bridge's protocol and register effects
(k-induction), the self-test frame source's frame counts and beat shape (k-induction; the
check sequence against the send sequence bounded) and the frame checker's verdicts
(bounded). Each harness has a broken block (or a false claim) that must fail with a
counterexample waveform."""

from pathlib import Path
from unittest import mock

import pytest
from amaranth.hdl import Module

import rtl.axil_config as axil_mod
from rtl.axil_config import AxilConfig
from rtl.selftest_check import FrameChecker
from rtl.selftest_gen import FrameSource
from rtl.tick_generator import TickGenerator
from verif import formal_ctrl
from verif.formal import FormalFailure, check, sby_available

pytestmark = pytest.mark.skipif(not sby_available(), reason="yowasp-sby or yices not installed")


def _fails(name, m, ports, mode="bmc", **depths):
    with pytest.raises(FormalFailure) as info:
        check(name, m, ports, **depths)
    assert info.value.mode == mode and info.value.vcd and Path(info.value.vcd).exists()
    return info.value


# -- broken blocks ---------------------------------------------------------------------------------

class EarlyTickGenerator(TickGenerator):
    """A tick generator one cycle early: its wrap value is one step short, so each period is
    a cycle shorter (at 2.44 MHz, gaps of 1 and 2 cycles instead of 2 and 3)."""

    def __init__(self, clk_hz):
        super().__init__(clk_hz)
        self.threshold -= self.step


class EagerBBridge(AxilConfig):
    """A bridge that answers BVALID as soon as it takes an AW beat, without its W beat."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.s_axil_awvalid & self.s_axil_awready & ~self.s_axil_wvalid):
            m.d.sync += self.s_axil_bvalid.eq(1)
        return m


class PartialStrobeBridge(AxilConfig):
    """A bridge that performs a write with ``wstrb`` 0x7 (its full-strobe constant wrong)."""

    def elaborate(self, platform):
        with mock.patch.object(axil_mod, "FULL_STRB", 0x7):
            return super().elaborate(platform)


class FullKeepSource(FrameSource):
    """A frame source whose last beat keeps every lane, whatever the length."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.m_axis.p.keep.eq(-1)
        return m


class BadAsOkChecker(FrameChecker):
    """A checker that reports a corrupted frame as ok."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = FrameChecker(self.data_width, self.window, self.timeout)
        for name in ("exp", "rx"):
            outer, core = getattr(self, name), getattr(inner, name)
            m.d.comb += [core.valid.eq(outer.valid), core.payload.eq(outer.payload),
                         outer.ready.eq(core.ready)]
        m.d.comb += [self.res_ok.eq(inner.res_ok | inner.res_bad), self.res_bad.eq(0),
                     self.res_lost.eq(inner.res_lost), self.res_extra.eq(inner.res_extra)]
        return m


# -- tick generator --------------------------------------------------------------------------------

@pytest.mark.parametrize("clk_hz", [250_000_000, 100_000_000, 125_000_001])
def test_tick_generator_period_inductive(clk_hz):
    # Exactly every 256 cycles at 250 MHz; gaps of 102 and 103 at 100 MHz; the 28-bit
    # accumulator of 125_000_001 Hz: ticks exactly where models/tick.py puts them, unbounded.
    m, ports, depths = formal_ctrl.tick_generator_harness(clk_hz)
    del depths["cover"]         # the covers are 256 cycles away at these rates
    result = check(f"ctrl_tick_{clk_hz}", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2)}


def test_tick_generator_short_period_inductive_and_covered():
    # 2.5 cycles per tick: the first tick, a short and a long gap, a gap change and a tick
    # after a reset in mid-period, all within 12 cycles.
    m, ports, depths = formal_ctrl.tick_generator_harness(formal_ctrl.SHORT_PERIOD_HZ)
    result = check("ctrl_tick_short", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", 12)}


@pytest.mark.full
def test_tick_generator_covers_at_100mhz():
    # The covers at a real rate: two gaps of different length (102 and 103 cycles) from reset.
    m, ports, _ = formal_ctrl.tick_generator_harness(100_000_000)
    result = check("ctrl_tick_100m_cover", m, ports, cover=320)
    assert result.modes == {"cover": ("PASS", 320)}


def test_early_tick_generator_fails():
    m, ports, _ = formal_ctrl.tick_generator_harness(formal_ctrl.SHORT_PERIOD_HZ,
                                                     block=EarlyTickGenerator)
    _fails("ctrl_broken_early_tick", m, ports, bmc=8)


def test_tick_generator_false_period_claim_fails():
    # Claiming every gap is the floor (2 cycles) at 2.5 cycles per tick is false.
    m, ports, _ = formal_ctrl.tick_generator_harness(formal_ctrl.SHORT_PERIOD_HZ,
                                                     claim_gaps=[2])
    _fails("ctrl_false_tick_claim", m, ports, bmc=10)


# -- AXI4-Lite configuration bridge ----------------------------------------------------------------

@pytest.mark.parametrize("read_latency", [1, 3])
def test_axil_config_inductive(read_latency):
    m, ports, depths = formal_ctrl.axil_config_harness(read_latency=read_latency)
    result = check(f"ctrl_axil_l{read_latency}", m, ports, **depths)
    k = max(2, read_latency + 1)
    assert result.modes == {"prove": ("PASS", k), "cover": ("PASS", 13 + read_latency)}


@pytest.mark.full
def test_axil_config_inductive_wider():
    # 4 words, 2 address bits above the port, read latency 8 (the largest).
    m, ports, depths = formal_ctrl.axil_config_harness(addr_width=2, read_latency=8,
                                                       axil_addr_width=6)
    result = check("ctrl_axil_wide", m, ports, **depths)
    assert result.modes["prove"] == ("PASS", 9) and result.modes["cover"][0] == "PASS"


@pytest.mark.parametrize("block", [EagerBBridge, PartialStrobeBridge])
def test_broken_axil_config_fails(block):
    m, ports, _ = formal_ctrl.axil_config_harness(block=block, inductive=False)
    _fails(f"ctrl_broken_{block.__name__}", m, ports, bmc=6)


# -- self-test frame source ------------------------------------------------------------------------

def test_frame_source_inductive():
    m, ports, depths = formal_ctrl.frame_source_harness()
    result = check("ctrl_frame_source", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", 12)}


def test_frame_source_check_sequence_bounded():
    # Frame k of the check sequence is made from the state of send frame k (bounded).
    m, ports, depths = formal_ctrl.frame_source_harness(inductive=False)
    result = check("ctrl_frame_source_seq", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", 10), "cover": ("PASS", 12)}


@pytest.mark.full
def test_frame_source_check_sequence_deep():
    m, ports, _ = formal_ctrl.frame_source_harness(inductive=False)
    result = check("ctrl_frame_source_seq_deep", m, ports, bmc=14)
    assert result.modes == {"bmc": ("PASS", 14)}


def test_full_keep_source_fails():
    # The lengths come from the fixed seed's sequence: the first partial last beat is a few
    # frames in (the cover partial_last_beat is reached within 12 cycles).
    m, ports, _ = formal_ctrl.frame_source_harness(block=FullKeepSource)
    _fails("ctrl_broken_full_keep", m, ports, bmc=12)


# -- self-test frame checker -----------------------------------------------------------------------

def test_frame_checker_bounded():
    m, ports, depths = formal_ctrl.frame_checker_harness()
    result = check("ctrl_frame_checker", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", 10), "cover": ("PASS", 12)}


@pytest.mark.full
def test_frame_checker_bounded_deep():
    m, ports, _ = formal_ctrl.frame_checker_harness(timeout=3)
    result = check("ctrl_frame_checker_deep", m, ports, bmc=16)
    assert result.modes == {"bmc": ("PASS", 16)}


def test_bad_as_ok_checker_fails():
    m, ports, _ = formal_ctrl.frame_checker_harness(block=BadAsOkChecker)
    _fails("ctrl_broken_bad_as_ok", m, ports, bmc=6)
