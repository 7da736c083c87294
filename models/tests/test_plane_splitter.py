# SPDX-License-Identifier: BSD-2-Clause
"""models.plane_splitter: frames go to their record's plane in order, a plane going down flushes
its queue (send records back with flushed = 1, control frames counted), frames arriving while it
is down are flushed at once, bad records and lengths are discarded and counted, beats at W bits,
sizes and parameter checks."""

import pytest
from hypothesis import given, settings, strategies as st

from models.header_inserter import OutFrame
from models.plane_splitter import (COUNTERS, PlaneSplitterModel,
                                   default_core_width, default_fifo_depth, frame_words,
                                   max_frame_bytes, min_frame_bytes, route_depth)
from models.records import SEND_RECORD


def record(plane, nbytes, data=True, psn=0):
    send = SEND_RECORD.pack(qpn=1, psn=psn, ev=plane | 0x50, plane=plane) if data else \
        SEND_RECORD.pack(qpn=1, ev=plane, plane=plane)
    return {"plane": plane, "frame_bytes": nbytes, "data": int(data), "send": send}


def test_frames_go_to_their_plane_in_order():
    model = PlaneSplitterModel(n_planes=2, data_width=64)
    frames = [bytes([k]) * (138 + k) for k in range(4)]
    for k, frame in enumerate(frames):
        model.route(record(k % 2, len(frame), psn=k))
        assert model.arrive(frame) == "queued"
    assert model.present(0) == OutFrame(frames[0], False)
    assert model.present(1) == OutFrame(frames[1], False)
    assert model.present(0).data == frames[2]
    assert model.present(1).data == frames[3]
    with pytest.raises(ValueError):
        model.present(0)
    assert model.counters["frames_in"] == 4
    assert [c["frames_out"] for c in model.plane_counters] == [2, 2]


def test_down_flushes_the_queue_and_later_arrivals():
    model = PlaneSplitterModel(n_planes=2, data_width=64)
    for k, data in enumerate((True, False, True)):
        model.route(record(0, 150, data, psn=k))
        model.arrive(bytes(150))
    assert model.present(0).data == bytes(150)          # in flight: it finishes
    model.set_up(0, False)
    assert [r["psn"] for r in model.flushed[0]] == [2]
    assert all(r["flushed"] == 1 and r["plane"] == 0 for r in model.flushed[0])
    assert model.plane_counters[0] == {"frames_out": 1, "flushed_data": 1, "flushed_control": 1}
    with pytest.raises(ValueError):
        model.present(0)
    model.route(record(0, 140, psn=7))
    assert model.arrive(bytes(140)) == "flushed"
    assert [r["psn"] for r in model.flushed[0]] == [2, 7]
    model.set_up(0, True)
    model.route(record(0, 140, psn=8))
    assert model.arrive(bytes(140), bad=True) == "queued"
    assert model.present(0) == OutFrame(bytes(140), True)
    assert model.flushed[1] == []


def test_bad_records_and_lengths():
    model = PlaneSplitterModel(n_planes=3, data_width=64, core_width=256)
    model.route(record(3, 140))
    assert model.arrive(bytes(140)) == "bad_plane"
    model.route(record(1, 140))
    assert model.arrive(bytes(141)) == "bad_length"
    model.route(record(1, 160))
    assert model.arrive(bytes(160), empty_last=True) == "bad_length"   # beats outnumber words
    model.route(record(1, 140))
    assert model.arrive(bytes(140)) == "queued"
    assert model.counters == {**dict.fromkeys(COUNTERS, 0), "frames_in": 1, "bad_plane": 1,
                              "bad_length": 2}
    with pytest.raises(ValueError):
        model.arrive(bytes(140))


def test_beats_at_the_plane_width():
    model = PlaneSplitterModel(n_planes=4, data_width=128)
    beats = model.beats(OutFrame(bytes(range(40)), True))
    assert [(len(d), keep, last, user) for d, keep, last, user in beats] == \
        [(16, 0xFFFF, 0, 0), (16, 0xFFFF, 0, 0), (8, 0xFF, 1, 1)]


def test_sizes():
    assert max_frame_bytes(4096) == 4238 and min_frame_bytes() == 134
    assert frame_words(4238, 512) == 67 and frame_words(128, 512) == 2
    assert default_core_width(8, 64) == 512 and default_core_width(3, 64) == 256
    assert default_core_width(1, 512) == 512
    with pytest.raises(ValueError):
        default_core_width(2, 512)
    assert default_fifo_depth(512, 4096) == 256
    assert route_depth(256, 512) == 128
    model = PlaneSplitterModel()
    assert (model.n_planes, model.core_width, model.fifo_depth, model.max_words) == (8, 512, 256, 67)


@pytest.mark.parametrize("kwargs", [dict(n_planes=0), dict(n_planes=9), dict(data_width=32),
                                    dict(n_planes=2, data_width=128, core_width=64),
                                    dict(core_width=384), dict(max_payload=0),
                                    dict(max_payload=4097), dict(fifo_depth=100),
                                    dict(fifo_depth=32)])
def test_parameters_are_checked(kwargs):
    with pytest.raises(ValueError):
        PlaneSplitterModel(**kwargs)


@settings(max_examples=80, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from("ruda"), st.integers(0, 3), st.booleans()),
                    max_size=80))
def test_every_frame_is_sent_or_flushed_once(ops):
    """Random routes, arrivals, presents and up/down changes: every frame that arrived is sent,
    flushed or still queued, exactly once, and per plane each of these keeps arrival order."""
    model = PlaneSplitterModel(n_planes=4, data_width=64, core_width=256)
    arrived = [[] for _ in range(4)]
    sent = [[] for _ in range(4)]
    psn = 0
    for op, plane, data in ops:
        if op == "r":
            model.route(record(plane, 134 + psn % 7, data, psn))
            psn += 1
        elif op == "a" and model.routes:
            rec = model.routes[0]
            frame_psn = SEND_RECORD.unpack(rec["send"])["psn"] if rec["data"] else 0xFFFF
            model.arrive(frame_psn.to_bytes(2, "big") * (rec["frame_bytes"] // 2) +
                         bytes(rec["frame_bytes"] % 2))
            arrived[rec["plane"]].append(frame_psn)
        elif op == "u":
            model.set_up(plane, data)
        elif op == "d" and model.up[plane] and model.queued(plane):
            sent[plane].append(int.from_bytes(model.present(plane).data[:2], "big"))
    for plane in range(4):
        queued = [int.from_bytes(f.data[:2], "big") for _, f in model.queues[plane]]
        flushed = [r["psn"] for r in model.flushed[plane]]
        controls = model.plane_counters[plane]["flushed_control"]
        assert sorted(arrived[plane]) == sorted(sent[plane] + flushed + queued +
                                                [0xFFFF] * controls)
        for fate in (sent[plane], flushed, queued):
            positions = [arrived[plane].index(p) for p in fate if p != 0xFFFF]
            assert positions == sorted(positions)
