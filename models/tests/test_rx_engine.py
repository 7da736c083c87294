# SPDX-License-Identifier: BSD-2-Clause
"""models.rx_engine: the front, the tracker and placement composed: in-order and reordered Writes
are placed byte for byte at their VAs, duplicates, trims, access errors and bad frames write
nothing, each answered as the profile says; NO_PKT_BUFFER NACKs, probes, feedback, completions
and the coalescing timer through the composition."""

import random

import pytest

from models.layouts import BTH_OFFSET, NETH, Dscp, Ecn, NackReason, Opcode
from models.packets import parse_frame
from models.records import RX_EVENT, RxVerdict, int_to_ext
from models.rx_engine import (RxEngineModel, Trackers, is_front_control, place_command,
                              rx_event)
from models.rx_front import BAD, NO_BUFFER, STORED
from models.rx_tracker import Sack
from models.switch_queue import trim
from models.rx_traffic import RxTraffic

START = 0xFFFFF0          # PSNs wrap during the tests


def engine(seed=3, **params):
    traffic = RxTraffic(random.Random(seed), n_qps=4, pmtu=512)
    model = RxEngineModel(n_planes=2, data_width=64, n_qps=4, n_regions=4, **params)
    traffic.configure(model.front)
    for q in traffic.enabled:
        model.setup_qp(q, START)
    return model, traffic


def feed(model, frame, plane=0, outcome=STORED, bad=False, ticks=0):
    """One frame through the model: arrival, merge, and the verdict when it has a record."""
    model.arrive(plane, frame, bad=bad, outcome=outcome)
    if outcome == BAD:
        return None, None
    judgement = model.merge(plane)
    verdict = model.decide(ticks) if judgement.meta is not None else None
    return judgement, verdict


def written(model, frame):
    """Whether the payload of ``frame`` sits at its VA in the model's memory."""
    parsed = parse_frame(frame)
    va = parsed.reth["va"]
    return all(model.memory.get(va + k) == b for k, b in enumerate(parsed.payload))


def memory_of(frames):
    """The memory after writing the payloads of ``frames`` in order."""
    memory = {}
    for frame in frames:
        parsed = parse_frame(frame)
        for k, byte in enumerate(parsed.payload):
            memory[parsed.reth["va"] + k] = byte
    return memory


def test_in_order_writes_are_placed_and_sacked():
    model, traffic = engine()
    frames = [traffic.data(qpn=0, psn=(START + k) % (1 << 24), opcode=Opcode.WRITE_MIDDLE)
              for k in range(40)]
    for frame in frames:
        _, verdict = feed(model, frame)
        assert verdict["verdict"] == RxVerdict.PLACED and verdict["placed"] == 1
    assert model.memory == memory_of(frames)
    sacks = [Sack.from_ext(int_to_ext(r["ext"], 36)) for r in model.tracker_controls]
    assert sacks and sacks[-1].cack_psn == (START + 39) % (1 << 24)
    assert model.placement.counters["placed"] == sum(1 for f in frames if parse_frame(f).payload)
    assert model.idle()


def test_reordered_and_duplicate_writes():
    model, traffic = engine()
    frames = [traffic.data(qpn=1, psn=(START + k) % (1 << 24), payload=64) for k in range(8)]
    order = [1, 0, 3, 2, 2, 5, 4, 7, 6, 0]
    verdicts = [feed(model, frames[k])[1]["verdict"] for k in order]
    assert verdicts == [RxVerdict.PLACED] * 4 + [RxVerdict.DUPLICATE] + [RxVerdict.PLACED] * 4 + \
        [RxVerdict.DUPLICATE]
    assert model.memory == memory_of([frames[k] for k in order[:4] + order[5:9]])
    assert model.placement.counters["placed"] == 8
    assert model.placement.counters["discarded"] == 2


