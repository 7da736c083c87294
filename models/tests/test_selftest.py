# SPDX-License-Identifier: BSD-2-Clause
"""models.selftest: the self-test's frames are valid MRC frames, the switch model turns each sent
frame into the expected one along the configured loop, and the report line round-trips."""

import pytest
from hypothesis import given, settings, strategies as st

from models import selftest as st_model
from models.layouts import DATA_OPCODES
from models.packets import parse_frame
from models.selftest import (EXIT_PORT, LOOP_PORT, SelfTestConfig, corrupt, expected_frame,
                             frame_state, parse_report, payload, payload_length, record,
                             report_line, sent_frame, switch_writes, xorshift64)
from models.switch import SwitchModel
from models.switch_queue import Departure

CONFIGS = st.builds(
    SelfTestConfig,
    data_width=st.sampled_from((64, 128)),
    ports=st.sampled_from((2, 3, 4)),
    passes=st.integers(1, 5),
    max_payload=st.sampled_from((8, 64, 256, 1024, 4096)),
    seed=st.integers(1, (1 << 64) - 1))


def loop_through_switch(cfg, frame):
    """``frame`` sent into ingress 0 of a switch model set up by :func:`switch_writes`, looped
    back at LOOP_PORT, until it leaves at EXIT_PORT; returns (frame out, ports crossed)."""
    model = SwitchModel(ports=cfg.ports, fabric_facing=(False,) * cfg.ports,
                        data_limit=4 * cfg.max_frame, max_frame=max(138, cfg.max_frame))
    writes = dict(switch_writes(cfg))
    model.un.set_own(usid=writes[0x001])
    for index in range(2):
        base = 0x100 + 4 * index
        model.un.set_entry(index, writes[base + 1] << 32 | writes[base], writes[base + 2],
                           bool(writes[base + 3]))
    ingress, ports = 0, []
    while True:
        assert model.arrive(ingress, frame) == "stored"
        pending = model.grant(ingress)
        ports.append(pending.port)
        model.admit(pending.port)
        departure = model.dequeue(pending.port)
        assert isinstance(departure, Departure) and departure.queue == "data"
        frame = departure.frame
        if pending.port == EXIT_PORT:
            return frame, ports
        assert pending.port == LOOP_PORT
        ingress = LOOP_PORT


@settings(max_examples=60, deadline=None)
@given(cfg=CONFIGS, i=st.integers(0, 40))
def test_switch_model_turns_the_sent_frame_into_the_expected_one(cfg, i):
    out, ports = loop_through_switch(cfg, sent_frame(cfg, i))
    assert ports == [LOOP_PORT] * (cfg.passes - 1) + [EXIT_PORT]
    assert out == expected_frame(cfg, i)


@settings(max_examples=40, deadline=None)
@given(cfg=CONFIGS, i=st.integers(0, 200))
def test_frames_are_valid_mrc_writes(cfg, i):
    frame = sent_frame(cfg, i)
    parsed = parse_frame(frame)
    rec = record(cfg, i)
    assert parsed.icrc_ok
    assert parsed.bth["opcode"] in DATA_OPCODES
    assert parsed.bth["psn"] == i & 0xFFFFFF
    assert parsed.payload == payload(cfg, i)
    assert len(parsed.payload) == rec["length"] <= cfg.max_payload
    assert len(frame) <= cfg.max_frame
    assert parse_frame(expected_frame(cfg, i)).icrc_ok


def test_lengths_cover_the_edges():
    cfg = SelfTestConfig(max_payload=256)
    lengths = [payload_length(cfg, frame_state(cfg, i)) for i in range(400)]
    assert 0 in lengths and 256 in lengths
    assert {n % 8 for n in lengths} == set(range(8))
    assert all(0 <= n <= 256 for n in lengths)


def test_payload_lanes_follow_the_width():
    """Lane j of every beat is the j-th xorshift64 stream of the frame's state."""
    cfg = SelfTestConfig(data_width=128, ports=0, passes=0, max_payload=4096)
    i = next(i for i in range(100) if payload_length(cfg, frame_state(cfg, i)) >= 64)
    r = frame_state(cfg, i)
    data = payload(cfg, i)
    lane1 = r ^ st_model.LANE_SALT[1]
    assert data[8:16] == lane1.to_bytes(8, "little")
    assert data[24:32] == xorshift64(lane1).to_bytes(8, "little")


def test_without_switch_the_frame_comes_back_unchanged():
    cfg = SelfTestConfig(ports=0, passes=0)
    assert all(expected_frame(cfg, i) == sent_frame(cfg, i) for i in range(20))
    assert switch_writes(cfg) == []


def test_corrupt_flips_one_bit():
    cfg = SelfTestConfig()
    frame = sent_frame(cfg, 3)
    last = corrupt(cfg, frame)
    diff = [k for k in range(len(frame)) if frame[k] != last[k]]
    assert diff == [(len(frame) - 1) // 8 * 8] and last[diff[0]] ^ frame[diff[0]] == 1
    assert corrupt(cfg, frame, 12)[12] == frame[12] ^ 1


def test_report_line_round_trip():
    cfg = SelfTestConfig()
    line = report_line(cfg, 4, 0x1234, 0x1200, 0, 0)
    assert line.endswith(" PASS\r\n") and " window=4 " in line
    assert parse_report(line) == {"sent": 0x1234, "ok": 0x1200, "bad": 0, "lost": 0,
                                  "status": "PASS"}
    assert report_line(cfg, 4, 0, 0, 0, 0).split()[-1] == "WAIT"
    assert parse_report(report_line(cfg, 4, 9, 5, 1, 2))["status"] == "FAIL"


@pytest.mark.parametrize("kwargs", [
    dict(data_width=32), dict(ports=1), dict(ports=5), dict(ports=4, data_width=256),
    dict(passes=0), dict(passes=6), dict(ports=0, passes=1), dict(max_payload=1000),
    dict(max_payload=4), dict(seed=0),
])
def test_bad_configs_are_refused(kwargs):
    with pytest.raises(ValueError):
        SelfTestConfig(**kwargs)
