# SPDX-License-Identifier: BSD-2-Clause
"""Formal checks of the receive tracker's window (docs/protocol.md 5, distance rule) and of the
switch egress port ("never a frame longer than it received", docs/protocol.md 7), with the
stream rules of section 8 on their outputs; and that a harness claiming too much, or a broken
egress port, fails. The switch egress properties are proved by k-induction (unbounded)."""

import re
from pathlib import Path
from unittest import mock

import pytest

from models.layouts import TRIM_MIN_BYTES
from models.switch import MIN_FRAME
from rtl import switch_egress as egress_mod
from rtl.switch_egress import SwitchEgressPort
from verif import formal_rx
from verif.formal import FormalFailure, check, sby_available

pytestmark = pytest.mark.skipif(not sby_available(), reason="yowasp-sby or yices not installed")


def test_rx_tracker_window_inductive():
    # One QP, MPR 128: PLACED only for 1 <= d <= MPR, OUT_OF_WINDOW for MPR < d < 2^23,
    # DUPLICATE for d = 0 or d >= 2^23; cack_psn only forward; stream rules. Unbounded.
    m, ports, depths = formal_rx.rx_tracker_harness()
    result = check("rx_tracker", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", 8)}


@pytest.mark.full
def test_rx_tracker_window_inductive_two_qps():
    m, ports, depths = formal_rx.rx_tracker_harness(n_qps=2, mpr=256, wimm_max=2)
    result = check("rx_tracker_2qp", m, ports, **depths)
    assert result.modes["prove"] == ("PASS", 2) and result.modes["cover"][0] == "PASS"


def test_rx_tracker_narrower_window_fails():
    # A harness that claims a window one PSN short of MPR fails with a waveform: the block does
    # accept d = MPR, so the properties above are not vacuous.
    m, ports, _ = formal_rx.rx_tracker_harness(window=127)
    with pytest.raises(FormalFailure) as info:
        check("rx_tracker_narrow", m, ports, bmc=6)
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()


def _failed_messages(log, module=formal_rx):
    """The messages of the assertions a failing sby log names (by their line in the harness)."""
    source = Path(module.__file__).read_text().splitlines()
    name = Path(module.__file__).name
    lines = {int(n) for n in re.findall(rf"failed assertion .*{name}:(\d+)", log)}
    return [" ".join(source[n - 1:n + 1]) for n in sorted(lines)]


def test_switch_egress_never_longer_inductive():
    # docs/protocol.md 7: a frame out is at most as long as the frame in (exactly its bytes, or
    # min(trim_size, n) when trimmed); none lost, duplicated or reordered; stream rules on
    # m_axis, tdata included. k-induction (depth 1) with the descriptor FIFOs as register FIFOs
    # of the same timing: unbounded. Covers by step 20: a trimmed frame out (17 beats), a data
    # frame after a control burst, a frame sent whole across a port-down flush.
    m, ports, depths = formal_rx.switch_egress_harness()
    result = check("switch_egress", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 1), "cover": ("PASS", 20)}


def test_register_fifo_buffered_same_timing():
    # The register FIFO swapped into the proof answers like Amaranth's SyncFIFOBuffered.
    m, ports, depths = formal_rx.fifo_buffered_equivalence_harness()
    result = check("fifo_buffered_equivalence", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", 14), "cover": ("PASS", 10)}


@pytest.mark.full
def test_switch_egress_never_longer_inductive_larger():
    # Longer queues (256/300 B), frames up to 200 B, a control burst of 2: about 50 s to prove.
    m, ports, depths = formal_rx.switch_egress_harness(data_limit=256, control_limit=300,
                                                       max_frame=200, control_burst=2,
                                                       cover=12)
    result = check("switch_egress_larger", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 1), "cover": ("PASS", 12)}


@pytest.mark.full
def test_switch_egress_block_as_is_bounded():
    # The port as it is (its SyncFIFOBuffered descriptor queues, no invariants), BMC 12 from
    # reset without tdata: the cross-check of the FIFO swap of the proof.
    m, ports, depths = formal_rx.switch_egress_harness(invariants=False, data=False,
                                                       prove=None, bmc=12, cover=None)
    result = check("switch_egress_as_is", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", 12)}


def test_switch_egress_shorter_claim_fails():
    # A harness that allows frames out one byte shorter than they came in fails, from reset
    # (the port as it is, properties only), at that property.
    m, ports, depths = formal_rx.switch_egress_harness(slack=-1, invariants=False, data=False)
    with pytest.raises(FormalFailure) as info:
        check("switch_egress_short", m, ports, bmc=12, memory_map=depths["memory_map"])
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()
    assert any("never a frame longer than it received" in text
               for text in _failed_messages(info.value.log)), info.value.log[-2000:]


class _LongerEgress(SwitchEgressPort):
    """A port that reads every frame as one byte longer than its header says (54 + 1 + outer
    Payload Length; the trimming threshold moved with it, so only the length is wrong)."""

    def elaborate(self, platform):
        with mock.patch.object(egress_mod, "MIN_FRAME", MIN_FRAME + 1), \
                mock.patch.object(egress_mod, "TRIM_MIN_BYTES", TRIM_MIN_BYTES + 1):
            return super().elaborate(platform)


def test_switch_egress_longer_frame_fails():
    # The broken port sends one byte more than it received: from reset (properties only) the
    # counterexample fails "never a frame longer than it received"; the proof fails too.
    m, ports, depths = formal_rx.switch_egress_harness(block=_LongerEgress, invariants=False,
                                                       data=False)
    with pytest.raises(FormalFailure) as info:
        check("switch_egress_longer", m, ports, bmc=12, memory_map=depths["memory_map"])
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()
    assert any("never a frame longer than it received" in text
               for text in _failed_messages(info.value.log)), info.value.log[-2000:]
    m, ports, depths = formal_rx.switch_egress_harness(block=_LongerEgress)
    with pytest.raises(FormalFailure) as info:
        check("switch_egress_longer_prove", m, ports, prove=depths["prove"],
              memory_map=depths["memory_map"])
    assert info.value.mode == "prove" and info.value.vcd and Path(info.value.vcd).exists()
