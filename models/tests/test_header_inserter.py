# SPDX-License-Identifier: BSD-2-Clause
"""models.header_inserter: good records give build_frame's frames (the conformance vectors among
them; scapy reads them in verif/tests/test_scapy_reading.py), every bad input gets its defined answer and counter, beats and the tkeep
rule."""

import math

import pytest
from hypothesis import given, settings, strategies as st

from models.header_inserter import (
    COUNTERS, INFO, MAX_PAYLOAD_LIMIT, HeaderInserterModel, OutFrame, Packet, frame_beats,
    packet_bytes, record_from_vector,
)
from models.layouts import CONTROL_OPCODES, DATA_OPCODES, KNOWN_OPCODES, Opcode
from models.packets import build_frame, frame_length
from models.records import TX_HEADER
from models import conformance as vectors

WIDTHS = (64, 128, 256, 512)
UNKNOWN_OPCODES = [op for op in range(256) if op not in KNOWN_OPCODES]


def records(opcodes, lengths):
    """Records with every field random, ``opcode`` from ``opcodes``, ``length`` from ``lengths``."""
    fields = {name: st.integers(0, (1 << width) - 1) for name, width in TX_HEADER.fields}
    fields["opcode"] = st.sampled_from(opcodes)
    fields["length"] = lengths
    return st.fixed_dictionaries(fields)


def payload_for(length, data):
    """``length`` bytes repeating ``data`` (zero bytes when it is empty)."""
    return ((data or b"\0") * length)[:length]


def test_conformance_vectors():
    cases = vectors.load("packets.json")
    assert len(cases) >= 16
    for width in WIDTHS:
        model = HeaderInserterModel(width)
        for case in cases:
            rec, payload = record_from_vector(case)
            frame = model.push(rec, Packet(payload) if payload else None)
            assert frame == OutFrame(bytes.fromhex(case["frame_hex"]), False), case["name"]
            beats = model.beats(frame)
            assert b"".join(data for data, *_ in beats) == frame.data
        assert model.counters["frames_out"] == len(cases)
        assert model.counters["bad_frames_out"] == 0


@settings(max_examples=150, deadline=None)
@given(rec=records(DATA_OPCODES, st.integers(0, 4096)), data=st.binary(max_size=64),
       width=st.sampled_from(WIDTHS))
def test_good_data_records_pass_to_build_frame_and_count(rec, data, width):
    """The model's wrapper: a good data record's frame is ``build_frame``'s for it, unflagged,
    with its counters. Not an independent check of the bytes (audit #14): the vectors above,
    and scapy field by field (``verif/tests/test_scapy_reading.py``), read those."""
    payload = payload_for(rec["length"], data)
    model = HeaderInserterModel(width)
    frame = model.push(rec, Packet(payload) if payload else None)
    assert frame == OutFrame(build_frame(rec, payload), False)
    assert len(frame.data) == frame_length(rec["opcode"], len(payload))
    assert model.counters == {**dict.fromkeys(COUNTERS, 0), "frames_out": 1, "records_in": 1,
                              "bytes_out": len(frame.data)}


@settings(max_examples=60, deadline=None)
@given(rec=records(CONTROL_OPCODES, st.just(0)))
def test_control_records_pass_to_build_frame(rec):
    """As above for control records (no payload); the bytes are read by scapy elsewhere."""
    model = HeaderInserterModel()
    frame = model.push(rec)
    assert frame == OutFrame(build_frame(rec), False)


@settings(max_examples=80, deadline=None)
@given(rec=records(DATA_OPCODES, st.integers(2, 600)), data=st.binary(min_size=1, max_size=600),
       upstream_bad=st.booleans())
def test_length_mismatch(rec, data, upstream_bad):
    model = HeaderInserterModel()
    frame = model.push(rec, Packet(data, upstream_bad))
    length = rec["length"]
    expected = (data + bytes(length))[:length]
    mismatch = len(data) != length
    assert frame == OutFrame(build_frame(rec, expected), mismatch or upstream_bad)
    assert model.counters["short_payload"] == int(len(data) < length)
    assert model.counters["long_payload"] == int(len(data) > length)
    assert model.counters["payload_bad_in"] == int(upstream_bad)
    assert model.counters["bad_frames_out"] == int(frame.bad)


