# SPDX-License-Identifier: BSD-2-Clause
"""Formal checks of the sender reliability block (``verif/formal_reliability.py``): the window,
the PSN limit, retransmissions of outstanding PSNs only, completions and the stream rules; a
claim of a window one PSN narrower fails with a waveform."""

from pathlib import Path

import pytest

from verif.formal import FormalFailure, check, sby_available
from verif.formal_reliability import reliability_harness

BMC_DEEP = 16

pytestmark = pytest.mark.skipif(not sby_available(), reason="yowasp-sby or yices not installed")


def test_reliability_window_and_limit_bounded():
    m, ports, depths = reliability_harness()
    result = check("reliability", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", 8), "cover": ("PASS", 12)}


@pytest.mark.full
def test_reliability_window_and_limit_deep():
    # About 5 minutes on one core: BMC 16 holds a set-up, sends, a SACK and its completions.
    m, ports, _ = reliability_harness()
    result = check("reliability_deep", m, ports, bmc=BMC_DEEP)
    assert result.modes == {"bmc": ("PASS", BMC_DEEP)}


def test_reliability_narrower_window_fails():
    # The window property is tight: the block does fill the window, so a claim of one PSN less
    # fails with a counterexample.
    m, ports, _ = reliability_harness(narrower=1)
    with pytest.raises(FormalFailure) as info:
        check("reliability_narrow", m, ports, bmc=8)
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()
