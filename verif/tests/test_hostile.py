# SPDX-License-Identifier: BSD-2-Clause
"""The hostile-frame campaign (``verif/hostile.py``) read two ways before any RTL sees it: its
good frames are well formed for scapy and for the project's parser, its ICRC is scapy's, and
the receive engine model (profile 1, as the RTL) meets every frame's stated outcome: the front
counter it reaches and, when it reaches the tracker, its verdict. A disagreement is a defect of
the model or of the campaign's reading of docs/protocol.md 5; both are independent."""

import random
from collections import Counter

import pytest

from models.packets import parse_frame
from models.records import RxVerdict
from models.rx_engine import RxEngineModel
from models.rx_front import BAD, STORED
from models.rx_traffic import RxTraffic
from verif.hostile import FRONT_DROPS, MUTATIONS, STANDALONE, Campaign, Receiver, _icrc
from verif.scapy_check import check_frame

VERDICT_NAMES = {code: name.lower() for name, code in vars(RxVerdict).items() if name.isupper()}


def receiver_of(traffic, mpr=256, profile=1):
    return Receiver(inner_dst=traffic.inner_dst, n_qps=traffic.n_qps, enabled=traffic.enabled,
                    regions=tuple(traffic.regions), pmtu=traffic.pmtu, mpr=mpr, profile=profile)


def engine_and_campaign(seed, n_planes=2, profile=1):
    rng = random.Random(seed)
    traffic = RxTraffic(rng, n_qps=4, n_regions=4, pmtu=1024)
    model = RxEngineModel(n_planes=n_planes, data_width=64, n_qps=4, n_regions=4, mpr=256,
                          wimm_max=16, profile=1)
    traffic.configure(model.front)
    starts = {q: rng.choice((rng.getrandbits(24), (1 << 24) - rng.randrange(1, 40)))
              for q in traffic.enabled}
    for q, psn in starts.items():
        model.setup_qp(q, psn)
    return model, Campaign(rng, receiver_of(traffic, profile=profile), n_planes, dict(starts))


def test_good_frames_are_read_alike_by_scapy_and_the_parser():
    _, campaign = engine_and_campaign(1)
    for k in range(200):
        q = campaign.rx.enabled[k % len(campaign.rx.enabled)]
        frame = campaign.data_frame(q, k, length=k % 70 if k % 3 else None)
        check_frame(frame)
        assert _icrc(frame) == frame, "the campaign's ICRC differs from scapy's"
        fields = parse_frame(frame, campaign.rx.inner_dst)
        assert fields is not None
    for opcode in (0xDC, 0xDD, 0xDE):
        frame = campaign.control_frame(opcode, campaign.rx.enabled[0])
        check_frame(frame)
        assert _icrc(frame) == frame


def play(model, storm):
    """Every frame of ``storm`` through the model in sending order; asserts that each meets a
    stated outcome. Returns the front outcomes reached and the placements per PSN."""
    reached, placed = Counter(), Counter()
    for index, case in enumerate(storm):
        plane = case.plane if case.plane is not None else index % 2
        model.arrive(plane, case.frame, bad=bool(case.tuser),
                     outcome=BAD if case.tuser else STORED, free=1 << 20)
        if case.tuser:
            got = "plane_bad"
        else:
            judgement = model.merge(plane)
            denied = judgement.meta is not None and judgement.meta["opcode"] != 0xDE and \
                not judgement.meta["access_ok"]
            got = "access_denied" if denied else judgement.reason
        assert got in case.front, f"frame {index} ({case.kind}): reached {got}, " \
            f"stated {sorted(case.front)}"
        reached[got] += 1
        if model.pending:
            verdict = VERDICT_NAMES[model.decide()["verdict"]]
            assert verdict in case.verdicts, f"frame {index} ({case.kind}): verdict " \
                f"{verdict}, stated {sorted(case.verdicts)}"
            if verdict == "placed":
                placed[case.psn] += 1
        else:
            assert got not in ("data", "trimmed", "probe", "access_denied"), \
                f"frame {index} ({case.kind}): {got} without a verdict"
    return reached, placed


@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.full),
                                  pytest.param(3, marks=pytest.mark.full)])
def test_the_model_meets_every_stated_outcome(seed):
    """A 3000-frame storm through the model: every front outcome and verdict is one the
    campaign states; every PSN of the storm placed once; every kind drawn."""
    model, campaign = engine_and_campaign(seed)
    storm = campaign.storm(3000)
    reached, placed = play(model, storm)
    psns = {case.psn for case in storm if case.psn is not None}
    assert set(placed) == psns and set(placed.values()) == {1}
    kinds = set(campaign.counts)
    assert set(MUTATIONS) <= kinds and set(STANDALONE) <= kinds, \
        sorted(set(MUTATIONS + STANDALONE) - kinds)
    assert sum(reached[r] for r in FRONT_DROPS) > 1000
    print(dict(reached))


def test_a_receiver_that_skips_a_check_fails(monkeypatch):
    """The oracle can fail: a front that reads every P_Key as 0xFFFF lets the P_Key mutations
    through its shape check, and they fail the ICRC instead, which the campaign does not
    allow."""
    import models.rx_front as rx_front

    real = rx_front.parse_frame

    def lax(frame, *args, **kwargs):
        if len(frame) >= 106:
            frame = frame[:104] + b"\xff\xff" + frame[106:]
        return real(frame, *args, **kwargs)

    monkeypatch.setattr(rx_front, "parse_frame", lax)
    model, campaign = engine_and_campaign(6)
    with pytest.raises(AssertionError, match=r"\(pkey\): reached icrc"):
        play(model, campaign.storm(3000))


def test_profile_2_draws_its_own_checks():
    _, campaign = engine_and_campaign(4, profile=2)
    campaign.storm(1500)
    assert {"ip_version", "inner_next_header", "oversize"} <= set(campaign.counts)


def test_campaign_rejects_bad_parameters():
    _, campaign = engine_and_campaign(5)
    with pytest.raises(ValueError, match="next_psn"):
        Campaign(random.Random(0), campaign.rx, 2, {})
    with pytest.raises(ValueError, match="profile"):
        Campaign(random.Random(0), Receiver(0, 4, (0,), (), 1024, 256, profile=3), 2, {0: 0})
