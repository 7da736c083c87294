# SPDX-License-Identifier: BSD-2-Clause
"""Formal checks of the receive tracker's window (docs/protocol.md 5, distance rule) and of the
switch egress port ("never a frame longer than it received", docs/protocol.md 7), with the
stream rules of section 8 on their outputs; and that a harness claiming too much fails."""

from pathlib import Path

import pytest

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


def test_switch_egress_never_longer_bounded():
    # docs/protocol.md 7: a frame out is at most as long as the frame in (exactly its bytes, or
    # min(trim_size, n) when trimmed); none lost, duplicated or reordered; stream rules.
    m, ports, depths = formal_rx.switch_egress_harness()
    result = check("switch_egress", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", 12), "cover": ("PASS", 12)}


@pytest.mark.full
def test_switch_egress_never_longer_deep():
    # Depth 20: a whole trimmed frame (17 beats at W = 64) leaves, and its cover is reached.
    m, ports, depths = formal_rx.switch_egress_harness(bmc=20, cover=20)
    check("switch_egress_deep", m, ports, **depths, timeout=3600)


@pytest.mark.full
def test_switch_egress_tdata_held_bounded():
    m, ports, depths = formal_rx.switch_egress_harness(data=True)
    check("switch_egress_tdata", m, ports, **depths)


def test_switch_egress_shorter_claim_fails():
    # A harness that allows frames out one byte shorter than they came in fails.
    m, ports, depths = formal_rx.switch_egress_harness(slack=-1)
    with pytest.raises(FormalFailure) as info:
        check("switch_egress_short", m, ports, bmc=12, memory_map=depths["memory_map"])
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()