@pytest.mark.parametrize("opcode, length, counter", [
    (UNKNOWN_OPCODES[0], 0, "drop_opcode"),
    (0xD1, 100, "drop_opcode"),                  # ACK: not an opcode here (docs/protocol.md 1.4)
    (Opcode.SACK, 1, "drop_ctrl_len"),
    (Opcode.PROBE, 4096, "drop_ctrl_len"),
    (Opcode.WRITE_ONLY, 4097, "drop_oversize"),
    (0x00, 5000, "drop_opcode"),                 # unknown wins over oversize
    (Opcode.NACK, 5000, "drop_ctrl_len"),        # a control payload wins over oversize
])
def test_dropped_records(opcode, length, counter):
    model = HeaderInserterModel(max_payload=4096)
    packet = Packet(bytes(length), bad=True) if length else None
    assert model.push({"opcode": opcode, "length": length}, packet) is None
    assert model.counters == {**dict.fromkeys(COUNTERS, 0), "records_in": 1, counter: 1,
                              "payload_bad_in": int(packet is not None)}


def test_max_payload_bounds():
    model = HeaderInserterModel(max_payload=MAX_PAYLOAD_LIMIT)
    rec = {"opcode": Opcode.WRITE_ONLY_IMM, "length": MAX_PAYLOAD_LIMIT}
    frame = model.push(rec, Packet(bytes(MAX_PAYLOAD_LIMIT)))
    assert frame.data[14 + 4:14 + 6] == (len(frame.data) - 54).to_bytes(2, "big")
    with pytest.raises(ValueError):       # one more padded word would overflow Payload Length
        build_frame({**rec, "length": MAX_PAYLOAD_LIMIT + 1}, bytes(MAX_PAYLOAD_LIMIT + 1))


@pytest.mark.parametrize("kwargs", [dict(data_width=32), dict(data_width=96),
                                    dict(max_payload=0), dict(max_payload=MAX_PAYLOAD_LIMIT + 1),
                                    dict(max_payload=4096.0)])
def test_parameters_checked(kwargs):
    with pytest.raises(ValueError):
        HeaderInserterModel(**kwargs)


def test_packet_ownership_enforced():
    model = HeaderInserterModel()
    with pytest.raises(ValueError):
        model.push({"opcode": Opcode.WRITE_ONLY, "length": 4})
    with pytest.raises(ValueError):
        model.push({"opcode": Opcode.WRITE_ONLY, "length": 0}, Packet(b"abcd"))


@given(frame=st.binary(min_size=1, max_size=300), bad=st.booleans(),
       width=st.sampled_from(WIDTHS))
def test_frame_beats(frame, bad, width):
    lanes = width // 8
    beats = frame_beats(OutFrame(frame, bad), width)
    assert len(beats) == math.ceil(len(frame) / lanes)
    assert b"".join(data for data, *_ in beats) == frame
    for index, (data, keep, last, user) in enumerate(beats):
        final = index == len(beats) - 1
        assert last == int(final)
        assert user == int(final and bad)
        assert keep == (1 << len(data)) - 1
        assert len(data) == lanes or final


def test_packet_bytes_tkeep_rule():
    data = bytes(range(20))
    # keep ignored on a beat that is not the last
    assert packet_bytes(data, [1, 0] + [1] * 18, 64) == data
    # the last beat (bytes 16..19) ends at its first keep = 0
    assert packet_bytes(data, [1] * 17 + [0, 1, 1], 64) == data[:17]
    assert packet_bytes(data, [1] * 16 + [0, 1, 1, 1], 64) == data[:16]
    assert packet_bytes(data[:8], [0] * 8, 64) == b""
    assert packet_bytes(data, [1] * 20, 512) == data
    with pytest.raises(ValueError):
        packet_bytes(b"", [], 64)


def test_map_addresses_distinct():
    addresses = list(COUNTERS.values()) + list(INFO.values())
    assert len(set(addresses)) == len(addresses)
    assert HeaderInserterModel(128, 1024).info() == {"data_width": 128, "max_payload": 1024}
