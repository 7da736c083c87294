# SPDX-License-Identifier: BSD-2-Clause
"""Formal checks of the transmit side (verif/formal_tx.py): the spray scheduler's choice
(docs/protocol.md 4.3: only GOOD or SKIP slots), the segmenter's PSN limit (section 5, v1: new
PSNs stop at psn_limit; by k-induction, and bounded as the block is), their stream rules
(section 8); and a deliberately broken block of each fails with a counterexample waveform. The uN stage's stream contract (docs/protocol.md 3) is
checked in ``make test-full`` only."""

from pathlib import Path
from unittest import mock

import pytest
from amaranth.hdl import Const

from rtl import segmenter as segmenter_mod
from rtl import spray_scheduler as spray_mod
from rtl.segmenter import Segmenter
from rtl.spray_scheduler import SprayScheduler
from verif import formal_tx
from verif.formal import FormalFailure, check, check_staged, sby_available

pytestmark = pytest.mark.skipif(not sby_available(), reason="yowasp-sby or yices not installed")


class AnySlotScheduler(SprayScheduler):
    """A scheduler whose rotation search sees every slot as choosable (``visible`` all ones):
    with no GOOD slot in a plane it picks the first position, ASSUMED_BAD or DENIED too."""

    def elaborate(self, platform):
        original = spray_mod._round_robin

        def round_robin(m, vec, start, n, name):
            if name.startswith("rr_visible"):
                vec = Const((1 << n) - 1, n)
            return original(m, vec, start, n, name)

        with mock.patch.object(spray_mod, "_round_robin", round_robin):
            return super().elaborate(platform)


class AtLimitSegmenter(Segmenter):
    """A segmenter whose limit compare is off by one: it also sends the PSN equal to the limit
    (``next_psn`` at or before ``psn_limit``)."""

    def elaborate(self, platform):
        def at_or_before(a, b):
            return ~((b - a)[:24])[23]

        with mock.patch.object(segmenter_mod, "_before", at_or_before):
            return super().elaborate(platform)


def test_spray_choice_inductive():
    # docs/protocol.md 4.3: a decision picks a GOOD or SKIP slot, from any state (1 QP, 2
    # planes, 2 slots, 1 backup); the answer that follows is that decision.
    m, ports, depths = formal_tx.spray_scheduler_harness(inductive=True)
    result = check("tx_spray_choice", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", 10)}


@pytest.mark.full
def test_spray_ports_bounded():
    # One answer per request in order, the answered slot GOOD or SKIP at its decision, the
    # v1 avoid rule; bounded from reset (latency 3 plus an event's 4..7 cycles).
    m, ports, depths = formal_tx.spray_scheduler_harness(depth=10)
    result = check("tx_spray_ports", m, ports, **depths)
    assert result.modes["bmc"] == ("PASS", 10) and result.modes["cover"][0] == "PASS"


@pytest.mark.full
def test_spray_ports_bounded_deep():
    # 2 QPs, 2 planes, 4 slots, 2 backups: the rotation and the mask; deeper.
    m, ports, depths = formal_tx.spray_scheduler_harness(2, 2, 4, 2, depth=12, cover=12)
    check("tx_spray_ports_deep", m, ports, **depths)


@pytest.mark.full
def test_spray_choice_inductive_larger():
    m, ports, depths = formal_tx.spray_scheduler_harness(2, 2, 4, 2, inductive=True, cover=12)
    check("tx_spray_choice_large", m, ports, **depths)


def test_segmenter_psn_limit_bounded():
    # docs/protocol.md 5 (v1): no new PSN at or beyond psn_limit; record k out is decision k;
    # W = 64, 1 QP, 2 requests, PMTU 256. Decision to record out: 5 cycles, 2 after reset.
    m, ports, depths = formal_tx.segmenter_psn_limit_harness(bmc=10, cover=12)
    result = check("tx_segmenter_limit", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", 10), "cover": ("PASS", 12)}


def test_segmenter_psn_limit_inductive():
    # The same properties by k-induction (k = 2, unbounded), the record FIFO as a register FIFO
    # of the same ports (a record offered one cycle sooner; the block as it is stays bounded
    # above); invariants on the limit copies, the S1..S3 stages and the FIFO's records. A few
    # seconds.
    m, ports, depths = formal_tx.segmenter_psn_limit_harness(prove=2, cover=12)
    result = check("tx_segmenter_limit_inductive", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", 12)}


@pytest.mark.full
def test_segmenter_psn_limit_two_qps_inductive():
    m, ports, depths = formal_tx.segmenter_psn_limit_harness(n_qps=2, prove=2, cover=None)
    result = check("tx_segmenter_limit_2qp_inductive", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2)}


def test_broken_segmenter_fails_inductive():
    # The segmenter that also sends the PSN equal to its limit fails the proof too, with a
    # waveform (the invariants do not hide it).
    m, ports, depths = formal_tx.segmenter_psn_limit_harness(block=AtLimitSegmenter, prove=2,
                                                             cover=None)
    with pytest.raises(FormalFailure) as info:
        check("broken_segmenter_at_limit_prove", m, ports, prove=2)
    assert info.value.mode == "prove" and info.value.vcd and Path(info.value.vcd).exists()


@pytest.mark.full
def test_segmenter_psn_limit_two_qps_deep():
    # Two QPs (their limits apart, round-robin service), deeper.
    m, ports, depths = formal_tx.segmenter_psn_limit_harness(n_qps=2, bmc=12, cover=12)
    check("tx_segmenter_limit_2qp", m, ports, **depths)


@pytest.mark.full
def test_un_stage_stream_bounded():
    # Switch uN stage, W = 64, one table entry: stream rules, no beat or frame invented, one
    # decision per frame, tdest constant over a frame; a 7-beat frame forwarded whole is first
    # reached at step 17 (header 7 beats, latency H + 4 = 11).
    m, ports, depths = formal_tx.un_stage_harness()
    result = check("tx_un_stage", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", 18), "cover": ("PASS", 18)}


@pytest.mark.full
def test_un_stage_inductive():
    # The same properties by k-induction (k = 1, unbounded) in stages, in their exact forms
    # (beats and frames discarded counted): the beat FIFO and decision queue as registers with
    # ghost tags, tdata not followed; a few minutes, so in test-full beside the bounded check.
    results = check_staged("tx_un_stage_inductive",
                           lambda: formal_tx.un_stage_harness(prove=1, data=False),
                           formal_tx.UN_STAGE_STAGES)
    assert [r.modes for r in results] == [{"prove": ("PASS", 1)}] * \
        len(formal_tx.UN_STAGE_STAGES)


@pytest.mark.parametrize("name, build, depth", [
    ("broken_spray_any_slot",
     lambda: formal_tx.spray_scheduler_harness(inductive=True, block=AnySlotScheduler), 8),
    ("broken_segmenter_at_limit",
     lambda: formal_tx.segmenter_psn_limit_harness(block=AtLimitSegmenter), 5),
])
def test_broken_block_fails_with_waveform(name, build, depth):
    # A scheduler that may pick an ASSUMED_BAD or DENIED slot, and a segmenter that sends the
    # PSN equal to its limit, must fail their harnesses, with a waveform.
    m, ports, _ = build()
    with pytest.raises(FormalFailure) as info:
        check(name, m, ports, bmc=depth)
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()
