# SPDX-License-Identifier: BSD-2-Clause
"""Hypothesis strategies shared by the model tests (a helper of this test package, not a test
module: nothing outside ``models/tests`` imports it)."""

from hypothesis import strategies as st

from models.reliability import QpConfig
from models.reliability_world import Scenario

__all__ = ["reliability_scenarios"]


def reliability_scenarios(profile_choice=None):
    """Closed-loop reliability scenarios: a Scenario, the QPs' QpConfig list and a seed; the
    profile of the block (1 or 2, ``Scenario.profile``) drawn, or ``profile_choice``."""
    @st.composite
    def build(draw):
        planes = draw(st.integers(1, 3))
        num_t1 = draw(st.integers(2, 3))
        doomed = draw(st.sampled_from([None, 0]))
        # Dead paths may cover every T1 a QP uses (test audit #15): a QP with every path dead
        # for long enough rightly fails with RETRY_EXCEEDED, which the test allows only then
        # (models/tests/test_reliability.py, cut_off_cycles).
        last_dead_t1 = num_t1 - 1 - (doomed is not None)
        dead = []
        for _ in range(draw(st.integers(0, 2)) if last_dead_t1 >= 0 else 0):
            path = (draw(st.integers(0, planes - 1)), draw(st.integers(0, last_dead_t1)))
            first = draw(st.integers(0, 3000))
            dead.append((path, first, first + draw(st.integers(100, 4000))))
        down = []
        if planes > 1:
            for _ in range(draw(st.integers(0, 2))):
                first = draw(st.integers(0, 3000))
                down.append((draw(st.integers(0, planes - 1)), first,
                             first + draw(st.integers(50, 1500))))
        slots = draw(st.sampled_from([2, 4]))
        profile = draw(st.sampled_from([1, 2, 2])) if profile_choice is None else profile_choice
        sc = Scenario(
            planes=planes, num_t1=num_t1, slots=slots, profile=profile,
            sack_bytes=draw(st.sampled_from([1024, 4096, 32768])),
            backup=draw(st.integers(0, 2)),
            ev_min_active=min(draw(st.integers(1, 3)), planes * slots),
            tick_cycles=draw(st.sampled_from([16, 32])), wrs_per_qp=draw(st.integers(1, 12)),
            max_packets=draw(st.integers(1, 5)), loss=draw(st.sampled_from([0, 0.01, 0.05])),
            trim=draw(st.sampled_from([0, 0.03])), ce=draw(st.sampled_from([0, 0.05])),
            nobuf=draw(st.sampled_from([0, 0.02])), oor=draw(st.sampled_from([0, 0.02])),
            dead_paths=tuple(dead), planes_down=tuple(down), doomed_qp=doomed,
            bad_wr=draw(st.sampled_from([None, (1, 0), (2, 1)])))
        n = draw(st.integers(3, 4))
        # Profile 1 waits forever when a retransmission's only choosable slot is the EV it
        # avoids and the other paths wait for probes (docs/protocol.md 4.3, what profile 2
        # fixed): timeouts shorter than the world's round trips (up to 144 cycles) mark live
        # paths bad and probes never answer in time, so profile 1 gets timeouts of at least
        # 512 cycles (a hang hypothesis found with 64-cycle timeouts, in the code before
        # profile 2 as well).
        low_exp = 2 if profile == 2 else (5 if sc.tick_cycles == 16 else 4)
        cfgs = [QpConfig(w_max=draw(st.integers(1, 20)), timeout_exp=draw(st.integers(low_exp, 5)),
                         retry_limit=draw(st.integers(0, 2)) if q == doomed else 7,
                         probe_period=draw(st.integers(1, 9))) for q in range(n)]
        return sc, cfgs, draw(st.integers(0, 1 << 30))
    return build()
