# SPDX-License-Identifier: BSD-2-Clause
"""Formal checks of the sender reliability block (``verif/formal_reliability.py``): the window,
the PSN limit, retransmissions of outstanding PSNs only, ``cack_psn``/``next_psn`` forward,
completions against work requests and the stream rules, proved by k-induction (unbounded); a
claim of a window one PSN narrower, and a block that counts one PSN fewer outstanding, fail with
a waveform."""

import re
from pathlib import Path
from unittest import mock

import pytest

from rtl import reliability as rel_mod
from verif import formal_reliability
from verif.formal import FormalFailure, check, sby_available
from verif.formal_reliability import reliability_harness

BMC_DEEP = 16

pytestmark = pytest.mark.skipif(not sby_available(), reason="yowasp-sby or yices not installed")


def _failed_messages(log):
    """The messages of the assertions a failing sby log names (by their line in the harness)."""
    source = Path(formal_reliability.__file__).read_text().splitlines()
    lines = {int(n) for n in re.findall(r"failed assertion .*formal_reliability\.py:(\d+)", log)}
    return [" ".join(source[n - 1:n + 1]) for n in sorted(lines)]


def test_reliability_window_and_limit_inductive():
    # 1 QP, ring 4, 1 probe entry, 2 work requests, 4-bit timers: every property holds at every
    # cycle (k-induction, depth 1, about 7 s); covers by step 9 (about 18 s).
    m, ports, depths = reliability_harness()
    result = check("reliability", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 1), "cover": ("PASS", 12)}


@pytest.mark.full
def test_reliability_window_and_limit_inductive_larger():
    # 4 QPs, ring 16, 2 probe entries, 4 work requests, 6-bit timers: about 2 minutes to prove.
    m, ports, depths = reliability_harness(n_qps=4, ring=16, probe_entries=2, wr_depth=4,
                                           timer_bits=6, cover=None)
    result = check("reliability_larger", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 1)}


@pytest.mark.full
def test_reliability_window_and_limit_deep():
    # The properties alone (no invariants), BMC 16 from reset (about 5 minutes on one core):
    # a set-up, sends, a SACK and its completions.
    m, ports, _ = reliability_harness(invariants=False)
    result = check("reliability_deep", m, ports, bmc=BMC_DEEP)
    assert result.modes == {"bmc": ("PASS", BMC_DEEP)}


def test_reliability_narrower_window_fails():
    # The window property is tight: the block does fill the window, so a claim of one PSN less
    # fails with a counterexample from reset, at that property.
    m, ports, _ = reliability_harness(narrower=1)
    with pytest.raises(FormalFailure) as info:
        check("reliability_narrow", m, ports, bmc=8)
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()
    assert any("outstanding PSNs within the window" in text
               for text in _failed_messages(info.value.log)), info.value.log[-2000:]


def _wire_changing(name, change):
    """``rtl.reliability.wire`` with the wire called ``name`` given ``change(value)``."""
    original = rel_mod.wire

    def wire(m, value, width, wire_name):
        return original(m, change(value) if wire_name == name else value, width, wire_name)
    return wire


def test_broken_reliability_fails():
    # A block that counts one PSN fewer outstanding when it handles a send record (so it sends
    # past the window, and takes a flushed record of a PSN not outstanding, with none
    # outstanding, for a retransmission): from reset (properties only) the counterexample
    # fails the window or the retransmission property; the proof fails too.
    broken = _wire_changing("send_out_count", lambda v: v - 1)
    with mock.patch.object(rel_mod, "wire", broken):
        m, ports, _ = reliability_harness(invariants=False)
    with pytest.raises(FormalFailure) as info:
        check("broken_reliability", m, ports, bmc=8)
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()
    messages = _failed_messages(info.value.log)
    assert any("a retransmission is outstanding" in text or
               "outstanding PSNs within the window" in text for text in messages), messages
    with mock.patch.object(rel_mod, "wire", broken):
        m, ports, depths = reliability_harness()
    with pytest.raises(FormalFailure) as info:
        check("broken_reliability_prove", m, ports, prove=depths["prove"])
    assert info.value.mode == "prove" and info.value.vcd and Path(info.value.vcd).exists()