def test_trimmed_access_error_and_bad_frames_write_nothing():
    model, traffic = engine()
    good = traffic.data(qpn=0, psn=START, payload=200)
    trimmed = trim(traffic.data(qpn=0, psn=START, payload=300), 200, Dscp.TRIMMED_LASTHOP)
    denied = traffic.data(qpn=0, psn=START, payload=100, access=False)
    broken = bytearray(good)
    broken[BTH_OFFSET + 40] ^= 1               # a payload byte: the ICRC fails
    judgement, verdict = feed(model, trimmed)
    assert judgement.reason == "trimmed" and verdict["verdict"] == RxVerdict.TRIMMED
    assert model.commands[-1][0]["length"] == 0
    judgement, verdict = feed(model, denied)
    assert verdict["verdict"] == RxVerdict.ACCESS_ERROR
    judgement, verdict = feed(model, bytes(broken))
    assert judgement.reason == "icrc" and verdict is None
    assert feed(model, good, bad=True, outcome=BAD) == (None, None)
    assert model.memory == {}
    reasons = [NETH.unpack(int_to_ext(r["ext"], 20))["nack_reason"]
               for r in model.tracker_controls]
    assert reasons == [NackReason.TRIMMED_LASTHOP, NackReason.UNEXP_EVENT]
    _, verdict = feed(model, good)
    assert verdict["verdict"] == RxVerdict.PLACED and written(model, good)


def test_no_buffer_probe_feedback_and_completions():
    model, traffic = engine()
    frame = traffic.data(qpn=2, psn=START, payload=600)
    judgement, verdict = feed(model, frame, outcome=NO_BUFFER)
    assert verdict is None and len(model.front_controls) == 1
    assert is_front_control(model.front_controls[0])
    probe = traffic.control(Opcode.PROBE, qpn=2)
    _, verdict = feed(model, probe)
    assert verdict["verdict"] == RxVerdict.PROBE
    answer = Sack.from_ext(int_to_ext(model.tracker_controls[-1]["ext"], 36))
    assert answer.pr == 1 and answer.probe_id == parse_frame(probe).peth["probe_id"]
    assert not is_front_control(model.tracker_controls[-1])
    sack = traffic.control(Opcode.SACK, qpn=2)
    judgement, verdict = feed(model, sack)
    assert verdict is None and model.feedbacks[-1]["opcode"] == Opcode.SACK
    imm = traffic.data(qpn=2, psn=(START + 1) % (1 << 24), opcode=Opcode.WRITE_ONLY_IMM)
    feed(model, imm)                          # waits for START
    assert model.completions == []
    feed(model, traffic.data(qpn=2, psn=START, opcode=Opcode.WRITE_ONLY))
    assert [c["imm"] for c in model.completions] == [parse_frame(imm).immdt["imm"]]


def test_coalescing_timer_through_verdict_ticks():
    model, traffic = engine()
    while True:                     # a frame that asks for no SACK at once (no CE, no RTX)
        frame = traffic.data(qpn=0, psn=START, opcode=Opcode.WRITE_FIRST)
        parsed = parse_frame(frame)
        if parsed.outer["ecn"] != Ecn.CE and not parsed.bth["rtx"]:
            break
    feed(model, frame)
    feed(model, traffic.control(Opcode.SACK, qpn=0))          # no verdict: no tick applied
    assert model.tracker_controls == []
    feed(model, traffic.data(qpn=1, psn=(START + 2000) % (1 << 24), payload=8), ticks=1)
    assert len(model.tracker_controls) == 1
    model.tick()
    sack = Sack.from_ext(int_to_ext(model.tracker_controls[-1]["ext"], 36))
    assert sack.cack_psn == START and sack.entropy == parsed.ev


def test_dropped_verdict_for_a_qp_not_set_up():
    model, traffic = engine()
    model.setup_qp(0, START, enabled=False)
    _, verdict = feed(model, traffic.data(qpn=0, psn=START, payload=64))
    assert verdict["verdict"] == RxVerdict.DROPPED and verdict["placed"] == 0
    assert model.memory == {} and model.trackers.counters["dropped"] == 1


def test_helpers():
    meta = {"qpn": 1, "opcode": Opcode.WRITE_ONLY, "psn": 5, "ev": 6, "dscp": Dscp.TRIMMABLE,
            "ecn": Ecn.CE, "ackreq": 1, "rtx": 0, "msn": 7, "imm": 0, "payload_length": 9,
            "access_ok": 1, "probe_id": 0, "va": 0x1234, "rkey": 0}
    event = rx_event(meta)
    assert set(event) == set(RX_EVENT.names) and event["ecn"] == Ecn.CE
    assert place_command(meta, True) == {"va": 0x1234, "length": 9, "place": 1}
    trackers = Trackers(2)
    with pytest.raises(ValueError):
        RxEngineModel(n_planes=2, data_width=64).decide()
    assert trackers.event(dict(event, qpn=1)) == RxVerdict.DROPPED
