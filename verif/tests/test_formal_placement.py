# SPDX-License-Identifier: BSD-2-Clause
"""The unbounded proof of the placement safety properties (issue [verify]: no AXI write outside
the frame's registered region): k-induction of :func:`verif.formal_placement.
placement_inductive_harness` passes and its covers are reached; a placement that strobes one
byte past its packet's end, or lets a burst cross 4 KB, fails with a counterexample waveform."""

import re
from pathlib import Path
from unittest import mock

import pytest

from rtl import placement as placement_mod
from verif.formal import FormalFailure, check, sby_available
from verif import formal_placement
from verif.formal_placement import placement_inductive_harness

pytestmark = pytest.mark.skipif(not sby_available(), reason="yowasp-sby or yices not installed")


def test_placement_inductive():
    # W = 64, addr_width 12, queue_depth 2, lengths up to 24 (1..4 beats): k-induction closes
    # at depth 1 from any state, so the properties hold at every cycle, not just the first 6
    # (prove about 4 s, cover about 3 s).
    m, ports, depths = placement_inductive_harness()
    result = check("placement_inductive", m, ports, **depths)
    assert result.modes["prove"][0] == "PASS" and result.modes["cover"][0] == "PASS"


@pytest.mark.full
@pytest.mark.parametrize("kwargs", [
    # The block as the NIC builds it at W = 64: 64-bit addresses, queue of 4, any 16-bit length.
    dict(data_width=64, addr_width=64, queue_depth=4, max_length=65535),
    dict(data_width=512, addr_width=16, queue_depth=3, max_length=200),
], ids=["w64_a64_q4_len65535", "w512_a16_q3_len200"])
def test_placement_inductive_larger(kwargs):
    m, ports, depths = placement_inductive_harness(**kwargs)
    name = "placement_inductive_" + "_".join(f"{v}" for v in kwargs.values())
    result = check(name, m, ports, **depths)
    assert result.modes["prove"][0] == "PASS" and result.modes["cover"][0] == "PASS"


def _wire_changing(name, change):
    """``rtl.placement.wire`` with the wire called ``name`` given ``change(value)``."""
    original = placement_mod.wire

    def wire(m, value, width, wire_name, **kwargs):
        return original(m, change(value) if wire_name == name else value, width, wire_name,
                        **kwargs)
    return wire


BROKEN = {
    # The last beat's lane mask one lane too wide: a byte past va + length is strobed.
    "byte_past_end": ("q_end_mask", lambda v: v | (v << 1), "W strobe outside", {}),
    # One beat more room than the block boundary leaves: a burst crosses it; at W = 512 the
    # block is 4 KB (at W = 64 it is 2 KB, whose crossing the harness reports first).
    "burst_crosses_4k": ("g_room", lambda v: v + 1, "AW burst crosses 4 KB",
                         dict(data_width=512, max_length=200)),
}


def _failed_messages(log):
    """The messages of the assertions a failing sby log names (by their line in the harness)."""
    source = Path(formal_placement.__file__).read_text().splitlines()
    lines = {int(n) for n in re.findall(r"failed assertion .*formal_placement\.py:(\d+)", log)}
    return [" ".join(source[n - 1:n + 1]) for n in sorted(lines)]


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_broken_placement_fails_with_waveform(broken):
    # BMC of the properties alone (no invariants): the counterexample from reset fails the
    # property at the AXI ports that the defect breaks.
    name, change, expected, kwargs = BROKEN[broken]
    with mock.patch.object(placement_mod, "wire", _wire_changing(name, change)):
        m, ports, _ = placement_inductive_harness(invariants=False, **kwargs)
    with pytest.raises(FormalFailure) as info:
        check(f"broken_placement_{broken}", m, ports, bmc=8)
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()
    messages = _failed_messages(info.value.log)
    assert any(expected in text for text in messages), messages


def test_broken_placement_fails_the_proof():
    # The same defect under the full harness: the proof does not pass (an invariant or a
    # property fails in the base case), with a waveform.
    name, change, _, _ = BROKEN["byte_past_end"]
    with mock.patch.object(placement_mod, "wire", _wire_changing(name, change)):
        m, ports, _ = placement_inductive_harness()
    with pytest.raises(FormalFailure) as info:
        check("broken_placement_proof", m, ports, prove=6)
    assert info.value.mode == "prove" and info.value.vcd and Path(info.value.vcd).exists()
