# SPDX-License-Identifier: BSD-2-Clause
"""NSCC (models/nscc.py, docs/protocol.md 5.1): the parameters scaled from htsim's reference, each
quadrant, the decrease's period, quick adapt, the trim and timeout reactions, and the window's
bounds under any sequence of inputs."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.nscc import (FRAC, MAX_BDPS, MIN_COST, REF_GBPS, REF_RTT_NS, STAMP_NS, TARGET_RTTS,
                         TICK_STAMPS, TRIM_KEEP, Nscc, NsccConfig, packet_cost)

# htsim's reference (100 Gb/s, 12 us: a = 1) with its 9 us target, starting at the BDP.
REF = NsccConfig.scaled(REF_GBPS, REF_RTT_NS, 4096, target_ns=9000, cwnd_init=150000)


def test_reference_parameters_are_htsims():
    """At 100 Gb/s and 12 us (a = 1): fi = 5 MTU, eta = 0.15 MTU, alpha = 4 MTU / 12 us, fast
    increase 0.25, gamma 0.8, quick adapt above 4 targets, adjustments every 8 MTU or one RTT;
    the project's defaults: target 3 RTTs, cwnd 1 MTU .. 3 BDPs starting at the top, a last-hop
    trim keeping 0.6."""
    one = 1 << FRAC
    assert (REF.cwnd_min, REF.cwnd_init, REF.cwnd_max) == (4096, 150000, MAX_BDPS * 150000)
    assert REF.base_rtt == REF_RTT_NS // STAMP_NS == 750
    assert REF.target == round(9000 / STAMP_NS)
    assert REF.fi_q == 5 * 4096 * one and REF.eta == int(0.15 * 4096)
    assert REF.alpha_q == round(4 * 4096 * STAMP_NS / REF_RTT_NS * one)
    assert REF.fast_q == one // 4 and REF.gamma_q == round(0.8 * one)
    assert REF.qa_threshold == round(4 * 9000 / STAMP_NS) and REF.qa_gate == 3
    assert (REF.adjust_bytes, REF.adjust_period, REF.md_period) == (8 * 4096, 750, 750)
    assert REF.trim_keep_q == round(TRIM_KEEP * one)
    default = NsccConfig.scaled(REF_GBPS, REF_RTT_NS, 4096)
    assert default.cwnd_init == default.cwnd_max == MAX_BDPS * 150000
    assert default.target == round(TARGET_RTTS * REF_RTT_NS / STAMP_NS)
    assert TICK_STAMPS * STAMP_NS == 1024


def test_scaling_follows_the_bdp():
    """Twice the rate, twice the BDP: the gains and the window double, the times stay."""
    double = NsccConfig.scaled(2 * REF_GBPS, REF_RTT_NS, 4096, target_ns=9000)
    assert double.cwnd_max == 2 * REF.cwnd_max and double.fi_q == 2 * REF.fi_q
    assert double.target == REF.target and double.base_rtt == REF.base_rtt
    assert NsccConfig.scaled(100, 12000, 4096, sack_bytes=32768).cwnd_max == \
        MAX_BDPS * 150000 + 32768


def test_packet_cost():
    assert [packet_cost(n) for n in (0, 1, 1024, 1025, 4096)] == [1024, 1024, 1024, 1025, 4096]
    assert MIN_COST == 1024


@pytest.mark.parametrize("change, message", [
    (dict(cwnd_min=100), "cwnd_min"),
    (dict(cwnd_init=10 ** 7), "cwnd_init"),
    (dict(target=0), "at least 1 stamp"),
    (dict(eta=-1), "non-negative"),
    (dict(gamma_q=0.5), "integer"),
])
def test_bad_parameters_are_refused(change, message):
    with pytest.raises(ValueError, match=message):
        replace(REF, **change)
    with pytest.raises(ValueError, match="NsccConfig"):
        Nscc({"cwnd_init": 1})


def at(cc, now=10_000):
    """Put ``cc`` past its first adjustment period and quick-adapt window."""
    cc.last_adjust = cc.last_decrease = now
    cc.qa_end = now + 10 ** 6
    return cc


def test_proportional_increase_below_target():
    """No ECN, below target: alpha x acked x (target - delay) accumulates; the adjustment adds it
    divided by cwnd, once ``adjust_bytes`` were acked."""
    cc = at(Nscc(REF))
    rtt = REF.base_rtt + 100                 # delay 100 stamps, above the fast-increase bound
    cc.on_sack(10_001, 16384, False, rtt, 0)
    assert cc.cwnd == REF.cwnd_init and cc.inc_q == REF.alpha_q * 16384 * (REF.target - 100)
    inc = cc.inc_q + REF.alpha_q * 20000 * (REF.target - 100)
    cc.on_sack(10_002, 20000, False, rtt, 0)      # 36,384 B > adjust_bytes: the adjustment
    assert cc.cwnd == REF.cwnd_init + (inc >> FRAC) // REF.cwnd_init
    assert cc.inc_q == 0 and cc.received == 0


def test_fair_increase_above_target_and_eta_once_per_period():
    cc = at(Nscc(REF))
    rtt = REF.base_rtt + REF.target + 5
    cc.on_sack(10_001, 40000, False, rtt, 0)
    assert cc.cwnd == REF.cwnd_init + ((REF.fi_q * 40000) >> FRAC) // REF.cwnd_init
    before = cc.cwnd
    now = 10_000 + REF.adjust_period + 1           # a period passed: the adjustment adds eta
    cc.on_sack(now, 1024, False, rtt, 0)
    assert cc.cwnd == before + ((REF.fi_q * 1024) >> FRAC) // before + REF.eta
    assert cc.last_adjust == now


def test_multiplicative_decrease_once_per_period():
    """ECN above target with the mean delay above target: cwnd x max(1 - gamma (avg - target) /
    avg, 1/2), at most once per ``md_period``; ECN below target changes nothing."""
    cc = at(Nscc(REF))
    cc.last_decrease = 10_000 - REF.md_period - 1
    cc.avg_q = (2 * REF.target) << FRAC
    rtt = REF.base_rtt + 2 * REF.target
    now = 10_001
    cc.on_sack(now, 1024, True, rtt, 0)
    avg = cc.avg
    keep = max(avg - ((REF.gamma_q * (avg - REF.target)) >> FRAC), avg >> 1)
    assert cc.cwnd == REF.cwnd_init * keep // avg and cc.counters["decreases"] == 1
    cut = cc.cwnd
    cc.on_sack(now + 1, 1024, True, rtt, 0)
    assert cc.cwnd == cut and cc.counters["decreases"] == 1
    low = at(Nscc(REF))
    low.on_sack(10_001, 1024, True, REF.base_rtt + 1, 0)
    assert low.cwnd == REF.cwnd_init and low.inc_q == 0


def test_fast_increase_after_a_window_of_low_delay():
    cc = at(Nscc(REF))
    rtt = REF.base_rtt                              # no queueing at all
    acked = 0
    while not cc.fast:
        cc.on_sack(10_001, 8192, False, rtt, 0)
        acked += 8192
    assert acked > REF.cwnd_init
    before = cc.cwnd
    cc.on_sack(10_002, 8192, False, rtt, 0)
    assert cc.cwnd >= before + ((8192 * REF.fast_q) >> FRAC)
    cc.on_sack(10_003, 8192, False, rtt + REF.fast_delay, 0)
    assert not cc.fast and cc.fast_count == 0


def test_trim_is_an_ecn_signal_and_a_packet_less():
    cc = at(Nscc(REF))
    cc.on_trim(10_001, 4096, 50000)
    assert cc.cwnd == REF.cwnd_init - 4096 and cc.ecn_pending and cc.qa_trigger
    assert cc.avg_q == (REF.base_rtt << FRAC) >> 6
    cc.on_sack(10_002, 1024, False, REF.base_rtt + 1, 0)
    assert not cc.ecn_pending


def test_last_hop_trim_decreases_once_per_period():
    """TRIMMED_LASTHOP: cwnd x trim_keep, at most once per md_period (the trims of one burst
    cost one decrease)."""
    cc = at(Nscc(REF))
    cc.last_decrease = 10_000 - REF.md_period - 1
    cc.on_trim(10_001, 4096, 50000, last_hop=True)
    kept = (REF.cwnd_init * REF.trim_keep_q) >> FRAC
    assert cc.cwnd == kept and cc.counters["decreases"] == 1
    cc.on_trim(10_002, 4096, 50000, last_hop=True)
    assert cc.cwnd == kept and cc.counters["decreases"] == 1
    cc.on_trim(10_002 + REF.md_period, 4096, 50000, last_hop=True)
    assert cc.cwnd == (kept * REF.trim_keep_q) >> FRAC


def test_quick_adapt_takes_the_achieved_bytes():
    """A trim arms quick adapt; when its window ends having achieved less than cwnd_max / 8,
    cwnd becomes what was achieved, and ECN feedback of the bytes then in flight is ignored."""
    cc = Nscc(REF)
    cc.on_sack(1, 1024, False, REF.base_rtt, 0)     # opens the first window
    end = cc.qa_end
    cc.on_sack(2, 5000, False, REF.base_rtt, 0)
    cc.on_trim(3, 4096, 0)
    cc.on_sack(end + 1, 1000, False, REF.base_rtt, 70000)
    assert cc.cwnd == 6000 and cc.counters["quick_adapts"] == 1   # 5,000 + 1,000 B achieved
    assert cc.ignore == 70000 and cc.qa_end == end + 1 + REF.base_rtt + REF.target
    cc.on_sack(end + 2, 1000, True, REF.base_rtt + 2 * REF.target, 0)
    assert cc.cwnd == 6000 and cc.counters["decreases"] == 0


def test_timeout_costs_one_packet():
    cc = Nscc(REF)
    cc.on_timeout(5, 4096)
    assert cc.cwnd == REF.cwnd_init - 4096
    cc.cwnd = REF.cwnd_min
    cc.on_timeout(6, 4096)
    assert cc.cwnd == REF.cwnd_min


events = st.one_of(
    st.tuples(st.just("sack"), st.integers(0, 1 << 17), st.booleans(),
              st.one_of(st.none(), st.integers(0, 5000)), st.integers(0, 1 << 20)),
    st.tuples(st.just("trim"), st.integers(MIN_COST, 4096), st.integers(0, 1 << 20)),
    st.tuples(st.just("timeout"), st.integers(MIN_COST, 4096)),
)


@settings(max_examples=200, deadline=None)
@given(rate=st.sampled_from([16, 100, 400, 800]), rtt=st.integers(200, 20000),
       seq=st.lists(st.tuples(st.integers(0, 2000), events), max_size=60))
def test_cwnd_stays_within_its_bounds(rate, rtt, seq):
    """Any inputs, in time order: cwnd stays within [cwnd_min, cwnd_max], every state an
    integer, and nothing raises."""
    cfg = NsccConfig.scaled(rate, rtt, 4096)
    cc = Nscc(cfg)
    now = 0
    for step, event in seq:
        now += step
        if event[0] == "sack":
            cc.on_sack(now, *event[1:])
        elif event[0] == "trim":
            cc.on_trim(now, *event[1:])
        else:
            cc.on_timeout(now, event[1])
        assert cfg.cwnd_min <= cc.cwnd <= cfg.cwnd_max
        assert all(isinstance(v, int) for v in (cc.cwnd, cc.inc_q, cc.avg_q, cc.received))
